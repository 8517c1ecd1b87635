#!/bin/sh
# Multipath (HCOMM_USE_MULTIPATH): two hosts (network namespaces, as in
# netns.sh), each with two links shaped to 400 and 200 Mbit/s; HCOMM's UCX
# on both (UCX_NET_DEVICES=eth0,eth1), MPI and mpirun's daemons on eth0.
#  - test_colls at 2 hosts x 2 ranks gets exact results over the rails;
#  - 1 MiB allreduces for 4 s (link_loop) send over both links, in about
#    the proportion of their rates (eth0 carries 2/3 of host 0's bytes,
#    measured at its devices' counters; the bound is loose, as the rates
#    are measured on a shared machine).
# Skipped as netns.sh is.
set -u
: "${top_builddir:=.}"
. "$(dirname "$0")/hosts.sh"
hosts_start 10.25 hp$(($$ % 100000)) 2 2 400mbit 200mbit
log=$(mktemp)
trap 'hosts_cleanup; rm -f "$log"' EXIT
set -- $hosts
failed=0
run() { # HOST0 HOST1 PROGRAM
    spec="$1:2,$2:2"
    shift 2
    hosts_mpirun 300 "$spec" 4 -x UCX_TLS=tcp,self \
        -x UCX_NET_DEVICES=eth0,eth1 -x HCOMM_USE_MULTIPATH=1 \
        -x HCOMM_TIMEOUT=60 -x HCOMM_SPIN_COUNT=0 -x HCOMM_DEBUG=info \
        -x HCOMM_TEST_LOOP_SECONDS=4 "$@" >"$log" 2>&1
    rc=$?
    grep -v setpgid "$log" | grep -vE "INFO (init|topo|coll|shm)"
    return $rc
}
tx() { ip netns exec "$1" cat "/sys/class/net/$2/statistics/tx_bytes"; }

echo "== test_colls, 2 hosts x 2 ranks, over two rails"
run "$1" "$2" "$top_builddir/test/integration/test_colls" ||
    { echo "FAILED: test_colls over the rails"; failed=1; }
grep -q "rail 1 (eth1)" "$log" ||
    { echo "FAILED: no rail was measured (multipath off?)"; failed=1; }

echo "== 1 MiB allreduces for 4 s"
a0=$(tx "$1" eth0) a1=$(tx "$1" eth1)
run "$1" "$2" "$top_builddir/test/multinode/link_loop" ||
    { echo "FAILED: link_loop over the rails"; failed=1; }
b0=$(tx "$1" eth0) b1=$(tx "$1" eth1)
# per mille of host 0's bytes that left on eth0
share=$(((b0 - a0) * 1000 / (b0 - a0 + b1 - a1 + 1)))
echo "host 0 sent $(((b0 - a0) >> 20)) MiB on eth0 (400 Mbit/s), $(((b1 - a1) >> 20)) MiB on eth1 (200 Mbit/s): eth0 ${share} per mille"
if [ "$share" -lt 550 ] || [ "$share" -gt 850 ]; then
    echo "FAILED: eth0's share is not about 2/3"
    failed=1
fi
exit $failed
