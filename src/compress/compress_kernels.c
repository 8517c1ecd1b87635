/* The compressors' CPU kernels: 16-bit conversion, top-k selection, sign
 * packing (compress.h). */
#include "compress/compress.h"
#include "kernels/reduce.h"
#include "kernels/reduce_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The branch-free conversions of reduce_impl.h, inlined so that the loops
 * vectorise (this file is built with the kernels' flags). fp16's need
 * per-lane shifts, which x86-64's baseline (SSE2) lacks: there the same
 * loops are compiled a second time for AVX2 and picked at run time (the
 * same C, so the same bits; 16 Mi floats to fp16 in 10 ms against 78). */
#define ALWAYS_INLINE static inline __attribute__((always_inline))

ALWAYS_INLINE void to16_loops(uint16_t *dst, const float *src, size_t n,
                              int bf16) {
    if (bf16)
        for (size_t i = 0; i < n; i++)
            dst[i] = f32_to_bf16(src[i]);
    else
        for (size_t i = 0; i < n; i++)
            dst[i] = f32_to_half(src[i]);
}

ALWAYS_INLINE void from16_loops(float *acc, const uint16_t *src, size_t n,
                                int bf16, int add) {
    if (bf16 && add)
        for (size_t i = 0; i < n; i++)
            acc[i] += bf16_to_f32(src[i]);
    else if (bf16)
        for (size_t i = 0; i < n; i++)
            acc[i] = bf16_to_f32(src[i]);
    else if (add)
        for (size_t i = 0; i < n; i++)
            acc[i] += half_to_f32(src[i]);
    else
        for (size_t i = 0; i < n; i++)
            acc[i] = half_to_f32(src[i]);
}

#if defined(__x86_64__) && defined(__GNUC__)
#define X86_AVX2 1
#define AVX2_TARGET __attribute__((target("avx2")))

AVX2_TARGET static void to16_avx2(uint16_t *dst, const float *src, size_t n,
                                  int bf16) {
    to16_loops(dst, src, n, bf16);
}

AVX2_TARGET static void from16_avx2(float *acc, const uint16_t *src, size_t n,
                                    int bf16, int add) {
    from16_loops(acc, src, n, bf16, add);
}
#endif

void hcomm_cmp_to16(uint16_t *dst, const float *src, size_t n, int bf16) {
#ifdef X86_AVX2
    if (hcomm_kernel_has_avx2()) {
        to16_avx2(dst, src, n, bf16);
        return;
    }
#endif
    to16_loops(dst, src, n, bf16);
}

void hcomm_cmp_from16(float *acc, const uint16_t *src, size_t n, int bf16,
                      int add) {
#ifdef X86_AVX2
    if (hcomm_kernel_has_avx2()) {
        from16_avx2(acc, src, n, bf16, add);
        return;
    }
#endif
    from16_loops(acc, src, n, bf16, add);
}

void hcomm_cmp_sum16(uint16_t *out, const uint16_t *in, size_t nin, size_t m,
                     int bf16, int divisor) {
    enum { BLOCK = 1024 }; /* fp32 sums on the stack, a block at a time */
    float acc[BLOCK];
    for (size_t at = 0; at < m && nin; at += BLOCK) {
        size_t n = m - at < BLOCK ? m - at : BLOCK;
        hcomm_cmp_from16(acc, in + at, n, bf16, 0);
        for (size_t p = 1; p < nin; p++)
            hcomm_cmp_from16(acc, in + p * m + at, n, bf16, 1);
        for (size_t i = 0; divisor > 1 && i < n; i++)
            acc[i] /= (float)divisor;
        hcomm_cmp_to16(out + at, acc, n, bf16);
    }
}

/* a before b: larger magnitude, then lower index. */
static int before(const float *x, uint32_t a, uint32_t b) {
    float ma = fabsf(x[a]), mb = fabsf(x[b]);
    if (ma != mb) return ma > mb;
    return a < b;
}

static int by_index(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* Quickselect on the index array all[0, n): afterwards its first k
 * entries are the k first in before()'s order (in no particular order). */
static void select_first(const float *x, uint32_t *all, size_t n, size_t k) {
    size_t lo = 0, hi = n; /* the k-th lies in [lo, hi) */
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    while (hi - lo > 1) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        uint32_t pivot = all[lo + (size_t)(seed >> 33) % (hi - lo)];
        /* three-way partition: before pivot | pivot | after */
        size_t lt = lo, i = lo, gt = hi;
        while (i < gt) {
            if (all[i] == pivot) {
                i++;
            } else if (before(x, all[i], pivot)) {
                uint32_t t = all[lt];
                all[lt++] = all[i];
                all[i++] = t;
            } else {
                uint32_t t = all[--gt];
                all[gt] = all[i];
                all[i] = t;
            }
        }
        if (k <= lt)
            hi = lt;
        else if (k > lt + (gt - lt))
            lo = gt;
        else
            break;
    }
}

static int by_magnitude_desc(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}

/* The indices of the elements of magnitude at least a threshold that a
 * sample of x puts a little below the k-th largest: one pass, and the
 * quickselect then runs on about 1.5 k of them, not on all n (64 MiB of
 * gradients: 170 ms before, on the GPU machine's host). Exact whenever at
 * least k pass (the threshold is then at most the k-th magnitude, so every
 * element tied with it passes too); returns 0, and the caller selects
 * from all, when fewer pass or more than cap do (heavy ties). */
static size_t candidates(const float *x, size_t n, size_t k, uint32_t *cand,
                         size_t cap) {
    enum { SAMPLE = 16384 };
    if (n < 4 * SAMPLE || k > n / 8) return 0;
    float *s = malloc(SAMPLE * sizeof(float));
    if (!s) return 0;
    size_t stride = n / SAMPLE;
    for (size_t i = 0; i < SAMPLE; i++)
        s[i] = fabsf(x[i * stride]);
    qsort(s, SAMPLE, sizeof(float), by_magnitude_desc);
    size_t r = (size_t)(1.5 * (double)k / (double)n * SAMPLE) + 16;
    float t = s[r < SAMPLE ? r : SAMPLE - 1];
    free(s);
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (fabsf(x[i]) >= t) {
            if (m == cap) return 0;
            cand[m++] = (uint32_t)i;
        }
    return m >= k ? m : 0;
}

void hcomm_topk_select(const float *x, size_t n, size_t k, uint32_t *idx) {
    size_t cap = 2 * k + 4096;
    uint32_t *all = malloc((cap < n ? cap : n) * sizeof(*all));
    size_t m = all ? candidates(x, n, k, all, cap < n ? cap : n) : 0;
    if (all && m == 0) { /* select from every index */
        free(all);
        if ((all = malloc(n * sizeof(*all))))
            for (size_t i = 0; i < n; i++)
                all[i] = (uint32_t)i;
        m = n;
    }
    if (!all) { /* no scratch: the first k, as a call with no memory can */
        for (size_t i = 0; i < k; i++)
            idx[i] = (uint32_t)i;
        return;
    }
    select_first(x, all, m, k);
    memcpy(idx, all, k * sizeof(*idx));
    free(all);
    qsort(idx, k, sizeof(*idx), by_index);
}

hcomm_status_t hcomm_topk_pairs(const float *x, size_t n, size_t k,
                                uint32_t *pairs, float *residual) {
    uint32_t *idx = malloc(k * sizeof(*idx));
    if (!idx) return HCOMM_ERR_NO_MEMORY;
    hcomm_topk_select(x, n, k, idx);
    if (residual) memcpy(residual, x, n * sizeof(float));
    for (size_t i = 0; i < k; i++) {
        pairs[2 * i] = idx[i];
        memcpy(&pairs[2 * i + 1], &x[idx[i]], sizeof(float));
        if (residual) residual[idx[i]] = 0;
    }
    free(idx);
    return HCOMM_SUCCESS;
}

void hcomm_topk_add(float *out, const uint32_t *pairs, size_t k, size_t n) {
    for (size_t i = 0; i < k; i++) {
        float v;
        memcpy(&v, &pairs[2 * i + 1], sizeof(v));
        if (pairs[2 * i] < n) out[pairs[2 * i]] += v;
    }
}

float hcomm_onebit_pack(const float *x, size_t n, uint8_t *bits) {
    double sum = 0;
    memset(bits, 0, hcomm_onebit_bytes(n));
    for (size_t i = 0; i < n; i++) {
        sum += fabs((double)x[i]);
        if (x[i] >= 0) bits[i / 8] |= (uint8_t)(1u << (i % 8));
    }
    return n ? (float)(sum / (double)n) : 0.0f;
}

void hcomm_onebit_unpack(float *acc, const uint8_t *bits, float scale, size_t n,
                         int add) {
    for (size_t i = 0; i < n; i++) {
        float v = bits[i / 8] >> (i % 8) & 1 ? scale : -scale;
        acc[i] = add ? acc[i] + v : v;
    }
}

void hcomm_onebit_encode(const float *x, size_t m, uint8_t *rec, float *res) {
    float scale = hcomm_onebit_pack(x, m, rec + 4);
    memcpy(rec, &scale, 4);
    if (res) { /* what the signs and the scale did not carry */
        hcomm_onebit_unpack(res, rec + 4, scale, m, 0);
        for (size_t i = 0; i < m; i++)
            res[i] = x[i] - res[i];
    }
}

void hcomm_onebit_decode(float *acc, const uint8_t *rec, size_t m, int add) {
    float scale;
    memcpy(&scale, rec, 4);
    hcomm_onebit_unpack(acc, rec + 4, scale, m, add);
}
