#!/bin/sh
# Runs one MPI test program at several rank counts and on each transport.
# Usage (from make check): run_mpi.sh SPEC, where SPEC is a .mpi file that
# sets program=, ranks= and transports=, and may set asan_options=,
# appended to ASAN_OPTIONS in a sanitizer build (the soak checks leaks).
set -u
spec=$1
program= ranks="1 2 3 4 5" transports="ucx mpi" asan_options=
. "$spec"
[ -z "$asan_options" ] || export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}$asan_options"
. "$(dirname "$0")/../max_ranks.sh"
. "$(dirname "$0")/../mpi_env.sh"
exe=$top_builddir/$program
launch_flags=$mpi_flags
# A hang must fail the test, not the CI job.
export HCOMM_TIMEOUT=${HCOMM_TIMEOUT:-60}

passed=0 failed=0 skipped=0
for t in $transports; do
    for n in $ranks; do
        echo "== $program: $n ranks, HCOMM_TRANSPORT=$t"
        HCOMM_TRANSPORT=$t timeout 600 $MPIRUN $launch_flags -np "$n" "$exe"
        rc=$?
        if [ $rc -eq 0 ]; then
            passed=$((passed + 1))
        elif [ $rc -eq 77 ]; then # the program has nothing to run here
            skipped=$((skipped + 1))
        else
            echo "FAILED: $program with $n ranks on $t"
            failed=$((failed + 1))
        fi
    done
done
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ] || exit 1
[ "$passed" -gt 0 ] || [ "$skipped" -eq 0 ] || exit 77
