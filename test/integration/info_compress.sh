#!/bin/sh
# hcomm_info --compress: under mpirun, what compression auto picks for each
# size from 64 KiB up, with the two times it measured; a bad size is
# refused (exit 2, usage on stderr, nothing on stdout).
set -u
. "$(dirname "$0")/../mpi_env.sh"
exe=$top_builddir/tools/hcomm_info
flags=$mpi_flags
export HCOMM_TIMEOUT=60
out=$(mktemp)
err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
failed=0

# shellcheck disable=SC2086
timeout 300 $MPIRUN $flags -np 2 "$exe" --compress 256K >"$out" 2>"$err"
rc=$?
cat "$out" "$err"
[ $rc -eq 0 ] || { echo "FAILED: exit $rc"; failed=1; }
# one row per size: bytes, two positive times, the pick
for bytes in 65536 262144; do
    grep -Eq "^ +$bytes +[0-9]*[1-9][0-9]* +[0-9]*[1-9][0-9]* +(bf16|none)$" "$out" ||
        { echo "FAILED: no row for $bytes bytes"; failed=1; }
done
[ "$(grep -c "^ *[0-9]" "$out")" -eq 2 ] || { echo "FAILED: not two rows"; failed=1; }

"$exe" --compress 1K >"$out" 2>"$err"
rc=$?
[ $rc -eq 2 ] && [ ! -s "$out" ] && grep -q "usage" "$err" ||
    { echo "FAILED: --compress 1K: exit $rc"; failed=1; }
echo "info_compress: $failed failed"
exit $failed
