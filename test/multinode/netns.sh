#!/bin/sh
# Several hosts on one machine: network namespaces joined by a bridge, each
# with its own host name, Open MPI starting its daemons inside them
# (netns_agent.sh as plm_rsh_agent), and UCX over TCP between them. MPI
# then finds one node per namespace, so HCOMM's topology detection, its
# hierarchical algorithms and its per-node shared segments run as they do
# across real nodes. Runs the integration programs as 2 hosts x 2 ranks and
# as 3 hosts of 2, 2 and 1 ranks.
#
# Skipped (exit 77) where namespaces cannot be made (not root, no ip or
# unshare, no CAP_NET_ADMIN) or the MPI is not Open MPI. The hosts share
# this machine's cores, which HCOMM cannot see from inside one of them:
# HCOMM_SPIN_COUNT=0 makes waiting ranks yield, as on an oversubscribed
# node.
set -u
: "${top_builddir:=.}"
. "$(dirname "$0")/hosts.sh"
hosts_start 10.21 hc$(($$ % 100000)) 3 1

set -- $hosts
two_by_two="$1:2,$2:2"
uneven="$1:2,$2:2,$3:1"

log=$(mktemp)
trap 'hosts_cleanup; rm -f "$log"' EXIT
passed=0 failed=0
# run HOSTS RANKS TRANSPORT PROGRAM [ARGS...]
run() {
    spec=$1 n=$2 t=$3
    shift 3
    echo "== $1: $n ranks on $spec, HCOMM_TRANSPORT=$t"
    hosts_mpirun 600 "$spec" "$n" \
        -x UCX_TLS=tcp,self -x UCX_NET_DEVICES=eth0 \
        -x HCOMM_TIMEOUT=60 -x HCOMM_TRANSPORT="$t" -x HCOMM_SPIN_COUNT=0 \
        "$top_builddir/$1" "$@" >"$log" 2>&1
    rc=$?
    # Open MPI warns that it cannot setpgid its agent: noise here.
    grep -v "setpgid" "$log"
    if [ "$rc" -eq 0 ]; then
        passed=$((passed + 1))
    else
        echo "FAILED: $1 with $n ranks on $spec, $t"
        failed=$((failed + 1))
    fi
}

shm_pid=$(mktemp)
run "$two_by_two" 4 ucx test/integration/test_topo
run "$two_by_two" 4 ucx test/integration/test_colls
run "$two_by_two" 4 mpi test/integration/test_colls
# Under the sanitizers (CI's HCOMM_TEST_SANITIZER pass, where each run
# takes twice as long) the runs whose code the ones above and the
# single-host tests there already take are left out.
if [ "${HCOMM_TEST_SANITIZER:-0}" = 0 ]; then
    run "$two_by_two" 4 ucx test/integration/test_allreduce
    run "$two_by_two" 4 ucx test/integration/test_shm "$shm_pid"
    run "$uneven" 5 ucx test/integration/test_colls
fi
run "$uneven" 5 ucx test/integration/test_shm "$shm_pid"
# Each host's segment is unlinked once mapped: nothing is left behind.
left=$(ls /dev/shm 2>/dev/null | grep "^hcomm-$(cat "$shm_pid")-")
rm -f "$shm_pid"
if [ -n "$left" ]; then
    echo "FAILED: left in /dev/shm: $left"
    failed=$((failed + 1))
fi
echo "$passed passed, $failed failed"
test "$failed" -eq 0
