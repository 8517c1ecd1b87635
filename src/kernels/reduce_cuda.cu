// CUDA reduction kernels: one grid-stride kernel per (type, op), 16-byte
// vector loads where every pointer shares its alignment, scalar head and
// tail otherwise. The grid is sized from the device's multiprocessors, so a
// launch covers the GPU once and large inputs loop.
#include "kernels/reduce_cuda.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <type_traits>

namespace {

constexpr int kThreads = 512;
constexpr int kUnroll = 4; // vectors in flight per thread and iteration

struct Args {
    void *dst, *dst2;
    const void *src[HCOMM_CUDA_MAX_SRCS];
    int nsrc;
    int divisor;
    size_t head, nvec, n; // scalar head, vectors after it, all elements
};

// The type a value is computed in: fp32 for the 16-bit floats, unsigned
// for integer sums and products (wrap-around is defined there only).
template <typename T> struct Acc {
    using type = T;
    __device__ static T load(T x) { return x; }
    __device__ static T store(T x) { return x; }
};
template <> struct Acc<__half> {
    using type = float;
    __device__ static float load(__half x) { return __half2float(x); }
    __device__ static __half store(float x) { return __float2half_rn(x); }
};
template <> struct Acc<__nv_bfloat16> {
    using type = float;
    __device__ static float load(__nv_bfloat16 x) { return __bfloat162float(x); }
    __device__ static __nv_bfloat16 store(float x) {
        return __float2bfloat16_rn(x);
    }
};

template <typename C> __device__ C wrap_add(C a, C b) {
    if constexpr (std::is_integral<C>::value) {
        using U = typename std::make_unsigned<C>::type;
        return (C)(U)((U)a + (U)b);
    } else {
        return a + b;
    }
}
template <typename C> __device__ C wrap_mul(C a, C b) {
    if constexpr (std::is_integral<C>::value) {
        using U = typename std::make_unsigned<C>::type;
        return (C)(U)((U)a * (U)b);
    } else {
        return a * b;
    }
}

struct OpSum {
    template <typename C> __device__ static C apply(C a, C b) {
        return wrap_add(a, b);
    }
};
struct OpProd {
    template <typename C> __device__ static C apply(C a, C b) {
        return wrap_mul(a, b);
    }
};
struct OpMax {
    template <typename C> __device__ static C apply(C a, C b) {
        return a > b ? a : b;
    }
};
struct OpMin {
    template <typename C> __device__ static C apply(C a, C b) {
        return a < b ? a : b;
    }
};

// The CPU kernels divide in the promoted type for 8-bit integers and in
// the type itself otherwise; the same here, so averages match bit for bit.
template <typename C> struct Div {
    using type = typename std::conditional<sizeof(C) == 1, int, C>::type;
};

template <typename T, typename OP>
__device__ __forceinline__ T combine(const Args &a, size_t i) {
    using A = Acc<T>;
    using C = typename A::type;
    C acc = A::load(static_cast<const T *>(a.src[0])[i]);
    for (int s = 1; s < a.nsrc; s++)
        acc = OP::apply(acc, A::load(static_cast<const T *>(a.src[s])[i]));
    if (a.divisor > 1) {
        using D = typename Div<C>::type;
        acc = (C)((D)acc / (D)a.divisor);
    }
    return A::store(acc);
}

template <typename T, typename OP>
__device__ __forceinline__ void one(const Args &a, size_t i) {
    T r = combine<T, OP>(a, i);
    static_cast<T *>(a.dst)[i] = r;
    if (a.dst2) static_cast<T *>(a.dst2)[i] = r;
}

// 16 bytes of T at a time, loaded as one uint4 and reduced element by
// element in registers.
template <typename T>
__device__ __forceinline__ uint4 load_vec(const void *base, size_t head,
                                          size_t v) {
    return reinterpret_cast<const uint4 *>(static_cast<const T *>(base) +
                                           head)[v];
}

template <typename T, typename OP>
__device__ __forceinline__ void reduce_vectors(const Args &a, size_t first,
                                               int k) {
    constexpr int W = 16 / sizeof(T);
    using A = Acc<T>;
    using C = typename A::type;
    uint4 in[kUnroll];
    C acc[kUnroll][W];
    for (int u = 0; u < k; u++)
        in[u] = load_vec<T>(a.src[0], a.head, first + u);
    for (int u = 0; u < k; u++)
        for (int e = 0; e < W; e++)
            acc[u][e] = A::load(reinterpret_cast<const T *>(&in[u])[e]);
    for (int s = 1; s < a.nsrc; s++) {
        for (int u = 0; u < k; u++)
            in[u] = load_vec<T>(a.src[s], a.head, first + u);
        for (int u = 0; u < k; u++)
            for (int e = 0; e < W; e++)
                acc[u][e] = OP::apply(
                    acc[u][e], A::load(reinterpret_cast<const T *>(&in[u])[e]));
    }
    for (int u = 0; u < k; u++) {
        uint4 out;
        T *o = reinterpret_cast<T *>(&out);
        for (int e = 0; e < W; e++) {
            C x = acc[u][e];
            if (a.divisor > 1) {
                using D = typename Div<C>::type;
                x = (C)((D)x / (D)a.divisor);
            }
            o[e] = A::store(x);
        }
        reinterpret_cast<uint4 *>(static_cast<T *>(a.dst) + a.head)[first + u] =
            out;
        if (a.dst2)
            reinterpret_cast<uint4 *>(static_cast<T *>(a.dst2) +
                                      a.head)[first + u] = out;
    }
}

template <typename T, typename OP>
__global__ void __launch_bounds__(kThreads) reduce_kernel(Args a) {
    size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = tid; i < a.head; i += stride)
        one<T, OP>(a, i);
    // Each thread takes kUnroll consecutive vectors per pass, so that
    // several loads of every source are in flight at once.
    size_t groups = a.nvec / kUnroll;
    for (size_t g = tid; g < groups; g += stride)
        reduce_vectors<T, OP>(a, g * kUnroll, kUnroll);
    for (size_t v = groups * kUnroll + tid; v < a.nvec; v += stride)
        reduce_vectors<T, OP>(a, v, 1);
    constexpr int W = 16 / sizeof(T);
    for (size_t i = a.head + a.nvec * W + tid; i < a.n; i += stride)
        one<T, OP>(a, i);
}

// Blocks that fill every multiprocessor once (per device, looked up once).
int grid_limit() {
    static int blocks[64];
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) return 132;
    if (!blocks[dev]) {
        int sms = 0, per_sm = 0;
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
        cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxThreadsPerMultiProcessor,
                               dev);
        int b = sms * (per_sm / kThreads);
        blocks[dev] = b > 0 ? b : 132;
    }
    return blocks[dev];
}

// Splits the call into a scalar head, 16-byte vectors and a scalar tail,
// where every pointer has the same offset from 16-byte alignment.
template <typename T> void split(Args *a) {
    constexpr size_t W = 16 / sizeof(T);
    uintptr_t mis = (uintptr_t)a->dst % 16;
    int same = mis % sizeof(T) == 0 && (!a->dst2 || (uintptr_t)a->dst2 % 16 == mis);
    for (int s = 0; s < a->nsrc; s++)
        same = same && (uintptr_t)a->src[s] % 16 == mis;
    if (!same) {
        a->head = a->n;
        a->nvec = 0;
        return;
    }
    size_t head = mis ? (16 - mis) / sizeof(T) : 0;
    if (head > a->n) head = a->n;
    a->head = head;
    a->nvec = (a->n - head) / W;
}

template <typename T, typename OP> int launch(Args *a, cudaStream_t stream) {
    split<T>(a);
    constexpr size_t W = 16 / sizeof(T);
    size_t work = a->head + (a->nvec + kUnroll - 1) / kUnroll +
                  (a->n - a->head - a->nvec * W);
    size_t blocks = (work + kThreads - 1) / kThreads;
    size_t cap = (size_t)grid_limit();
    if (blocks > cap) blocks = cap;
    if (blocks == 0) blocks = 1;
    reduce_kernel<T, OP><<<(unsigned)blocks, kThreads, 0, stream>>>(*a);
    return (int)cudaGetLastError();
}

template <typename T> int by_op(hcomm_op_t op, Args *a, cudaStream_t s) {
    switch (op) {
    case HCOMM_SUM:
    case HCOMM_AVG:
        return launch<T, OpSum>(a, s);
    case HCOMM_PROD:
        return launch<T, OpProd>(a, s);
    case HCOMM_MAX:
        return launch<T, OpMax>(a, s);
    case HCOMM_MIN:
        return launch<T, OpMin>(a, s);
    default:
        return (int)cudaErrorInvalidValue;
    }
}

} // namespace

extern "C" int hcomm_cuda_reduce(void *dst, void *dst2, const void *const *srcs,
                                 int nsrc, size_t count, hcomm_dtype_t dtype,
                                 hcomm_op_t op, int divisor, void *stream) {
    if (count == 0) return 0;
    if (nsrc < 1 || nsrc > HCOMM_CUDA_MAX_SRCS) return (int)cudaErrorInvalidValue;
    Args a = {};
    a.dst = dst;
    a.dst2 = dst2;
    for (int s = 0; s < nsrc; s++)
        a.src[s] = srcs[s];
    a.nsrc = nsrc;
    a.divisor = divisor;
    a.n = count;
    cudaStream_t st = (cudaStream_t)stream;
    switch (dtype) {
    case HCOMM_INT8:
        return by_op<int8_t>(op, &a, st);
    case HCOMM_UINT8:
        return by_op<uint8_t>(op, &a, st);
    case HCOMM_INT32:
        return by_op<int32_t>(op, &a, st);
    case HCOMM_UINT32:
        return by_op<uint32_t>(op, &a, st);
    case HCOMM_INT64:
        return by_op<int64_t>(op, &a, st);
    case HCOMM_UINT64:
        return by_op<uint64_t>(op, &a, st);
    case HCOMM_FLOAT16:
        return by_op<__half>(op, &a, st);
    case HCOMM_BFLOAT16:
        return by_op<__nv_bfloat16>(op, &a, st);
    case HCOMM_FLOAT32:
        return by_op<float>(op, &a, st);
    case HCOMM_FLOAT64:
        return by_op<double>(op, &a, st);
    default:
        return (int)cudaErrorInvalidValue;
    }
}

extern "C" int hcomm_cuda_copy(void *dst, const void *src, size_t bytes,
                               void *stream) {
    if (bytes == 0) return 0;
    Args a = {};
    a.dst = dst;
    a.src[0] = src;
    a.nsrc = 1;
    a.n = bytes;
    return launch<uint8_t, OpSum>(&a, (cudaStream_t)stream);
}

