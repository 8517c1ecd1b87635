#!/bin/sh
# A rank killed by SIGKILL in the middle of calls: every survivor's call
# fails within the timeout naming it (test_hang kill). Open MPI only: its
# --enable-recovery keeps the survivors running.
set -u
. "$(dirname "$0")/../mpi_env.sh"
[ -n "$mpi_flags" ] || { echo "not Open MPI: skipped"; exit 77; }
export HCOMM_TIMEOUT=5 # finalize waits this long for the dead rank
# shellcheck disable=SC2086
out=$(timeout 120 $MPIRUN --enable-recovery $mpi_flags -np 3 \
    "$top_builddir/test/integration/test_hang" kill 2>&1)
echo "$out" | grep -E "test_hang|\[rank" 
echo "$out" | grep -q "test_hang kill: [1-9][0-9]* passed, 0 failed" || exit 1
! echo "$out" | grep -q "^\[rank"
