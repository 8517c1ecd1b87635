#!/bin/sh
# Open MPI's plm_rsh_agent for test/multinode/netns.sh: Open MPI runs
# "AGENT HOST COMMAND..." to start its daemon on HOST; HOST is the name of
# a network namespace, and the daemon runs inside it with HOST as its host
# name (a UTS namespace of its own), so MPI sees a host of its own.
host=$1
shift
exec ip netns exec "$host" unshare --uts sh -c "hostname $host && $*"
