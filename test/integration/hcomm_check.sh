#!/bin/sh
# tools/hcomm_check, the preflight: passes (exit 0, every collective exact)
# at 2 and 3 ranks; fails (exit 1), naming what differs, when one rank has
# another HCOMM_* setting or a setting HCOMM refuses; flags a slow rank
# (the test hook HCOMM_TEST_CHECK_SLOW_RANK stretches its timed work);
# refuses a bad argument (exit 2). No case may hang.
set -u
. "$(dirname "$0")/../mpi_env.sh"
exe=$top_builddir/tools/hcomm_check
flags=$mpi_flags
export HCOMM_TIMEOUT=60
out=$(mktemp)
trap 'rm -f "$out"' EXIT
failed=0
fail() {
    echo "FAILED: $*"
    sed 's/^/  | /' "$out" | head -60
    failed=$((failed + 1))
}
# expect RC PATTERN...: the last run exited RC and printed every PATTERN.
expect() {
    want=$1
    shift
    [ "$rc" -eq "$want" ] || fail "$label: exit $rc, expected $want"
    for p in "$@"; do
        grep -q -- "$p" "$out" || fail "$label: no '$p' in the output"
    done
}

# On a machine with fewer cores than ranks a rank's timings can be off by
# a few times, not by 20: the passing runs flag only what is 20x slower.
for n in 2 3; do
    label="$n ranks"
    echo "== $label"
    timeout 300 $MPIRUN $flags -np $n "$exe" --bytes 1M --slow-factor 0.05 \
        >"$out" 2>&1
    rc=$?
    expect 0 "hcomm_check: OK: 0 problems" "HCOMM_\* settings  same on every"
    k=$(grep -c ' exact$' "$out")
    [ "$k" -eq 17 ] || fail "$label: $k of 17 collective runs exact"
    ! grep -q -e WRONG -e SLOW -e DIFFERS "$out" || fail "$label: a problem"
done

label="rank 0 with HCOMM_CHUNK_SIZE=2M"
echo "== $label"
timeout 300 $MPIRUN $flags -np 1 env HCOMM_CHUNK_SIZE=2M "$exe" : \
    -np 2 "$exe" >"$out" 2>&1
rc=$?
expect 1 "HCOMM_\* settings  DIFFERS between ranks" "ranks 0:" \
    "HCOMM_CHUNK_SIZE=2M" "ranks 1 2:" "collectives and links: not run" \
    "hcomm_check: FAILED: 1 problem"

label="rank 1 with HCOMM_CHUNK_SIZE=1 (refused)"
echo "== $label"
timeout 300 $MPIRUN $flags -np 1 "$exe" : -np 1 env HCOMM_CHUNK_SIZE=1 \
    "$exe" >"$out" 2>&1
rc=$?
expect 1 "settings parse    DIFFERS" \
    "FAILED: HCOMM_CHUNK_SIZE=1: below the smallest allowed" \
    "hcomm_check: FAILED: 2 problems"

label="rank 1 slow"
echo "== $label"
timeout 300 $MPIRUN $flags -np 2 -x HCOMM_TEST_CHECK_SLOW_RANK=1 "$exe" \
    --bytes 64K >"$out" 2>&1
rc=$?
expect 1 "rank 1 .*SLOW" "hcomm_check: FAILED"
grep -q "rank 0 .*SLOW" "$out" && fail "$label: rank 0 flagged too"

label="bad argument"
echo "== $label"
timeout 300 $MPIRUN $flags -np 1 "$exe" --bytes -4 >"$out" 2>&1
rc=$?
expect 2 "hcomm_check: bad argument '--bytes -4'" "usage:"

echo "$failed failed"
[ "$failed" -eq 0 ]
