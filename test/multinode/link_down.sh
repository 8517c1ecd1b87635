#!/bin/sh
# A link taken down in the middle of a run: two hosts (network namespaces,
# as in netns.sh), each with two links; MPI and mpirun's daemons use eth0,
# HCOMM's UCX eth1 alone. While test/multinode/link_loop runs allreduces
# at 2 hosts x 2 ranks, one host's eth1 goes down. Every rank must then
# either go on (a path around the link) or fail with an HCOMM error that
# says what it waited for, and every rank must end: within HCOMM_TIMEOUT
# of the link going down, plus the time to finalize. Skipped as netns.sh is.
set -u
: "${MPIRUN:=mpirun}"
: "${top_builddir:=.}"
here=$(cd "$(dirname "$0")" && pwd)

skip() {
    echo "SKIP: $*"
    exit 77
}
[ "$(id -u)" = 0 ] || skip "network namespaces need root"
command -v ip >/dev/null && command -v unshare >/dev/null ||
    skip "needs ip (iproute2) and unshare"
$MPIRUN --version 2>&1 | grep -q "Open MPI" || skip "needs Open MPI's rsh launcher"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

tag=hd$(($$ % 100000))
sub=$(($$ % 250))
hosts="${tag}n0 ${tag}n1"
log=$(mktemp)
cleanup() {
    for h in $hosts; do ip netns del "$h" 2>/dev/null; done
    for l in 0 1; do ip link del "${tag}b$l" 2>/dev/null; done
    rm -f "$log"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# Link l: bridge ${tag}b$l, subnet 10.22$l.$sub.0/24, eth$l in each host.
setup() {
    for l in 0 1; do
        ip link add "${tag}b$l" type bridge && ip link set "${tag}b$l" up || return 1
        ip addr add "10.22$l.$sub.254/24" dev "${tag}b$l" || return 1
        i=1
        for h in $hosts; do
            [ $l = 0 ] && { ip netns add "$h" && ip -n "$h" link set lo up || return 1; }
            ip link add "${h}v$l" type veth peer name "eth$l" netns "$h" || return 1
            ip link set "${h}v$l" master "${tag}b$l" up || return 1
            ip -n "$h" addr add "10.22$l.$sub.$i/24" dev "eth$l" || return 1
            ip -n "$h" link set "eth$l" up || return 1
            i=$((i + 1))
        done
    done
}
setup 2>&1 || skip "cannot make network namespaces here"
set -- $hosts
timeout_s=5

start=$(date +%s)
timeout 300 $MPIRUN --host "$1:2,$2:2" -np 4 --bind-to none \
    --mca plm_rsh_agent "$here/netns_agent.sh" \
    --mca oob_tcp_if_include "10.220.$sub.0/24" \
    --mca btl_tcp_if_include "10.220.$sub.0/24" \
    -x UCX_TLS=tcp,self -x UCX_NET_DEVICES=eth1 \
    -x HCOMM_TIMEOUT=$timeout_s -x HCOMM_SPIN_COUNT=0 \
    -x HCOMM_TEST_LOOP_SECONDS=30 \
    "$top_builddir/test/multinode/link_loop" >"$log" 2>&1 &
job=$!
# once the calls run, host 1's eth1 goes down
i=0
while ! grep -q "link_loop: running" "$log" && [ $i -lt 600 ]; do
    sleep 0.1
    i=$((i + 1))
done
sleep 1
down=$(date +%s)
ip -n "$2" link set eth1 down
echo "eth1 of $2 down $((down - start)) s after the start"
wait $job
rc=$?
end=$(date +%s)
grep -v setpgid "$log"

failed=0
ended=$(grep -c "^link_loop: rank [0-3]: " "$log")
if [ "$ended" -ne 4 ]; then
    echo "FAILED: $ended of 4 ranks said how they ended (mpirun: $rc)"
    failed=1
fi
# A failure names what the call waited for (a timeout or a transport error).
if grep "^link_loop: rank" "$log" | grep -v "all succeeded" |
    grep -vqE "(HCOMM_ERR_TIMEOUT|HCOMM_ERR_TRANSPORT|timed out|timeout).*(rank|peer)"; then
    echo "FAILED: a rank failed without saying what it waited for"
    failed=1
fi
# The loop would run for 30 s: the ranks must end long before.
limit=$((2 * timeout_s + 15))
if [ $((end - down)) -gt $limit ]; then
    echo "FAILED: the ranks ended $((end - down)) s after the link went down (limit $limit s)"
    failed=1
fi
echo "link_down: ended $((end - down)) s after the link went down, mpirun $rc"
exit $failed
