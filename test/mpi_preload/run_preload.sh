#!/bin/sh
# Runs one plain MPI program at several rank counts three ways: without
# libhcomm_mpi.so, with it (HCOMM_MPI_STATS=1), and with it as a pure
# pass-through (HCOMM_MPI_INTERCEPT=none). Their stdout must be byte for
# byte the same, their stderr too once the statistics lines and the
# program's own run-dependent lines (starting with "# ") are set aside, and
# the statistics must show that HCOMM took the calls it should.
# Usage (from make check): run_preload.sh SPEC. SPEC is a .preload file
# that sets program=, and optionally ranks=, args=, fortran= (the program
# is Fortran: skip when configure found no compiler), stats=0 (no
# statistics checks), compare=no (no run without the preload to compare
# with: the output differs run to run, or another spec compares it),
# expect_taken= (MPI_* that every rank must show taken),
# expect_calls= (MPI_* each rank must show, taken unless HCOMM does not
# implement them yet), mpi_transport_ranks= (also run with
# HCOMM_TRANSPORT=mpi at these rank counts), window= and window_ranks=
# (also run with HCOMM_MPI_INTERCEPT=$window at these rank counts: the
# output must not change, and some calls must fall back for their size),
# same_taken=yes (every rank takes each collective, and sets up HCOMM
# communicators, equally often: doing so on some ranks only would hang),
# left_to_mpi= (MPI_* that no rank
# takes from 2 ranks on), none_ranks= (the rank counts of the pass-through
# run; default 1 and 2: it checks that nothing is taken, a third of a
# test's time at each count), limit= (seconds each run may take; default 600:
# a hang fails). HCOMM_TEST_RANKS, when set, replaces every spec's rank
# counts (CI uses it where MPI is slow when oversubscribed).
# HCOMM_TEST_PRELOAD_FIRST, when set, goes before libhcomm_mpi.so in
# LD_PRELOAD: a sanitizer's runtime must be the first library loaded.
# Under the sanitizers (CI's HCOMM_TEST_SANITIZER pass) only the run with
# the preload: the runs without HCOMM and with it passing everything
# through look at no memory of HCOMM's that the first does not, and the
# plain suite compares their outputs (they took half of that pass's
# preload time).
set -u
spec=$1
program= ranks="1 2 3 4 5" args= fortran= stats=1 compare=yes
expect_taken= expect_calls= mpi_transport_ranks= window= window_ranks=
same_taken= left_to_mpi= limit=600 none_ranks="1 2"
. "$spec"
ranks=${HCOMM_TEST_RANKS:-$ranks}
if [ "${HCOMM_TEST_SANITIZER:-0}" != 0 ]; then
    compare=no none_ranks=
fi
. "$(dirname "$0")/../max_ranks.sh"
. "$(dirname "$0")/../mpi_env.sh"
exe=$top_builddir/$program
lib=$(cd "$top_builddir" && pwd)/.libs/libhcomm_mpi.so

if [ ! -x "$exe" ]; then
    if [ -n "$fortran" ]; then
        echo "SKIP: $program: configure found no MPI Fortran compiler that" \
            "builds $fortran programs (MPIFORT=${MPIFORT:-none})"
        exit 77
    fi
    echo "FAILED: $exe is missing"
    exit 1
fi
[ -f "$lib" ] || { echo "FAILED: $lib is missing"; exit 1; }

launch=$mpi_flags
if [ -n "$mpi_flags" ]; then
    setenv() { printf -- '-x %s=%s ' "$1" "$2"; }
else # MPICH's Hydra
    setenv() { printf -- '-genv %s %s ' "$1" "$2"; }
    # No hook runs HCOMM's non-blocking calls from MPICH's blocking ones
    # (interpose_ireq.c): MPI_Iallreduce goes to MPI there, and says why.
    expect_taken=$(echo "$expect_taken" | sed 's/MPI_I[a-z_]*//g')
    expect_calls=$(echo "$expect_calls" | sed 's/MPI_I[a-z_]*//g')
    no_hook_ok='MPI_I[a-z_]*' # every non-blocking call
fi
export HCOMM_TIMEOUT=${HCOMM_TIMEOUT:-60}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

passed=0 failed=0
fail() {
    echo "FAILED: $program, $n ranks: $*"
    failed=$((failed + 1))
}

# run LABEL [mpirun environment flags]: LABEL.out, LABEL.err, LABEL.stats
run() {
    label=$1
    shift
    # shellcheck disable=SC2086,SC2048
    timeout "$limit" $MPIRUN $launch $* -np "$n" "$exe" $args \
        >"$tmp/$label.out" 2>"$tmp/$label.err"
    rc=$?
    grep '^\[hcomm_mpi rank ' "$tmp/$label.err" >"$tmp/$label.stats"
    grep -v -e '^\[hcomm_mpi rank ' -e '^# ' "$tmp/$label.err" \
        >"$tmp/$label.rest"
    if [ "$rc" -ne 0 ]; then
        [ "$rc" -eq 124 ] && fail "$label run still running after $limit s"
        fail "$label run exited with $rc"
        sed 's/^/  | /' "$tmp/$label.err" | head -40
        return 1
    fi
    return 0
}

same_as_plain() { # label
    [ "$compare" = yes ] || return 0
    if ! cmp -s "$tmp/plain.out" "$tmp/$1.out"; then
        fail "stdout differs without and with the preload ($1)"
        diff "$tmp/plain.out" "$tmp/$1.out" | head -20
    fi
    if ! cmp -s "$tmp/plain.rest" "$tmp/$1.rest"; then
        fail "stderr differs without and with the preload ($1)"
        diff "$tmp/plain.rest" "$tmp/$1.rest" | head -20
    fi
}

# Lines "[hcomm_mpi rank R] MPI_X: T taken, F fallback (...)".
check_stats() {
    s=$tmp/preload.stats
    for c in $expect_taken; do
        k=$(grep -c "\] $c: [1-9][0-9]* taken" "$s")
        [ "$k" -eq "$n" ] || fail "$c taken on $k of $n ranks"
    done
    for c in $expect_calls; do
        k=$(grep "\] $c: " "$s" | grep -c -e ": [1-9][0-9]* taken" \
            -e "not implemented in HCOMM")
        [ "$k" -eq "$n" ] || fail "$c neither taken nor unimplemented on" \
            "$k of $n ranks"
    done
    if grep -v "\] ${no_hook_ok:-none}: 0 taken, [0-9]* fallback ([0-9]* no progress hook)$" "$s" |
        grep -e ' failed' -e 'refused by HCOMM' -e 'communicator setup' \
            -e 'no progress hook' -e 're-entry' -e 'did not start'; then
        fail "calls fell back for no good reason (above)"
    fi
    if [ "$same_taken" = yes ]; then
        # "MPI_X: N" taken, "communicators: N" set up: n of each.
        k=$(sed -n -e 's/^\[hcomm_mpi rank [0-9]*\] \(MPI_[A-Za-z_]*: [0-9]*\) taken.*/\1/p' \
            -e 's/^\[hcomm_mpi rank [0-9]*\] \(communicators: [0-9]*\) .*/\1/p' "$s" |
            sort | uniq -c | awk -v n="$n" '$1 != n' | wc -l)
        [ "$k" -eq 0 ] ||
            fail "ranks took a collective or set up communicators unequally"
    fi
    if [ "$n" -gt 1 ]; then
        for c in $left_to_mpi; do
            ! grep "\] $c: [1-9][0-9]* taken" "$s" || fail "$c taken"
        done
    fi
    if grep ': [1-9][0-9]* taken' "$tmp/none.stats"; then
        fail "HCOMM_MPI_INTERCEPT=none still took calls (above)"
    fi
}

lib_env="$(setenv LD_PRELOAD "${HCOMM_TEST_PRELOAD_FIRST:+$HCOMM_TEST_PRELOAD_FIRST:}$lib") $(setenv HCOMM_MPI_STATS "$stats")"
for n in $ranks; do
    echo "== $program${args:+ $args}: $n ranks"
    if [ "$compare" = yes ]; then run plain || continue; fi
    run preload "$lib_env $(setenv HCOMM_TEST_EXPECT_HCOMM 1)" || continue
    before=$failed
    : >"$tmp/none.stats"
    case " $none_ranks " in
    *" $n "*)
        run none "$lib_env $(setenv HCOMM_MPI_INTERCEPT none)" || continue
        same_as_plain none
        ;;
    esac
    same_as_plain preload
    [ "$stats" = 1 ] && check_stats
    for m in $mpi_transport_ranks; do
        [ "$m" = "$n" ] || continue
        run mpitp "$lib_env $(setenv HCOMM_TRANSPORT mpi)" && same_as_plain mpitp
    done
    for m in $window_ranks; do
        [ "$m" = "$n" ] || continue
        run window "$lib_env $(setenv HCOMM_MPI_INTERCEPT "$window")" &&
            same_as_plain window
        grep -q ' size' "$tmp/window.stats" ||
            fail "HCOMM_MPI_INTERCEPT=$window: no call fell back for its size"
        grep -q ': [1-9][0-9]* taken' "$tmp/window.stats" ||
            fail "HCOMM_MPI_INTERCEPT=$window: no call taken"
    done
    grep -h -e '^\[hcomm_mpi rank 0\]' -e '^# rank 0:' "$tmp/preload.err"
    [ "$failed" -eq "$before" ] && passed=$((passed + 1))
done
echo "$passed passed, $failed failed"
test "$failed" -eq 0
