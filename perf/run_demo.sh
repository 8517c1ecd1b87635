#!/bin/sh
# The main job: hcomm_perf on as many ranks as the machine has cores (at
# least 2), HCOMM and MPI_Allreduce side by side. Extra arguments go to
# hcomm_perf (default: 8 B to 64 MiB, float32 sum).
set -eu
perf=${PERF_BIN:-$(dirname "$0")/../build/perf/hcomm_perf}
np=$(nproc)
[ "$np" -ge 2 ] || np=2
mpirun=${MPIRUN:-mpirun}
flags=
if $mpirun --version 2>&1 | grep -q "Open MPI"; then
    flags="--oversubscribe"
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
[ $# -gt 0 ] || set -- -b 8 -e 64M -f 2
exec $mpirun $flags -np "$np" "$perf" "$@"
