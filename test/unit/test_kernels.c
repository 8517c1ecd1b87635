/* Unit tests of the CPU reduction kernels (src/kernels/reduce.h).
 *
 * Every expectation is computed independently of the kernels: integer
 * results by widening and wrapping by hand, float16 / bfloat16 conversions
 * from the definition of the formats with ldexp / frexp / rint, so a bug
 * shared by the kernels and their helpers still shows. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "kernels/reduce.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* --- independent reference conversions ---------------------------------- */

static float ref_half_to_float(uint16_t h) {
    int exp = (h >> 10) & 0x1f;
    int mant = h & 0x3ff;
    float mag;
    if (exp == 31)
        mag = mant ? NAN : INFINITY;
    else if (exp == 0)
        mag = ldexpf((float)mant, -24);
    else
        mag = ldexpf((float)(1024 + mant), exp - 25);
    return (h & 0x8000) ? -mag : mag;
}

static float ref_bf16_to_float(uint16_t b) {
    int exp = (b >> 7) & 0xff;
    int mant = b & 0x7f;
    float mag;
    if (exp == 255)
        mag = mant ? NAN : INFINITY;
    else if (exp == 0)
        mag = ldexpf((float)mant, -133);
    else
        mag = ldexpf((float)(128 + mant), exp - 134);
    return (b & 0x8000) ? -mag : mag;
}

/* Nearest value with `bits` significand bits (implicit one included) whose
 * smallest normal exponent is emin, ties to even (rint in the default
 * rounding mode), returned as (biased exponent << (bits - 1)) | fraction.
 * emax is the largest exponent; beyond it the result is the inf pattern. */
static uint32_t ref_round_bits(double ax, int bits, int emin, int emax) {
    int frac = bits - 1;
    uint32_t inf = (uint32_t)(emax - emin + 2) << frac;
    if (isinf(ax)) return inf;
    if (ax < ldexp(1.0, emin)) /* subnormal: a multiple of 2^(emin - frac) */
        return (uint32_t)rint(ldexp(ax, frac - emin));
    int e;
    frexp(ax, &e);
    e -= 1; /* ax = 1.f * 2^e */
    double m = rint(ldexp(ax, frac - e));
    if (m == ldexp(1.0, bits)) { /* rounded up to the next binade */
        m /= 2;
        e += 1;
    }
    if (e > emax) return inf;
    return ((uint32_t)(e - emin + 1) << frac) | ((uint32_t)m - (1u << frac));
}

static uint16_t ref_float_to_half(float f) {
    uint16_t sign = signbit(f) ? 0x8000 : 0;
    if (isnan(f)) return sign | 0x7e00;
    return sign | (uint16_t)ref_round_bits(fabs((double)f), 11, -14, 15);
}

static uint16_t ref_float_to_bf16(float f) {
    uint16_t sign = signbit(f) ? 0x8000 : 0;
    if (isnan(f)) return sign | 0x7fc0;
    return sign | (uint16_t)ref_round_bits(fabs((double)f), 8, -126, 127);
}

static uint32_t bits_of_float(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float float_of_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static int half_is_nan(uint16_t h) {
    return (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
}

static int bf16_is_nan(uint16_t b) {
    return (b & 0x7f80) == 0x7f80 && (b & 0x7f);
}

/* --- reference reductions, one element at a time ------------------------ */

static size_t elem_size(hcomm_dtype_t t) {
    switch (t) {
    case HCOMM_INT8:
    case HCOMM_UINT8:
        return 1;
    case HCOMM_FLOAT16:
    case HCOMM_BFLOAT16:
        return 2;
    case HCOMM_INT32:
    case HCOMM_UINT32:
    case HCOMM_FLOAT32:
        return 4;
    default:
        return 8;
    }
}

static const char *dtype_name(hcomm_dtype_t t) {
    static const char *names[] = {"int8",    "uint8",  "int32",   "uint32",
                                  "int64",   "uint64", "float16", "bfloat16",
                                  "float32", "float64"};
    return names[t];
}

/* Wrap an exact integer result into a signed type of `bits` bits. */
static int64_t wrap_signed(int64_t v, int bits) {
    uint64_t m = ((uint64_t)1 << bits) - 1;
    uint64_t u = (uint64_t)v & m;
    return u >> (bits - 1) ? (int64_t)u - (int64_t)(m + 1) : (int64_t)u;
}

static int64_t ref_small_signed(hcomm_op_t op, int64_t x, int64_t y, int bits) {
    switch (op) {
    case HCOMM_SUM:
    case HCOMM_AVG:
        return wrap_signed(x + y, bits);
    case HCOMM_PROD:
        return wrap_signed(x * y, bits);
    case HCOMM_MAX:
        return x > y ? x : y;
    default:
        return x < y ? x : y;
    }
}

static uint64_t ref_unsigned(hcomm_op_t op, uint64_t x, uint64_t y,
                             uint64_t mask) {
    switch (op) {
    case HCOMM_SUM:
    case HCOMM_AVG:
        return (x + y) & mask;
    case HCOMM_PROD:
        return (x * y) & mask;
    case HCOMM_MAX:
        return x > y ? x : y;
    default:
        return x < y ? x : y;
    }
}

static int64_t ref_int64(hcomm_op_t op, int64_t x, int64_t y) {
    uint64_t r;
    switch (op) {
    case HCOMM_SUM:
    case HCOMM_AVG:
        r = (uint64_t)x + (uint64_t)y;
        break;
    case HCOMM_PROD:
        r = (uint64_t)x * (uint64_t)y;
        break;
    case HCOMM_MAX:
        return x > y ? x : y;
    default:
        return x < y ? x : y;
    }
    /* Two's complement reading of r, without an out-of-range conversion. */
    return r <= (uint64_t)INT64_MAX ? (int64_t)r : -(int64_t)(~r) - 1;
}

/* The ops as specified: in fp32 for float32, float16 and bfloat16 (which
 * round the fp32 result), in fp64 for float64. */
static float ref_float_op(hcomm_op_t op, float x, float y) {
    switch (op) {
    case HCOMM_SUM:
    case HCOMM_AVG:
        return x + y;
    case HCOMM_PROD:
        return x * y;
    case HCOMM_MAX:
        return x > y ? x : y;
    default:
        return x < y ? x : y;
    }
}

static double ref_double_op(hcomm_op_t op, double x, double y) {
    switch (op) {
    case HCOMM_SUM:
    case HCOMM_AVG:
        return x + y;
    case HCOMM_PROD:
        return x * y;
    case HCOMM_MAX:
        return x > y ? x : y;
    default:
        return x < y ? x : y;
    }
}

#define LOAD(T, p) (*(const T *)(p))
#define STORE(T, p, v) (*(T *)(p) = (T)(v))

static void ref_reduce_elem(hcomm_dtype_t t, hcomm_op_t op, const void *a,
                            const void *b, void *out) {
    switch (t) {
    case HCOMM_INT8:
        STORE(int8_t, out,
              ref_small_signed(op, LOAD(int8_t, a), LOAD(int8_t, b), 8));
        break;
    case HCOMM_UINT8:
        STORE(uint8_t, out,
              ref_unsigned(op, LOAD(uint8_t, a), LOAD(uint8_t, b), 0xff));
        break;
    case HCOMM_INT32:
        STORE(int32_t, out,
              ref_small_signed(op, LOAD(int32_t, a), LOAD(int32_t, b), 32));
        break;
    case HCOMM_UINT32:
        STORE(uint32_t, out,
              ref_unsigned(op, LOAD(uint32_t, a), LOAD(uint32_t, b),
                           0xffffffffu));
        break;
    case HCOMM_INT64:
        STORE(int64_t, out, ref_int64(op, LOAD(int64_t, a), LOAD(int64_t, b)));
        break;
    case HCOMM_UINT64:
        STORE(
            uint64_t, out,
            ref_unsigned(op, LOAD(uint64_t, a), LOAD(uint64_t, b), UINT64_MAX));
        break;
    case HCOMM_FLOAT16:
        STORE(uint16_t, out,
              ref_float_to_half(
                  ref_float_op(op, ref_half_to_float(LOAD(uint16_t, a)),
                               ref_half_to_float(LOAD(uint16_t, b)))));
        break;
    case HCOMM_BFLOAT16:
        STORE(uint16_t, out,
              ref_float_to_bf16(
                  ref_float_op(op, ref_bf16_to_float(LOAD(uint16_t, a)),
                               ref_bf16_to_float(LOAD(uint16_t, b)))));
        break;
    case HCOMM_FLOAT32:
        STORE(float, out, ref_float_op(op, LOAD(float, a), LOAD(float, b)));
        break;
    default:
        STORE(double, out, ref_double_op(op, LOAD(double, a), LOAD(double, b)));
        break;
    }
}

static void ref_scale_elem(hcomm_dtype_t t, void *p, int d) {
    switch (t) {
    case HCOMM_INT8:
        STORE(int8_t, p, (long long)LOAD(int8_t, p) / d);
        break;
    case HCOMM_UINT8:
        STORE(uint8_t, p, (unsigned long long)LOAD(uint8_t, p) / d);
        break;
    case HCOMM_INT32:
        STORE(int32_t, p, (long long)LOAD(int32_t, p) / d);
        break;
    case HCOMM_UINT32:
        STORE(uint32_t, p, (unsigned long long)LOAD(uint32_t, p) / d);
        break;
    case HCOMM_INT64:
        STORE(int64_t, p, LOAD(int64_t, p) / d);
        break;
    case HCOMM_UINT64:
        STORE(uint64_t, p, LOAD(uint64_t, p) / (unsigned)d);
        break;
    case HCOMM_FLOAT16:
        STORE(
            uint16_t, p,
            ref_float_to_half(ref_half_to_float(LOAD(uint16_t, p)) / (float)d));
        break;
    case HCOMM_BFLOAT16:
        STORE(
            uint16_t, p,
            ref_float_to_bf16(ref_bf16_to_float(LOAD(uint16_t, p)) / (float)d));
        break;
    case HCOMM_FLOAT32:
        STORE(float, p, LOAD(float, p) / (float)d);
        break;
    default:
        STORE(double, p, LOAD(double, p) / (double)d);
        break;
    }
}

/* Exact comparison, except that any NaN matches an expected NaN (the
 * payload is the hardware's business); float16 / bfloat16 NaNs must be
 * quiet, as the kernels promise. */
static int same_elem(hcomm_dtype_t t, const void *want, const void *got) {
    switch (t) {
    case HCOMM_FLOAT16:
        if (half_is_nan(LOAD(uint16_t, want)))
            return half_is_nan(LOAD(uint16_t, got)) &&
                   (LOAD(uint16_t, got) & 0x200);
        break;
    case HCOMM_BFLOAT16:
        if (bf16_is_nan(LOAD(uint16_t, want)))
            return bf16_is_nan(LOAD(uint16_t, got)) &&
                   (LOAD(uint16_t, got) & 0x40);
        break;
    case HCOMM_FLOAT32:
        if (isnan(LOAD(float, want))) return isnan(LOAD(float, got));
        break;
    case HCOMM_FLOAT64:
        if (isnan(LOAD(double, want))) return isnan(LOAD(double, got));
        break;
    default:
        break;
    }
    return memcmp(want, got, elem_size(t)) == 0;
}

/* --- random inputs -------------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng(void) { /* xorshift64* */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dull;
}

/* Floats: mostly values within a few binades of each other, so sums round
 * for real; some specials (NaNs, infs, zeros, subnormals, extremes) and some
 * raw random bit patterns. 16-bit types and integers: raw random bits, which
 * already cover every class. */
static void fill_random(hcomm_dtype_t t, void *buf, size_t n) {
    static const uint32_t f32_special[] = {
        0x00000000, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000,
        0x7f800001, 0x7f7fffff, 0x00000001, 0x00800000, 0x3f800000};
    static const uint64_t f64_special[] = {0,
                                           0x8000000000000000ull,
                                           0x7ff0000000000000ull,
                                           0xfff0000000000000ull,
                                           0x7ff8000000000000ull,
                                           0x7ff0000000000001ull,
                                           0x7fefffffffffffffull,
                                           1,
                                           0x0010000000000000ull,
                                           0x3ff0000000000000ull};
    size_t es = elem_size(t);
    for (size_t i = 0; i < n; i++) {
        uint64_t r = rng();
        unsigned kind = (unsigned)(rng() % 16);
        unsigned char *p = (unsigned char *)buf + i * es;
        if (t == HCOMM_FLOAT32 && kind == 0) {
            uint32_t u = f32_special[r % 10];
            memcpy(p, &u, 4);
        } else if (t == HCOMM_FLOAT32 && kind > 1) {
            /* sign, exponent 127 +- 8, random mantissa */
            uint32_t u = (uint32_t)(r & 0x807fffff) |
                         (uint32_t)(119 + (r >> 32) % 17) << 23;
            memcpy(p, &u, 4);
        } else if (t == HCOMM_FLOAT64 && kind == 0) {
            memcpy(p, &f64_special[r % 10], 8);
        } else if (t == HCOMM_FLOAT64 && kind > 1) {
            uint64_t u = (r & 0x800fffffffffffffull) |
                         (uint64_t)(1015 + (rng() % 17)) << 52;
            memcpy(p, &u, 8);
        } else {
            memcpy(p, &r, es); /* little- or big-endian: random either way */
        }
    }
}

/* --- every dtype x op x count x aliasing ---------------------------------- */

enum { MODE_SEPARATE, MODE_DST_IS_A, MODE_DST_IS_B, MODE_ALL_SAME, N_MODES };
static const char *mode_names[] = {"dst separate", "dst == a", "dst == b",
                                   "dst == a == b"};
static const char *op_names[] = {"sum", "prod", "max", "min", "avg"};
static const size_t counts[] = {0, 1, 3, 17, 1000, 4099};

#define GUARD 0xa5

/* dst gets one guard element on each side, to catch writes past count, and
 * starts one element in, so it is not aligned like a and b. */
static void check_reduce(hcomm_dtype_t t, hcomm_op_t op, size_t n, int mode) {
    size_t es = elem_size(t);
    unsigned char *a = malloc((n + 1) * es);
    unsigned char *b = malloc((n + 1) * es);
    unsigned char *want = malloc((n + 1) * es);
    unsigned char *dbuf = malloc((n + 2) * es);
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(want);
    assert_non_null(dbuf);
    unsigned char *d = dbuf + es;
    fill_random(t, a, n);
    fill_random(t, b, n);
    memset(dbuf, GUARD, (n + 2) * es);

    const unsigned char *ea = a, *eb = mode == MODE_ALL_SAME ? a : b;
    for (size_t i = 0; i < n; i++)
        ref_reduce_elem(t, op, ea + i * es, eb + i * es, want + i * es);

    hcomm_reduce_fn_t fn = hcomm_kernel_reduce(t, op);
    assert_non_null(fn);
    switch (mode) {
    case MODE_SEPARATE:
        fn(d, a, b, n);
        break;
    case MODE_DST_IS_A:
        memcpy(d, a, n * es);
        fn(d, d, b, n);
        break;
    case MODE_DST_IS_B:
        memcpy(d, b, n * es);
        fn(d, a, d, n);
        break;
    default:
        memcpy(d, a, n * es);
        fn(d, d, d, n);
        break;
    }

    for (size_t i = 0; i < n; i++) {
        if (!same_elem(t, want + i * es, d + i * es)) {
            uint64_t w = 0, g = 0, x = 0, y = 0;
            memcpy(&w, want + i * es, es);
            memcpy(&g, d + i * es, es);
            memcpy(&x, ea + i * es, es);
            memcpy(&y, eb + i * es, es);
            fail_msg("%s %s n=%zu %s: [%zu] a=%#llx b=%#llx want %#llx got "
                     "%#llx",
                     dtype_name(t), op_names[op], n, mode_names[mode], i,
                     (unsigned long long)x, (unsigned long long)y,
                     (unsigned long long)w, (unsigned long long)g);
        }
    }
    for (size_t k = 0; k < es; k++) {
        assert_int_equal(dbuf[k], GUARD);
        assert_int_equal(dbuf[(n + 1) * es + k], GUARD);
    }
    free(a);
    free(b);
    free(want);
    free(dbuf);
}

static void test_reduce_dtype(void **state) {
    hcomm_dtype_t t = *(const hcomm_dtype_t *)*state;
    for (int op = 0; op < HCOMM_OP_COUNT; op++)
        for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++)
            for (int mode = 0; mode < N_MODES; mode++)
                check_reduce(t, (hcomm_op_t)op, counts[c], mode);
}

static void test_dispatch_range(void **state) {
    (void)state;
    for (int t = 0; t < HCOMM_DTYPE_COUNT; t++) {
        assert_non_null(hcomm_kernel_scale((hcomm_dtype_t)t));
        for (int op = 0; op < HCOMM_OP_COUNT; op++)
            assert_non_null(
                hcomm_kernel_reduce((hcomm_dtype_t)t, (hcomm_op_t)op));
        assert_null(hcomm_kernel_reduce((hcomm_dtype_t)t, HCOMM_OP_COUNT));
        assert_null(hcomm_kernel_reduce((hcomm_dtype_t)t, (hcomm_op_t)-1));
    }
    assert_null(hcomm_kernel_reduce(HCOMM_DTYPE_COUNT, HCOMM_SUM));
    assert_null(hcomm_kernel_reduce((hcomm_dtype_t)-1, HCOMM_SUM));
    assert_null(hcomm_kernel_reduce((hcomm_dtype_t)1000, HCOMM_MAX));
    assert_null(hcomm_kernel_scale(HCOMM_DTYPE_COUNT));
    assert_null(hcomm_kernel_scale((hcomm_dtype_t)-1));
}

/* --- integer wrap-around and signed compares ------------------------------ */

/* One element through the kernel: returns x op y. */
#define DEFINE_RED1(name, T, dtype)                                            \
    static T name(hcomm_op_t op, T x, T y) {                                   \
        T d = 0;                                                               \
        hcomm_kernel_reduce(dtype, op)(&d, &x, &y, 1);                         \
        return d;                                                              \
    }

DEFINE_RED1(red_i8, int8_t, HCOMM_INT8)
DEFINE_RED1(red_u8, uint8_t, HCOMM_UINT8)
DEFINE_RED1(red_i32, int32_t, HCOMM_INT32)
DEFINE_RED1(red_u32, uint32_t, HCOMM_UINT32)
DEFINE_RED1(red_i64, int64_t, HCOMM_INT64)
DEFINE_RED1(red_u64, uint64_t, HCOMM_UINT64)
DEFINE_RED1(red_f32, float, HCOMM_FLOAT32)

static uint16_t red_16(hcomm_dtype_t t, hcomm_op_t op, uint16_t x, uint16_t y) {
    uint16_t d = 0;
    hcomm_kernel_reduce(t, op)(&d, &x, &y, 1);
    return d;
}

static void test_int_wrap(void **state) {
    (void)state;
    assert_int_equal(red_i8(HCOMM_SUM, 127, 1), -128);
    assert_int_equal(red_i8(HCOMM_AVG, 127, 1), -128);
    assert_int_equal(red_i8(HCOMM_SUM, -128, -1), 127);
    assert_int_equal(red_i8(HCOMM_PROD, 16, 16), 0);
    assert_int_equal(red_i8(HCOMM_PROD, 127, 2), -2);
    assert_int_equal(red_i8(HCOMM_PROD, -128, -1), -128);
    assert_int_equal(red_i8(HCOMM_PROD, -3, 50), 106); /* -150 + 256 */
    assert_int_equal(red_u8(HCOMM_SUM, 255, 1), 0);
    assert_int_equal(red_u8(HCOMM_PROD, 16, 17), 16); /* 272 - 256 */
    assert_int_equal(red_u8(HCOMM_PROD, 255, 255), 1);
    assert_int_equal(red_i32(HCOMM_SUM, INT32_MAX, 1), INT32_MIN);
    assert_int_equal(red_i32(HCOMM_SUM, INT32_MIN, -1), INT32_MAX);
    assert_int_equal(red_i32(HCOMM_PROD, INT32_MIN, -1), INT32_MIN);
    assert_int_equal(red_i32(HCOMM_PROD, 65536, 65536), 0);
    assert_int_equal(red_i32(HCOMM_PROD, 65537, 65537), 131073);
    assert_true(red_u32(HCOMM_SUM, UINT32_MAX, 1) == 0);
    assert_true(red_u32(HCOMM_PROD, 0x80000000u, 2) == 0);
    assert_true(red_i64(HCOMM_SUM, INT64_MAX, 1) == INT64_MIN);
    assert_true(red_i64(HCOMM_SUM, INT64_MIN, -1) == INT64_MAX);
    assert_true(red_i64(HCOMM_PROD, INT64_MIN, -1) == INT64_MIN);
    assert_true(red_i64(HCOMM_PROD, INT64_MAX, 2) == -2);
    assert_true(red_u64(HCOMM_SUM, UINT64_MAX, 1) == 0);
    assert_true(red_u64(HCOMM_PROD, 1ull << 32, 1ull << 32) == 0);
    assert_true(red_u64(HCOMM_PROD, UINT64_MAX, UINT64_MAX) == 1);
}

static void test_int_compare(void **state) {
    (void)state;
    assert_int_equal(red_i8(HCOMM_MAX, -1, 1), 1);
    assert_int_equal(red_i8(HCOMM_MIN, -128, 127), -128);
    assert_int_equal(red_u8(HCOMM_MAX, 0xff, 1), 0xff);
    assert_int_equal(red_u8(HCOMM_MIN, 0xff, 1), 1);
    assert_int_equal(red_i32(HCOMM_MAX, -5, 3), 3);
    assert_int_equal(red_i32(HCOMM_MIN, INT32_MIN, INT32_MAX), INT32_MIN);
    assert_true(red_u32(HCOMM_MAX, 0x80000000u, 1) == 0x80000000u);
    assert_true(red_u32(HCOMM_MIN, 0x80000000u, 1) == 1);
    assert_true(red_i64(HCOMM_MAX, INT64_MIN, -1) == -1);
    assert_true(red_i64(HCOMM_MIN, INT64_MAX, -1) == -1);
    assert_true(red_u64(HCOMM_MAX, 1ull << 63, 1) == 1ull << 63);
    assert_true(red_u64(HCOMM_MIN, 1ull << 63, 1) == 1);
}

/* max / min are documented as a > b ? a : b and a < b ? a : b. */
static void test_float_maxmin_semantics(void **state) {
    (void)state;
    assert_true(red_f32(HCOMM_MAX, NAN, 1.0f) == 1.0f);
    assert_true(isnan(red_f32(HCOMM_MAX, 1.0f, NAN)));
    assert_true(red_f32(HCOMM_MIN, NAN, 1.0f) == 1.0f);
    assert_true(isnan(red_f32(HCOMM_MIN, 1.0f, NAN)));
    assert_true(signbit(red_f32(HCOMM_MAX, -0.0f, 0.0f)) == 0);
    assert_true(signbit(red_f32(HCOMM_MAX, 0.0f, -0.0f)) != 0);
    assert_true(red_f32(HCOMM_MAX, -INFINITY, -FLT_MAX) == -FLT_MAX);
    assert_true(red_f32(HCOMM_MIN, 2.0f, -3.0f) == -3.0f);
    /* float16 / bfloat16: same semantics through fp32; NaNs quiet. */
    assert_int_equal(red_16(HCOMM_FLOAT16, HCOMM_MAX, 0x7e00, 0x3c00), 0x3c00);
    assert_true(half_is_nan(red_16(HCOMM_FLOAT16, HCOMM_MAX, 0x3c00, 0x7c01)));
    assert_true(red_16(HCOMM_FLOAT16, HCOMM_MAX, 0x3c00, 0x7c01) & 0x200);
    assert_int_equal(red_16(HCOMM_FLOAT16, HCOMM_MIN, 0xbc00, 0x3c00), 0xbc00);
    assert_int_equal(red_16(HCOMM_BFLOAT16, HCOMM_MAX, 0x3f80, 0x4000), 0x4000);
    assert_true(bf16_is_nan(red_16(HCOMM_BFLOAT16, HCOMM_MIN, 0x3f80, 0x7f81)));
    assert_true(red_16(HCOMM_BFLOAT16, HCOMM_MIN, 0x3f80, 0x7f81) & 0x40);
}

/* --- float16 ----------------------------------------------------------------
 */

static void test_half_roundtrip_all(void **state) {
    (void)state;
    for (uint32_t h = 0; h <= 0xffff; h++) {
        float f = hcomm_half_to_float((uint16_t)h);
        uint16_t back = hcomm_float_to_half(f);
        if (half_is_nan((uint16_t)h)) {
            assert_true(isnan(f));
            assert_true(bits_of_float(f) & 0x00400000); /* quiet */
            assert_true(half_is_nan(back));
            assert_true(back & 0x200);
            assert_int_equal(back & 0x8000, h & 0x8000);
        } else {
            float want = ref_half_to_float((uint16_t)h);
            if (bits_of_float(f) != bits_of_float(want))
                fail_msg("half_to_float(%#x) = %a, want %a", h, (double)f,
                         (double)want);
            assert_int_equal(back, h);
        }
    }
}

static void check_to_half(float f) {
    uint16_t got = hcomm_float_to_half(f);
    uint16_t want = ref_float_to_half(f);
    if (isnan(f)) {
        if (!half_is_nan(got) || !(got & 0x200) ||
            (got & 0x8000) != (want & 0x8000))
            fail_msg("float_to_half(NaN %#x) = %#x", bits_of_float(f), got);
    } else if (got != want) {
        fail_msg("float_to_half(%a = %#x) = %#x, want %#x", (double)f,
                 bits_of_float(f), got, want);
    }
}

/* Every tie between adjacent halves, and the floats either side of it. */
static void test_half_rounding_ties(void **state) {
    (void)state;
    for (uint32_t h = 0; h < 0x7c00; h++) {
        double lo = ref_half_to_float((uint16_t)h);
        double hi = h == 0x7bff ? 65536.0 : ref_half_to_float((uint16_t)h + 1);
        float mid = (float)((lo + hi) / 2); /* exact: 12 significant bits */
        uint16_t even = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;
        assert_int_equal(hcomm_float_to_half(mid), even);
        assert_int_equal(hcomm_float_to_half(-mid), even | 0x8000);
        assert_int_equal(hcomm_float_to_half(nextafterf(mid, 0)), h);
        assert_int_equal(hcomm_float_to_half(nextafterf(mid, INFINITY)), h + 1);
        check_to_half(mid);
        check_to_half(nextafterf(mid, 0));
        check_to_half(nextafterf(mid, INFINITY));
    }
}

/* A spread of all float bit patterns against the reference. */
static void test_half_from_float_sample(void **state) {
    (void)state;
    for (uint64_t u = 0; u <= 0xffffffffu; u += 4093)
        check_to_half(float_of_bits((uint32_t)u));
}

static void test_half_special_values(void **state) {
    (void)state;
    /* Nearest even at ties: 1 + 2^-11 is halfway between 1 and 1 + 2^-10. */
    assert_int_equal(hcomm_float_to_half(1.0f + 0x1p-11f), 0x3c00);
    assert_int_equal(hcomm_float_to_half(1.0f + 3 * 0x1p-11f), 0x3c02);
    assert_int_equal(hcomm_float_to_half(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);
    assert_int_equal(hcomm_float_to_half(1.0f + 0x1p-11f - 0x1p-23f), 0x3c00);
    assert_int_equal(hcomm_float_to_half(-(1.0f + 0x1p-11f)), 0xbc00);
    /* Overflow: 65504 is the largest half, 65520 the tie with 2^16. */
    assert_int_equal(hcomm_float_to_half(65504.0f), 0x7bff);
    assert_int_equal(hcomm_float_to_half(65519.996f), 0x7bff);
    assert_int_equal(hcomm_float_to_half(65520.0f), 0x7c00);
    assert_int_equal(hcomm_float_to_half(1e10f), 0x7c00);
    assert_int_equal(hcomm_float_to_half(-FLT_MAX), 0xfc00);
    assert_int_equal(hcomm_float_to_half(INFINITY), 0x7c00);
    assert_int_equal(hcomm_float_to_half(-INFINITY), 0xfc00);
    /* Subnormals and underflow. */
    assert_int_equal(hcomm_float_to_half(0x1p-24f), 0x0001);
    assert_int_equal(hcomm_float_to_half(0x1p-25f), 0x0000); /* tie to 0 */
    assert_int_equal(hcomm_float_to_half(0x1.000002p-25f), 0x0001);
    assert_int_equal(hcomm_float_to_half(3 * 0x1p-25f), 0x0002);
    assert_int_equal(hcomm_float_to_half(1023.5f * 0x1p-24f), 0x0400);
    assert_int_equal(hcomm_float_to_half(1022.5f * 0x1p-24f), 0x03fe);
    assert_int_equal(hcomm_float_to_half(0x1p-14f), 0x0400);
    assert_int_equal(hcomm_float_to_half(-0x1p-24f), 0x8001);
    assert_int_equal(hcomm_float_to_half(0x1p-30f), 0x0000);
    assert_int_equal(hcomm_float_to_half(FLT_TRUE_MIN), 0x0000);
    assert_int_equal(hcomm_float_to_half(-0.0f), 0x8000);
    /* NaNs stay NaN, quiet, sign kept. */
    uint16_t q = hcomm_float_to_half(float_of_bits(0x7f800001)); /* sNaN */
    assert_true(half_is_nan(q) && (q & 0x200) && !(q & 0x8000));
    q = hcomm_float_to_half(float_of_bits(0xffc00000));
    assert_true(half_is_nan(q) && (q & 0x200) && (q & 0x8000));
    /* half -> float */
    assert_true(hcomm_half_to_float(0x0001) == 0x1p-24f);
    assert_true(hcomm_half_to_float(0x03ff) == 1023 * 0x1p-24f);
    assert_true(hcomm_half_to_float(0x8001) == -0x1p-24f);
    assert_true(hcomm_half_to_float(0x0400) == 0x1p-14f);
    assert_true(hcomm_half_to_float(0x7bff) == 65504.0f);
    assert_true(hcomm_half_to_float(0x3555) == 0x1.554p-2f);
    assert_true(hcomm_half_to_float(0x7c00) == INFINITY);
    assert_true(hcomm_half_to_float(0xfc00) == -INFINITY);
    assert_true(signbit(hcomm_half_to_float(0x8000)));
    float n = hcomm_half_to_float(0x7c01); /* signalling -> quiet */
    assert_true(isnan(n) && (bits_of_float(n) & 0x00400000));
    /* Reductions through fp32. */
    assert_int_equal(red_16(HCOMM_FLOAT16, HCOMM_SUM, 0x3c00, 0x3c00), 0x4000);
    assert_int_equal(red_16(HCOMM_FLOAT16, HCOMM_AVG, 0x3c00, 0x3c00), 0x4000);
    assert_int_equal(red_16(HCOMM_FLOAT16, HCOMM_SUM, 0x7bff, 0x7bff), 0x7c00);
    assert_int_equal(red_16(HCOMM_FLOAT16, HCOMM_SUM, 0x0001, 0x0001), 0x0002);
    assert_int_equal(red_16(HCOMM_FLOAT16, HCOMM_SUM, 0x3c00, 0x0001), 0x3c00);
    assert_int_equal(red_16(HCOMM_FLOAT16, HCOMM_PROD, 0x4000, 0xc200),
                     0xc600); /* 2 * -3 */
    /* 2^-14 * 2^-10 = 2^-24, the smallest subnormal; 2^-14 * 2^-11 = 2^-25
     * ties to 0; 2^-14 * 0.5 = 2^-15 is subnormal 0x200. */
    assert_int_equal(red_16(HCOMM_FLOAT16, HCOMM_PROD, 0x0400, 0x1400), 0x0001);
    assert_int_equal(red_16(HCOMM_FLOAT16, HCOMM_PROD, 0x0400, 0x1000), 0x0000);
    assert_int_equal(red_16(HCOMM_FLOAT16, HCOMM_PROD, 0x0400, 0x3800), 0x0200);
    assert_true(half_is_nan(red_16(HCOMM_FLOAT16, HCOMM_SUM, 0x7c00, 0xfc00)));
}

/* --- bfloat16 ---------------------------------------------------------------
 */

static void test_bf16(void **state) {
    (void)state;
    for (uint32_t b = 0; b <= 0xffff; b++) {
        float f = hcomm_bf16_to_float((uint16_t)b);
        uint16_t back = hcomm_float_to_bf16(f);
        if (bf16_is_nan((uint16_t)b)) {
            assert_true(isnan(f));
            assert_true(bf16_is_nan(back) && (back & 0x40));
            assert_int_equal(back & 0x8000, b & 0x8000);
        } else {
            float want = ref_bf16_to_float((uint16_t)b);
            assert_true(bits_of_float(f) == bits_of_float(want));
            assert_int_equal(back, b);
        }
    }
    for (uint64_t u = 0; u <= 0xffffffffu; u += 4093) {
        float f = float_of_bits((uint32_t)u);
        uint16_t got = hcomm_float_to_bf16(f);
        if (isnan(f)) {
            assert_true(bf16_is_nan(got) && (got & 0x40));
        } else if (got != ref_float_to_bf16(f)) {
            fail_msg("float_to_bf16(%#x) = %#x, want %#x", (uint32_t)u, got,
                     ref_float_to_bf16(f));
        }
    }
    /* Ties to even: 1 + 2^-8 is halfway between 1 and 1 + 2^-7. */
    assert_int_equal(hcomm_float_to_bf16(1.0f + 0x1p-8f), 0x3f80);
    assert_int_equal(hcomm_float_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);
    assert_int_equal(hcomm_float_to_bf16(float_of_bits(0x3f808001)), 0x3f81);
    assert_int_equal(hcomm_float_to_bf16(float_of_bits(0x3f807fff)), 0x3f80);
    assert_int_equal(hcomm_float_to_bf16(float_of_bits(0x00008000)), 0x0000);
    assert_int_equal(hcomm_float_to_bf16(float_of_bits(0x00018000)), 0x0002);
    assert_int_equal(hcomm_float_to_bf16(FLT_MAX), 0x7f80); /* overflow */
    assert_int_equal(hcomm_float_to_bf16(float_of_bits(0x7f7f7fff)), 0x7f7f);
    assert_int_equal(hcomm_float_to_bf16(-INFINITY), 0xff80);
    uint16_t q = hcomm_float_to_bf16(float_of_bits(0x7f800001));
    assert_true(bf16_is_nan(q) && (q & 0x40));
    q = hcomm_float_to_bf16(float_of_bits(0xff800001));
    assert_true(bf16_is_nan(q) && (q & 0x40) && (q & 0x8000));
    assert_true(isnan(hcomm_bf16_to_float(0x7f81)));
    assert_true(bits_of_float(hcomm_bf16_to_float(0x7f81)) & 0x00400000);
    assert_true(hcomm_bf16_to_float(0x0001) == 0x1p-133f);
    assert_int_equal(red_16(HCOMM_BFLOAT16, HCOMM_SUM, 0x3f80, 0x3f80), 0x4000);
    /* 256 + 1 = 257 is a tie between 256 and 258: even is 256. */
    assert_int_equal(red_16(HCOMM_BFLOAT16, HCOMM_SUM, 0x4380, 0x3f80), 0x4380);
    /* 258 + 1 = 259 is a tie between 258 and 260: even is 260. */
    assert_int_equal(red_16(HCOMM_BFLOAT16, HCOMM_SUM, 0x4381, 0x3f80), 0x4382);
    assert_true(bf16_is_nan(red_16(HCOMM_BFLOAT16, HCOMM_SUM, 0x7f80, 0xff80)));
}

/* --- scale ------------------------------------------------------------------
 */

static void test_scale_values(void **state) {
    (void)state;
    int8_t i8[] = {-7, 127, -128, -128, 100, 7};
    hcomm_kernel_scale(HCOMM_INT8)(i8, 3, 2);
    hcomm_kernel_scale(HCOMM_INT8)(i8 + 3, 1, 127);
    hcomm_kernel_scale(HCOMM_INT8)(i8 + 4, 1, 1000);
    assert_int_equal(i8[0], -3);
    assert_int_equal(i8[1], 63);
    assert_int_equal(i8[2], -64);
    assert_int_equal(i8[3], -1);
    assert_int_equal(i8[4], 0);
    assert_int_equal(i8[5], 7); /* past count: untouched */

    uint8_t u8[] = {255, 255, 3};
    hcomm_kernel_scale(HCOMM_UINT8)(u8, 1, 4);
    hcomm_kernel_scale(HCOMM_UINT8)(u8 + 1, 1, 256); /* wider than uint8 */
    assert_int_equal(u8[0], 63);
    assert_int_equal(u8[1], 0);
    assert_int_equal(u8[2], 3);

    int32_t i32[] = {-7, 7, INT32_MIN, INT32_MAX};
    hcomm_kernel_scale(HCOMM_INT32)(i32, 4, 2);
    assert_int_equal(i32[0], -3);
    assert_int_equal(i32[1], 3);
    assert_int_equal(i32[2], -1073741824);
    assert_int_equal(i32[3], 1073741823);

    uint32_t u32[] = {UINT32_MAX, 10};
    hcomm_kernel_scale(HCOMM_UINT32)(u32, 2, INT_MAX);
    assert_true(u32[0] == 2 && u32[1] == 0);

    int64_t i64[] = {-7, INT64_MIN};
    hcomm_kernel_scale(HCOMM_INT64)(i64, 2, 3);
    assert_true(i64[0] == -2);
    assert_true(i64[1] == -3074457345618258602ll);

    uint64_t u64[] = {UINT64_MAX, 5};
    hcomm_kernel_scale(HCOMM_UINT64)(u64, 2, 3);
    assert_true(u64[0] == 0x5555555555555555ull && u64[1] == 1);

    /* float16: 1/3 rounds to 0x3555; subnormal ties go to even. */
    uint16_t f16[] = {0x3c00, 0x0003, 0x0001, 0x7c00, 0x7e00, 0xc000};
    hcomm_kernel_scale(HCOMM_FLOAT16)(f16, 1, 3);
    hcomm_kernel_scale(HCOMM_FLOAT16)(f16 + 1, 5, 2);
    assert_int_equal(f16[0], 0x3555);
    assert_int_equal(f16[0], hcomm_float_to_half(1.0f / 3.0f));
    assert_int_equal(f16[1], 0x0002); /* 1.5 ulp -> 2 */
    assert_int_equal(f16[2], 0x0000); /* 0.5 ulp -> 0 */
    assert_int_equal(f16[3], 0x7c00);
    assert_true(half_is_nan(f16[4]));
    assert_int_equal(f16[5], 0xbc00);

    uint16_t bf[] = {0x3f80, 0x4040};
    hcomm_kernel_scale(HCOMM_BFLOAT16)(bf, 2, 3);
    assert_int_equal(bf[0], 0x3eab);
    assert_int_equal(bf[0], hcomm_float_to_bf16(1.0f / 3.0f));
    assert_int_equal(bf[1], 0x3f80);

    float f32[] = {1.0f, -7.0f};
    hcomm_kernel_scale(HCOMM_FLOAT32)(f32, 2, 3);
    assert_true(bits_of_float(f32[0]) == 0x3eaaaaab);
    assert_true(f32[1] == -7.0f / 3.0f);

    double f64[] = {1.0, 10.0};
    hcomm_kernel_scale(HCOMM_FLOAT64)(f64, 2, 3);
    assert_true(f64[0] == 0x1.5555555555555p-2);
    assert_true(f64[1] == 10.0 / 3.0);
}

static void test_scale_random(void **state) {
    (void)state;
    static const int divisors[] = {1, 2, 3, 7, 8, 255, 256, 1000, INT_MAX};
    static const size_t scounts[] = {0, 1, 17, 1000};
    for (int t = 0; t < HCOMM_DTYPE_COUNT; t++) {
        size_t es = elem_size((hcomm_dtype_t)t);
        for (size_t c = 0; c < sizeof scounts / sizeof scounts[0]; c++) {
            for (size_t k = 0; k < sizeof divisors / sizeof divisors[0]; k++) {
                size_t n = scounts[c];
                unsigned char *buf = malloc((n + 1) * es);
                unsigned char *want = malloc((n + 1) * es);
                assert_non_null(buf);
                assert_non_null(want);
                fill_random((hcomm_dtype_t)t, buf, n + 1);
                memcpy(want, buf, (n + 1) * es);
                for (size_t i = 0; i < n; i++)
                    ref_scale_elem((hcomm_dtype_t)t, want + i * es,
                                   divisors[k]);
                hcomm_kernel_scale((hcomm_dtype_t)t)(buf, n, divisors[k]);
                for (size_t i = 0; i < n; i++)
                    if (!same_elem((hcomm_dtype_t)t, want + i * es,
                                   buf + i * es))
                        fail_msg("scale %s n=%zu / %d: element %zu differs",
                                 dtype_name((hcomm_dtype_t)t), n, divisors[k],
                                 i);
                /* the element past count is untouched, bit for bit */
                assert_memory_equal(buf + n * es, want + n * es, es);
                free(buf);
                free(want);
            }
        }
    }
}

/* --- main -------------------------------------------------------------------
 */

/* Buffers at odd byte offsets (a packed message's float at offset 1):
 * results exact, bit for bit those of aligned copies, every dtype x op,
 * in place and not, and the scaling. Built with -fsanitize=undefined (the
 * sanitizer job in .ci/run), a typed load from these addresses is a
 * misaligned-access error that ends the test. */
static void test_unaligned(void **state) {
    (void)state;
    static const size_t ucounts[] = {1, 7, 33, 1001};
    for (int t = 0; t < HCOMM_DTYPE_COUNT; t++) {
        size_t es = elem_size((hcomm_dtype_t)t);
        for (size_t c = 0; c < sizeof ucounts / sizeof ucounts[0]; c++) {
            size_t n = ucounts[c], bytes = n * es;
            unsigned char *a = malloc(bytes), *b = malloc(bytes);
            unsigned char *want = malloc(bytes), *raw = malloc(3 * bytes + 8);
            assert_non_null(a);
            assert_non_null(b);
            assert_non_null(want);
            assert_non_null(raw);
            fill_random((hcomm_dtype_t)t, a, n);
            fill_random((hcomm_dtype_t)t, b, n);
            /* a, b and dst at offsets 1, 3 and 5 of one allocation. */
            unsigned char *ua = raw + 1, *ub = raw + bytes + 3;
            unsigned char *ud = raw + 2 * bytes + 5;
            for (int op = 0; op < HCOMM_OP_COUNT; op++) {
                hcomm_reduce_fn_t fn =
                    hcomm_kernel_reduce((hcomm_dtype_t)t, (hcomm_op_t)op);
                fn(want, a, b, n);
                memcpy(ua, a, bytes);
                memcpy(ub, b, bytes);
                fn(ud, ua, ub, n);
                assert_memory_equal(ud, want, bytes);
                fn(ua, ua, ub, n); /* in place */
                assert_memory_equal(ua, want, bytes);
            }
            hcomm_kernel_scale((hcomm_dtype_t)t)(want, n, 3);
            hcomm_kernel_scale((hcomm_dtype_t)t)(ua, n, 3);
            assert_memory_equal(ua, want, bytes);
            free(a);
            free(b);
            free(want);
            free(raw);
        }
    }
}

static hcomm_dtype_t all_dtypes[HCOMM_DTYPE_COUNT] = {
    HCOMM_INT8,   HCOMM_UINT8,   HCOMM_INT32,    HCOMM_UINT32,  HCOMM_INT64,
    HCOMM_UINT64, HCOMM_FLOAT16, HCOMM_BFLOAT16, HCOMM_FLOAT32, HCOMM_FLOAT64};

#define REDUCE_TEST(name, t)                                                   \
    { "reduce_" name, test_reduce_dtype, NULL, NULL, &all_dtypes[t] }

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dispatch_range),
        REDUCE_TEST("int8", HCOMM_INT8),
        REDUCE_TEST("uint8", HCOMM_UINT8),
        REDUCE_TEST("int32", HCOMM_INT32),
        REDUCE_TEST("uint32", HCOMM_UINT32),
        REDUCE_TEST("int64", HCOMM_INT64),
        REDUCE_TEST("uint64", HCOMM_UINT64),
        REDUCE_TEST("float16", HCOMM_FLOAT16),
        REDUCE_TEST("bfloat16", HCOMM_BFLOAT16),
        REDUCE_TEST("float32", HCOMM_FLOAT32),
        REDUCE_TEST("float64", HCOMM_FLOAT64),
        cmocka_unit_test(test_int_wrap),
        cmocka_unit_test(test_int_compare),
        cmocka_unit_test(test_float_maxmin_semantics),
        cmocka_unit_test(test_half_roundtrip_all),
        cmocka_unit_test(test_half_rounding_ties),
        cmocka_unit_test(test_half_from_float_sample),
        cmocka_unit_test(test_half_special_values),
        cmocka_unit_test(test_bf16),
        cmocka_unit_test(test_scale_values),
        cmocka_unit_test(test_scale_random),
        cmocka_unit_test(test_unaligned),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
