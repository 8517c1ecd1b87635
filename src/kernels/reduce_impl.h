/* Private to src/kernels: the float16 / bfloat16 <-> fp32 conversions as
 * static inline functions, so the reduction loops can inline (and, where the
 * target allows, vectorise) them. half.c exports them under the public names
 * of reduce.h.
 *
 * Integer bit manipulation only, except two float operations that are exact
 * (int -> float of a value < 2^24, and a multiply by a power of two with a
 * normal result), so the results do not depend on the rounding mode or on
 * flush-to-zero. NaNs come out quiet with their top payload bits kept. */
#ifndef HCOMM_KERNELS_REDUCE_IMPL_H
#define HCOMM_KERNELS_REDUCE_IMPL_H

#include <stdint.h>
#include <string.h>

#define F32_QUIET_BIT 0x00400000u
#define F32_INF 0x7f800000u

static inline uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* mask_if: all-ones when c is true, else 0; select_bits(m, x, y) picks x
 * where m is set. The conversions compute every case and select with masks:
 * plain ternaries leave branches that stop gcc vectorising the loops. */
static inline uint32_t mask_if(int c) {
    return 0u - (uint32_t)c;
}

static inline uint32_t select_bits(uint32_t m, uint32_t x, uint32_t y) {
    return (x & m) | (y & ~m);
}

/* binary16 -> fp32 is exact: every half is a float. */
static inline float half_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = h & 0x7c00u;
    uint32_t mant = h & 0x3ffu;
    uint32_t body = (uint32_t)(h & 0x7fffu) << 13; /* exponent and mantissa */
    /* Normal: rebias the exponent 15 -> 127. */
    uint32_t normal = body + ((127u - 15u) << 23);
    /* Zero / subnormal: mant * 2^-24, exact and a normal float. */
    uint32_t tiny = f32_bits((float)(int32_t)mant * 0x1p-24f);
    /* Inf / NaN: rebias 31 -> 255; a NaN is made quiet. */
    uint32_t special =
        (body + ((255u - 31u) << 23)) | (mask_if(mant != 0) & F32_QUIET_BIT);
    uint32_t bits = select_bits(mask_if(exp == 0), tiny, normal);
    bits = select_bits(mask_if(exp == 0x7c00u), special, bits);
    return f32_from_bits(bits | sign);
}

/* fp32 -> binary16, rounded to nearest, ties to even. Rounding off k low
 * bits: adding (2^(k-1) - 1) + the lowest kept bit carries exactly when the
 * dropped part is above half, or is half and the kept part odd. A carry out
 * of the mantissa bumps the exponent, which is right (subnormal 0x3ff ->
 * 0x400, the smallest normal; 65520 -> 0x7c00, inf). */
static inline uint16_t f32_to_half(float f) {
    uint32_t u = f32_bits(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7fffffffu;
    /* [2^-14, 2^16): normal half; rebias 127 -> 15, drop 13 bits. */
    uint32_t normal =
        (a - ((127u - 15u) << 23) + 0xfffu + ((a >> 13) & 1u)) >> 13;
    /* [2^-25, 2^-14): subnormal half = m * 2^(e - 126) for the 24-bit
     * significand m and biased exponent e in [102, 112]. e is clamped so the
     * shift stays in range when this case is not the one selected. */
    uint32_t e = a >> 23;
    e = e < 102u ? 102u : e;
    e = e > 112u ? 112u : e;
    uint32_t shift = 126u - e; /* 14 .. 24 */
    uint32_t m = (a & 0x7fffffu) | 0x800000u;
    uint32_t sub =
        (m + ((1u << (shift - 1)) - 1u) + ((m >> shift) & 1u)) >> shift;
    /* NaN: quiet, with the top of the payload kept. */
    uint32_t nan = 0x7e00u | ((a >> 13) & 0x3ffu);
    /* Below 2^-25 the result is 0 (2^-25 itself ties to 0). */
    uint32_t r = sub & mask_if(a >= 0x33000000u);
    r = select_bits(mask_if(a >= 0x38800000u), normal, r);
    r = select_bits(mask_if(a >= 0x47800000u), 0x7c00u, r); /* >= 2^16, inf */
    r = select_bits(mask_if(a > F32_INF), nan, r);
    return (uint16_t)(sign | r);
}

/* bfloat16 is the top half of an fp32: exact. The _raw form leaves a
 * signalling NaN signalling; the kernels use it, as f32_to_bf16 quiets
 * whatever NaN reaches it, which gives the same bits for less work. */
static inline float bf16_to_f32_raw(uint16_t b) {
    return f32_from_bits((uint32_t)b << 16);
}

static inline float bf16_to_f32(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    if ((u & 0x7fffffffu) > F32_INF) u |= F32_QUIET_BIT;
    return f32_from_bits(u);
}

/* fp32 -> bfloat16, nearest even; overflow carries into inf by itself. */
static inline uint16_t f32_to_bf16(float f) {
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > F32_INF) /* NaN: keep it NaN and quiet */
        return (uint16_t)((u >> 16) | 0x0040u);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

#endif
