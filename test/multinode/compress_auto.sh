#!/bin/sh
# Compression auto with a lossy scheme allowed, where the network is slow:
# two hosts (network namespaces, as in netns.sh) of one rank each, joined
# by one link that tc shapes to 200 Mbit/s. hcomm_info --compress, with
# HCOMM_COMPRESS=auto:topk:0.01, measures each size's first call; at 1 and
# 4 MiB, top-k 1% must be timed and picked (it moves about 2% of the bytes;
# none and bf16 then take tens of milliseconds more). Skipped as netns.sh is.
set -u
: "${top_builddir:=.}"
. "$(dirname "$0")/hosts.sh"
hosts_start 10.24 hz$(($$ % 100000)) 2 1 200mbit
log=$(mktemp)
trap 'hosts_cleanup; rm -f "$log"' EXIT
set -- $hosts
hosts_mpirun 300 "$1:1,$2:1" 2 -x UCX_TLS=tcp,self -x UCX_NET_DEVICES=eth0 \
    -x HCOMM_TIMEOUT=60 -x HCOMM_SPIN_COUNT=0 \
    -x HCOMM_COMPRESS=auto:topk:0.01 \
    "$top_builddir/tools/hcomm_info" --compress 4M >"$log" 2>&1
rc=$?
grep -v setpgid "$log"
failed=0
[ "$rc" -eq 0 ] || { echo "FAILED: hcomm_info exited $rc"; failed=1; }
# bytes, bf16, none and top-k times (each positive), the pick
for bytes in 1048576 4194304; do
    grep -Eq "^ +$bytes( +[0-9]*[1-9][0-9]*){3} +topk$" "$log" ||
        { echo "FAILED: top-k not picked at $bytes bytes"; failed=1; }
done
echo "compress_auto: $failed failed"
exit $failed
