/* A compressed call's local steps (compress_coll.c), each run where the
 * call's buffers are: the CPU kernels (compress.h) on host memory, the
 * CUDA kernels (compress_cuda.h) on the call's stream for GPU memory, with
 * the same results. A failed step records its status and the steps after
 * it do nothing, so that the algorithms read as a sequence; a call checks
 * hcomm_cx_sync before each collective, which also waits for the GPU's
 * steps so that the collective reads what they wrote. */
#ifndef HCOMM_COMPRESS_STEPS_H
#define HCOMM_COMPRESS_STEPS_H

#include "hcomm.h"

#include <stddef.h>
#include <stdint.h>

typedef struct {
    int device;            /* the GPU of the call's buffers; -1: host memory */
    void *stream;          /* where its kernels run */
    hcomm_status_t status; /* the first step that failed */
    void *scratch;         /* the GPU kernels' own, grown as they need */
    size_t scratch_bytes;
} hcomm_cx_t;

/* For a call whose buffers are host memory (device -1) or on device. */
hcomm_status_t hcomm_cx_init(hcomm_cx_t *x, int device, void *stream);
/* Waits for the GPU's steps; the first failure, or success. */
hcomm_status_t hcomm_cx_sync(hcomm_cx_t *x);
/* hcomm_cx_sync, then frees the scratch. */
hcomm_status_t hcomm_cx_finish(hcomm_cx_t *x);

/* Zeroed memory of bytes where the call's buffers are (NULL: failed);
 * given back with its size, once no step uses it (after a sync). */
void *hcomm_cx_alloc(hcomm_cx_t *x, size_t bytes);
void hcomm_cx_free(hcomm_cx_t *x, void *p, size_t bytes);

void hcomm_cx_zero(hcomm_cx_t *x, void *dst, size_t bytes);
void hcomm_cx_copy(hcomm_cx_t *x, void *dst, const void *src, size_t bytes);
/* dst = a + b (b NULL: a), n floats. */
void hcomm_cx_add(hcomm_cx_t *x, float *dst, const float *a, const float *b,
                  size_t n);
/* v /= divisor where divisor > 1. */
void hcomm_cx_divide(hcomm_cx_t *x, float *v, size_t n, int divisor);

/* compress.h's kernels. */
void hcomm_cx_to16(hcomm_cx_t *x, uint16_t *dst, const float *src, size_t n,
                   int bf16);
void hcomm_cx_from16(hcomm_cx_t *x, float *dst, const uint16_t *src, size_t n,
                     int bf16);
void hcomm_cx_sum16(hcomm_cx_t *x, uint16_t *out, const uint16_t *in,
                    size_t nin, size_t m, int bf16, int divisor);
void hcomm_cx_topk_pairs(hcomm_cx_t *x, const float *v, size_t n, size_t k,
                         uint32_t *pairs, float *residual);
void hcomm_cx_topk_add(hcomm_cx_t *x, float *out, const uint32_t *pairs,
                       size_t k, size_t n);
void hcomm_cx_onebit_encode(hcomm_cx_t *x, const float *v, size_t m,
                            uint8_t *rec, float *res);
void hcomm_cx_onebit_decode(hcomm_cx_t *x, float *acc, const uint8_t *rec,
                            size_t m, int add);

#endif
