#!/bin/sh
# tools/hcomm_prof on the files test_profile leaves: one row per collective
# and size with every rank's calls, the slowest rank named, and, where
# matplotlib is installed, a PNG.
set -u
. "$(dirname "$0")/../mpi_env.sh"
: "${top_srcdir:=.}"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
flags=$mpi_flags
HCOMM_TEST_PROFILE_DIR=$dir timeout 120 $MPIRUN $flags -np 2 \
    "$top_builddir/test/integration/test_profile" >/dev/null || exit 1
fail=0
for fmt in calls trace; do
    out=$(python3 "$top_srcdir/tools/hcomm_prof" "$dir"/$fmt.*) || fail=1
    for row in "allreduce +4000 +2 " "allgather +80 +2 " "bcast +56 +2 "; do
        echo "$out" | grep -Eq "^  $row" || {
            echo "hcomm_prof ($fmt): no row '$row' in:"
            echo "$out"
            fail=1
        }
    done
done
# The python3 first on PATH may be another than the system's, which has
# Debian's matplotlib.
plotter=
for py in python3 /usr/bin/python3; do
    if "$py" -c "import matplotlib" 2>/dev/null; then plotter=$py && break; fi
done
if [ -n "$plotter" ]; then
    "$plotter" "$top_srcdir/tools/hcomm_prof" "$dir"/calls.* --plot "$dir/bw.png" >/dev/null &&
        head -c 8 "$dir/bw.png" | grep -q PNG || { echo "no PNG drawn"; fail=1; }
else
    echo "matplotlib missing: the plot is not tested"
fi
[ $fail -eq 0 ] && echo "prof_tool: passed"
exit $fail
