/* The CUDA runtime side of device calls: streams and events per
 * communicator, device scratch and pinned staging pools. */
#include "core/config.h"
#include "core/gpu.h"
#include "core/log.h"

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

hcomm_status_t hcomm_gpu_error(int cuda_err, const char *what) {
    return hcomm_error(cuda_err == cudaErrorMemoryAllocation
                           ? HCOMM_ERR_NO_MEMORY
                           : HCOMM_ERR_INTERNAL,
                       "%s: CUDA error %d (%s)", what, cuda_err,
                       cudaGetErrorString((cudaError_t)cuda_err));
}

/* The device whose primary context this thread has made current through
 * us: cudaGetDevice answers 0 in a thread that never chose one, without any
 * context being current, and UCX's CUDA transports, which use the driver's
 * current context, then fail in that thread. */
static _Thread_local int bound_device = -1;

int hcomm_gpu_use_device(int device) {
    int prev = -1;
    cudaError_t e = cudaGetDevice(&prev);
    if (e == cudaSuccess && (prev != device || bound_device != device))
        e = cudaSetDevice(device); /* also makes its context current */
    if (e != cudaSuccess) {
        hcomm_gpu_error(e, "selecting the GPU");
        return -1;
    }
    bound_device = device;
    return prev;
}

int hcomm_gpu_current_device(void) {
    int dev = -1;
    cudaError_t e = cudaGetDevice(&dev);
    if (e != cudaSuccess) {
        hcomm_gpu_error(e, "finding the current GPU");
        return -1;
    }
    return dev;
}

/* --- streams and events ------------------------------------------------ */

struct hcomm_gpu_ctx {
    int device;
    cudaStream_t streams[HCOMM_GPU_NSTREAMS];
    pthread_mutex_t lock;
    cudaEvent_t *free_events;
    int nfree, cap;
};

hcomm_status_t hcomm_gpu_ctx_create(int device, hcomm_gpu_ctx_t **out) {
    hcomm_gpu_ctx_t *ctx = calloc(1, sizeof(*ctx));
    if (!ctx) return hcomm_error(HCOMM_ERR_NO_MEMORY, "no memory for a GPU");
    ctx->device = device;
    pthread_mutex_init(&ctx->lock, NULL);
    int prev = hcomm_gpu_use_device(device);
    if (prev < 0) {
        free(ctx);
        return HCOMM_ERR_INTERNAL;
    }
    for (int i = 0; i < HCOMM_GPU_NSTREAMS; i++) {
        /* The IPC stream follows the legacy default stream: a blocking
         * call's input written by cudaMemcpy from pageable memory may still
         * be in flight there when cudaMemcpy returns. */
        cudaError_t e = cudaStreamCreateWithFlags(&ctx->streams[i],
                                                  i == HCOMM_GPU_STREAM_IPC
                                                      ? cudaStreamDefault
                                                      : cudaStreamNonBlocking);
        if (e != cudaSuccess) {
            hcomm_gpu_use_device(prev);
            hcomm_gpu_ctx_destroy(ctx);
            return hcomm_gpu_error(e, "creating a stream");
        }
    }
    hcomm_gpu_use_device(prev);
    *out = ctx;
    return HCOMM_SUCCESS;
}

void hcomm_gpu_ctx_destroy(hcomm_gpu_ctx_t *ctx) {
    if (!ctx) return;
    for (int i = 0; i < HCOMM_GPU_NSTREAMS; i++)
        if (ctx->streams[i]) {
            cudaStreamSynchronize(ctx->streams[i]);
            cudaStreamDestroy(ctx->streams[i]);
        }
    for (int i = 0; i < ctx->nfree; i++)
        cudaEventDestroy(ctx->free_events[i]);
    free(ctx->free_events);
    pthread_mutex_destroy(&ctx->lock);
    free(ctx);
}

int hcomm_gpu_ctx_device(const hcomm_gpu_ctx_t *ctx) {
    return ctx->device;
}

void *hcomm_gpu_ctx_stream(hcomm_gpu_ctx_t *ctx, hcomm_gpu_stream_id_t id) {
    return ctx->streams[id];
}

void *hcomm_gpu_event_record(hcomm_gpu_ctx_t *ctx, void *stream) {
    cudaEvent_t ev = NULL;
    pthread_mutex_lock(&ctx->lock);
    if (ctx->nfree) ev = ctx->free_events[--ctx->nfree];
    pthread_mutex_unlock(&ctx->lock);
    cudaError_t e = cudaSuccess;
    if (!ev) e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaEventRecord(ev, (cudaStream_t)stream);
    if (e != cudaSuccess) {
        if (ev) hcomm_gpu_event_put(ctx, ev);
        hcomm_gpu_error(e, "recording an event");
        return NULL;
    }
    return ev;
}

static int query_result(cudaError_t e) {
    if (e == cudaSuccess) return 1;
    if (e == cudaErrorNotReady) return 0;
    hcomm_gpu_error(e, "waiting for the GPU");
    return -1;
}

int hcomm_gpu_event_query(void *event) {
    return query_result(cudaEventQuery((cudaEvent_t)event));
}

int hcomm_gpu_stream_query(void *stream) {
    return query_result(cudaStreamQuery((cudaStream_t)stream));
}

void hcomm_gpu_event_put(hcomm_gpu_ctx_t *ctx, void *event) {
    if (!event) return;
    pthread_mutex_lock(&ctx->lock);
    if (ctx->nfree == ctx->cap) {
        int cap = ctx->cap ? 2 * ctx->cap : 16;
        cudaEvent_t *n = realloc(ctx->free_events, (size_t)cap * sizeof(*n));
        if (n) {
            ctx->free_events = n;
            ctx->cap = cap;
        }
    }
    int kept = ctx->nfree < ctx->cap;
    if (kept) ctx->free_events[ctx->nfree++] = (cudaEvent_t)event;
    pthread_mutex_unlock(&ctx->lock);
    if (!kept) cudaEventDestroy((cudaEvent_t)event);
}

unsigned long long hcomm_gpu_stream_uid(void *stream) {
    unsigned long long id = 0;
    if (cudaStreamGetId((cudaStream_t)stream, &id) != cudaSuccess) {
        cudaGetLastError(); /* not sticky: nothing to keep */
        return 0;
    }
    return id;
}

hcomm_status_t hcomm_gpu_stream_wait_event(void *stream, void *event) {
    cudaError_t e =
        cudaStreamWaitEvent((cudaStream_t)stream, (cudaEvent_t)event, 0);
    return e == cudaSuccess ? HCOMM_SUCCESS
                            : hcomm_gpu_error(e, "ordering two streams");
}

hcomm_status_t hcomm_gpu_follow_default(hcomm_gpu_ctx_t *ctx, int host_too) {
    void *ev = hcomm_gpu_event_record(ctx, cudaStreamLegacy);
    if (!ev) return HCOMM_ERR_INTERNAL;
    int done = hcomm_gpu_event_query(ev);
    hcomm_status_t st = done < 0 ? HCOMM_ERR_INTERNAL : HCOMM_SUCCESS;
    /* The common case costs a record and a query: the program synchronised
     * already, or wrote its inputs with kernels long finished. */
    if (done == 0 && host_too) {
        cudaError_t e = cudaEventSynchronize((cudaEvent_t)ev);
        if (e != cudaSuccess)
            st = hcomm_gpu_error(e, "waiting for the default stream");
    }
    static const hcomm_gpu_stream_id_t plan_streams[] = {
        HCOMM_GPU_STREAM_KERNEL, HCOMM_GPU_STREAM_D2H, HCOMM_GPU_STREAM_H2D};
    for (int i = 0; done == 0 && !host_too && i < 3 && st == HCOMM_SUCCESS; i++)
        st = hcomm_gpu_stream_wait_event(ctx->streams[plan_streams[i]], ev);
    /* a wait already enqueued keeps the event's state of now */
    hcomm_gpu_event_put(ctx, ev);
    return st;
}

hcomm_status_t hcomm_gpu_copy_async(void *dst, const void *src, size_t bytes,
                                    void *stream) {
    if (!bytes) return HCOMM_SUCCESS;
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault,
                                    (cudaStream_t)stream);
    return e == cudaSuccess ? HCOMM_SUCCESS : hcomm_gpu_error(e, "copying");
}

hcomm_status_t hcomm_gpu_zero_async(void *dst, size_t bytes, void *stream) {
    if (!bytes) return HCOMM_SUCCESS;
    cudaError_t e = cudaMemsetAsync(dst, 0, bytes, (cudaStream_t)stream);
    return e == cudaSuccess ? HCOMM_SUCCESS : hcomm_gpu_error(e, "zeroing");
}

hcomm_status_t hcomm_gpu_stream_sync(void *stream) {
    cudaError_t e = cudaStreamSynchronize((cudaStream_t)stream);
    return e == cudaSuccess ? HCOMM_SUCCESS
                            : hcomm_gpu_error(e, "waiting for a stream");
}

/* --- pools --------------------------------------------------------------
 * Power-of-two classes as in the host pool (core/pool.c), but the
 * bookkeeping lives in host nodes: device memory cannot carry a header. */

#define POOL_CLASSES 48
#define POOL_MIN_CLASS 12
#define POOL_DEVICES 64

typedef struct pool_node {
    void *ptr;
    struct pool_node *next;
} pool_node_t;

typedef struct {
    size_t cached, live;
    pool_node_t *free_list[POOL_CLASSES];
} gpu_pool_t;

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;

/* [0]: pinned host; [1 + device]: device memory of that GPU. */
static gpu_pool_t pools[1 + POOL_DEVICES];

static gpu_pool_t *pool_of(hcomm_gpu_pool_id_t id, int device) {
    if (id == HCOMM_GPU_POOL_PINNED) return &pools[0];
    return device >= 0 && device < POOL_DEVICES ? &pools[1 + device] : NULL;
}

static unsigned size_class(size_t bytes) {
    unsigned cls = POOL_MIN_CLASS;
    while (cls < POOL_CLASSES - 1 && ((size_t)1 << cls) < bytes)
        cls++;
    return cls;
}

static void memlog(const char *what, hcomm_gpu_pool_id_t id, int device,
                   size_t bytes, const gpu_pool_t *p) {
    size_t free_b = 0, total_b = 0;
    char where[32] = "pinned host";
    if (strcmp(hcomm_cfg_str(HCOMM_CFG_MEMLOG), "1") != 0) return;
    if (id == HCOMM_GPU_POOL_DEVICE)
        snprintf(where, sizeof(where), "GPU %d", device);
    cudaMemGetInfo(&free_b, &total_b);
    /* Asked for by the user: logged whatever HCOMM_DEBUG says. */
    hcomm_log_write(HCOMM_LOG_INFO, __FILE__, __LINE__,
                    "memlog: %s %zu bytes of %s memory: pool %zu cached, %zu "
                    "in use; GPU free %zu of %zu bytes",
                    what, bytes, where, p->cached, p->live, free_b, total_b);
}

void *hcomm_gpu_alloc(hcomm_gpu_pool_id_t id, int device, size_t bytes) {
    gpu_pool_t *p = pool_of(id, device);
    if (!p || bytes == 0 || bytes > SIZE_MAX / 2) return NULL;
    unsigned cls = size_class(bytes);
    size_t cb = (size_t)1 << cls;
    void *ptr = NULL;
    pool_node_t *node = NULL;
    pthread_mutex_lock(&pool_lock);
    if ((node = p->free_list[cls])) {
        p->free_list[cls] = node->next;
        p->cached -= cb;
        ptr = node->ptr;
    }
    p->live += cb;
    pthread_mutex_unlock(&pool_lock);
    free(node);
    if (ptr) return ptr;
    cudaError_t e;
    if (id == HCOMM_GPU_POOL_PINNED) {
        e = cudaMallocHost(&ptr, cb);
    } else {
        int prev = hcomm_gpu_use_device(device);
        e = prev < 0 ? cudaErrorInvalidDevice : cudaMalloc(&ptr, cb);
        if (prev >= 0) hcomm_gpu_use_device(prev);
    }
    if (e != cudaSuccess) {
        pthread_mutex_lock(&pool_lock);
        p->live -= cb;
        pthread_mutex_unlock(&pool_lock);
        hcomm_gpu_error(e, "allocating GPU scratch");
        return NULL;
    }
    memlog("allocated", id, device, cb, p);
    return ptr;
}

_Thread_local int hcomm_gpu_frees_kept;
static atomic_int over_budget; /* kept frees made a pool exceed its budget */

static void release_buffer(hcomm_gpu_pool_id_t id, int device, void *ptr,
                           size_t cb, const gpu_pool_t *p) {
    if (id == HCOMM_GPU_POOL_PINNED)
        cudaFreeHost(ptr);
    else
        cudaFree(ptr);
    memlog("released", id, device, cb, p);
}

void hcomm_gpu_free(hcomm_gpu_pool_id_t id, int device, void *ptr,
                    size_t bytes) {
    gpu_pool_t *p = pool_of(id, device);
    if (!ptr || !p) return;
    unsigned cls = size_class(bytes);
    size_t cb = (size_t)1 << cls;
    pool_node_t *node = malloc(sizeof(*node));
    size_t budget = (size_t)hcomm_cfg_int(HCOMM_CFG_BUFFER_POOL_SIZE);
    pthread_mutex_lock(&pool_lock);
    p->live -= cb;
    int keep = node && (p->cached + cb <= budget || hcomm_gpu_frees_kept);
    if (keep && p->cached + cb > budget) atomic_store(&over_budget, 1);
    if (keep) {
        node->ptr = ptr;
        node->next = p->free_list[cls];
        p->free_list[cls] = node;
        p->cached += cb;
    }
    pthread_mutex_unlock(&pool_lock);
    if (keep) return;
    free(node);
    release_buffer(id, device, ptr, cb, p);
}

/* Releases cached buffers, the largest first, until each pool caches at
 * most budget bytes. */
static void release_cached_over(size_t budget) {
    for (int i = 0; i < 1 + POOL_DEVICES; i++) {
        gpu_pool_t *p = &pools[i];
        for (int c = POOL_CLASSES - 1; c >= 0; c--) {
            for (;;) {
                pthread_mutex_lock(&pool_lock);
                pool_node_t *n = p->cached > budget ? p->free_list[c] : NULL;
                if (n) {
                    p->free_list[c] = n->next;
                    p->cached -= (size_t)1 << c;
                }
                pthread_mutex_unlock(&pool_lock);
                if (!n) break;
                release_buffer(i ? HCOMM_GPU_POOL_DEVICE
                                 : HCOMM_GPU_POOL_PINNED,
                               i - 1, n->ptr, (size_t)1 << c, p);
                free(n);
            }
        }
    }
}

void hcomm_gpu_pools_trim(void) {
    if (atomic_exchange(&over_budget, 0))
        release_cached_over((size_t)hcomm_cfg_int(HCOMM_CFG_BUFFER_POOL_SIZE));
}

void hcomm_gpu_pool_usage(hcomm_gpu_pool_id_t id, size_t *cached,
                          size_t *live) {
    *cached = *live = 0;
    pthread_mutex_lock(&pool_lock);
    for (int d = 0; d < POOL_DEVICES; d++) {
        gpu_pool_t *p = pool_of(id, d);
        *cached += p->cached;
        *live += p->live;
        if (id == HCOMM_GPU_POOL_PINNED) break;
    }
    pthread_mutex_unlock(&pool_lock);
}

/* Releases every cached buffer (hcomm_finalize). */
void hcomm_gpu_pools_release(void) {
    release_cached_over(0);
}
