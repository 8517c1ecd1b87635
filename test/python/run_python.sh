#!/bin/sh
# Runs one Python test script under mpirun at several rank counts and on
# each transport, with the hcomm package of the source tree over the
# libhcomm.so of the build tree.
# Usage (from make check): run_python.sh SPEC, where SPEC is a .pympi file
# that sets script=, needs= (modules it imports), ranks= and transports=.
# The interpreter is the first of $PYTHON, python3 and /usr/bin/python3
# (Debian's, where apt's python3-numpy lands) that imports every module in
# needs; with none the test is skipped (77). HCOMM_TEST_PRELOAD_FIRST, when
# set, is preloaded into the interpreter: a sanitizer build's libhcomm.so
# needs the sanitizer's runtime loaded before it.
set -u
spec=$1
script= needs=numpy ranks="1 2 3 4" transports="ucx mpi"
. "$spec"
. "$(dirname "$0")/../max_ranks.sh"
. "$(dirname "$0")/../mpi_env.sh"
: "${top_srcdir:=.}"

python=
for p in ${PYTHON:-} python3 /usr/bin/python3; do
    [ "$p" != : ] || continue # configure's mark for no Python
    if "$p" -c "import $needs" >/dev/null 2>&1; then
        python=$p
        break
    fi
done
if [ -z "$python" ]; then
    echo "SKIP: no Python here imports $needs"
    exit 77
fi
lib=$(cd "$top_builddir/.libs" && pwd)/libhcomm.so
PYTHONPATH=$(cd "$top_srcdir/python" && pwd)${PYTHONPATH:+:$PYTHONPATH}
LIBHCOMM_PATH=$lib
export PYTHONPATH LIBHCOMM_PATH
# One thread per rank: the ranks share the machine's cores.
export OMP_NUM_THREADS=1
echo "$python ($("$python" --version 2>&1)), $lib"

launch_flags=$mpi_flags
[ -z "$mpi_flags" ] || [ -z "${HCOMM_TEST_PRELOAD_FIRST:-}" ] ||
    launch_flags="$launch_flags -x LD_PRELOAD=$HCOMM_TEST_PRELOAD_FIRST"
export HCOMM_TIMEOUT=${HCOMM_TIMEOUT:-60}

passed=0 failed=0 skipped=0
for t in $transports; do
    for n in $ranks; do
        echo "== $script: $n ranks, HCOMM_TRANSPORT=$t"
        HCOMM_TRANSPORT=$t timeout 600 $MPIRUN $launch_flags -np "$n" \
            "$python" "$top_srcdir/$script"
        rc=$?
        if [ $rc -eq 0 ]; then
            passed=$((passed + 1))
        elif [ $rc -eq 77 ]; then
            skipped=$((skipped + 1))
        else
            echo "FAILED: $script with $n ranks on $t"
            failed=$((failed + 1))
        fi
    done
done
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ] || exit 1
[ "$passed" -gt 0 ] || [ "$skipped" -eq 0 ] || exit 77
