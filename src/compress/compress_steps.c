/* A compressed call's steps on the CPU or the GPU (compress_steps.h). */
#include "compress/compress_steps.h"
#include "compress/compress.h"
#include "compress/compress_cuda.h"
#include "core/gpu.h"
#include "core/log.h"
#include "kernels/reduce_cuda.h"

#include <stdlib.h>
#include <string.h>

#ifdef HAVE_CUDA
/* A GPU step's cudaError_t (0: enqueued) into the call's status. */
static void gpu_step(hcomm_cx_t *x, int err, const char *what) {
    if (err) x->status = hcomm_gpu_error(err, what);
}
#define ON_GPU(x, what, call) gpu_step((x), (call), (what))

/* The GPU kernels' scratch, at least bytes of it: a larger one replaces
 * the old once the steps that use it are done. */
static void *scratch(hcomm_cx_t *x, size_t bytes) {
    if (x->scratch_bytes >= bytes) return x->scratch;
    if (hcomm_cx_sync(x) != HCOMM_SUCCESS) return NULL;
    if (x->scratch)
        hcomm_gpu_free(HCOMM_GPU_POOL_DEVICE, x->device, x->scratch,
                       x->scratch_bytes);
    x->scratch_bytes = 0;
    if (!(x->scratch =
              hcomm_gpu_alloc(HCOMM_GPU_POOL_DEVICE, x->device, bytes))) {
        x->status = HCOMM_ERR_NO_MEMORY;
        return NULL;
    }
    x->scratch_bytes = bytes;
    return x->scratch;
}
#else
/* Never reached: without CUDA no call's buffers are GPU memory. */
#define ON_GPU(x, what, call) ((void)(x))
#endif

#define ON_CPU(x) ((x)->device < 0)

hcomm_status_t hcomm_cx_init(hcomm_cx_t *x, int device, void *stream) {
    memset(x, 0, sizeof(*x));
    x->device = device;
    x->stream = stream;
#ifndef HAVE_CUDA
    if (device >= 0)
        return x->status = hcomm_error(HCOMM_ERR_UNSUPPORTED,
                                       "compression on GPU memory: HCOMM "
                                       "was built without CUDA");
#endif
    return HCOMM_SUCCESS;
}

hcomm_status_t hcomm_cx_sync(hcomm_cx_t *x) {
#ifdef HAVE_CUDA
    if (!ON_CPU(x)) {
        hcomm_status_t st = hcomm_gpu_stream_sync(x->stream);
        if (x->status == HCOMM_SUCCESS) x->status = st;
    }
#endif
    return x->status;
}

hcomm_status_t hcomm_cx_finish(hcomm_cx_t *x) {
    hcomm_status_t st = hcomm_cx_sync(x);
#ifdef HAVE_CUDA
    if (x->scratch)
        hcomm_gpu_free(HCOMM_GPU_POOL_DEVICE, x->device, x->scratch,
                       x->scratch_bytes);
    x->scratch = NULL;
#endif
    return st;
}

void *hcomm_cx_alloc(hcomm_cx_t *x, size_t bytes) {
    void *p = NULL;
    if (x->status) return NULL;
    if (ON_CPU(x)) {
        p = calloc(1, bytes ? bytes : 1);
    } else {
#ifdef HAVE_CUDA
        p = hcomm_gpu_alloc(HCOMM_GPU_POOL_DEVICE, x->device,
                            bytes ? bytes : 1);
#endif
    }
    if (!p)
        x->status = hcomm_error(HCOMM_ERR_NO_MEMORY,
                                "compression: no memory for %zu bytes%s", bytes,
                                ON_CPU(x) ? "" : " of GPU scratch");
    else if (!ON_CPU(x))
        hcomm_cx_zero(x, p, bytes);
    return p;
}

void hcomm_cx_free(hcomm_cx_t *x, void *p, size_t bytes) {
    if (!p) return;
    if (ON_CPU(x)) {
        free(p);
        return;
    }
#ifdef HAVE_CUDA
    hcomm_gpu_free(HCOMM_GPU_POOL_DEVICE, x->device, p, bytes ? bytes : 1);
#else
    (void)bytes;
#endif
}

void hcomm_cx_zero(hcomm_cx_t *x, void *dst, size_t bytes) {
    if (x->status) return;
    if (ON_CPU(x)) {
        memset(dst, 0, bytes);
        return;
    }
#ifdef HAVE_CUDA
    hcomm_status_t st = hcomm_gpu_zero_async(dst, bytes, x->stream);
    if (st != HCOMM_SUCCESS) x->status = st;
#endif
}

void hcomm_cx_copy(hcomm_cx_t *x, void *dst, const void *src, size_t bytes) {
    if (x->status || dst == src) return;
    if (ON_CPU(x)) {
        memmove(dst, src, bytes);
        return;
    }
#ifdef HAVE_CUDA
    hcomm_status_t st = hcomm_gpu_copy_async(dst, src, bytes, x->stream);
    if (st != HCOMM_SUCCESS) x->status = st;
#endif
}

void hcomm_cx_add(hcomm_cx_t *x, float *dst, const float *a, const float *b,
                  size_t n) {
    if (x->status) return;
    if (!b) {
        hcomm_cx_copy(x, dst, a, n * sizeof(float));
    } else if (ON_CPU(x)) {
        for (size_t i = 0; i < n; i++)
            dst[i] = a[i] + b[i];
    } else {
        ON_GPU(x, "adding the residual",
               hcomm_cuda_reduce(dst, NULL, (const void *const[]){a, b}, 2, n,
                                 HCOMM_FLOAT32, HCOMM_SUM, 0, x->stream));
    }
}

void hcomm_cx_divide(hcomm_cx_t *x, float *v, size_t n, int divisor) {
    if (x->status || divisor <= 1) return;
    if (ON_CPU(x)) {
        for (size_t i = 0; i < n; i++)
            v[i] /= (float)divisor;
    } else {
        ON_GPU(x, "averaging",
               hcomm_cuda_divide(v, n, HCOMM_FLOAT32, divisor, x->stream));
    }
}

void hcomm_cx_to16(hcomm_cx_t *x, uint16_t *dst, const float *src, size_t n,
                   int bf16) {
    if (x->status) return;
    if (ON_CPU(x))
        hcomm_cmp_to16(dst, src, n, bf16);
    else
        ON_GPU(x, "16-bit conversion",
               hcomm_cuda_cmp_to16(dst, src, n, bf16, x->stream));
}

void hcomm_cx_from16(hcomm_cx_t *x, float *dst, const uint16_t *src, size_t n,
                     int bf16) {
    if (x->status) return;
    if (ON_CPU(x))
        hcomm_cmp_from16(dst, src, n, bf16, 0);
    else
        ON_GPU(x, "16-bit conversion",
               hcomm_cuda_cmp_from16(dst, src, n, bf16, 0, x->stream));
}

void hcomm_cx_sum16(hcomm_cx_t *x, uint16_t *out, const uint16_t *in,
                    size_t nin, size_t m, int bf16, int divisor) {
    if (x->status) return;
    if (ON_CPU(x))
        hcomm_cmp_sum16(out, in, nin, m, bf16, divisor);
    else
        ON_GPU(x, "16-bit sum",
               hcomm_cuda_cmp_sum16(out, in, nin, m, bf16, divisor, x->stream));
}

void hcomm_cx_topk_pairs(hcomm_cx_t *x, const float *v, size_t n, size_t k,
                         uint32_t *pairs, float *residual) {
    if (x->status) return;
    if (ON_CPU(x)) {
        if (hcomm_topk_pairs(v, n, k, pairs, residual) != HCOMM_SUCCESS)
            x->status = hcomm_error(HCOMM_ERR_NO_MEMORY,
                                    "top-k: no memory for %zu indices", k);
        return;
    }
#ifdef HAVE_CUDA
    size_t bytes = hcomm_cuda_topk_scratch(n);
    void *s = scratch(x, bytes);
    if (s)
        ON_GPU(x, "top-k selection",
               hcomm_cuda_topk_pairs(v, n, k, pairs, residual, s, bytes,
                                     x->stream));
#endif
}

void hcomm_cx_topk_add(hcomm_cx_t *x, float *out, const uint32_t *pairs,
                       size_t k, size_t n) {
    if (x->status) return;
    if (ON_CPU(x))
        hcomm_topk_add(out, pairs, k, n);
    else
        ON_GPU(x, "top-k sum",
               hcomm_cuda_topk_add(out, pairs, k, n, x->stream));
}

void hcomm_cx_onebit_encode(hcomm_cx_t *x, const float *v, size_t m,
                            uint8_t *rec, float *res) {
    if (x->status) return;
    if (ON_CPU(x)) {
        hcomm_onebit_encode(v, m, rec, res);
        return;
    }
#ifdef HAVE_CUDA
    void *s = scratch(x, hcomm_cuda_onebit_scratch());
    if (s)
        ON_GPU(x, "1-bit packing",
               hcomm_cuda_onebit_encode(v, m, rec, res, s, x->stream));
#endif
}

void hcomm_cx_onebit_decode(hcomm_cx_t *x, float *acc, const uint8_t *rec,
                            size_t m, int add) {
    if (x->status) return;
    if (ON_CPU(x))
        hcomm_onebit_decode(acc, rec, m, add);
    else
        ON_GPU(x, "1-bit unpacking",
               hcomm_cuda_onebit_decode(acc, rec, m, add, x->stream));
}
