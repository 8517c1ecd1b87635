# Hosts on one machine, sourced by netns.sh, link_down.sh and
# perf/netns_links.sh: network namespaces with host names of their own
# (netns_agent.sh starts Open MPI's daemons inside them), joined by one
# bridge per link, so that MPI sees separate hosts and UCX talks TCP
# between them.
#
#   hosts_start BASE TAG N LINKS [RATE0 RATE1 ...]
#       hosts_require, then hosts_make with hosts_base=BASE, or skip
#   hosts_require               exit 77 (skip) where they cannot be made
#   hosts_make TAG N LINKS [RATE0 RATE1 ...]
#       hosts ${TAG}n0 .. n(N-1) in $hosts, each with eth0 .. eth(LINKS-1);
#       link l is bridge ${TAG}b$l with subnet $(hosts_net l).0/24, the
#       host side of this machine at .254, host i at .(i+1); a RATE shapes
#       both ends of that link (tc token bucket, e.g. 1gbit). 1 on failure.
#   hosts_mpirun SECONDS SPEC NP CMD...
#       mpirun over those hosts for at most SECONDS, its daemons and MPI's
#       own traffic on link 0
#
# Cleanup (namespaces and bridges) is trapped on exit.

hosts_skip() {
    echo "SKIP: $*"
    exit 77
}

hosts_require() {
    [ "$(id -u)" = 0 ] || hosts_skip "network namespaces need root"
    command -v ip >/dev/null && command -v unshare >/dev/null ||
        hosts_skip "needs ip (iproute2) and unshare"
    ${MPIRUN:-mpirun} --version 2>&1 | grep -q "Open MPI" ||
        hosts_skip "needs Open MPI's rsh launcher"
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
}

# A subnet of this run's own for link l: the pid keeps runs of one script
# apart, hosts_base (10.21, 10.22...) scripts that make check runs at once.
hosts_net() {
    echo "${hosts_base:-10.21}$1.$(($$ % 250))"
}

hosts_cleanup() {
    for h in $hosts; do ip netns del "$h" 2>/dev/null; done
    for b in $hosts_bridges; do ip link del "$b" 2>/dev/null; done
}

hosts_make() {
    hosts_tag=$1 _hn=$2 _hlinks=$3
    shift 3
    hosts="" hosts_bridges=""
    _hi=0
    while [ $_hi -lt "$_hn" ]; do
        hosts="$hosts ${hosts_tag}n$_hi"
        _hi=$((_hi + 1))
    done
    trap hosts_cleanup EXIT
    trap 'exit 1' INT TERM
    for _hh in $hosts; do
        ip netns add "$_hh" && ip -n "$_hh" link set lo up || return 1
    done
    _hl=0
    while [ $_hl -lt "$_hlinks" ]; do
        _hrate=${1:-}
        [ $# -gt 0 ] && shift
        _hb=${hosts_tag}b$_hl _hnet=$(hosts_net $_hl)
        hosts_bridges="$hosts_bridges $_hb"
        ip link add "$_hb" type bridge && ip link set "$_hb" up || return 1
        ip addr add "$_hnet.254/24" dev "$_hb" || return 1
        _hi=1
        for _hh in $hosts; do
            ip link add "${_hh}v$_hl" type veth peer name "eth$_hl" netns "$_hh" ||
                return 1
            ip link set "${_hh}v$_hl" master "$_hb" up || return 1
            ip -n "$_hh" addr add "$_hnet.$_hi/24" dev "eth$_hl" || return 1
            ip -n "$_hh" link set "eth$_hl" up || return 1
            if [ -n "$_hrate" ]; then
                _hshape="root tbf rate $_hrate burst 256kb latency 50ms"
                # shellcheck disable=SC2086
                tc qdisc add dev "${_hh}v$_hl" $_hshape || return 1
                # shellcheck disable=SC2086
                ip netns exec "$_hh" tc qdisc add dev "eth$_hl" $_hshape || return 1
            fi
            _hi=$((_hi + 1))
        done
        _hl=$((_hl + 1))
    done
}

hosts_start() {
    hosts_require
    hosts_base=$1
    shift
    hosts_make "$@" 2>&1 || hosts_skip "cannot make network namespaces here"
}

hosts_mpirun() {
    _hsecs=$1 _hspec=$2 _hnp=$3
    shift 3
    timeout "$_hsecs" ${MPIRUN:-mpirun} --host "$_hspec" -np "$_hnp" --bind-to none \
        --mca plm_rsh_agent "$hosts_dir/netns_agent.sh" \
        --mca oob_tcp_if_include "$(hosts_net 0).0/24" \
        --mca btl_tcp_if_include "$(hosts_net 0).0/24" "$@"
}

hosts_dir=$(cd "$(dirname "$0")" && pwd)
[ -f "$hosts_dir/netns_agent.sh" ] || hosts_dir=$(cd "$hosts_dir/../test/multinode" && pwd)
