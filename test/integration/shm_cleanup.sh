#!/bin/sh
# The node's shared segment leaves nothing in /dev/shm, after a normal exit
# and after a rank is killed (its name is unlinked once every rank has
# mapped it, so even a crash cannot leave it behind).
set -u
. "$(dirname "$0")/../mpi_env.sh"
exe=$top_builddir/test/integration/test_shm
flags=$mpi_flags
export HCOMM_TIMEOUT=60
pidfile=$(mktemp)
trap 'rm -f "$pidfile"' EXIT
failed=0

leftovers() {
    ls /dev/shm 2>/dev/null | grep "^hcomm-$(cat "$pidfile")-" || true
}

echo "== normal exit, 3 ranks"
if ! timeout 300 $MPIRUN $flags -np 3 "$exe" "$pidfile"; then
    echo "FAILED: test_shm"
    failed=1
fi
if [ -n "$(leftovers)" ]; then
    echo "FAILED: left in /dev/shm after a normal exit: $(leftovers)"
    failed=1
fi

echo "== a rank killed, 3 ranks (mpirun reports it; that is expected)"
timeout 300 $MPIRUN $flags -np 3 "$exe" "$pidfile" kill >/dev/null 2>&1
if [ ! -s "$pidfile" ]; then
    echo "FAILED: the killed job did not start"
    failed=1
elif [ -n "$(leftovers)" ]; then
    echo "FAILED: left in /dev/shm after a rank was killed: $(leftovers)"
    failed=1
fi
[ "$failed" -eq 0 ] && echo "shm_cleanup: passed"
exit "$failed"
