// Device code shared by the CUDA kernels (reduce_cuda.cu, and the CUDA IPC
// collectives in src/cuda_ipc/): per-type arithmetic with the CPU kernels'
// semantics, and reduce_span, which reduces nsrc inputs over n elements
// with the threads it is given.
#ifndef HCOMM_KERNELS_REDUCE_CUDA_DEV_CUH
#define HCOMM_KERNELS_REDUCE_CUDA_DEV_CUH

#include "kernels/reduce_cuda.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>
#include <type_traits>

namespace hcomm_dev {

// 16-byte vectors in flight per thread and source: up to four, fewer for
// small types, so a thread holds about 16 accumulators (the 16-bit floats
// accumulate in fp32). Four for every type made ptxas spill (bf16) or take
// 106 to 126 registers (fp16, int8), a quarter of the threads a
// multiprocessor holds otherwise; measured on the H200, 256 MiB c = a + b:
// bf16 84% of the memory bound with four, 97% with two.
template <typename T> constexpr int kUnroll = sizeof(T) < 4 ? sizeof(T) : 4;

struct Span {
    void *dst[HCOMM_CUDA_MAX_SRCS]; // every copy of the result (ndst)
    const void *src[HCOMM_CUDA_MAX_SRCS];
    int nsrc, ndst;
    int divisor; // > 1: the result is divided by it (HCOMM_AVG)
    size_t n;    // elements
};

// The type a value is computed in: fp32 for the 16-bit floats; integer
// sums and products wrap around in the unsigned type.
template <typename T> struct Acc {
    using type = T;
    __device__ static T load(T x) {
        return x;
    }
    __device__ static T store(T x) {
        return x;
    }
};
template <> struct Acc<__half> {
    using type = float;
    __device__ static float load(__half x) {
        return __half2float(x);
    }
    __device__ static __half store(float x) {
        return __float2half_rn(x);
    }
};
template <> struct Acc<__nv_bfloat16> {
    using type = float;
    __device__ static float load(__nv_bfloat16 x) {
        return __bfloat162float(x);
    }
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
template <typename C> __device__ C divide(C x, int divisor) {
    using D = typename std::conditional<sizeof(C) == 1, int, C>::type;
    return (C)((D)x / (D)divisor);
}

// Loads that skip the L1 cache: memory another process (or this kernel's
// previous round) wrote is read from L2, where every writer's stores are.
template <typename T> __device__ __forceinline__ T load_cg(const T *p) {
    if constexpr (sizeof(T) == 1) {
        unsigned char b = __ldcg(reinterpret_cast<const unsigned char *>(p));
        return *reinterpret_cast<T *>(&b);
    } else if constexpr (sizeof(T) == 2) {
        unsigned short b = __ldcg(reinterpret_cast<const unsigned short *>(p));
        return *reinterpret_cast<T *>(&b);
    } else if constexpr (sizeof(T) == 4) {
        unsigned int b = __ldcg(reinterpret_cast<const unsigned int *>(p));
        return *reinterpret_cast<T *>(&b);
    } else {
        unsigned long long b =
            __ldcg(reinterpret_cast<const unsigned long long *>(p));
        return *reinterpret_cast<T *>(&b);
    }
}

template <typename T, typename OP>
__device__ __forceinline__ void reduce_one(const Span &a, size_t i) {
    using A = Acc<T>;
    using C = typename A::type;
    C acc = A::load(load_cg(static_cast<const T *>(a.src[0]) + i));
    for (int s = 1; s < a.nsrc; s++)
        acc = OP::apply(acc,
                        A::load(load_cg(static_cast<const T *>(a.src[s]) + i)));
    if (a.divisor > 1) acc = divide(acc, a.divisor);
    T r = A::store(acc);
    for (int d = 0; d < a.ndst; d++)
        static_cast<T *>(a.dst[d])[i] = r;
}

// k vectors (16 bytes of T each) at v0, v0 + step, ...: the threads of a
// warp take neighbouring vectors, so every load is coalesced, and each
// thread keeps k loads of every source in flight.
template <typename T, typename OP, int K>
__device__ __forceinline__ void reduce_vectors(const Span &a, size_t head,
                                               size_t v0, size_t step) {
    constexpr int W = 16 / sizeof(T);
    using A = Acc<T>;
    using C = typename A::type;
    uint4 in[K];
    C acc[K][W];
    for (int u = 0; u < K; u++)
        in[u] = __ldcg(reinterpret_cast<const uint4 *>(
                           static_cast<const T *>(a.src[0]) + head) +
                       v0 + u * step);
    for (int u = 0; u < K; u++)
        for (int e = 0; e < W; e++)
            acc[u][e] = A::load(reinterpret_cast<const T *>(&in[u])[e]);
    for (int s = 1; s < a.nsrc; s++) {
        for (int u = 0; u < K; u++)
            in[u] = __ldcg(reinterpret_cast<const uint4 *>(
                               static_cast<const T *>(a.src[s]) + head) +
                           v0 + u * step);
        for (int u = 0; u < K; u++)
            for (int e = 0; e < W; e++)
                acc[u][e] = OP::apply(
                    acc[u][e], A::load(reinterpret_cast<const T *>(&in[u])[e]));
    }
    for (int u = 0; u < K; u++) {
        uint4 out;
        T *o = reinterpret_cast<T *>(&out);
        for (int e = 0; e < W; e++) {
            C x = acc[u][e];
            if (a.divisor > 1) x = divide(x, a.divisor);
            o[e] = A::store(x);
        }
        size_t v = v0 + u * step;
        for (int d = 0; d < a.ndst; d++)
            reinterpret_cast<uint4 *>(static_cast<T *>(a.dst[d]) + head)[v] =
                out;
    }
}

// Reduces a.n elements with nw threads, this one being w: 16-byte vectors
// where every pointer has the same offset from 16-byte alignment (a scalar
// head and tail around them), scalars otherwise.
template <typename T, typename OP>
__device__ void reduce_span(const Span &a, size_t w, size_t nw) {
    constexpr size_t W = 16 / sizeof(T);
    uintptr_t mis = (uintptr_t)a.dst[0] % 16;
    bool same = mis % sizeof(T) == 0;
    for (int d = 1; d < a.ndst; d++)
        same = same && (uintptr_t)a.dst[d] % 16 == mis;
    for (int s = 0; s < a.nsrc; s++)
        same = same && (uintptr_t)a.src[s] % 16 == mis;
    size_t head = a.n, nvec = 0;
    if (same) {
        head = mis ? (16 - mis) / sizeof(T) : 0;
        if (head > a.n) head = a.n;
        nvec = (a.n - head) / W;
    }
    for (size_t i = w; i < head; i += nw)
        reduce_one<T, OP>(a, i);
    constexpr int K = kUnroll<T>;
    size_t per = nw * K, full = nvec / per * per;
    for (size_t base = 0; base < full; base += per)
        reduce_vectors<T, OP, K>(a, head, base + w, nw);
    for (size_t v = full + w; v < nvec; v += nw)
        reduce_vectors<T, OP, 1>(a, head, v, nw);
    for (size_t i = head + nvec * W + w; i < a.n; i += nw)
        reduce_one<T, OP>(a, i);
}

// Calls F::template run<T, OP>(args...) for a dtype and op of hcomm.h
// (HCOMM_AVG sums; the caller passes the divisor). Returns
// cudaErrorInvalidValue for anything else.
template <typename F, typename T, typename... Args>
int by_op(hcomm_op_t op, Args &&...args) {
    switch (op) {
    case HCOMM_SUM:
    case HCOMM_AVG:
        return F::template run<T, OpSum>(args...);
    case HCOMM_PROD:
        return F::template run<T, OpProd>(args...);
    case HCOMM_MAX:
        return F::template run<T, OpMax>(args...);
    case HCOMM_MIN:
        return F::template run<T, OpMin>(args...);
    default:
        return 1; /* cudaErrorInvalidValue */
    }
}

template <typename F, typename... Args>
int dispatch(hcomm_dtype_t dtype, hcomm_op_t op, Args &&...args) {
    switch (dtype) {
    case HCOMM_INT8:
        return by_op<F, int8_t>(op, args...);
    case HCOMM_UINT8:
        return by_op<F, uint8_t>(op, args...);
    case HCOMM_INT32:
        return by_op<F, int32_t>(op, args...);
    case HCOMM_UINT32:
        return by_op<F, uint32_t>(op, args...);
    case HCOMM_INT64:
        return by_op<F, int64_t>(op, args...);
    case HCOMM_UINT64:
        return by_op<F, uint64_t>(op, args...);
    case HCOMM_FLOAT16:
        return by_op<F, __half>(op, args...);
    case HCOMM_BFLOAT16:
        return by_op<F, __nv_bfloat16>(op, args...);
    case HCOMM_FLOAT32:
        return by_op<F, float>(op, args...);
    case HCOMM_FLOAT64:
        return by_op<F, double>(op, args...);
    default:
        return 1; /* cudaErrorInvalidValue */
    }
}

} // namespace hcomm_dev

#endif
