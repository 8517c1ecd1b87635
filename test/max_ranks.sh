# Sourced by the test runners (run_mpi.sh, run_preload.sh, run_python.sh)
# after they read their spec, so that all three cut the rank counts alike.
# HCOMM_TEST_MAX_RANKS (the sanitizer job in .ci/run: every rank is several
# times slower there) keeps the counts in $ranks up to it, and the smallest
# when none is, and says so when it drops any.
if [ -n "${HCOMM_TEST_MAX_RANKS:-}" ]; then
    kept=
    for n in $ranks; do
        [ "$n" -le "$HCOMM_TEST_MAX_RANKS" ] && kept="$kept $n"
    done
    [ -n "$kept" ] || kept=$(printf '%s\n' $ranks | sort -n | head -n 1)
    [ "$kept" = " $ranks" ] || echo "HCOMM_TEST_MAX_RANKS=$HCOMM_TEST_MAX_RANKS: ranks$kept of $ranks"
    ranks=$kept
fi
