#!/bin/bash
# The GPU machine's one command: builds HCOMM there against UCX built with
# CUDA, then runs every GPU test and benchmark, logs under $OUT.
#
#   test/gpu/run_gpu.sh [build] [kernels] [ipc] [nodes] [kill] [quick]
#                       [stream] [preload] [regperf] [test] [smoke] [perf]
#                       [ipcperf] [mapped] [latency] [ucxchunk] [python] [compress]
#               (no argument: build kernels ipc nodes kill stream test
#               compress perf ipcperf regperf python)
#
# Needs, from this checkout: .devdeps (../shared/gpu/prepare-deps.sh) and
# the generated build files (./autogen.sh), which git ignores, so the
# device tool's call names them in carry:
#   carry: .devdeps configure Makefile.in config.h.in aclocal.m4 build-aux
# Tests run several ranks on the one GPU under MPS, and once without it
# (correct, slower). GPU_RANKS overrides the rank counts. The python stage
# runs the Python package's tests and the DDP example (HCOMM against Gloo)
# with GPU_PYTHON (default: the machine's PyTorch venv). GPU_BUILD_TARGETS
# builds only those targets (the whole build takes 5 minutes there).
# Without the build stage, a build made on the CPU machine
# (test/gpu/prebuild.sh: .gpu-prebuilt.tar.xz, carried too) is unpacked.
set -u
cd "$(dirname "$0")/../.."
src=$PWD
out=${OUT:-$src/gpu-out}
mkdir -p "$out"
D=$src/.devdeps
R=$D/root/usr
export LD_LIBRARY_PATH=$D/ucx-cuda/lib:$R/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export NCCL_NVLS_ENABLE=0 # never NVLink multicast (shared/gpu/README.md)
export HCOMM_TIMEOUT=${HCOMM_TIMEOUT:-15}
b=$src/build-gpu
stages=${*:-build kernels ipc nodes kill stream test compress perf ipcperf regperf python}
has() { [[ " $stages " == *" $1 "* ]]; }
mpirun_flags="--oversubscribe --bind-to none -x LD_LIBRARY_PATH -x HCOMM_TIMEOUT
  -x HCOMM_TRANSPORT -x HCOMM_CUDA_STAGING -x HCOMM_TEST_GPU_QUICK
  -x HCOMM_TEST_GPU_NODES
  -x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY -x NCCL_NVLS_ENABLE
  -x HCOMM_ALGO -x HCOMM_SHM_SLOT_SIZE -x HCOMM_CUDA_IPC -x HCOMM_CUDA_IPC_ALGO
  -x HCOMM_CUDA_IPC_BUFFER -x HCOMM_CUDA_IPC_BLOCKS -x HCOMM_CUDA_IPC_DIRECT_MIN
  -x HCOMM_PROFILE"
export HCOMM_TRANSPORT=auto HCOMM_CUDA_STAGING=auto HCOMM_TEST_GPU_QUICK=0
export HCOMM_ALGO= HCOMM_SHM_SLOT_SIZE=256K
export HCOMM_CUDA_IPC=auto HCOMM_CUDA_IPC_ALGO=auto HCOMM_CUDA_IPC_BUFFER=8M
export HCOMM_CUDA_IPC_BLOCKS=32 HCOMM_CUDA_IPC_DIRECT_MIN=4M HCOMM_PROFILE=

status=0
note() { echo "### $*"; }
run() { # run LOG TIMEOUT CMD...: appends to LOG, records a failure
    local log=$1 t=$2
    shift 2
    echo "\$ $* ($(date +%T))" >>"$out/$log"
    timeout "$t" "$@" >>"$out/$log" 2>&1
    local rc=$?
    echo "(exit $rc)" >>"$out/$log"
    [ $rc -eq 0 ] || { status=1; note "FAILED ($rc): $*"; }
    return $rc
}
mps_on() {
    export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mpslog
    mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
    nvidia-cuda-mps-control -d 2>/dev/null || true
}
mps_off() { echo quit | nvidia-cuda-mps-control 2>/dev/null || true; sleep 1; }

if ! has build && [ -f "$src/.gpu-prebuilt.tar.xz" ]; then
    tar -C "$src" -xJf "$src/.gpu-prebuilt.tar.xz"
    # its libtool wrappers and run paths name the checkout it was built in
    built_in=$(cat "$b/.built-in" 2>/dev/null)
    [ "$built_in" = "$src" ] || {
        note "the prebuilt tree is from $built_in, not $src: building here"
        rm -rf "$b"
        stages="build $stages"
    }
fi

if has build; then
    note "build"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >"$out/build.log" 2>&1
    mkdir -p "$b"
    (cd "$b" && { [ -f Makefile ] || ../configure CC=mpicc --disable-maintainer-mode \
        --with-cuda=/usr/local/cuda --with-ucx="$D/ucx-cuda" \
        CPPFLAGS="-I$R/include" \
        LDFLAGS="-L$R/lib/x86_64-linux-gnu -Wl,-rpath,$R/lib/x86_64-linux-gnu"; } &&
        if [ -n "${GPU_BUILD_TARGETS:-}" ]; then make -j${GPU_MAKE_JOBS:-16} $GPU_BUILD_TARGETS; else
            make -j${GPU_MAKE_JOBS:-16} && make -j${GPU_MAKE_JOBS:-16} check TESTS=; fi) >>"$out/build.log" 2>&1 ||
        { note "build failed"; tail -40 "$out/build.log"; exit 1; }
    grep -A14 "configuration" "$out/build.log" | tail -14
fi

mpi() { # mpi LOG NP CMD...
    local log=$1 np=$2
    shift 2
    run "$log" ${GPU_RUN_LIMIT:-150} mpirun $mpirun_flags -np "$np" "$@"
}

if has kernels; then
    note "kernels"
    run tests.log 300 "$b/test/gpu/test_cuda_kernels"
fi

if has ipc; then
    note "CUDA IPC: safety and rounds at 2 to 4 ranks, every collective forced"
    mps_on
    # 6 ranks: five ranks' kernels of 32 blocks fill an H100 or H200; the
    # blocks' cap (ipc_shape.h) lets the sixth's start
    for n in 2 3 4 6; do
        mpi ipc.log "$n" "$b/test/gpu/test_cuda_ipc"
    done
    HCOMM_CUDA_IPC_ALGO=twoshot mpi ipc.log 3 "$b/test/gpu/test_cuda_ipc"
    # ordinary buffers' calls must go direct once their cards are
    # confirmed (the profile says which did): about 34 a rank at 3 ranks
    rm -f "$out"/mapped.*.json
    HCOMM_PROFILE="$out/mapped.%r.json" mpi ipc.log 3 "$b/test/gpu/test_cuda_ipc"
    direct=$(cat "$out"/mapped.*.json 2>/dev/null | grep -c '"algorithm":"ipc_direct"')
    echo "mapped buffers: $direct calls went direct on 3 ranks" >>"$out/ipc.log"
    [ "$direct" -ge 30 ] || { status=1; note "FAILED: only $direct direct calls on mapped buffers"; }
    HCOMM_CUDA_IPC_ALGO=oneshot HCOMM_TEST_GPU_QUICK=1 HCOMM_CUDA_IPC_BUFFER=64K \
        mpi ipc.log 2 "$b/test/gpu/test_cuda_colls"
    HCOMM_CUDA_IPC_ALGO=twoshot HCOMM_TEST_GPU_QUICK=1 HCOMM_CUDA_IPC_BUFFER=64K \
        mpi ipc.log 3 "$b/test/gpu/test_cuda_colls"
    HCOMM_CUDA_IPC_ALGO=twoshot HCOMM_TEST_GPU_QUICK=1 mpi ipc.log 4 "$b/test/gpu/test_cuda_colls"
    mpi ipc.log 2 "$b/test/gpu/test_cuda_colls" # every type and operation
    # the plans and the staged shared segment, the IPC path off
    HCOMM_CUDA_IPC=0 HCOMM_TEST_GPU_QUICK=1 mpi ipc.log 3 "$b/test/gpu/test_cuda_colls"
    mps_off
    note "CUDA IPC without MPS"
    HCOMM_TEST_GPU_QUICK=1 mpi ipc.log 2 "$b/test/gpu/test_cuda_colls"
    mpi ipc.log 2 "$b/test/gpu/test_cuda_ipc"
    grep -E "passed|FAILED|skipped|went direct" "$out/ipc.log"
fi

if has nodes; then
    note "two nodes of 2 ranks (HCOMM_OVERRIDE_TOPO): device buffers across nodes"
    mps_on
    HCOMM_TEST_GPU_NODES=2 HCOMM_TEST_GPU_QUICK=1 mpi nodes.log 4 "$b/test/gpu/test_cuda_colls"
    topo=$out/two_nodes.json
    echo '{"nodes": [{"ranks": [0, 1]}, {"ranks": [2, 3]}]}' >"$topo"
    # node stages (CUDA IPC inside a node, rails over UCX) at every size
    # against the hierarchical plans (every step over UCX), MPI + copies in
    # each run
    for max in 1G 0; do
        echo "# HCOMM_CUDA_NODE_STAGES_MAX=$max" >>"$out/nodes.log"
        mpi nodes.log 4 -x HCOMM_OVERRIDE_TOPO="$topo" \
            -x HCOMM_CUDA_NODE_STAGES_MAX=$max "$b/perf/hcomm_perf" -D cuda \
            allreduce -b 16K -e 64M -f 4 -n 10 -w 3
    done
    mps_off
    grep -vE "^\$|^\(exit" "$out/nodes.log" | grep -E "passed|FAILED|^ +[0-9]|^# HCOMM|hcomm_perf:"
fi

if has kill; then
    note "a rank killed between IPC calls: the survivors fail in time, naming it"
    mps_on
    for n in 2 3; do
        # mpirun's status reports the death: every survivor's line decides
        timeout 60 mpirun $mpirun_flags --enable-recovery -np $n \
            "$b/test/gpu/test_cuda_ipc" kill >"$out/kill$n.log" 2>&1
        [ "$(grep -c "kill: rank [0-9]*: [1-9][0-9]* passed, 0 failed" "$out/kill$n.log")" \
            -eq $((n - 1)) ] || { status=1; note "FAILED: kill at $n ranks"; }
    done
    mps_off
    grep -hE "kill:|FAILED" "$out"/kill[23].log
fi

if has preload; then
    note "an unmodified CUDA-aware MPI program under libhcomm_mpi.so"
    mps_on
    for n in 2 4; do
        mpi preload.log $n -x LD_PRELOAD="$b/.libs/libhcomm_mpi.so" \
            -x HCOMM_MPI_STATS=1 "$b/test/gpu/test_preload_cuda"
    done
    # HCOMM took every call: MPI (built without CUDA) saw no device memory
    if grep -E "MPI_(Allreduce|Bcast|Allgather|Reduce): .* [1-9][0-9]* fallback" \
        "$out/preload.log"; then
        status=1
        note "FAILED: calls on device memory were left to MPI"
    fi
    mps_off
    grep -E "passed|FAILED|taken" "$out/preload.log" | sort | uniq -c
fi

if has quick; then
    note "quick: registered and ordinary buffers, two-shot forced, 3 ranks; the plans"
    mps_on
    HCOMM_CUDA_IPC_ALGO=twoshot HCOMM_TEST_GPU_QUICK=1 mpi quick.log 3 "$b/test/gpu/test_cuda_colls"
    HCOMM_CUDA_IPC=0 HCOMM_TEST_GPU_QUICK=1 mpi quick.log 3 "$b/test/gpu/test_cuda_colls"
    mps_off
    grep -E "passed|FAILED" "$out/quick.log"
fi

if has stream; then
    note "stream-ordered calls on the plans (HCOMM's worker): staged, over MPI, two nodes; against the blocking form"
    mps_on
    HCOMM_CUDA_STAGING=1 HCOMM_TEST_GPU_QUICK=1 mpi stream.log 2 "$b/test/gpu/test_cuda_colls"
    HCOMM_TRANSPORT=mpi HCOMM_TEST_GPU_QUICK=1 mpi stream.log 3 "$b/test/gpu/test_cuda_colls"
    HCOMM_TEST_GPU_NODES=2 HCOMM_TEST_GPU_QUICK=1 mpi stream.log 4 "$b/test/gpu/test_cuda_colls"
    p="$b/perf/hcomm_perf -D cuda allreduce -b 8 -e 64M -f 8 -n 20 -w 3"
    HCOMM_CUDA_IPC=0 mpi stream.log 2 $p
    HCOMM_CUDA_IPC=0 mpi stream.log 2 $p -S
    mps_off
    grep -vE "^\$|^\(exit" "$out/stream.log" | grep -E "passed|FAILED|^ +[0-9]|hcomm_perf:"
fi

if has smoke; then
    note "smoke: 2 ranks, quick"
    mps_on
    HCOMM_TEST_GPU_QUICK=1 mpi tests.log 2 "$b/test/gpu/test_cuda_colls"
    grep -E "passed|FAILED|skipped" "$out/tests.log"
fi

if has test; then
    note "tests"
    mps_on
    for n in ${GPU_RANKS:-1 2 3 4}; do
        HCOMM_TEST_GPU_QUICK=$([ "$n" = 2 ] || [ "$n" = 4 ] && echo 0 || echo 1) \
            mpi tests.log "$n" "$b/test/gpu/test_cuda_colls"
    done
    HCOMM_CUDA_STAGING=1 HCOMM_TEST_GPU_QUICK=1 mpi tests.log 2 "$b/test/gpu/test_cuda_colls"
    HCOMM_TRANSPORT=mpi HCOMM_TEST_GPU_QUICK=1 mpi tests.log 3 "$b/test/gpu/test_cuda_colls"
    # the variable-count collectives on device memory
    for n in 2 3; do
        mpi tests.log $n "$b/test/gpu/test_cuda_vcolls"
    done
    HCOMM_TRANSPORT=mpi mpi tests.log 3 "$b/test/gpu/test_cuda_vcolls"
    mps_off
    note "without MPS"
    HCOMM_TEST_GPU_QUICK=1 mpi tests.log 2 "$b/test/gpu/test_cuda_colls"
    grep -E "passed|FAILED|skipped|bandwidth" "$out/tests.log"
fi

if has compress; then
    note "compression on GPU memory: bit for bit against the CPU's, and its cost on one node"
    mps_on
    for n in ${GPU_RANKS:-1 2 3 4}; do
        mpi compress.log "$n" "$b/test/gpu/test_cuda_compress"
    done
    HCOMM_TRANSPORT=mpi mpi compress.log 3 "$b/test/gpu/test_cuda_compress"
    HCOMM_CUDA_IPC=0 mpi compress.log 2 "$b/test/gpu/test_cuda_compress"
    mpi compress.log 4 "$b/perf/hcomm_bench_compress" -D cuda -e 64M -n 5
    grep -E "passed|FAILED|skipped|^ +[0-9]|^#" "$out/compress.log"
fi

if has perf; then
    note "benchmarks"
    mps_on
    run perf.log 60 "$b/test/gpu/bench_memtype"
    p="$b/perf/hcomm_perf -D cuda"
    mpi perf.log 2 $p allreduce -b 8 -e 1G -f 4 -n 10 -w 3
    mpi perf.log 2 $p allreduce -b 8 -e 1G -f 4 -n 10 -w 3 -S
    HCOMM_CUDA_STAGING=1 mpi perf.log 2 $p allreduce -b 8 -e 256M -f 4 -n 10 -w 3
    mpi perf.log 2 $p allreduce -b 8 -e 256M -f 4 -n 10 -w 3 -d bfloat16 -o sum
    for c in allgather reduce_scatter broadcast alltoall; do
        mpi perf.log 2 $p $c -b 8 -e 64M -f 16 -n 10 -w 3
    done
    mpi perf.log 4 $p allreduce -b 8 -e 256M -f 4 -n 10 -w 3
    u=$D/ucx-cuda/bin/ucx_perftest
    for t in "tag_lat -s 8" "tag_bw -s 1048576" "tag_bw -s 67108864"; do
        echo "\$ ucx_perftest -t $t -m cuda,cuda" >>"$out/perf.log"
        timeout 60 $u -t $t -m cuda,cuda -n 200 >/dev/null 2>&1 &
        sleep 2
        timeout 60 $u 127.0.0.1 -t $t -m cuda,cuda -n 200 >>"$out/perf.log" 2>&1
        wait
    done
    mps_off
    grep -vE "^\\$|^\(exit" "$out/perf.log" | grep -E "^ +[0-9]|^#|memtype|surely_host|Final" | head -200
fi
if has ipcperf; then
    note "CUDA IPC benchmarks: one-shot against two-shot, auto, the UCX path"
    mps_on
    p="$b/perf/hcomm_perf -D cuda"
    for n in 2 4; do
        for a in oneshot twoshot; do
            HCOMM_CUDA_IPC_ALGO=$a mpi ipcperf.log $n $p allreduce -b 8 -e 8M -f 4 -n 20 -w 5
        done
        mpi ipcperf.log $n $p allreduce -b 8 -e 256M -f 4 -n 10 -w 3
        HCOMM_CUDA_IPC=0 mpi ipcperf.log $n $p allreduce -b 8 -e 64M -f 4 -n 10 -w 3
    done
    mpi ipcperf.log 2 $p allreduce -b 8 -e 64M -f 8 -n 20 -w 5 -S
    # registered buffers (hcomm_mem_alloc_device) against ordinary ones,
    # two-shot both, and with the most blocks
    for n in 2 4; do
        for r in "" -R; do
            HCOMM_CUDA_IPC_ALGO=twoshot mpi ipcperf.log $n $p allreduce \
                -b 32K -e 256M -f 8 -n 10 -w 3 $r
        done
    done
    HCOMM_CUDA_IPC_BLOCKS=64 mpi ipcperf.log 2 $p allreduce -b 8M -e 256M -f 4 -n 10 -w 3 -R
    mps_off
    grep -vE "^\\$|^\(exit" "$out/ipcperf.log" | grep -E "^ +[0-9]|^#" | head -300
fi

if has mapped; then
    note "ordinary buffers mapped by the peers, against the workspaces and registered buffers"
    mps_on
    p="$b/perf/hcomm_perf -D cuda"
    for n in ${GPU_RANKS:-2 4}; do
        HCOMM_CUDA_IPC_DIRECT_MIN=1G mpi mapped.log $n $p allreduce -b 1M -e 256M -f 2 -n 10 -w 3 --hcomm-only
        mpi mapped.log $n $p allreduce -b 1M -e 256M -f 2 -n 10 -w 3
        mpi mapped.log $n $p allreduce -b 1M -e 256M -f 2 -n 10 -w 3 -R --hcomm-only
        for c in reduce_scatter allgather broadcast; do
            HCOMM_CUDA_IPC_DIRECT_MIN=1G mpi mapped.log $n $p $c -b 1M -e 64M -f 4 -n 10 -w 3 --hcomm-only
            mpi mapped.log $n $p $c -b 1M -e 64M -f 4 -n 10 -w 3 --hcomm-only
        done
    done
    mps_off
    grep -vE "^\$|^\(exit" "$out/mapped.log" | grep -E "^ +[0-9]|hcomm_perf:|^#"
fi

if has regperf; then
    note "registered against ordinary device buffers: direct kernels"
    mps_on
    p="$b/perf/hcomm_perf -D cuda"
    for n in 2 4; do
        for c in reduce_scatter allgather broadcast; do
            for r in "" -R; do
                mpi regperf.log $n $p $c -b 32K -e 64M -f 8 -n 10 -w 3 $r
            done
        done
    done
    mps_off
    grep -vE "^\$|^\(exit" "$out/regperf.log" | grep -E "^ +[0-9]|hcomm_perf:"
fi

if has latency; then
    note "small calls on the CUDA IPC path: blocking and stream-ordered"
    # the floor under them: one process without MPS and with it, then two
    # and four at once (as 2 and 4 ranks) under MPS
    run latency.log 60 "$b/test/gpu/test_cuda_kernels" --latency
    mps_on
    run latency.log 60 "$b/test/gpu/test_cuda_kernels" --latency
    for at_once in 2 4; do
        echo "\$ $at_once at once" >>"$out/latency.log"
        for i in $(seq "$at_once"); do
            "$b/test/gpu/test_cuda_kernels" --latency >>"$out/latency.log" 2>&1 &
        done
        wait
    done
    p="$b/perf/hcomm_perf -D cuda allreduce -b 8 -e 64K -f 2 -n 200 -w 20"
    for n in 2 4; do
        mpi latency.log $n $p
        mpi latency.log $n $p -S
    done
    mps_off
    grep -vE "^\$|^\(exit" "$out/latency.log" | grep -E "^ +[0-9]|hcomm_perf:|^latency:"
fi

if has ucxchunk; then
    note "the plans over UCX with CUDA: HCOMM_CUDA_CHUNK_SIZE"
    mps_on
    p="$b/perf/hcomm_perf -D cuda allreduce -b 1M -e 256M -f 4 -n 10 -w 3"
    for n in 2 4; do
        HCOMM_CUDA_IPC=0 mpi ucxchunk.log $n $p -e 64M
        for cs in 1M 4M 64M; do
            HCOMM_CUDA_IPC=0 mpi ucxchunk.log $n -x HCOMM_CUDA_CHUNK_SIZE=$cs \
                $p --hcomm-only
        done
        HCOMM_CUDA_IPC=0 mpi ucxchunk.log $n $p --hcomm-only
    done
    mps_off
    grep -vE "^\$|^\(exit" "$out/ucxchunk.log" | grep -E "^ +[0-9]|hcomm_perf:|^\\$"
fi

if has python; then
    note "python: the hcomm package, hcomm.torch and DDP on the GPU"
    mps_on
    py=${GPU_PYTHON:-/opt/torch/.venv/bin/python3}
    export PYTHONPATH=$src/python LIBHCOMM_PATH=$b/.libs/libhcomm.so OMP_NUM_THREADS=1
    mpirun_flags="$mpirun_flags -x PYTHONPATH -x LIBHCOMM_PATH -x OMP_NUM_THREADS"
    for n in 1 2 4; do
        mpi python.log "$n" "$py" "$src/test/python/test_gpu.py"
    done
    mpi python.log 2 "$py" "$src/test/python/test_numpy.py"
    mpi python.log 2 "$py" "$src/test/python/test_torch.py"
    for n in 2 4; do
        for c in hcomm gloo; do
            mpi "ddp_${c}_$n.log" "$n" "$py" "$src/examples/ddp_train.py" --cuda \
                $([ $c = gloo ] && echo --gloo)
        done
        # The same loss at every epoch, within fp32 reduction-order tolerance.
        "$py" - "$out/ddp_hcomm_$n.log" "$out/ddp_gloo_$n.log" >>"$out/python.log" 2>&1 <<'PY' ||
import re, sys
a, b = ([float(v) for v in re.findall(r"loss ([0-9.]+)", open(f).read())]
        for f in sys.argv[1:])
ok = len(a) == len(b) > 0 and all(abs(x - y) <= 1e-4 * abs(y) for x, y in zip(a, b))
print("DDP losses, HCOMM vs Gloo:", a, b, "same" if ok else "DIFFERENT")
sys.exit(0 if ok else 1)
PY
            { status=1; note "FAILED: DDP losses differ at $n ranks"; }
    done
    mps_off
    grep -hE "passed|FAILED|SKIP|median|DDP losses" "$out"/python.log "$out"/ddp_*.log
fi
exit $status
