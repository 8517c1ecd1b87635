/* The compressors' CUDA kernels (compress_cuda.cu): compress.h's CPU
 * kernels on device (or managed, or mapped) memory, enqueued on a stream,
 * with the same results. Two exceptions: NaN payloads, and the 1-bit
 * scale, whose sum runs in another order (the sender's scale travels with
 * the signs, so every rank still uses the same one). Each returns a
 * cudaError_t (0: enqueued). */
#ifndef HCOMM_COMPRESS_CUDA_H
#define HCOMM_COMPRESS_CUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* hcomm_cmp_to16 and hcomm_cmp_from16. */
int hcomm_cuda_cmp_to16(uint16_t *dst, const float *src, size_t n, int bf16,
                        void *stream);
int hcomm_cuda_cmp_from16(float *acc, const uint16_t *src, size_t n, int bf16,
                          int add, void *stream);
/* hcomm_cmp_sum16: out = the 16-bit rounding of the fp32 sum of the nin
 * chunks of m values at in (chunk p at in + p * m, added in that order),
 * divided by divisor when it is above 1. */
int hcomm_cuda_cmp_sum16(uint16_t *out, const uint16_t *in, size_t nin,
                         size_t m, int bf16, int divisor, void *stream);

/* Device scratch hcomm_cuda_topk_pairs needs for n values (n < 2^31). */
size_t hcomm_cuda_topk_scratch(size_t n);
/* hcomm_topk_pairs: the k (1 <= k <= n) values of x of largest magnitude
 * as (index, value bits) pairs in increasing index order; where residual
 * is not NULL, residual = x with those k set to 0 (residual may be x). */
int hcomm_cuda_topk_pairs(const float *x, size_t n, size_t k, uint32_t *pairs,
                          float *residual, void *scratch, size_t scratch_bytes,
                          void *stream);
/* hcomm_topk_add: out[index] += value for each of the k pairs whose index
 * is below n. The indices of one call must differ (one rank's selection);
 * the calls for several ranks run in stream order. */
int hcomm_cuda_topk_add(float *out, const uint32_t *pairs, size_t k, size_t n,
                        void *stream);

/* Device scratch hcomm_cuda_onebit_encode needs. */
size_t hcomm_cuda_onebit_scratch(void);
/* hcomm_onebit_encode: rec = the scale (float, the mean of |x|), then the
 * signs of x packed 8 to a byte (rec 4-byte aligned); where res is not
 * NULL, res = x - scale * sign. */
int hcomm_cuda_onebit_encode(const float *x, size_t m, uint8_t *rec, float *res,
                             void *scratch, void *stream);
/* hcomm_onebit_decode. */
int hcomm_cuda_onebit_decode(float *acc, const uint8_t *rec, size_t m, int add,
                             void *stream);

#ifdef __cplusplus
}
#endif
#endif
