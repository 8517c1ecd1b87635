#!/bin/sh
# The speed libhcomm_mpi.so gives an unmodified MPI program: hcomm_perf
# --mpi-only (which times MPI calls only) run without and with the preload,
# and the ratio per size (time without / time with: above 1, faster).
# Usage, from a build tree:
#   sh ../test/mpi_preload/bench_preload.sh [ranks] [collectives...]
# Defaults: 2 ranks; allreduce allgather bcast; 8 B to 64 MiB. Extra
# mpirun flags: MPIRUN_FLAGS (e.g. "--bind-to core"); HCOMM_MPI_INTERCEPT
# is passed on to the preloaded run.
set -u
np=${1:-2}
[ $# -gt 0 ] && shift
colls=${*:-allreduce allgather bcast}
: "${MPIRUN:=mpirun}"
lib=$(pwd)/.libs/libhcomm_mpi.so
perf=./perf/hcomm_perf
[ -f "$lib" ] && [ -x "$perf" ] || {
    echo "run from a build tree (no $lib or $perf)" >&2
    exit 1
}
if $MPIRUN --version 2>&1 | grep -q "Open MPI"; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    pre="-x LD_PRELOAD=$lib -x HCOMM_MPI_INTERCEPT=${HCOMM_MPI_INTERCEPT:-all}"
else
    pre="-genv LD_PRELOAD $lib -genv HCOMM_MPI_INTERCEPT ${HCOMM_MPI_INTERCEPT:-all}"
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for c in $colls; do
    # shellcheck disable=SC2086
    $MPIRUN ${MPIRUN_FLAGS:-} -np "$np" $perf "$c" -b 8 -e 64M -f 2 --mpi-only \
        >"$tmp/plain" 2>/dev/null || { echo "$c: MPI run failed"; continue; }
    # shellcheck disable=SC2086
    $MPIRUN ${MPIRUN_FLAGS:-} $pre -np "$np" $perf "$c" -b 8 -e 64M -f 2 \
        --mpi-only >"$tmp/pre" 2>/dev/null || { echo "$c: preload run failed"; continue; }
    echo "# $c, $np ranks: MPI time (us) without / with libhcomm_mpi.so"
    printf '%12s %12s %12s %8s\n' "size (B)" "without" "with" "ratio"
    # Rows: size count type redop root, 4 hcomm columns (n/a), MPI time.
    awk 'FNR == NR { if ($1 !~ /^#/ && NF > 10) t[$1] = $10; next }
         $1 !~ /^#/ && NF > 10 && ($1 in t) {
             printf "%12s %12.2f %12.2f %7.2fx\n", $1, t[$1], $10, t[$1] / $10 }' \
        "$tmp/plain" "$tmp/pre"
done
