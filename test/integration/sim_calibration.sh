#!/bin/sh
# The simulator's checked-in figures come from its checked-in records:
# tools/hcomm_sim_calibrate.py --replay of each record fits them again,
# the same to the byte, with the within-25% count README states. A change
# to the model, the fit or the simulator that moves them fails here (then
# replay, and update the figures and README together).
set -u
: "${top_srcdir:=.}"
tools=$top_srcdir/tools
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail=0
check() { # record flags fitted-file checked-in-figures "N of M"
    mkdir -p "$dir/$1"
    OUT="$dir/$1" python3 "$tools/hcomm_sim_calibrate.py" $2 --replay \
        "$tools/$1" >"$dir/$1/table.md" 2>"$dir/$1/log" || {
        echo "replay of $1 failed:"
        tail -5 "$dir/$1/log"
        fail=1
        return
    }
    cmp -s "$dir/$1/$3" "$tools/$4" || {
        echo "replay of $1: $3 differs from tools/$4"
        diff "$dir/$1/$3" "$tools/$4" | head -20
        fail=1
    }
    grep -qxF "$5 within 25%" "$dir/$1/table.md" || {
        echo "replay of $1: not '$5 within 25%':"
        grep "within" "$dir/$1/table.md"
        fail=1
    }
}
check hcomm_sim_measured_gpuhost.json --no-netns hcomm_sim_here.json \
    hcomm_sim_gpuhost.json "36 of 48"
check hcomm_sim_measured_gpuhost_fakehosts.json --fake-hosts \
    hcomm_sim_fakehosts.json hcomm_sim_fakehosts.json "94 of 112"
check hcomm_sim_measured_here_shm.json --shm hcomm_sim_shm.json \
    hcomm_sim_here_shm.json "10 of 16"
exit $fail
