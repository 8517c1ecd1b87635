// CUDA reduction kernels: one grid-stride kernel per (type, op) over
// reduce_span (reduce_cuda_dev.cuh). The grid is sized from the device's
// multiprocessors, so a launch covers the GPU once and large inputs loop.
#include "kernels/reduce_cuda_dev.cuh"

#include <cuda_runtime.h>

namespace {

using namespace hcomm_dev;

constexpr int kThreads = 512;

template <typename T, typename OP>
__global__ void __launch_bounds__(kThreads) reduce_kernel(Span a) {
    reduce_span<T, OP>(a, (size_t)blockIdx.x * blockDim.x + threadIdx.x,
                       (size_t)gridDim.x * blockDim.x);
}

// Blocks that fill every multiprocessor once with this kernel: its
// registers decide how many of its blocks a multiprocessor holds (per
// device, looked up once per kernel).
template <typename T, typename OP> int grid_limit() {
    static int blocks[64];
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) return 132;
    if (!blocks[dev]) {
        int sms = 0, per_sm = 0;
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(
            &per_sm, reduce_kernel<T, OP>, kThreads, 0);
        int b = sms * per_sm;
        blocks[dev] = b > 0 ? b : 132;
    }
    return blocks[dev];
}

struct Launch {
    template <typename T, typename OP> static int run(Span *a, cudaStream_t s) {
        // A thread per kUnroll<T> vectors, up to the device's capacity.
        size_t per_thread = kUnroll<T> * (16 / sizeof(T));
        size_t threads = (a->n + per_thread - 1) / per_thread;
        size_t blocks = (threads + kThreads - 1) / kThreads;
        size_t cap = (size_t)grid_limit<T, OP>();
        if (blocks > cap) blocks = cap;
        if (blocks == 0) blocks = 1;
        // The launch's own status, not cudaGetLastError(): that also
        // returns an earlier call's error (the program's, or a failed IPC
        // mapping's), which this launch would report as its own.
        Span arg = *a;
        void *args[] = {&arg};
        return (int)cudaLaunchKernel(reduce_kernel<T, OP>,
                                     dim3((unsigned)blocks), dim3(kThreads),
                                     args, 0, s);
    }
};

} // namespace

extern "C" int hcomm_cuda_reduce(void *dst, void *dst2, const void *const *srcs,
                                 int nsrc, size_t count, hcomm_dtype_t dtype,
                                 hcomm_op_t op, int divisor, void *stream) {
    if (count == 0) return 0;
    if (nsrc < 1 || nsrc > HCOMM_CUDA_MAX_SRCS)
        return (int)cudaErrorInvalidValue;
    Span a = {};
    a.dst[0] = dst;
    a.dst[1] = dst2;
    a.ndst = dst2 ? 2 : 1;
    for (int s = 0; s < nsrc; s++)
        a.src[s] = srcs[s];
    a.nsrc = nsrc;
    a.divisor = divisor;
    a.n = count;
    return dispatch<Launch>(dtype, op, &a, (cudaStream_t)stream);
}

extern "C" int hcomm_cuda_copy(void *dst, const void *src, size_t bytes,
                               void *stream) {
    if (bytes == 0) return 0;
    Span a = {};
    a.dst[0] = dst;
    a.ndst = 1;
    a.src[0] = src;
    a.nsrc = 1;
    // The widest words pointers and length allow: a byte kernel holds each
    // byte of its vectors in a register of its own (H200, 256 MiB: 4-byte
    // words 89% of cudaMemcpy's bandwidth; 8-byte words are the fp64
    // kernel's shape, 97% of the bound).
    uintptr_t all = (uintptr_t)dst | (uintptr_t)src | bytes;
    if (all % 8 == 0) {
        a.n = bytes / 8;
        return Launch::run<uint64_t, OpSum>(&a, (cudaStream_t)stream);
    }
    if (all % 4 == 0) {
        a.n = bytes / 4;
        return Launch::run<uint32_t, OpSum>(&a, (cudaStream_t)stream);
    }
    a.n = bytes;
    return Launch::run<uint8_t, OpSum>(&a, (cudaStream_t)stream);
}
