// The CUDA IPC collectives (ipc_kernels.h): one kernel per (type, op)
// runs every kind, round after round, each block on its own slice. Two
// files instantiate it, each for five of the ten types (ipc_kernels.cu,
// ipc_kernels_more.cu): nvcc takes 4 to 7 minutes over the forty kernels,
// which held up CI's build on one of its two cores.
#ifndef HCOMM_CUDA_IPC_IPC_KERNELS_CUH
#define HCOMM_CUDA_IPC_IPC_KERNELS_CUH

#include "cuda_ipc/ipc_kernels.h"
#include "kernels/reduce_cuda_dev.cuh"

#include <cuda_runtime.h>

namespace {

using namespace hcomm_dev;

__device__ uint64_t *flag_at(char *ws, int phase, int block, int src) {
    return reinterpret_cast<uint64_t *>(ws) +
           ((size_t)phase * HCOMM_IPC_MAX_BLOCKS + block) *
               HCOMM_IPC_MAX_RANKS +
           src;
}

__device__ uint64_t now_ns() {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// The flags' scope: the GPU's own where every peer runs on this GPU (the
// processes share its L2), else the system's (peers on other GPUs). On the
// GPU machine, stream-ordered 8 B allreduces back to back took 8.7-9.3 us
// each with the system's at 2 ranks, 8.0-8.4 with the GPU's; 17.6 against
// 13.0 at 4 ranks.
__device__ uint64_t load_acquire(const uint64_t *p, bool one_gpu) {
    uint64_t v;
    if (one_gpu)
        asm volatile("ld.acquire.gpu.global.u64 %0, [%1];"
                     : "=l"(v)
                     : "l"(p)
                     : "memory");
    else
        asm volatile("ld.acquire.sys.global.u64 %0, [%1];"
                     : "=l"(v)
                     : "l"(p)
                     : "memory");
    return v;
}
__device__ void store_release(uint64_t *p, uint64_t v, bool one_gpu) {
    if (one_gpu)
        asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v)
                     : "memory");
    else
        asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v)
                     : "memory");
}

// Raises this block's flag for epoch in every peer's workspace once all
// its threads' writes are done: thread p raises it in peer p's, so that
// the fences and stores of the peers go out together, not one after the
// other (each release waits for the block's writes to be visible).
__device__ void signal_peers(const hcomm_ipc_kargs_t &a, int phase,
                             uint64_t epoch) {
    __syncthreads();
    const int p = threadIdx.x;
    if (p < a.nranks && p != a.rank) {
        // the other threads' writes, which the barrier showed this one,
        // made visible to the peers' whole GPU (or system) first
        if (a.one_gpu)
            __threadfence();
        else
            __threadfence_system();
        store_release(flag_at(a.ws[p], phase, blockIdx.x, a.rank), epoch,
                      a.one_gpu);
    }
}

// Waits until block b of every peer raised its flag for epoch: lane p of
// the first warp reads peer p's flag, all at once. False when the call
// failed: the wait outlasted the timeout (the status then names the ranks
// still awaited), the host aborted, or another block failed.
__device__ bool wait_peers(const hcomm_ipc_kargs_t &a, int phase,
                           uint64_t epoch) {
    __shared__ int failed;
    if (threadIdx.x < 32) {
        const int lane = threadIdx.x;
        const uint64_t *f = lane < a.nranks && lane != a.rank
                                ? flag_at(a.ws[a.rank], phase, blockIdx.x, lane)
                                : nullptr;
        bool arrived = f == nullptr;
        int why = 0;
        uint64_t start = 0;
        for (unsigned spin = 0;; spin++) {
            if (!arrived) arrived = load_acquire(f, a.one_gpu) >= epoch;
            if (__all_sync(0xffffffffu, arrived)) break;
            if (spin % 256 != 255) continue;
            if (lane == 0) {
                volatile unsigned long long *st = a.status;
                if (a.abort[0]) why = HCOMM_IPC_ABORTED;
                if (st[0]) why = -1; // another block has failed
                uint64_t t = now_ns();
                if (!start) start = t;
                if (t - start > a.timeout_ns) why = HCOMM_IPC_TIMED_OUT;
            }
            why = __shfl_sync(0xffffffffu, why, 0);
            if (why) break;
        }
        const unsigned missing = __ballot_sync(0xffffffffu, !arrived);
        if (lane == 0) {
            failed = why;
            if (why > 0) {
                // Host memory: plain stores (no PCIe atomics), the word
                // the host tests last. Blocks failing together may each
                // write.
                volatile unsigned long long *st = a.status;
                st[2] = missing;
                st[1] = epoch;
                __threadfence_system();
                st[0] = (unsigned long long)why;
                __threadfence_system();
            }
        }
    }
    __syncthreads();
    return !failed;
}

template <typename T, typename OP>
__device__ void copy(void *dst, const void *src, size_t n) {
    if (n == 0 || dst == src) return;
    Span s; // only what reduce_span reads: see the kernel's
    s.divisor = 0;
    s.dst[0] = dst;
    s.ndst = 1;
    s.src[0] = src;
    s.nsrc = 1;
    s.n = n;
    reduce_span<T, OP>(s, threadIdx.x, blockDim.x);
}

// Rank p's data area for the round of epoch: the rounds alternate between
// the workspace's two areas.
__device__ char *area_of(const hcomm_ipc_kargs_t &a, int p, uint64_t epoch) {
    return a.ws[p] + HCOMM_IPC_FLAG_BYTES + (epoch & 1) * a.area_bytes;
}

// One-shot allreduce of a round whose slice in this block is at most
// ONESHOT_SMALL bytes (a 16-byte vector a thread): plain per-thread loads
// and stores, no Span. A Span (and the areas' table), indexed at run
// time, lives in local memory, which every thread of the block zeroed and
// wrote first: on the H200 that was most of a small call's time in the
// kernel. Vectors where the buffers allow (the areas and the slice's start
// are 16-byte aligned), elements otherwise. Reduces in rank order, as
// reduce_span does, so every rank's result is the same bits.
constexpr size_t ONESHOT_SMALL = 16 * HCOMM_IPC_THREADS;
template <typename T, typename OP>
__device__ bool oneshot_small(const hcomm_ipc_kargs_t &a, uint64_t epoch,
                              const T *in, T *out, size_t lo, size_t hi) {
    using A = Acc<T>;
    using C = typename A::type;
    constexpr size_t W = 16 / sizeof(T);
    const bool vec = ((uintptr_t)(in + lo) | (uintptr_t)(out + lo)) % 16 == 0;
    const size_t nv = vec ? (hi - lo) / W : 0, mid = lo + nv * W;
    T *mine = reinterpret_cast<T *>(area_of(a, a.rank, epoch));
    for (size_t v = threadIdx.x; v < nv; v += blockDim.x)
        reinterpret_cast<uint4 *>(mine + lo)[v] =
            reinterpret_cast<const uint4 *>(in + lo)[v];
    for (size_t i = mid + threadIdx.x; i < hi; i += blockDim.x)
        mine[i] = in[i];
    signal_peers(a, 0, epoch);
    if (!wait_peers(a, 0, epoch)) return false;
    auto area = [&](int p) {
        return reinterpret_cast<const T *>(area_of(a, p, epoch));
    };
    for (size_t v = threadIdx.x; v < nv; v += blockDim.x) {
        C acc[W];
        uint4 x = __ldcg(reinterpret_cast<const uint4 *>(area(0) + lo) + v);
        for (size_t e = 0; e < W; e++)
            acc[e] = A::load(reinterpret_cast<const T *>(&x)[e]);
        for (int p = 1; p < a.nranks; p++) {
            x = __ldcg(reinterpret_cast<const uint4 *>(area(p) + lo) + v);
            for (size_t e = 0; e < W; e++)
                acc[e] = OP::apply(acc[e],
                                   A::load(reinterpret_cast<const T *>(&x)[e]));
        }
        uint4 o;
        for (size_t e = 0; e < W; e++) {
            if (a.divisor > 1) acc[e] = divide(acc[e], a.divisor);
            reinterpret_cast<T *>(&o)[e] = A::store(acc[e]);
        }
        reinterpret_cast<uint4 *>(out + lo)[v] = o;
    }
    for (size_t i = mid + threadIdx.x; i < hi; i += blockDim.x) {
        C acc = A::load(load_cg(area(0) + i));
        for (int p = 1; p < a.nranks; p++)
            acc = OP::apply(acc, A::load(load_cg(area(p) + i)));
        if (a.divisor > 1) acc = divide(acc, a.divisor);
        out[i] = A::store(acc);
    }
    return true;
}

// Registered buffers (a.direct): the peers' buffers are read (or written)
// in place, once every rank has reached the call (inputs written, outputs
// free); the second wait keeps each rank's kernel running until no peer
// reads its buffers any more.
__device__ bool direct_arrive(const hcomm_ipc_kargs_t &a, uint64_t epoch) {
    signal_peers(a, 0, epoch);
    return wait_peers(a, 0, epoch);
}
__device__ bool direct_leave(const hcomm_ipc_kargs_t &a, uint64_t epoch) {
    signal_peers(a, 1, epoch);
    return wait_peers(a, 1, epoch);
}

// Launched early (a.early), the kernel starts while the one before it on
// its stream ends: it waits here for that end and for its writes, and only
// then lets the next one start, so that at most two kernels of a stream
// hold multiprocessors (launch(): the GPU must hold both of every rank).
// Without the early launch both are no-ops.
__device__ void follow_previous_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// One block a multiprocessor, said outright: left to choose, ptxas held
// the kernel to 64 registers and spilled (220 bytes) once the small
// one-shot path was in.
template <typename T, typename OP>
__global__ void __launch_bounds__(HCOMM_IPC_THREADS, 1)
    ipc_kernel(hcomm_ipc_kargs_t a) {
    follow_previous_kernel();
    constexpr size_t vw = 16 / sizeof(T);
    const int n = a.nranks, r = a.rank, b = blockIdx.x, nb = gridDim.x;
    const T *in = static_cast<const T *>(a.in);
    T *out = static_cast<T *>(a.out);
    const size_t res = hcomm_ipc_result_offset(a.piece, sizeof(T));
    for (size_t off = 0, k = 0; off < a.count; off += a.piece, k++) {
        const uint64_t epoch = a.epoch0 + k;
        const size_t len = min(a.piece, a.count - off);
        size_t lo, hi;
        if (a.kind == HCOMM_IPC_ONESHOT) {
            hcomm_ipc_slice(a.piece, len, 1, 0, nb, b, vw, &lo, &hi);
            if ((hi - lo) * sizeof(T) <= ONESHOT_SMALL) {
                if (!oneshot_small<T, OP>(a, epoch, in + off, out + off, lo,
                                          hi))
                    return;
                continue;
            }
        }
        char *area[HCOMM_IPC_MAX_RANKS];
        for (int p = 0; p < n; p++)
            area[p] = area_of(a, p, epoch);
        // Only the fields a kind uses are set: a Span lives in local
        // memory (its tables are indexed at run time), and zeroing all of
        // it in each of 512 threads took microseconds (and 10-18% of a
        // 16-64 MiB allreduce, every round and block zeroing it again).
        Span s;
        s.nsrc = n;
        s.ndst = 1;
        switch (a.kind) {
        case HCOMM_IPC_ONESHOT: // lo, hi: this block's slice (above)
            copy<T, OP>((T *)area[r] + lo, in + off + lo, hi - lo);
            signal_peers(a, 0, epoch);
            if (!wait_peers(a, 0, epoch)) return;
            for (int p = 0; p < n; p++)
                s.src[p] = (const T *)area[p] + lo;
            s.dst[0] = out + off + lo;
            s.divisor = a.divisor;
            s.n = hi - lo;
            reduce_span<T, OP>(s, threadIdx.x, blockDim.x);
            break;
        case HCOMM_IPC_TWOSHOT: {
            // Chunk c of the round is reduced by rank c; block b of every
            // rank takes part b of every chunk.
            if (a.direct) {
                // Rank r reads chunk r of every rank's input and writes
                // the result into every rank's output. No one else reads
                // chunk r, so in place is safe; the second wait also
                // keeps every kernel running until its output is whole.
                if (!direct_arrive(a, epoch)) return;
                hcomm_ipc_slice(a.piece, len, n, r, nb, b, vw, &lo, &hi);
                for (int p = 0; p < n; p++) {
                    s.src[p] = (const T *)a.peer_in[p] + off + lo;
                    s.dst[p] = (T *)a.peer_out[p] + off + lo;
                }
                s.ndst = n;
                s.divisor = a.divisor;
                s.n = hi - lo;
                reduce_span<T, OP>(s, threadIdx.x, blockDim.x);
                if (!direct_leave(a, epoch)) return;
                break;
            }
            for (int c = 0; c < n; c++) {
                if (c == r) continue; // this rank reads its own in place
                hcomm_ipc_slice(a.piece, len, n, c, nb, b, vw, &lo, &hi);
                copy<T, OP>((T *)area[r] + lo, in + off + lo, hi - lo);
            }
            signal_peers(a, 0, epoch);
            if (!wait_peers(a, 0, epoch)) return;
            hcomm_ipc_slice(a.piece, len, n, r, nb, b, vw, &lo, &hi);
            for (int p = 0; p < n; p++)
                s.src[p] = p == r ? in + off + lo : (const T *)area[p] + lo;
            s.dst[0] = (T *)(area[r] + res) + lo;
            s.dst[1] = out + off + lo;
            s.ndst = 2;
            s.divisor = a.divisor;
            s.n = hi - lo;
            reduce_span<T, OP>(s, threadIdx.x, blockDim.x);
            signal_peers(a, 1, epoch);
            if (!wait_peers(a, 1, epoch)) return;
            for (int c = 0; c < n; c++) {
                if (c == r) continue;
                hcomm_ipc_slice(a.piece, len, n, c, nb, b, vw, &lo, &hi);
                copy<T, OP>(out + off + lo, (const T *)(area[c] + res) + lo,
                            hi - lo);
            }
            break;
        }
        case HCOMM_IPC_REDUCE_SCATTER:
            // Block c of the input (count elements each) goes to rank c.
            hcomm_ipc_slice(a.piece, len, 1, 0, nb, b, vw, &lo, &hi);
            if (a.direct) { // block r of every rank's input, in place
                if (!direct_arrive(a, epoch)) return;
                for (int p = 0; p < n; p++)
                    s.src[p] = (const T *)a.peer_in[p] + r * a.count + off + lo;
                s.dst[0] = out + off + lo;
                s.divisor = a.divisor;
                s.n = hi - lo;
                reduce_span<T, OP>(s, threadIdx.x, blockDim.x);
                if (!direct_leave(a, epoch)) return;
                break;
            }
            for (int c = 0; c < n; c++)
                if (c != r)
                    copy<T, OP>((T *)area[r] + c * a.piece + lo,
                                in + c * a.count + off + lo, hi - lo);
            signal_peers(a, 0, epoch);
            if (!wait_peers(a, 0, epoch)) return;
            for (int p = 0; p < n; p++)
                s.src[p] = p == r ? in + r * a.count + off + lo
                                  : (const T *)area[p] + r * a.piece + lo;
            s.dst[0] = out + off + lo;
            s.divisor = a.divisor;
            s.n = hi - lo;
            reduce_span<T, OP>(s, threadIdx.x, blockDim.x);
            break;
        case HCOMM_IPC_ALLGATHER:
            hcomm_ipc_slice(a.piece, len, 1, 0, nb, b, vw, &lo, &hi);
            if (a.direct) { // every rank's input, in place
                if (!direct_arrive(a, epoch)) return;
                for (int p = 0; p < n; p++)
                    copy<T, OP>(out + p * a.count + off + lo,
                                (const T *)a.peer_in[p] + off + lo, hi - lo);
                if (!direct_leave(a, epoch)) return;
                break;
            }
            copy<T, OP>((T *)area[r] + lo, in + off + lo, hi - lo);
            signal_peers(a, 0, epoch);
            if (!wait_peers(a, 0, epoch)) return;
            for (int p = 0; p < n; p++)
                copy<T, OP>(out + p * a.count + off + lo,
                            p == r ? in + off + lo : (const T *)area[p] + lo,
                            hi - lo);
            break;
        case HCOMM_IPC_BCAST:
            // Every rank raises its flag, the root after its copy, so that
            // the root too knows when its area may be written again.
            hcomm_ipc_slice(a.piece, len, 1, 0, nb, b, vw, &lo, &hi);
            if (a.direct) { // the root's buffer, in place
                if (!direct_arrive(a, epoch)) return;
                if (r != a.root)
                    copy<T, OP>(out + off + lo,
                                (const T *)a.peer_in[a.root] + off + lo,
                                hi - lo);
                if (!direct_leave(a, epoch)) return;
                break;
            }
            if (r == a.root)
                copy<T, OP>((T *)area[r] + lo, in + off + lo, hi - lo);
            signal_peers(a, 0, epoch);
            if (!wait_peers(a, 0, epoch)) return;
            if (r != a.root)
                copy<T, OP>(out + off + lo, (const T *)area[a.root] + lo,
                            hi - lo);
            break;
        default:
            return;
        }
    }
    if (a.done) {
        __syncthreads();
        if (threadIdx.x == 0) {
            __threadfence_system();
            reinterpret_cast<volatile unsigned long long *>(
                a.done)[blockIdx.x] = a.done_value;
        }
    }
}

struct Launch {
    template <typename T, typename OP>
    static int run(const hcomm_ipc_kargs_t *a, cudaStream_t s) {
        // The launch's own status (as in reduce_cuda.cu).
        hcomm_ipc_kargs_t arg = *a;
        void *args[] = {&arg};
        cudaLaunchAttribute early;
        early.id = cudaLaunchAttributeProgrammaticStreamSerialization;
        early.val.programmaticStreamSerializationAllowed = 1;
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = dim3((unsigned)a->blocks);
        cfg.blockDim = dim3(HCOMM_IPC_THREADS);
        cfg.stream = s;
        cfg.attrs = &early;
        cfg.numAttrs = a->early ? 1 : 0;
        return (int)cudaLaunchKernelExC(
            &cfg, reinterpret_cast<const void *>(ipc_kernel<T, OP>), args);
    }
};

// The launch for element type T (by_op: one kernel per operation).
template <typename T>
int launch_typed(const hcomm_ipc_kargs_t *a, hcomm_op_t op, cudaStream_t s) {
    return by_op<Launch, T>(op, a, s);
}

} // namespace

// ipc_kernels_more.cu: hcomm_ipc_kernel_launch for the types
// ipc_kernels.cu leaves to it.
extern "C" int hcomm_ipc_kernel_launch_more(const hcomm_ipc_kargs_t *a,
                                            hcomm_dtype_t dtype, hcomm_op_t op,
                                            cudaStream_t stream);

#endif
