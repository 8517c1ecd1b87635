#!/bin/sh
# The speed libhcomm_mpi.so gives an unmodified MPI program: hcomm_perf
# --pmpi under the preload times, in one run and alternating trials, the
# MPI_* calls (taken by the preload) and the PMPI_* calls (MPI itself, what
# the program runs without it), and the ratio per size (time without /
# time with: above 1, faster). Pairing the two in one process matters on a
# shared machine, where one run's latency can land 2x away from the next.
# Usage, from a build tree:
#   sh ../test/mpi_preload/bench_preload.sh [ranks] [collectives...]
# Defaults: 2 ranks; allreduce allgather bcast; 8 B to 64 MiB. Extra
# mpirun flags: MPIRUN_FLAGS (e.g. "--bind-to core"); HCOMM_MPI_INTERCEPT
# is passed on. The run is repeated REPEAT times (default 3) and each
# side's median per size is compared.
set -u
np=${1:-2}
[ $# -gt 0 ] && shift
colls=${*:-allreduce allgather bcast}
: "${MPIRUN:=mpirun}" "${REPEAT:=3}"
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
    i=1
    while [ "$i" -le "$REPEAT" ]; do
        # shellcheck disable=SC2086
        $MPIRUN ${MPIRUN_FLAGS:-} $pre -np "$np" $perf "$c" -b 8 -e 64M -f 2 \
            --pmpi >"$tmp/run.$i" 2>/dev/null || break
        i=$((i + 1))
    done
    [ "$i" -gt "$REPEAT" ] || { echo "$c: run $i failed"; continue; }
    echo "# $c, $np ranks: MPI time (us) without / with libhcomm_mpi.so," \
        "median of $REPEAT runs"
    printf '%12s %12s %12s %8s\n' "size (B)" "without" "with" "ratio"
    # Rows: size count type redop root, time algbw busbw wrong of the
    # preloaded MPI_* calls, then of PMPI_*.
    awk 'function median(list,   v, n, i, j, x) {
             n = split(list, v, " ")
             for (i = 2; i <= n; i++)
                 for (j = i; j > 1 && v[j - 1] + 0 > v[j] + 0; j--) {
                     x = v[j]; v[j] = v[j - 1]; v[j - 1] = x
                 }
             return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
         }
         $1 !~ /^#/ && NF > 10 {
             if (!($1 in with)) order[++rows] = $1
             with[$1] = with[$1] " " $6; without[$1] = without[$1] " " $10
         }
         END {
             for (r = 1; r <= rows; r++) {
                 s = order[r]; a = median(without[s]); b = median(with[s])
                 printf "%12s %12.2f %12.2f %7.2fx\n", s, a, b, a / b
             }
         }' "$tmp"/run.*
done
