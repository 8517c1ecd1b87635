/* The compressors' CPU kernels: 16-bit conversion within half an ulp,
 * top-k picks exactly the k largest magnitudes (lower index on ties),
 * one-bit sends exactly the signs and the mean magnitude; the
 * HCOMM_COMPRESS parser. */
#include "compress/compress.h"
#include "kernels/reduce.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static uint32_t key_of(float v) { /* |v|'s order, as the kernels' */
    uint32_t u;
    memcpy(&u, &v, sizeof(u));
    return u & 0x7fffffffu;
}

static float value(size_t i) { /* signs and magnitudes all over */
    uint32_t h = (uint32_t)i * 2654435761u;
    return ((float)(h % 20001) - 10000.0f) / 37.0f;
}

static void test_half_round_trip(void **state) {
    (void)state;
    enum { N = 10007 };
    float x[N], y[N];
    uint16_t h[N];
    for (int bf16 = 0; bf16 < 2; bf16++) {
        for (size_t i = 0; i < N; i++)
            x[i] = value(i);
        hcomm_cmp_to16(h, x, N, bf16);
        hcomm_cmp_from16(y, h, N, bf16, 0);
        double ulp = bf16 ? 0x1p-8 : 0x1p-11; /* half an ulp, relative */
        for (size_t i = 0; i < N; i++)
            assert_true(fabs((double)y[i] - x[i]) <= ulp * fabs(x[i]));
        hcomm_cmp_from16(y, h, N, bf16, 1); /* add: twice the value */
        for (size_t i = 0; i < N; i++)
            assert_true(y[i] == 2 * (bf16 ? hcomm_bf16_to_float(h[i])
                                          : hcomm_half_to_float(h[i])));
    }
}

/* The array conversions (an AVX2 build of their loops where the CPU has
 * it) give the bits of the scalar ones: every binary16 and bfloat16 value
 * to fp32, and fp32 bit patterns across the whole range (subnormals,
 * rounding ties, overflow, infinities, NaNs) to 16 bits. */
static void test_convert_bits(void **state) {
    (void)state;
    enum { N = 65536 + 16 };
    static float x[N], y[N];
    static uint16_t h[N];
    static const uint32_t special[] = {
        0x00000000u, 0x80000000u, 0x00000001u, 0x33000000u,
        0x33000001u, 0x387fe000u, 0x387ff000u, 0x38800000u,
        0x477fe000u, 0x477ff000u, 0x477fefffu, 0x47800000u,
        0x7f800000u, 0xff800000u, 0x7f800001u, 0xffc12345u};
    for (int bf16 = 0; bf16 < 2; bf16++) {
        for (uint32_t i = 0; i < 65536; i++)
            h[i] = (uint16_t)i;
        hcomm_cmp_from16(y, h, 65536, bf16, 0);
        for (uint32_t i = 0; i < 65536; i++) {
            float want =
                bf16 ? hcomm_bf16_to_float(h[i]) : hcomm_half_to_float(h[i]);
            assert_memory_equal(&y[i], &want, sizeof(float));
        }
        for (uint64_t pass = 0; pass < 64; pass++) {
            for (size_t i = 0; i < N; i++) {
                uint32_t u =
                    i < 16 ? special[i] : (uint32_t)((pass * N + i) * 65521u);
                memcpy(&x[i], &u, sizeof(u));
            }
            hcomm_cmp_to16(h, x, N, bf16);
            for (size_t i = 0; i < N; i++)
                assert_int_equal(h[i], bf16 ? hcomm_float_to_bf16(x[i])
                                            : hcomm_float_to_half(x[i]));
        }
    }
}

/* All values equal: every element ties with the k-th, too many for the
 * sampled threshold's candidates; the lowest indices win, as in a full
 * selection. */
static void test_topk_ties(void **state) {
    (void)state;
    size_t n = (size_t)1 << 18, k = n / 100;
    float *x = malloc(n * sizeof(float));
    uint32_t *idx = malloc(k * sizeof(uint32_t));
    for (size_t i = 0; i < n; i++)
        x[i] = -1.5f;
    hcomm_topk_select(x, n, k, idx);
    for (size_t i = 0; i < k; i++)
        assert_int_equal(idx[i], i);
    free(x);
    free(idx);
}

/* idx holds k increasing indices, and no value left out beats one kept
 * (magnitudes as the sign-cleared bits order them: NaN above infinity,
 * as on the GPU; ties: the lower index). */
static void check_topk(const float *x, size_t n, size_t k,
                       const uint32_t *idx) {
    uint32_t weakest = UINT32_MAX;
    size_t weakest_at = 0;
    for (size_t i = 0; i < k; i++) {
        if (i) assert_true(idx[i] > idx[i - 1]);
        uint32_t m = key_of(x[idx[i]]);
        if (m < weakest || (m == weakest && idx[i] > weakest_at)) {
            weakest = m;
            weakest_at = idx[i];
        }
    }
    size_t kept = 0;
    for (size_t i = 0, s = 0; i < n; i++) {
        if (s < k && idx[s] == i) {
            s++;
            kept++;
            continue;
        }
        uint32_t m = key_of(x[i]);
        assert_true(m < weakest || (m == weakest && i > weakest_at));
    }
    assert_int_equal(kept, k);
}

static void test_topk(void **state) {
    (void)state;
    /* past 65536 and k <= n / 8, a sampled threshold first */
    const size_t ns[] = {1, 2, 7, 100, 1009, 65536, 262147, 1 << 20};
    for (size_t t = 0; t < sizeof(ns) / sizeof(*ns); t++) {
        size_t n = ns[t];
        float *x = malloc(n * sizeof(float));
        uint32_t *idx = malloc(n * sizeof(uint32_t));
        for (size_t i = 0; i < n; i++)
            x[i] = (i % 5 == 0) ? 3.0f : value(i); /* many ties at 3 */
        const size_t ks[] = {1, n / 3 + 1, n, n / 100 + 1, n / 9};
        for (size_t q = 0; q < 5; q++) {
            size_t k = ks[q] > n ? n : ks[q];
            hcomm_topk_select(x, n, k, idx);
            check_topk(x, n, k, idx);
        }
        free(x);
        free(idx);
    }
}

/* Data of a period (1000 levels, 0.1% each, in a pattern a regular sample
 * would alias with), NaNs and infinities, and the residual written over
 * the input itself: the same pairs, and the input with the k zeroed. */
static void test_topk_period_nan_in_place(void **state) {
    (void)state;
    size_t n = (size_t)1 << 20, k = n / 100;
    float *x = malloc(n * sizeof(float)), *res = malloc(n * sizeof(float));
    uint32_t *idx = malloc(k * sizeof(uint32_t)),
             *pairs = malloc(2 * k * sizeof(uint32_t)),
             *again = malloc(2 * k * sizeof(uint32_t));
    for (size_t i = 0; i < n; i++)
        x[i] = (float)((i * 7) % 1000) / 64.0f - 7.0f;
    x[5] = NAN;
    x[77] = -INFINITY;
    x[n - 1] = INFINITY;
    hcomm_topk_select(x, n, k, idx);
    check_topk(x, n, k, idx);
    assert_int_equal(idx[0], 5);
    assert_int_equal(idx[1], 77);
    assert_int_equal(idx[k - 1], n - 1);
    assert_int_equal(hcomm_topk_pairs(x, n, k, pairs, res), HCOMM_SUCCESS);
    float *copy = malloc(n * sizeof(float));
    memcpy(copy, x, n * sizeof(float));
    assert_int_equal(hcomm_topk_pairs(copy, n, k, again, copy), HCOMM_SUCCESS);
    assert_memory_equal(again, pairs, 2 * k * sizeof(uint32_t));
    assert_memory_equal(copy, res, n * sizeof(float));
    for (size_t i = 0; i < k; i++)
        assert_true(copy[idx[i]] == 0.0f);
    free(x);
    free(res);
    free(copy);
    free(idx);
    free(pairs);
    free(again);
}

static void test_onebit(void **state) {
    (void)state;
    enum { N = 1001 };
    float x[N], y[N];
    uint8_t bits[(N + 7) / 8];
    double sum = 0;
    for (size_t i = 0; i < N; i++) {
        x[i] = value(i);
        sum += fabs((double)x[i]);
    }
    float scale = hcomm_onebit_pack(x, N, bits);
    assert_true(scale == (float)(sum / N));
    hcomm_onebit_unpack(y, bits, scale, N, 0);
    for (size_t i = 0; i < N; i++)
        assert_true(y[i] == (x[i] >= 0 ? scale : -scale));
    hcomm_onebit_unpack(y, bits, scale, N, 1);
    for (size_t i = 0; i < N; i++)
        assert_true(y[i] == (x[i] >= 0 ? 2 * scale : -2 * scale));
    assert_true(hcomm_onebit_pack(x, 0, bits) == 0.0f);
    /* the record and residual, with the residual over the input itself */
    uint8_t rec[4 + (N + 7) / 8], rec2[sizeof(rec)];
    hcomm_onebit_encode(x, N, rec, y);
    for (size_t i = 0; i < N; i++)
        assert_true(y[i] == x[i] - (x[i] >= 0 ? scale : -scale));
    hcomm_onebit_encode(x, N, rec2, x);
    assert_memory_equal(rec2, rec, sizeof(rec));
    assert_memory_equal(x, y, sizeof(x));
}

static void test_parse(void **state) {
    (void)state;
    hcomm_compress_t k, l;
    double d;
    assert_int_equal(hcomm_compress_parse("none", &k, &d, &l), HCOMM_SUCCESS);
    assert_int_equal(k, HCOMM_COMPRESS_NONE);
    assert_int_equal(hcomm_compress_parse("bf16", &k, &d, &l), HCOMM_SUCCESS);
    assert_int_equal(k, HCOMM_COMPRESS_BF16);
    assert_int_equal(hcomm_compress_parse("fp16", &k, &d, &l), HCOMM_SUCCESS);
    assert_int_equal(k, HCOMM_COMPRESS_FP16);
    assert_int_equal(hcomm_compress_parse("onebit", &k, &d, &l), HCOMM_SUCCESS);
    assert_int_equal(k, HCOMM_COMPRESS_ONEBIT);
    assert_int_equal(hcomm_compress_parse("auto", &k, &d, &l), HCOMM_SUCCESS);
    assert_int_equal(k, HCOMM_COMPRESS_AUTO);
    assert_int_equal(hcomm_compress_parse("topk:0.01", &k, &d, &l),
                     HCOMM_SUCCESS);
    assert_int_equal(k, HCOMM_COMPRESS_TOPK);
    assert_true(d == 0.01);
    assert_int_equal(l, HCOMM_COMPRESS_NONE);
    assert_int_equal(hcomm_compress_parse("auto:topk:0.05", &k, &d, &l),
                     HCOMM_SUCCESS);
    assert_int_equal(k, HCOMM_COMPRESS_AUTO);
    assert_int_equal(l, HCOMM_COMPRESS_TOPK);
    assert_true(d == 0.05);
    assert_int_equal(hcomm_compress_parse("auto:onebit", &k, &d, &l),
                     HCOMM_SUCCESS);
    assert_int_equal(l, HCOMM_COMPRESS_ONEBIT);
    const char *bad[] = {"topk",     "topk:",     "topk:0",    "topk:1.5",
                         "topk:x",   "topk:0.1x", "bf32",      "Auto",
                         "NONE",     "auto:",     "auto:bf16", "auto:auto",
                         "auto:topk"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
        assert_int_equal(hcomm_compress_parse(bad[i], &k, &d, &l),
                         HCOMM_ERR_INVALID_ARG);
}

/* A lossier scheme only where 20% faster than the best less lossy one. */
static void test_auto_pick(void **state) {
    (void)state;
    const hcomm_compress_t N = HCOMM_COMPRESS_NONE, B = HCOMM_COMPRESS_BF16,
                           T = HCOMM_COMPRESS_TOPK;
    assert_int_equal(hcomm_compress_auto_pick(100, 90, 0, N), N);
    assert_int_equal(hcomm_compress_auto_pick(100, 79, 0, N), B);
    assert_int_equal(hcomm_compress_auto_pick(100, 79, 70, T), B);
    assert_int_equal(hcomm_compress_auto_pick(100, 79, 63, T), T);
    assert_int_equal(hcomm_compress_auto_pick(100, 90, 79, T), T);
    assert_int_equal(hcomm_compress_auto_pick(100, 90, 81, T), N);
    assert_int_equal(hcomm_compress_auto_pick(100, 200, 1, N), N);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_half_round_trip),
        cmocka_unit_test(test_convert_bits),
        cmocka_unit_test(test_topk),
        cmocka_unit_test(test_topk_ties),
        cmocka_unit_test(test_topk_period_nan_in_place),
        cmocka_unit_test(test_onebit),
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_auto_pick)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
