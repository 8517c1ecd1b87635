#!/bin/sh
# hcomm_perf --rewrite and --consume: each call timed on its own after
# the input is written again (as a program's new data each step), or
# before the output is read (as its next step does), or both. The rows
# must come out whole and checked (no wrong element on either side), and
# device buffers are refused by name.
set -u
. "$(dirname "$0")/../mpi_env.sh"
exe=$top_builddir/perf/hcomm_perf
out=$(mktemp)
trap 'rm -f "$out"' EXIT
failed=0

for run in "allreduce --rewrite" "reduce --consume" \
    "alltoall --rewrite --consume" "scatter --consume"; do
    # shellcheck disable=SC2086
    timeout 300 $MPIRUN $mpi_flags -np 2 "$exe" $run -b 8 -e 64K -f 8 \
        -n 5 -w 1 >"$out" 2>&1
    rc=$?
    rows=$(grep -cE '^ +[0-9]+ ' "$out")
    # the #wrong columns, hcomm's and MPI's (5th and 1st from the end)
    wrong=$(awk '$1 ~ /^[0-9]+$/ && ($(NF-5) != 0 || $(NF-1) != 0)' "$out")
    if [ $rc -ne 0 ] || [ "$rows" -ne 5 ] || [ -n "$wrong" ]; then
        echo "FAILED: $run: exit $rc, $rows rows (5 expected)"
        cat "$out"
        failed=1
    fi
done

# shellcheck disable=SC2086
timeout 120 $MPIRUN $mpi_flags -np 1 "$exe" allreduce -D cuda --consume \
    >"$out" 2>&1
rc=$?
if [ $rc -eq 0 ] ||
    ! grep -q -- "--rewrite and --consume: host buffers only" "$out"; then
    echo "FAILED: --consume with -D cuda: exit $rc"
    cat "$out"
    failed=1
fi
[ $failed -eq 0 ] && echo "perf_rewrite: rows whole and right, -D cuda refused"
exit $failed
