#!/bin/sh
# Two hosts on one machine, each with two links of limited bandwidth:
# network namespaces as in test/multinode/netns.sh, joined by two bridges,
# every veth end shaped by tc (token bucket) to RATE0 (eth0) and RATE1
# (eth1). Then, 2 hosts x 2 ranks (NETNS_RANKS_PER_HOST), UCX over TCP,
# MPI in the same run:
#  - perf/hcomm_bench_compress over eth0 alone: every compression scheme
#    of hcomm_allreduce_ex against uncompressed HCOMM and MPI_Allreduce;
#  - hcomm_perf allreduce over eth0, eth1, and both: UCX's multi-rail
#    (HCOMM_USE_MULTIPATH=0), then HCOMM's multipath.
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
. "$here/test/multinode/hosts.sh"
hosts_start 10.23 hl$(($$ % 100000)) 2 2 "$rate0" "$rate1"
set -- $hosts
ppn=${NETNS_RANKS_PER_HOST:-2}
spec="$1:$ppn,$2:$ppn"

# mpi LOG DEVICES CMD...: every rank, UCX over TCP on DEVICES.
mpi() {
    log=$1 devs=$2
    shift 2
    echo "\$ UCX_NET_DEVICES=$devs $*" >>"$out/$log"
    hosts_mpirun 900 "$spec" $((2 * ppn)) -x UCX_TLS=tcp,self -x UCX_NET_DEVICES="$devs" \
        -x HCOMM_TIMEOUT=300 -x HCOMM_SPIN_COUNT=0 "$@" 2>&1 |
        grep -v setpgid >>"$out/$log"
}

{
    date -u
    echo "links: eth0 $rate0, eth1 $rate1 (tc tbf, both directions)"
    git -C "$here" log -1 --oneline 2>/dev/null
} >"$out/env.txt"
mpi compress.txt eth0 "$build/perf/hcomm_bench_compress" -e 64M -n 5
for run in "eth0 0" "eth1 0" "eth0,eth1 0" "eth0,eth1 1"; do
    set -- $run
    echo "# HCOMM_USE_MULTIPATH=$2" >>"$out/multirail.txt"
    mpi multirail.txt "$1" -x HCOMM_USE_MULTIPATH="$2" "$build/perf/hcomm_perf" \
        allreduce -b 1M -e 64M -f 8 -n 3 -w 1
done
cat "$out/compress.txt"
grep -E '^\$|^# HCOMM|^ +[0-9]' "$out/multirail.txt"
