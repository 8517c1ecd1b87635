/* CPU reduction kernels: every dtype x op, plus the scaling that turns a sum
 * into an average. Written as plain loops the compiler vectorises. */
#ifndef HCOMM_KERNELS_REDUCE_H
#define HCOMM_KERNELS_REDUCE_H

#include "hcomm.h"

#include <stddef.h>

/* dst[i] = a[i] op b[i] for i < count. dst may equal a or b (exactly, not
 * partially overlapping). For HCOMM_AVG this is the sum; the caller applies
 * the scale kernel once at the end. */
typedef void (*hcomm_reduce_fn_t)(void *dst, const void *a, const void *b,
                                  size_t count);

/* buf[i] = buf[i] / divisor (integers: C division, truncating toward zero;
 * float16/bfloat16: computed in fp32, rounded to nearest even). */
typedef void (*hcomm_scale_fn_t)(void *buf, size_t count, int divisor);

/* NULL when dtype or op is out of range. */
hcomm_reduce_fn_t hcomm_kernel_reduce(hcomm_dtype_t dtype, hcomm_op_t op);
hcomm_scale_fn_t hcomm_kernel_scale(hcomm_dtype_t dtype);
/* Whether this x86-64 CPU runs AVX2 code (probed once); 0 elsewhere. */
int hcomm_kernel_has_avx2(void);

/* Scalar conversions, exact to IEEE rounding (nearest even), NaN kept. */
float hcomm_half_to_float(uint16_t h);
uint16_t hcomm_float_to_half(float f);
float hcomm_bf16_to_float(uint16_t b);
uint16_t hcomm_float_to_bf16(float f);

#endif
