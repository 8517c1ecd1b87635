#!/bin/sh
# perf/lib_ab.sh and lib_ab.py (libraries compared, the library alone
# swapped): known rows give known medians, ranges and ratios; a real run
# of two libraries over two rotations runs each library once a rotation,
# forward then backward, and gives a row a size; bad arguments and a
# failing run are errors on stderr.
set -u
. "$(dirname "$0")/../mpi_env.sh"
: "${top_srcdir:=.}"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail=0
expect() { # FILE LINE-FRAGMENT...
    f=$1
    shift
    for want in "$@"; do
        grep -qF -- "$want" "$f" || {
            echo "lib_ab: no '$want' in:"
            cat "$f"
            fail=1
        }
    done
}

row() { # lib hcomm_us mpi_us size
    printf '{"lib":"%s","rotation":1,"collective":"allreduce","size":%s,"count":2,"type":"float32","redop":"sum","root":-1,"nranks":2,"hcomm":{"time_us":%s,"algbw":1,"busbw":1,"wrong":0},"mpi":{"time_us":%s,"algbw":1,"busbw":1,"wrong":0},"ratio":1}\n' \
        "$1" "$4" "$2" "$3"
}
{
    row a 1 1 8
    row a 3 2 8
    row a 2 3 8
    row b 4 4 8
    row b 6 5 8
    row b 5 6 8
    row b 7 1 64
} >"$dir/known.jsonl"
python3 "$top_srcdir/perf/lib_ab.py" "$dir/known.jsonl" a b >"$dir/known.txt" || fail=1
expect "$dir/known.txt" "a 2.000 [1.000-3.000] (1.00)  b 5.000 [4.000-6.000] (2.50)  MPI 3.500" \
    "a -  b 7.000 [7.000-7.000]  MPI 1.000"

mkdir "$dir/x" "$dir/y"
lib=$(cd "$top_builddir/.libs" && pwd)/libhcomm.so.0
ln -s "$lib" "$dir/x/libhcomm.so.0"
ln -s "$lib" "$dir/y/libhcomm.so.0"
export HCOMM_PERF="$top_builddir/perf/.libs/hcomm_perf" MPI_FLAGS="$mpi_flags"
ROTATIONS=2 bash "$top_srcdir/perf/lib_ab.sh" "$dir/run" "x=$dir/x y=$dir/y" 2 \
    allreduce -b 8 -e 64 -f 8 -n 10 -w 1 >"$dir/run.out" 2>&1 || {
    echo "lib_ab.sh: a run of two libraries failed"
    cat "$dir/run.out"
    fail=1
}
order=$(sed 's/^{"lib":"\([a-z]*\)".*/\1/' "$dir/run/runs.jsonl" | tr -d '\n')
[ "$order" = xxyyyyxx ] || {
    echo "lib_ab.sh: the libraries ran as $order, not xxyyyyxx (a row a size)"
    fail=1
}
expect "$dir/run/table.txt" "allreduce         2 float32           8  x " \
    "allreduce         2 float32          64  x " "(1.00)  y " "MPI "

# bad arguments: a clear error on stderr, nothing on stdout, exit 2
for libs in "x=$dir/none" "=$dir/x" "x y"; do
    bash "$top_srcdir/perf/lib_ab.sh" "$dir/bad" "$libs" 2 allreduce \
        >"$dir/bad.out" 2>"$dir/bad.err"
    rc=$?
    if [ $rc -ne 2 ] || [ -s "$dir/bad.out" ] || ! grep -q '^lib_ab: ' "$dir/bad.err"; then
        echo "lib_ab.sh \"$libs\": exit $rc (2 expected), stdout and stderr:"
        cat "$dir/bad.out" "$dir/bad.err"
        fail=1
    fi
done
# a run that fails (no such collective) fails the comparison and says where
ROTATIONS=1 bash "$top_srcdir/perf/lib_ab.sh" "$dir/broken" "x=$dir/x" 2 nosuch \
    >/dev/null 2>"$dir/broken.err"
rc=$?
if [ $rc -eq 0 ] || ! grep -q "lib_ab: x, 2 ranks, nosuch: exit" "$dir/broken.err"; then
    echo "lib_ab.sh: a failing run gave exit $rc and:"
    cat "$dir/broken.err"
    fail=1
fi
[ $fail -eq 0 ] && echo "lib_ab: medians, order and errors as expected"
exit $fail
