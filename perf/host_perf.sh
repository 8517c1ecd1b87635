#!/bin/bash
# Host-memory performance of every collective, HCOMM against MPI in the same
# run (hcomm_perf: nccl-tests' columns and the ratio MPI time / HCOMM
# time), 8 B to 64 MiB, at 2, 4, 8 and 16 ranks bound one per core.
#
#   perf/host_perf.sh BUILD_DIR [RANKS...]
#
# BUILD_DIR holds perf/hcomm_perf (build/ here; build-gpu/ on the GPU
# machine, made by test/gpu/run_gpu.sh). Logs go under $OUT (default
# ./host-perf-out): one per collective and rank count
# (<coll>.<n>ranks.txt), the machine and the bindings (env.txt), and
# summary.txt (each run's median ratio, the sizes where MPI is faster).
# Rank counts above the machine's cores are skipped: --bind-to core would
# refuse them. Extra hcomm_perf arguments: HOST_PERF_ARGS (e.g. "-d int32");
# the collectives: HOST_PERF_COLLS.
set -u
if [ $# -lt 1 ] || [ ! -x "$1/perf/hcomm_perf" ]; then
    echo "usage: $0 BUILD_DIR [RANKS...]  (BUILD_DIR/perf/hcomm_perf)" >&2
    exit 2
fi
build=$(cd "$1" && pwd)
shift
ranks=${*:-2 4 8 16}
src=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$PWD/host-perf-out}
mkdir -p "$out"
colls=${HOST_PERF_COLLS:-allreduce allgather reduce_scatter broadcast reduce
    alltoall barrier gather scatter allgatherv alltoallv reduce_scatterv}
mpirun=${MPIRUN:-mpirun}
flags="--bind-to core --map-by core --report-bindings"
if $mpirun --version 2>&1 | grep -q "Open MPI"; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
# A build against the GPU machine's own UCX (test/gpu/run_gpu.sh) finds it
# as run_gpu.sh does.
D=$src/.devdeps
if [ -d "$D" ]; then
    export LD_LIBRARY_PATH=$D/ucx-cuda/lib:$D/root/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    flags="$flags -x LD_LIBRARY_PATH"
fi
cores=$(nproc)

{
    date -u
    uname -a
    lscpu 2>/dev/null | grep -E "Model name|^CPU\(s\)|Thread|Socket|NUMA node"
    $mpirun --version 2>&1 | head -1
    echo "build: $build"
    git -C "$src" log -1 --oneline 2>/dev/null
    "$build/tools/hcomm_info" 2>&1 | head -40
} >"$out/env.txt"

: >"$out/summary.txt"
status=0
for n in $ranks; do
    if [ "$n" -gt "$cores" ]; then
        echo "skip: $n ranks on $cores cores" | tee -a "$out/summary.txt"
        continue
    fi
    for coll in $colls; do
        log=$out/$coll.${n}ranks.txt
        echo "== $coll, $n ranks"
        # shellcheck disable=SC2086
        timeout 1800 $mpirun $flags -np "$n" "$build/perf/hcomm_perf" "$coll" \
            -b 8 -e 64M -f 2 ${HOST_PERF_ARGS:-} >"$log" 2>&1
        rc=$?
        [ $rc -eq 0 ] || { echo "FAILED ($rc): $log"; status=1; }
        grep -m1 "bound to" "$log" >>"$out/env.txt"
        median=$(sed -n 's/^# Median ratio: //p' "$log")
        # rows where MPI is faster: the ratio (last column) below 1
        slower=$(awk '$1 ~ /^[0-9]+$/ && NF > 10 && $NF + 0 < 1 { printf "%s(%s) ", $1, $NF }' "$log")
        # far-apart cores (placement.c) make a run incomparable: say so
        trip=$(sed -n 's/^# Core round trip, node ranks 0-1: //p' "$log")
        printf '%-16s %2d ranks  median ratio %-6s  MPI faster at: %s%s\n' \
            "$coll" "$n" "${median:-n/a}" "${slower:-none}" \
            "${trip:+  (core round trip $trip)}" >>"$out/summary.txt"
    done
done
cat "$out/summary.txt"
exit $status
