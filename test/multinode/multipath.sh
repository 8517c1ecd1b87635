#!/bin/sh
# Multipath (HCOMM_USE_MULTIPATH): two hosts (network namespaces, as in
# netns.sh), each with two links shaped to 400 and 200 Mbit/s; HCOMM's UCX
# on both (UCX_NET_DEVICES=eth0,eth1), MPI and mpirun's daemons on eth0.
#  - test_colls at 2 hosts x 2 ranks gets exact results over the rails;
#  - 1 MiB allreduces for 4 s (link_loop) send over both links, in about
#    the proportion of their rates (eth0 carries 2/3 of host 0's bytes,
#    measured at its devices' counters; the bound is loose, as the rates
#    are measured on a shared machine).
#  - with an override file that makes eth1 the NIC nearest to every rank
#    (hwloc would, for ranks bound to its socket), 4 KiB allreduces leave
#    host 0 over eth1 (collective messages of up to 16 KiB take the
#    sender's nearest rail), though eth0 is the faster.
# Skipped as netns.sh is.
set -u
: "${top_builddir:=.}"
. "$(dirname "$0")/hosts.sh"
hosts_start 10.25 hp$(($$ % 100000)) 2 2 400mbit 200mbit
log=$(mktemp)
trap 'hosts_cleanup; rm -f "$log"' EXIT
set -- $hosts
failed=0
run() { # HOST0 HOST1 [mpirun options] PROGRAM
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

echo "== 4 KiB allreduces for 4 s, eth1 the nearest NIC of every rank"
topo=$(mktemp)
cat >"$topo" <<EOF
{"nodes": [{"ranks": [0, 1], "nics": [{"name": "eth1", "ranks": [0, 1]}]},
           {"ranks": [2, 3], "nics": [{"name": "eth1", "ranks": [2, 3]}]}]}
EOF
a0=$(tx "$1" eth0) a1=$(tx "$1" eth1)
run "$1" "$2" -x HCOMM_OVERRIDE_TOPO="$topo" -x HCOMM_TEST_LOOP_COUNT=1024 \
    "$top_builddir/test/multinode/link_loop" ||
    { echo "FAILED: link_loop with the nearest NIC"; failed=1; }
b0=$(tx "$1" eth0) b1=$(tx "$1" eth1)
rm -f "$topo"
near=$(grep -c "rail 1 (eth1) is its nearest" "$log")
[ "$near" -eq 4 ] ||
    { echo "FAILED: $near of 4 ranks took eth1 as their nearest rail"; failed=1; }
# Less the rails' weighing, which sends 3 x 4 MiB on each from rank 0
# first (MPI's few bytes on eth0 stay in).
probe=$((12 << 20))
s0=$((b0 - a0 - probe)) s1=$((b1 - a1 - probe))
[ "$s0" -gt 0 ] || s0=0
[ "$s1" -gt 0 ] || s1=0
share=$((s1 * 1000 / (s0 + s1 + 1)))
echo "host 0 sent $((s0 >> 10)) KiB on eth0, $((s1 >> 10)) KiB on eth1 besides the weighing: eth1 ${share} per mille"
if [ "$share" -lt 750 ]; then
    echo "FAILED: the small messages did not keep to eth1"
    failed=1
fi
exit $failed
