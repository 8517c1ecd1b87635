/* GPUs: what kind of memory a buffer is (always built: a build without CUDA
 * still recognises device pointers, to refuse them), and, with CUDA, the
 * streams, events and memory pools that calls on device buffers use.
 *
 * Memory types are found per call from the CUDA driver (loaded with dlopen,
 * so that libhcomm.so needs no driver to load), and only once the process
 * uses CUDA: until a CUDA context exists, no buffer can be device memory. */
#ifndef HCOMM_CORE_GPU_H
#define HCOMM_CORE_GPU_H

#include "hcomm.h"

#include <stddef.h>
#include <stdint.h>

typedef enum {
    HCOMM_MEM_HOST = 0, /* pageable host memory */
    HCOMM_MEM_PINNED,   /* page-locked host memory (cudaMallocHost) */
    HCOMM_MEM_MANAGED,  /* cudaMallocManaged */
    HCOMM_MEM_DEVICE,   /* cudaMalloc */
    HCOMM_MEM_COUNT
} hcomm_memtype_t;

/* Loads the driver unless HCOMM_CUDA=0 (hcomm_init). */
void hcomm_gpu_init(void);
void hcomm_gpu_finalize(void);

/* A driver and at least one device are there (and HCOMM_CUDA is not 0). */
extern int hcomm_gpu_present;
/* How many devices the driver shows (0 when none is present). */
int hcomm_gpu_device_count(void);

/* Whether the process may hold CUDA memory: it has a CUDA context (none
 * before its first CUDA call). A call with several buffers asks once. */
int hcomm_gpu_in_use(void);
/* The memory type of the buffer at p (HOST when no GPU is present or p is
 * NULL); *device is the ordinal of the GPU holding it (-1 for host). */
hcomm_memtype_t hcomm_gpu_memtype_slow(const void *p, int *device);
static inline hcomm_memtype_t hcomm_gpu_memtype(const void *p, int *device) {
    *device = -1;
    if (__builtin_expect(!hcomm_gpu_present, 1) || !p) return HCOMM_MEM_HOST;
    return hcomm_gpu_memtype_slow(p, device);
}
const char *hcomm_memtype_name(hcomm_memtype_t t);
/* p is plain or pinned host memory, known without asking the driver (a
 * question costs 150 ns for host memory on an H100 machine's host): it
 * lies in the heap below the program break or on the calling thread's
 * stack. 0 says nothing. */
int hcomm_gpu_surely_host(const void *p);
/* Whether no buffer of a call (a, b; NULL: none) can be GPU memory,
 * known without asking the driver what memory each is: no GPU, both in
 * the heap or on this thread's stack, or no CUDA context yet (asked once
 * for both, and only after the addresses: two driver calls, 35 ns on the
 * GPU machine's host). 0: ask hcomm_gpu_memtype. */
int hcomm_gpu_all_host(const void *a, const void *b);
/* Finds the heap for hcomm_gpu_surely_host: hcomm_gpu_init does, where a
 * GPU is present (a process without one never asks); tests call it. */
void hcomm_gpu_find_heap(void);
/* The device allocation holding p: CUDA's id for it (never reused in the
 * process), its start and its size; -1 if p is in none. */
int hcomm_gpu_alloc_range(const void *p, uint64_t *id, uintptr_t *base,
                          size_t *bytes);

/* A GPU can read and write it with kernels (pinned host memory is mapped
 * into every device on 64-bit UVA systems). */
static inline int hcomm_memtype_gpu_access(hcomm_memtype_t t) {
    return t != HCOMM_MEM_HOST;
}

#ifdef HAVE_CUDA

/* Per communicator and device: the streams a call on device memory runs on
 * (kernels; copies to and from host staging, each way on its own so that
 * they overlap) and a cache of events. Thread safe. */
typedef struct hcomm_gpu_ctx hcomm_gpu_ctx_t;
hcomm_status_t hcomm_gpu_ctx_create(int device, hcomm_gpu_ctx_t **out);
void hcomm_gpu_ctx_destroy(hcomm_gpu_ctx_t *ctx); /* NULL is fine */
int hcomm_gpu_ctx_device(const hcomm_gpu_ctx_t *ctx);

typedef enum {
    HCOMM_GPU_STREAM_KERNEL = 0,
    HCOMM_GPU_STREAM_D2H,
    HCOMM_GPU_STREAM_H2D,
    HCOMM_GPU_STREAM_IPC, /* the CUDA IPC kernels of blocking calls */
    HCOMM_GPU_NSTREAMS
} hcomm_gpu_stream_id_t;
void *hcomm_gpu_ctx_stream(hcomm_gpu_ctx_t *ctx, hcomm_gpu_stream_id_t id);

/* An event recorded on stream now (NULL on failure, with the error set);
 * poll it with hcomm_gpu_event_query (1 done, 0 not yet, or an error < 0),
 * give it back with hcomm_gpu_event_put. */
void *hcomm_gpu_event_record(hcomm_gpu_ctx_t *ctx, void *stream);
int hcomm_gpu_event_query(void *event);
/* Whether stream has run everything enqueued on it: 1, 0 not yet, or an
 * error < 0 (set). */
int hcomm_gpu_stream_query(void *stream);
void hcomm_gpu_event_put(hcomm_gpu_ctx_t *ctx, void *event);
/* The stream's process-wide id (never reused, unlike its handle), or 0
 * where the driver cannot tell. */
unsigned long long hcomm_gpu_stream_uid(void *stream);
/* Makes stream wait for event (on the device; the host does not block). */
hcomm_status_t hcomm_gpu_stream_wait_event(void *stream, void *event);

/* A blocking call's inputs may still be written on the legacy default
 * stream (cudaMemcpy from pageable memory returns before its copy lands):
 * ctx's plan streams (kernel, D2H, H2D) are made to wait for what that
 * stream has enqueued so far; host_too: the host waits for it instead, for
 * a transport that reads device memory on streams of its own. */
hcomm_status_t hcomm_gpu_follow_default(hcomm_gpu_ctx_t *ctx, int host_too);

/* Scratch on the device and pinned host staging, from pools bounded by
 * HCOMM_BUFFER_POOL_SIZE each (HCOMM_MEMLOG=1 logs their growth). The size
 * must be given back with the pointer. */
typedef enum {
    HCOMM_GPU_POOL_DEVICE = 0,
    HCOMM_GPU_POOL_PINNED
} hcomm_gpu_pool_id_t;
void *hcomm_gpu_alloc(hcomm_gpu_pool_id_t pool, int device, size_t bytes);
void hcomm_gpu_free(hcomm_gpu_pool_id_t pool, int device, void *ptr,
                    size_t bytes);
/* Bytes each pool holds, cached and in use (hcomm_info, HCOMM_MEMLOG). */
void hcomm_gpu_pool_usage(hcomm_gpu_pool_id_t pool, size_t *cached,
                          size_t *live);
/* Frees what the pools cache (hcomm_finalize). */
void hcomm_gpu_pools_release(void);
/* Set on a thread that must not wait for the device (HCOMM's stream worker,
 * core/stream_worker.c: a stream it holds would never end): its frees keep
 * the buffer in the pool even past the budget, as cudaFree waits for every
 * stream. hcomm_gpu_pools_trim, from a thread that may wait, then releases
 * what is past the budget. */
extern _Thread_local int hcomm_gpu_frees_kept;
void hcomm_gpu_pools_trim(void);

/* Asynchronous copy of any direction on stream. */
hcomm_status_t hcomm_gpu_copy_async(void *dst, const void *src, size_t bytes,
                                    void *stream);
/* Zeroes bytes of device memory at dst, enqueued on stream. */
hcomm_status_t hcomm_gpu_zero_async(void *dst, size_t bytes, void *stream);
/* Blocks until stream has run everything enqueued on it. */
hcomm_status_t hcomm_gpu_stream_sync(void *stream);
/* Makes device current for the calling thread; returns the previous one
 * (or -1 on failure, with the error set). */
int hcomm_gpu_use_device(int device);
/* The calling thread's current device (-1 on failure, with the error). */
int hcomm_gpu_current_device(void);

/* A cudaError_t as a status with its message ("what: cuda error text"). */
hcomm_status_t hcomm_gpu_error(int cuda_err, const char *what);

#endif /* HAVE_CUDA */
#endif
