#!/bin/sh
# Runs one fuzz target on its committed corpus (test/fuzz/corpus/TARGET).
# Usage (from make check): run_fuzz.sh SPEC, where SPEC is a .fuzz file
# that sets target=. With clang's libFuzzer (configure found it), the
# libFuzzer build replays the corpus under AddressSanitizer and
# UndefinedBehaviorSanitizer, then, when HCOMM_TEST_FUZZ_SECONDS is set (the
# sanitizer job in .ci/run), fuzzes that long from it (new inputs go to a
# scratch copy, never into the source tree). Without it, the plain driver
# (fuzz_main.c) replays the corpus.
set -u
spec=$1
target=
. "$spec"
: "${top_builddir:=.}"
: "${top_srcdir:=.}"
corpus=$top_srcdir/test/fuzz/corpus/$target
lf=$top_builddir/test/fuzz/libfuzz_$target
plain=$top_builddir/test/fuzz/fuzz_$target
[ -d "$corpus" ] || { echo "FAILED: no corpus $corpus"; exit 1; }
# No MPI starts in these programs: every leak would be the parsers'.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=1"
if [ -x "$lf" ]; then
    echo "== $target: libFuzzer, replaying $corpus"
    "$lf" -runs=0 "$corpus" || { echo "FAILED: $target on its corpus"; exit 1; }
    if [ -n "${HCOMM_TEST_FUZZ_SECONDS:-}" ]; then
        scratch=$(mktemp -d)
        trap 'rm -rf "$scratch"' EXIT
        cp "$corpus"/* "$scratch"/
        echo "== $target: fuzzing for $HCOMM_TEST_FUZZ_SECONDS s"
        "$lf" -max_total_time="$HCOMM_TEST_FUZZ_SECONDS" -max_len=4096 \
            -artifact_prefix="$scratch/" "$scratch" 2>&1 | tail -n 5
        if ls "$scratch"/crash-* "$scratch"/leak-* "$scratch"/timeout-* \
            >/dev/null 2>&1; then
            echo "FAILED: $target: fuzzing found inputs that fail:"
            for f in "$scratch"/crash-* "$scratch"/leak-* "$scratch"/timeout-*; do
                [ -f "$f" ] && od -c "$f" | head -5
            done
            exit 1
        fi
    fi
elif [ -x "$plain" ]; then
    echo "== $target: no libFuzzer here, the plain driver replays $corpus"
    "$plain" "$corpus" || { echo "FAILED: $target on its corpus"; exit 1; }
else
    echo "FAILED: neither $lf nor $plain was built"
    exit 1
fi
echo "$target: corpus of $(ls "$corpus" | wc -l) inputs passed"
