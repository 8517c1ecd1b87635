#!/bin/sh
# The speed libhcomm_mpi.so gives an unmodified MPI program: hcomm_perf
# --mpi-only (which times MPI calls only) run without and with the preload,
# and the ratio per size (time without / time with: above 1, faster).
# Usage, from a build tree:
#   sh ../test/mpi_preload/bench_preload.sh [ranks] [collectives...]
# Defaults: 2 ranks; allreduce allgather bcast; 8 B to 64 MiB. Extra
# mpirun flags: MPIRUN_FLAGS (e.g. "--bind-to core"); HCOMM_MPI_INTERCEPT
# is passed on to the preloaded run. The two runs alternate REPEAT times
# (default 3) and each side's median per size is compared: on a shared
# machine one pair of runs can differ by 2x either way.
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
        $MPIRUN ${MPIRUN_FLAGS:-} -np "$np" $perf "$c" -b 8 -e 64M -f 2 \
            --mpi-only >"$tmp/plain.$i" 2>/dev/null || break
        # shellcheck disable=SC2086
        $MPIRUN ${MPIRUN_FLAGS:-} $pre -np "$np" $perf "$c" -b 8 -e 64M -f 2 \
            --mpi-only >"$tmp/pre.$i" 2>/dev/null || break
        i=$((i + 1))
    done
    [ "$i" -gt "$REPEAT" ] || { echo "$c: run $i failed"; continue; }
    echo "# $c, $np ranks: MPI time (us) without / with libhcomm_mpi.so," \
        "median of $REPEAT alternating runs"
    printf '%12s %12s %12s %8s\n' "size (B)" "without" "with" "ratio"
    # Rows: size count type redop root, 4 hcomm columns (n/a), MPI time.
    awk 'function median(list,   v, n, i, j, x) {
             n = split(list, v, " ")
             for (i = 2; i <= n; i++)
                 for (j = i; j > 1 && v[j - 1] + 0 > v[j] + 0; j--) {
                     x = v[j]; v[j] = v[j - 1]; v[j - 1] = x
                 }
             return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
         }
         $1 !~ /^#/ && NF > 10 {
             side = FILENAME ~ /plain/ ? "p" : "q"
             if (!($1 in seen)) { seen[$1] = 1; order[++rows] = $1 }
             t[side, $1] = t[side, $1] " " $10
         }
         END {
             for (r = 1; r <= rows; r++) {
                 s = order[r]; a = median(t["p", s]); b = median(t["q", s])
                 printf "%12s %12.2f %12.2f %7.2fx\n", s, a, b, a / b
             }
         }' "$tmp"/plain.* "$tmp"/pre.*
done
