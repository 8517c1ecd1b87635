/* The public float16 / bfloat16 scalar conversions (reduce.h); the bodies
 * live in reduce_impl.h so the reduction loops inline them. */
#include "kernels/reduce.h"
#include "kernels/reduce_impl.h"

float hcomm_half_to_float(uint16_t h) {
    return half_to_f32(h);
}

uint16_t hcomm_float_to_half(float f) {
    return f32_to_half(f);
}

float hcomm_bf16_to_float(uint16_t b) {
    return bf16_to_f32(b);
}

uint16_t hcomm_float_to_bf16(float f) {
    return f32_to_bf16(f);
}
