/* Stream-ordered calls: input events, the pinned words streams wait on,
 * and the progress thread (see stream.h). */
#include "core/stream.h"
#include "core/gpu.h"
#include "core/log.h"
#include "core/request.h"
#include "kernels/reduce_cuda.h"

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

/* Pinned words, one per op in flight, handed out from a free list. Each
 * word only grows: an op waits for the word's next value, so a reused word
 * never lets a later wait pass early. */
#define SLOTS 4096

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static volatile uint32_t *words;
static uint32_t next_value[SLOTS];
static uint32_t free_slots[SLOTS];
static int nfree = -1; /* -1: not set up yet */
static pthread_t thread;
static int running, stopping;
static int bound = -1, want_device = -1; /* the thread's GPU */
static atomic_int kicked;

static hcomm_status_t slots_ready_locked(void) {
    if (nfree >= 0) return HCOMM_SUCCESS;
    void *p = NULL;
    cudaError_t e = cudaHostAlloc(&p, SLOTS * sizeof(uint32_t),
                                  cudaHostAllocPortable | cudaHostAllocMapped);
    if (e != cudaSuccess) return hcomm_gpu_error(e, "allocating stream flags");
    words = p;
    for (int i = 0; i < SLOTS; i++) {
        words[i] = 0;
        free_slots[i] = (uint32_t)(SLOTS - 1 - i);
    }
    nfree = SLOTS;
    return HCOMM_SUCCESS;
}

hcomm_status_t hcomm_stream_op_begin(hcomm_stream_op_t *op,
                                     hcomm_gpu_ctx_t *ctx, void *stream) {
    hcomm_status_t st;
    op->user_stream = stream;
    op->ctx = ctx;
    op->in_ready = 0;
    pthread_mutex_lock(&lock);
    st = slots_ready_locked();
    if (st == HCOMM_SUCCESS && nfree == 0)
        st =
            hcomm_error(HCOMM_ERR_NO_MEMORY,
                        "%d stream-ordered calls are in flight already", SLOTS);
    if (st == HCOMM_SUCCESS) {
        op->slot = free_slots[--nfree];
        op->value = ++next_value[op->slot];
    }
    pthread_mutex_unlock(&lock);
    if (st != HCOMM_SUCCESS) return st;
    op->in_event = hcomm_gpu_event_record(ctx, stream);
    if (!op->in_event) {
        hcomm_stream_op_end(op);
        return HCOMM_ERR_INTERNAL;
    }
    return HCOMM_SUCCESS;
}

hcomm_status_t hcomm_stream_op_enqueue_wait(hcomm_stream_op_t *op) {
    enum { WAIT_GEQ = 0 }; /* CU_STREAM_WAIT_VALUE_GEQ */
    volatile uint32_t *word = &words[op->slot];
    if (hcomm_cu.stream_wait_value32 &&
        hcomm_cu.stream_wait_value32(op->user_stream,
                                     (unsigned long long)(uintptr_t)word,
                                     op->value, WAIT_GEQ) == 0)
        return HCOMM_SUCCESS;
    int e = hcomm_cuda_wait_value((const volatile unsigned *)word, op->value,
                                  op->user_stream);
    return e ? hcomm_gpu_error(e, "making the stream wait") : HCOMM_SUCCESS;
}

int hcomm_stream_op_input_ready(hcomm_stream_op_t *op) {
    if (op->in_ready) return 1;
    int r = hcomm_gpu_event_query(op->in_event);
    /* an error on the program's stream: run anyway, its error shows there */
    if (r != 0) op->in_ready = 1;
    return op->in_ready;
}

void hcomm_stream_op_end(hcomm_stream_op_t *op) {
    if (op->in_event) {
        hcomm_gpu_event_put(op->ctx, op->in_event);
        op->in_event = NULL;
    }
    atomic_thread_fence(memory_order_seq_cst);
    pthread_mutex_lock(&lock);
    words[op->slot] = op->value;
    free_slots[nfree++] = op->slot;
    pthread_mutex_unlock(&lock);
}

/* Drives stream requests while any is in flight: polls without sleeping
 * while work moves, then backs off to short sleeps (a stream's input may
 * take a long time to come), and sleeps on the condition when none is
 * left. */
static void *progress_main(void *arg) {
    (void)arg;
    unsigned idle = 0;
    /* Never give GPU memory back from here (cudaFree waits for the GPU,
     * and a program's stream may be waiting for this thread). */
    hcomm_gpu_keep_memory_in_this_thread();
    pthread_mutex_lock(&lock);
    while (!stopping) {
        if (bound != want_device) {
            int d = want_device;
            pthread_mutex_unlock(&lock);
            int ok = hcomm_gpu_use_device(d) >= 0;
            pthread_mutex_lock(&lock);
            bound = ok ? d : -2;
            pthread_cond_broadcast(&wake);
            continue;
        }
        if (!atomic_load(&kicked)) {
            pthread_cond_wait(&wake, &lock);
            continue;
        }
        pthread_mutex_unlock(&lock);
        int moved = 0;
        int left = hcomm_request_progress_streams(&moved);
        idle = moved ? 0 : idle + 1;
        if (idle > 1000) {
            struct timespec ts = {0, 20000};
            nanosleep(&ts, NULL);
        } else {
            sched_yield();
        }
        pthread_mutex_lock(&lock);
        /* under the lock, so that a kick after this look is not lost */
        if (left == 0 && hcomm_request_streams_in_flight() == 0)
            atomic_store(&kicked, 0);
    }
    pthread_mutex_unlock(&lock);
    return NULL;
}

hcomm_status_t hcomm_stream_thread_ready(int device) {
    hcomm_status_t st = HCOMM_SUCCESS;
    pthread_mutex_lock(&lock);
    if (!running) {
        stopping = 0;
        bound = -1;
        if (pthread_create(&thread, NULL, progress_main, NULL) == 0)
            running = 1;
        else
            st = hcomm_error(HCOMM_ERR_NO_MEMORY,
                             "cannot start the progress thread");
    }
    if (st == HCOMM_SUCCESS && bound != device) {
        want_device = device;
        pthread_cond_broadcast(&wake);
        while (bound != device && bound != -2)
            pthread_cond_wait(&wake, &lock);
        if (bound != device) {
            bound = -1;
            st = hcomm_error(HCOMM_ERR_INTERNAL,
                             "the progress thread cannot use GPU %d", device);
        }
    }
    pthread_mutex_unlock(&lock);
    return st;
}

hcomm_status_t hcomm_stream_kick(void) {
    pthread_mutex_lock(&lock);
    atomic_store(&kicked, 1);
    pthread_cond_broadcast(&wake);
    pthread_mutex_unlock(&lock);
    return HCOMM_SUCCESS;
}

void hcomm_stream_shutdown(void) {
    pthread_mutex_lock(&lock);
    int was = running;
    stopping = 1;
    running = 0;
    bound = want_device = -1;
    pthread_cond_broadcast(&wake);
    pthread_mutex_unlock(&lock);
    if (was) pthread_join(thread, NULL);
}
