#!/bin/bash
# HCOMM against NCCL on the GPUs of one host, in the same runs on the same
# device buffers (hcomm_perf -D cuda --nccl, one rank a GPU): AllReduce,
# AllGather, ReduceScatter, Broadcast and AllToAll, float32 and bfloat16
# sum, 8 B to 8 GiB. Under $OUT (default ./gpu-vs-nccl-out): the runs'
# JSON rows (runs.json), table.md (per size: each side's time and busbw,
# the ratio, each run's median ratio), busbw.png (busbw against size, a
# panel a collective, a line a side and type) and env.txt (GPUs, their
# links, NCCL's settings).
#
#   perf/gpu_vs_nccl.sh BUILD_DIR [GPUS]   (default: every GPU of the host)
#
# BUILD_DIR holds perf/hcomm_perf built with CUDA (build-gpu/, made by
# test/gpu/run_gpu.sh or test/gpu/prebuild.sh). The plot needs matplotlib
# (PLOT_PYTHON, default the GPU machine's PyTorch venv, else python3).
# GPU_VS_NCCL_MAX caps the largest size (default 8G), GPU_VS_NCCL_TYPES
# and GPU_VS_NCCL_COLLS the types and collectives.
set -u
if [ $# -lt 1 ] || [ ! -x "$1/perf/hcomm_perf" ]; then
    echo "usage: $0 BUILD_DIR [GPUS]  (BUILD_DIR/perf/hcomm_perf)" >&2
    exit 2
fi
build=$(cd "$1" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
gpus=${2:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')}
if [ "${gpus:-0}" -lt 2 ]; then
    echo "$0: NCCL needs a GPU a rank, and this host has ${gpus:-0} GPU(s)" >&2
    exit 2
fi
out=${OUT:-$PWD/gpu-vs-nccl-out}
mkdir -p "$out"
# NVLink multicast stays off (shared/gpu/README.md says why)
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
D=$src/.devdeps
flags="--bind-to none -x NCCL_NVLS_ENABLE"
if [ -d "$D" ]; then # the GPU machine's UCX with CUDA, as run_gpu.sh finds it
    export LD_LIBRARY_PATH=$D/ucx-cuda/lib:$D/root/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    flags="$flags -x LD_LIBRARY_PATH"
fi
{
    date
    nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv
    nvidia-smi topo -m
    env | grep '^NCCL_' | sort
} >"$out/env.txt" 2>&1
max=${GPU_VS_NCCL_MAX:-8G}
status=0
: >"$out/runs.json"
for coll in ${GPU_VS_NCCL_COLLS:-allreduce allgather reduce_scatter broadcast alltoall}; do
    for type in ${GPU_VS_NCCL_TYPES:-float32 bfloat16}; do
        echo "== $coll $type, $gpus ranks" >&2
        # the version line and any failure go to stderr, the rows to the log
        timeout 1800 mpirun $flags -np "$gpus" "$build/perf/hcomm_perf" \
            -D cuda --nccl --json -d "$type" -b 8 -e "$max" -f 2 \
            "$coll" >>"$out/runs.json" || status=1
    done
done
py=${PLOT_PYTHON:-/opt/torch/.venv/bin/python3}
[ -x "$py" ] || py=python3
"$py" "$src/perf/perf_table.py" "$out/table.md" "$out/busbw.png" \
    "$out/runs.json" || status=1
exit $status
