/* CUDA reduction kernels (reduce_cuda.cu), callable from C: every dtype x
 * op of hcomm.h on device (or managed, or mapped) memory, enqueued on a
 * stream. Semantics are the CPU kernels' (reduce.h): integers wrap around,
 * float16 and bfloat16 are computed in fp32 and rounded to nearest even
 * once, max/min are `a > b ? a : b` / `a < b ? a : b`. NaN payloads may
 * differ from the CPU's (GPUs return a canonical NaN from arithmetic). */
#ifndef HCOMM_KERNELS_REDUCE_CUDA_H
#define HCOMM_KERNELS_REDUCE_CUDA_H

#include "hcomm_types.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Most inputs one launch reduces. */
#define HCOMM_CUDA_MAX_SRCS 16

/* dst[i] = srcs[0][i] op srcs[1][i] op ... op srcs[nsrc-1][i], accumulated
 * in that order, then divided by divisor when divisor > 1 (HCOMM_AVG passes
 * the rank count; other ops 0), stored once; also into dst2 when it is not
 * NULL. nsrc 1 is a copy (or a scaling, with divisor). dst may be one of
 * the sources, exactly. Returns a cudaError_t (0: enqueued). */
int hcomm_cuda_reduce(void *dst, void *dst2, const void *const *srcs, int nsrc,
                      size_t count, hcomm_dtype_t dtype, hcomm_op_t op,
                      int divisor, void *stream);

/* buf[i] /= divisor, in place (AVG's division after a sum). */
static inline int hcomm_cuda_divide(void *buf, size_t count,
                                    hcomm_dtype_t dtype, int divisor,
                                    void *stream) {
    const void *srcs[1] = {buf};
    return hcomm_cuda_reduce(buf, NULL, srcs, 1, count, dtype, HCOMM_SUM,
                             divisor, stream);
}

/* dst = src, bytes of device memory, as a kernel (no copy engine). */
int hcomm_cuda_copy(void *dst, const void *src, size_t bytes, void *stream);

#ifdef __cplusplus
}
#endif
#endif
