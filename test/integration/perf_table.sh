#!/bin/sh
# perf/perf_table.py (gpu_vs_nccl.sh's table and plot): known rows give
# known ratios and median, a missing baseline "n/a", the baseline named
# by the rows' key; hcomm_perf --json's own rows go through it too.
set -u
. "$(dirname "$0")/../mpi_env.sh"
: "${top_srcdir:=.}"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
table=$top_srcdir/perf/perf_table.py
fail=0
row() { # size hcomm_us base_us ratio
    printf '{"collective":"allreduce","size":%s,"count":1,"type":"float32","redop":"sum","root":-1,"nranks":4,"hcomm":{"time_us":%s,"algbw":1,"busbw":1.5,"wrong":0},"nccl":{"time_us":%s,"algbw":1,"busbw":1.5,"wrong":0},"ratio":%s}\n' "$@"
}
{
    echo "# a line that is not a row"
    row 8 1 2 2
    row 1048576 2 2 1
    row 8589934592 4 2 0.5
    echo '{"collective":"allreduce","size":16,"count":4,"type":"float32","redop":"sum","root":-1,"nranks":4,"hcomm":{"time_us":1,"algbw":1,"busbw":1,"wrong":0},"nccl":{"time_us":null,"algbw":null,"busbw":null,"wrong":null},"ratio":null}'
} >"$dir/known.json"
python3 "$table" "$dir/known.md" "$dir/known.json" || fail=1
for want in "### allreduce, float32, 4 ranks: HCOMM against NCCL" \
    "| 8 B | 1 | 1.5 | 2 | 1.5 | 2.00 | 0, 0 |" \
    "| 1 MiB | 2 | 1.5 | 2 | 1.5 | 1.00 | 0, 0 |" \
    "| 8 GiB | 4 | 1.5 | 2 | 1.5 | 0.50 | 0, 0 |" \
    "| 16 B | 1 | 1 | n/a | n/a | n/a | 0, n/a |" \
    "Median ratio: 1.00"; do
    grep -qxF "$want" "$dir/known.md" || {
        echo "perf_table.py: no line '$want' in:"
        cat "$dir/known.md"
        fail=1
    }
done
# no rows: an error, no table
python3 "$table" "$dir/none.md" /dev/null 2>/dev/null && {
    echo "perf_table.py: succeeded on no rows"
    fail=1
}
# a real run: a row a size, against MPI
timeout 120 $MPIRUN $mpi_flags -np 2 "$top_builddir/perf/hcomm_perf" \
    --json -b 8 -e 32 allreduce >"$dir/run.json" 2>/dev/null || fail=1
python3 "$table" "$dir/run.md" "$dir/run.json" || fail=1
[ "$(grep -cE '^\| (8|16|32) B \| ' "$dir/run.md")" -eq 3 ] &&
    grep -q "HCOMM against MPI" "$dir/run.md" || {
    echo "perf_table.py: the run's table is not one row a size:"
    cat "$dir/run.md"
    fail=1
}
[ $fail -eq 0 ] && echo "perf_table: passed"
exit $fail
