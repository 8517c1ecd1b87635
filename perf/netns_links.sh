#!/bin/sh
# Two hosts on one machine, each with two links of limited bandwidth:
# network namespaces as in test/multinode/netns.sh, joined by two bridges,
# every veth end shaped by tc (token bucket) to RATE0 (eth0) and RATE1
# (eth1). Then, 2 hosts x 2 ranks (NETNS_RANKS_PER_HOST), UCX over TCP,
# MPI in the same run:
#  - perf/hcomm_bench_compress over eth0 alone: every compression scheme
#    of hcomm_allreduce_ex against uncompressed HCOMM and MPI_Allreduce;
#  - hcomm_perf allreduce over eth0, eth1, and both (UCX's multi-rail).
#
#   OUT=dir perf/netns_links.sh BUILD_DIR [RATE0 [RATE1]]
#   (defaults 1gbit and 500mbit; as root, Open MPI)
#
# The hosts share this machine's cores: with links this slow the wire,
# not the CPU, is what the times measure.
set -u
build=$(cd "${1:?usage: $0 BUILD_DIR [RATE0 [RATE1]]}" && pwd)
rate0=${2:-1gbit}
rate1=${3:-500mbit}
here=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$PWD/netns-links-out}
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tag=hl$(($$ % 100000))
hosts="${tag}n0 ${tag}n1"
cleanup() {
    for h in $hosts; do ip netns del "$h" 2>/dev/null; done
    for l in 0 1; do ip link del "${tag}b$l" 2>/dev/null; done
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# Link l of every host: bridge ${tag}b$l, subnet 10.21$l.x.0/24, both veth
# ends shaped (egress) to the link's rate.
setup() {
    for l in 0 1; do
        rate=$([ $l = 0 ] && echo "$rate0" || echo "$rate1")
        net=10.21$l.$(($$ % 250))
        ip link add "${tag}b$l" type bridge && ip link set "${tag}b$l" up || return 1
        # mpirun, here, reaches its daemons in the hosts over link 0
        ip addr add "$net.254/24" dev "${tag}b$l" || return 1
        i=1
        for h in $hosts; do
            [ $l = 0 ] && { ip netns add "$h" && ip -n "$h" link set lo up || return 1; }
            ip link add "${h}v$l" type veth peer name "eth$l" netns "$h" || return 1
            ip link set "${h}v$l" master "${tag}b$l" up || return 1
            ip -n "$h" addr add "$net.$i/24" dev "eth$l" || return 1
            ip -n "$h" link set "eth$l" up || return 1
            shape="root tbf rate $rate burst 256kb latency 50ms"
            # shellcheck disable=SC2086
            tc qdisc add dev "${h}v$l" $shape || return 1
            # shellcheck disable=SC2086
            ip netns exec "$h" tc qdisc add dev "eth$l" $shape || return 1
            i=$((i + 1))
        done
    done
}
setup || { echo "cannot make shaped namespaces here" >&2; exit 77; }
set -- $hosts
ppn=${NETNS_RANKS_PER_HOST:-2}
spec="$1:$ppn,$2:$ppn"
net0=10.210.$(($$ % 250)).0/24

# mpi LOG DEVICES CMD...: every rank, UCX over TCP on DEVICES.
mpi() {
    log=$1 devs=$2
    shift 2
    echo "\$ UCX_NET_DEVICES=$devs $*" >>"$out/$log"
    timeout 900 mpirun --host "$spec" -np $((2 * ppn)) --bind-to none \
        --mca plm_rsh_agent "$here/test/multinode/netns_agent.sh" \
        --mca oob_tcp_if_include "$net0" --mca btl_tcp_if_include "$net0" \
        -x UCX_TLS=tcp,self -x UCX_NET_DEVICES="$devs" \
        -x HCOMM_TIMEOUT=300 -x HCOMM_SPIN_COUNT=0 "$@" 2>&1 |
        grep -v setpgid >>"$out/$log"
}

{
    date -u
    echo "links: eth0 $rate0, eth1 $rate1 (tc tbf, both directions)"
    git -C "$here" log -1 --oneline 2>/dev/null
} >"$out/env.txt"
mpi compress.txt eth0 "$build/perf/hcomm_bench_compress" -e 64M -n 5
for devs in eth0 eth1 eth0,eth1; do
    mpi multirail.txt "$devs" "$build/perf/hcomm_perf" allreduce -b 1M -e 64M \
        -f 8 -n 3 -w 1
done
cat "$out/compress.txt"
grep -E '^\$|^ +[0-9]' "$out/multirail.txt"
