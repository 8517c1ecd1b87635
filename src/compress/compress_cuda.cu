// The compressors' CUDA kernels (compress_cuda.h): grid-stride kernels for
// the conversions, a stable radix sort (CUB, part of the CUDA toolkit) for
// the top-k selection, warp votes for the sign packing.
#include "compress/compress_cuda.h"

// CUB's iterators include <iostream> for an operator<< this file never
// uses, and with it a static initialiser that needs libstdc++ at link
// time, which a C library should not: its guard, set first, keeps it out.
#define _GLIBCXX_IOSTREAM 1
#include <cub/device/device_radix_sort.cuh>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace {

constexpr int kThreads = 256;
// One launch covers the GPU a few times over at most; larger inputs loop.
constexpr size_t kMaxBlocks = 4096;

dim3 grid_for(size_t n) {
    size_t b = (n + kThreads - 1) / kThreads;
    return dim3((unsigned)(b < 1 ? 1 : b > kMaxBlocks ? kMaxBlocks : b));
}

__device__ size_t first_index() {
    return (size_t)blockIdx.x * blockDim.x + threadIdx.x;
}
__device__ size_t stride() {
    return (size_t)gridDim.x * blockDim.x;
}

// Round to nearest even, as the CPU's conversions (reduce_impl.h).
__device__ uint16_t to16(float x, int bf16) {
    return bf16 ? __bfloat16_as_ushort(__float2bfloat16_rn(x))
                : __half_as_ushort(__float2half_rn(x));
}
__device__ float from16(uint16_t v, int bf16) {
    return bf16 ? __bfloat162float(__ushort_as_bfloat16(v))
                : __half2float(__ushort_as_half(v));
}

__global__ void to16_kernel(uint16_t *dst, const float *src, size_t n,
                            int bf16) {
    for (size_t i = first_index(); i < n; i += stride())
        dst[i] = to16(src[i], bf16);
}

__global__ void from16_kernel(float *acc, const uint16_t *src, size_t n,
                              int bf16, int add) {
    for (size_t i = first_index(); i < n; i += stride()) {
        float v = from16(src[i], bf16);
        acc[i] = add ? acc[i] + v : v;
    }
}

__global__ void sum16_kernel(uint16_t *out, const uint16_t *in, size_t nin,
                             size_t m, int bf16, int divisor) {
    for (size_t i = first_index(); i < m; i += stride()) {
        float a = from16(in[i], bf16);
        for (size_t p = 1; p < nin; p++)
            a += from16(in[p * m + i], bf16);
        if (divisor > 1) a /= (float)divisor;
        out[i] = to16(a, bf16);
    }
}

// --- top-k ------------------------------------------------------------------
// Magnitudes as unsigned keys (the sign bit cleared: the order of |x|),
// sorted descending with their indices; the sort is stable, so among equal
// magnitudes the lower index comes first, as in compress.h. The first k
// indices are then sorted ascending.

__global__ void keys_kernel(const float *x, size_t n, uint32_t *keys,
                            uint32_t *idx) {
    for (size_t i = first_index(); i < n; i += stride()) {
        keys[i] = __float_as_uint(x[i]) & 0x7fffffffu;
        idx[i] = (uint32_t)i;
    }
}

__global__ void pairs_kernel(const float *x, const uint32_t *idx, size_t k,
                             uint32_t *pairs, float *residual) {
    for (size_t i = first_index(); i < k; i += stride()) {
        uint32_t j = idx[i];
        pairs[2 * i] = j;
        pairs[2 * i + 1] = __float_as_uint(x[j]);
        if (residual) residual[j] = 0.0f;
    }
}

__global__ void topk_add_kernel(float *out, const uint32_t *pairs, size_t k,
                                size_t n) {
    for (size_t i = first_index(); i < k; i += stride())
        if (pairs[2 * i] < n)
            out[pairs[2 * i]] += __uint_as_float(pairs[2 * i + 1]);
}

// Scratch: two key and two index arrays of n, then CUB's own.
struct TopkScratch {
    uint32_t *k0, *k1, *v0, *v1;
    void *cub;
    size_t cub_bytes;
};

size_t align256(size_t b) {
    return (b + 255) & ~(size_t)255;
}

// CUB's scratch for the larger of the two sorts (its size needs no data).
size_t cub_bytes(size_t n) {
    cub::DoubleBuffer<uint32_t> k(nullptr, nullptr), v(nullptr, nullptr);
    size_t pairs = 0, keys = 0;
    cub::DeviceRadixSort::SortPairsDescending(nullptr, pairs, k, v, (int)n, 0,
                                              31);
    cub::DeviceRadixSort::SortKeys(nullptr, keys, k, (int)n, 0, 32);
    return pairs > keys ? pairs : keys;
}

// Four arrays of n words, then CUB's part: the rest of the scratch.
TopkScratch carve(void *scratch, size_t scratch_bytes, size_t n) {
    char *p = (char *)scratch;
    size_t a = align256(n * sizeof(uint32_t));
    return TopkScratch{
        (uint32_t *)p,           (uint32_t *)(p + a), (uint32_t *)(p + 2 * a),
        (uint32_t *)(p + 3 * a), p + 4 * a,           scratch_bytes - 4 * a};
}

// Bits that index n values.
int index_bits(size_t n) {
    int b = 1;
    while (b < 32 && ((size_t)1 << b) < n)
        b++;
    return b;
}

// --- 1-bit ------------------------------------------------------------------
// The scale: per-block sums of |x| in double (a fixed grid, so the same
// input always sums alike), then one block adds the partial sums in order.
constexpr int kSumBlocks = 1024;

__device__ double block_sum(double v, double *shared) {
    shared[threadIdx.x] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s /= 2) {
        if ((int)threadIdx.x < s)
            shared[threadIdx.x] += shared[threadIdx.x + s];
        __syncthreads();
    }
    return shared[0];
}

__global__ void abs_sum_kernel(const float *x, size_t m, double *partial) {
    __shared__ double shared[kThreads];
    double v = 0;
    for (size_t i = first_index(); i < m; i += stride())
        v += fabs((double)x[i]);
    v = block_sum(v, shared);
    if (threadIdx.x == 0) partial[blockIdx.x] = v;
}

__global__ void scale_kernel(const double *partial, int nparts, size_t m,
                             uint8_t *rec) {
    __shared__ double shared[kThreads];
    double v = 0;
    for (int i = threadIdx.x; i < nparts; i += blockDim.x)
        v += partial[i];
    v = block_sum(v, shared);
    if (threadIdx.x == 0) *(float *)rec = m ? (float)(v / (double)m) : 0.0f;
}

// A warp packs 32 consecutive signs into one word (bit i % 32 of word
// i / 32 is bit i % 8 of byte i / 8 on a little-endian GPU).
__global__ void pack_kernel(const float *x, size_t m, uint8_t *rec,
                            float *res) {
    float scale = *(const float *)rec;
    uint32_t *words = (uint32_t *)(rec + 4);
    size_t span = (m + 31) / 32 * 32;
    for (size_t i = first_index(); i < span; i += stride()) {
        float v = i < m ? x[i] : -1.0f;
        int bit = i < m && v >= 0;
        uint32_t word = __ballot_sync(0xffffffffu, bit);
        if ((threadIdx.x & 31) == 0) words[i / 32] = word;
        if (res && i < m) res[i] = v - (bit ? scale : -scale);
    }
}

__global__ void unpack_kernel(float *acc, const uint8_t *rec, size_t m,
                              int add) {
    float scale = *(const float *)rec;
    const uint8_t *bits = rec + 4;
    for (size_t i = first_index(); i < m; i += stride()) {
        float v = bits[i / 8] >> (i % 8) & 1 ? scale : -scale;
        acc[i] = add ? acc[i] + v : v;
    }
}

// A launch's own status (cudaGetLastError would also return an earlier
// call's error, the program's, as this launch's): kernel parameters P from
// the arguments given, converted as a call would.
template <typename... P> struct Launcher {
    static int run(void (*kernel)(P...), dim3 grid, cudaStream_t s, P... p) {
        void *args[] = {(void *)&p...};
        return (int)cudaLaunchKernel((const void *)kernel, grid, dim3(kThreads),
                                     args, 0, s);
    }
};
template <typename... P, typename... A>
int launch(void (*kernel)(P...), dim3 grid, void *stream, A... a) {
    return Launcher<P...>::run(kernel, grid, (cudaStream_t)stream, a...);
}

} // namespace

extern "C" int hcomm_cuda_cmp_to16(uint16_t *dst, const float *src, size_t n,
                                   int bf16, void *stream) {
    return n ? launch(to16_kernel, grid_for(n), stream, dst, src, n, bf16) : 0;
}

extern "C" int hcomm_cuda_cmp_from16(float *acc, const uint16_t *src, size_t n,
                                     int bf16, int add, void *stream) {
    return n ? launch(from16_kernel, grid_for(n), stream, acc, src, n, bf16,
                      add)
             : 0;
}

extern "C" int hcomm_cuda_cmp_sum16(uint16_t *out, const uint16_t *in,
                                    size_t nin, size_t m, int bf16, int divisor,
                                    void *stream) {
    return m && nin ? launch(sum16_kernel, grid_for(m), stream, out, in, nin, m,
                             bf16, divisor)
                    : 0;
}

extern "C" size_t hcomm_cuda_topk_scratch(size_t n) {
    return 4 * align256(n * sizeof(uint32_t)) + cub_bytes(n);
}

extern "C" int hcomm_cuda_topk_pairs(const float *x, size_t n, size_t k,
                                     uint32_t *pairs, float *residual,
                                     void *scratch, size_t scratch_bytes,
                                     void *stream) {
    cudaStream_t s = (cudaStream_t)stream;
    if (k == 0 || k > n || n > 0x7fffffff ||
        scratch_bytes < hcomm_cuda_topk_scratch(n))
        return (int)cudaErrorInvalidValue;
    TopkScratch t = carve(scratch, scratch_bytes, n);
    cudaError_t e =
        (cudaError_t)launch(keys_kernel, grid_for(n), stream, x, n, t.k0, t.v0);
    cub::DoubleBuffer<uint32_t> keys(t.k0, t.k1), idx(t.v0, t.v1);
    size_t bytes = t.cub_bytes;
    if (e == cudaSuccess)
        e = cub::DeviceRadixSort::SortPairsDescending(t.cub, bytes, keys, idx,
                                                      (int)n, 0, 31, s);
    // the first k indices, ascending, sorted within idx's two buffers
    cub::DoubleBuffer<uint32_t> chosen(idx.Current(), idx.Alternate());
    bytes = t.cub_bytes;
    if (e == cudaSuccess)
        e = cub::DeviceRadixSort::SortKeys(t.cub, bytes, chosen, (int)k, 0,
                                           index_bits(n), s);
    if (e == cudaSuccess && residual && residual != x)
        e = cudaMemcpyAsync(residual, x, n * sizeof(float),
                            cudaMemcpyDeviceToDevice, s);
    if (e != cudaSuccess) return (int)e;
    return launch(pairs_kernel, grid_for(k), stream, x,
                  (const uint32_t *)chosen.Current(), k, pairs, residual);
}

extern "C" int hcomm_cuda_topk_add(float *out, const uint32_t *pairs, size_t k,
                                   size_t n, void *stream) {
    return k ? launch(topk_add_kernel, grid_for(k), stream, out, pairs, k, n)
             : 0;
}

extern "C" size_t hcomm_cuda_onebit_scratch(void) {
    return kSumBlocks * sizeof(double);
}

extern "C" int hcomm_cuda_onebit_encode(const float *x, size_t m, uint8_t *rec,
                                        float *res, void *scratch,
                                        void *stream) {
    double *partial = (double *)scratch;
    int parts = 0, e = 0;
    if (m) {
        dim3 g = grid_for(m);
        parts = (int)(g.x < kSumBlocks ? g.x : kSumBlocks);
        e = launch(abs_sum_kernel, dim3(parts), stream, x, m, partial);
    }
    if (!e)
        e = launch(scale_kernel, dim3(1), stream, (const double *)partial,
                   parts, m, rec);
    if (!e && m)
        e = launch(pack_kernel, grid_for((m + 31) / 32 * 32), stream, x, m, rec,
                   res);
    return e;
}

extern "C" int hcomm_cuda_onebit_decode(float *acc, const uint8_t *rec,
                                        size_t m, int add, void *stream) {
    return m ? launch(unpack_kernel, grid_for(m), stream, acc, rec, m, add) : 0;
}
