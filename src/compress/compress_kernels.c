/* The compressors' CPU kernels: 16-bit conversion, top-k selection, sign
 * packing (compress.h). */
#include "compress/compress.h"
#include "kernels/reduce.h"
#include "kernels/reduce_impl.h"

#include <math.h>
#include <stdint.h>
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

/* |v| as an unsigned key, the sign bit cleared: the order of magnitudes,
 * NaNs above infinity, as the CUDA kernels' radix sort has them. */
static inline uint32_t mag_key(float v) {
    uint32_t u;
    memcpy(&u, &v, sizeof(u));
    return u & 0x7fffffffu;
}

/* The r-th largest (from 0) of a[0, n), which it reorders: quickselect
 * with a three-way partition (> pivot | == pivot | < pivot). */
static uint32_t kth_largest(uint32_t *a, size_t n, size_t r) {
    size_t lo = 0, hi = n;
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    while (hi - lo > 1) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        uint32_t pivot = a[lo + (size_t)(seed >> 33) % (hi - lo)];
        size_t gt = lo, i = lo, lt = hi;
        while (i < lt) {
            uint32_t v = a[i];
            if (v > pivot) {
                a[i++] = a[gt];
                a[gt++] = v;
            } else if (v < pivot) {
                a[i] = a[--lt];
                a[lt] = v;
            } else {
                i++;
            }
        }
        if (r < gt)
            hi = gt;
        else if (r >= lt)
            lo = lt;
        else
            return pivot;
    }
    return a[lo];
}

/* A key a little below the k-th largest of x's, from a sample of them,
 * so that about 1.5 k elements pass it; 0 (all pass) for small n or large
 * k. The sample's positions are pseudo-random: a regular stride aliases
 * with data of a period (a layer's channels), and a threshold from a few
 * of its classes let through too many or too few. */
static uint32_t sampled_threshold(const float *x, size_t n, size_t k) {
    enum { SAMPLE = 16384 };
    if (n < 4 * SAMPLE || k > n / 8) return 0;
    uint32_t *s = malloc(SAMPLE * sizeof(*s));
    if (!s) return 0;
    uint64_t seed = 0x2545f4914f6cdd1dull;
    for (size_t i = 0; i < SAMPLE; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        s[i] = mag_key(x[(size_t)((seed >> 32) * (uint64_t)n >> 32)]);
    }
    size_t r = (size_t)(1.5 * (double)k / (double)n * SAMPLE) + 16;
    uint32_t t = kth_largest(s, SAMPLE, r < SAMPLE ? r : SAMPLE - 1);
    free(s);
    return t;
}

/* The indices of x's elements whose key is at least t, in increasing
 * order, with their keys; SIZE_MAX when more than cap pass. */
static size_t gather(const float *x, size_t n, uint32_t t, uint32_t *idx,
                     uint32_t *keys, size_t cap) {
    enum { BLOCK = 64 };
    size_t m = 0;
    for (size_t at = 0; at < n; at += BLOCK) {
        size_t end = n - at < BLOCK ? n : at + BLOCK;
        int any = 0; /* a test that vectorises: most blocks have none */
        for (size_t i = at; i < end; i++)
            any |= mag_key(x[i]) >= t;
        for (size_t i = at; any && i < end; i++) {
            uint32_t key = mag_key(x[i]);
            if (key >= t) {
                if (m == cap) return SIZE_MAX;
                idx[m] = (uint32_t)i;
                keys[m++] = key;
            }
        }
    }
    return m;
}

/* The k-th largest key T is found among candidates: the elements past a
 * sampled threshold (one pass over x; then work on about 1.5 k of them, not
 * all n: 64 MiB of gradients took 170 ms with a quickselect over every
 * index), or every element where fewer than k pass or too many do (heavy
 * ties). The candidates come in index order, so one more pass over them
 * keeps those above T and the first of those equal to T, already in
 * increasing index order. Exact: at least k pass the threshold only if it
 * is at most T, and then every element with key T is a candidate. */
void hcomm_topk_select(const float *x, size_t n, size_t k, uint32_t *idx) {
    if (k == 0 || k > n) return; /* none to pick, or not k to pick from */
    uint32_t t = sampled_threshold(x, n, k);
    size_t cap = 2 * k + 4096, m = SIZE_MAX;
    uint32_t *cand = NULL, *keys = NULL, *work = NULL;
    if (t && cap < n && (cand = malloc(3 * cap * sizeof(*cand)))) {
        keys = cand + cap;
        work = keys + cap;
        m = gather(x, n, t, cand, keys, cap);
    }
    if (m == SIZE_MAX || m < k) { /* every element a candidate */
        free(cand);
        cand = keys = NULL;
        m = n;
        if (!(work = malloc(n * sizeof(*work)))) {
            for (size_t i = 0; i < k; i++) /* the first k, as a call with */
                idx[i] = (uint32_t)i;      /* no memory can */
            return;
        }
        for (size_t i = 0; i < n; i++)
            work[i] = mag_key(x[i]);
    } else {
        memcpy(work, keys, m * sizeof(*work));
    }
    uint32_t kth = kth_largest(work, m, k - 1);
    size_t above = 0;
    for (size_t i = 0; i < m; i++)
        above += (keys ? keys[i] : mag_key(x[i])) > kth;
    size_t ties = k - above, o = 0;
    for (size_t i = 0; i < m && o < k; i++) {
        uint32_t key = keys ? keys[i] : mag_key(x[i]);
        if (key > kth || (key == kth && ties > 0)) {
            ties -= key == kth;
            idx[o++] = cand ? cand[i] : (uint32_t)i;
        }
    }
    free(cand ? cand : work);
}

hcomm_status_t hcomm_topk_pairs(const float *x, size_t n, size_t k,
                                uint32_t *pairs, float *residual) {
    uint32_t *idx = malloc(k * sizeof(*idx));
    if (!idx) return HCOMM_ERR_NO_MEMORY;
    hcomm_topk_select(x, n, k, idx);
    if (residual && residual != x) memcpy(residual, x, n * sizeof(float));
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

/* The signs of x[0, len) (len <= 8) as a byte, |x| added to sum[j]:
 * inlined with len 8, the loop vectorises. */
ALWAYS_INLINE unsigned sign_byte(const float *x, unsigned len, double *sum) {
    unsigned byte = 0;
    for (unsigned j = 0; j < len; j++) {
        sum[j] += fabs((double)x[j]);
        byte |= (unsigned)(x[j] >= 0) << j;
    }
    return byte;
}

/* A byte of signs and eight running sums at a time; the order of the sums
 * is fixed, so one input always gives one scale. */
float hcomm_onebit_pack(const float *x, size_t n, uint8_t *bits) {
    double sum[8] = {0};
    for (size_t at = 0; at < n; at += 8)
        bits[at / 8] =
            (uint8_t)(n - at >= 8 ? sign_byte(x + at, 8, sum)
                                  : sign_byte(x + at, (unsigned)(n - at), sum));
    double total = ((sum[0] + sum[1]) + (sum[2] + sum[3])) +
                   ((sum[4] + sum[5]) + (sum[6] + sum[7]));
    return n ? (float)(total / (double)n) : 0.0f;
}

void hcomm_onebit_unpack(float *acc, const uint8_t *bits, float scale, size_t n,
                         int add) {
    for (size_t at = 0; at < n; at += 8) {
        unsigned byte = bits[at / 8];
        size_t len = n - at < 8 ? n - at : 8;
        if (add)
            for (size_t j = 0; j < len; j++)
                acc[at + j] += byte >> j & 1 ? scale : -scale;
        else
            for (size_t j = 0; j < len; j++)
                acc[at + j] = byte >> j & 1 ? scale : -scale;
    }
}

void hcomm_onebit_encode(const float *x, size_t m, uint8_t *rec, float *res) {
    float scale = hcomm_onebit_pack(x, m, rec + 4);
    memcpy(rec, &scale, 4);
    if (res) /* what the signs and the scale did not carry */
        for (size_t i = 0; i < m; i++)
            res[i] = x[i] - (x[i] >= 0 ? scale : -scale);
}

void hcomm_onebit_decode(float *acc, const uint8_t *rec, size_t m, int add) {
    float scale;
    memcpy(&scale, rec, 4);
    hcomm_onebit_unpack(acc, rec + 4, scale, m, add);
}
