/* HCOMM's stream worker (stream_worker.h): one thread per process, started
 * by the first stream-ordered call the plans run. */
#include "core/stream_worker.h"
#include "core/clock.h"
#include "core/context.h"
#include "core/log.h"
#include "core/request.h"

#ifdef HAVE_CUDA
#include "core/gpu.h"
#include "kernels/stream_wait.h"

#include <cuda_runtime_api.h>
#endif

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct job {
    struct job *next;
    hcomm_comm_impl_t *c;
    struct hcomm_gpu_ctx *gpu;
    void *inputs; /* on the caller's stream: the staging holds the inputs */
    void *copied; /* and the result has left the staging */
    hcomm_status_t failed; /* queueing it failed once its stream was held */
    int device;
    uint64_t ticket; /* the held stream goes on once the flag reaches it */
    hcomm_status_t (*run)(void *);
    void (*done)(void *);
    void *arg;
} job_t;

static struct {
    /* Callers queue one at a time, so tickets follow the queue's order. The
     * worker never takes this one: a caller blocked in a CUDA launch (its
     * stream's queue full of held work) cannot stop the worker, which is
     * what frees that stream. */
    pthread_mutex_t enqueue;
    pthread_mutex_t lock;
    pthread_cond_t changed; /* a call queued, one ended, or stop */
    pthread_t thread;
    int started, stopping;
    job_t *head, *tail;
    atomic_int pending; /* queued or running */
    uint64_t issued;    /* the last ticket given */
    /* Mapped pinned host memory (under unified addressing its address is
     * the devices' too): the ticket of the last call that has run. Calls
     * run in ticket order, so every ticket up to it is done. */
    uint64_t *flag;
} w = {.enqueue = PTHREAD_MUTEX_INITIALIZER,
       .lock = PTHREAD_MUTEX_INITIALIZER,
       .changed = PTHREAD_COND_INITIALIZER};

/* The default TLS model, as every thread-local of this library: with
 * initial-exec a Python program that loads it after numpy or torch finds
 * no static TLS left ("cannot allocate memory in static TLS block"). */
static _Thread_local int in_worker;

/* Both look at the global first: in a shared library a thread-local costs
 * a call (__tls_get_addr) on every call of the program's. The worker runs
 * a call only while that call is pending. */
int hcomm_stream_in_worker(void) {
    return atomic_load_explicit(&w.pending, memory_order_relaxed) && in_worker;
}

void hcomm_stream_drain(const hcomm_comm_impl_t *c) {
    if (!atomic_load_explicit(&w.pending, memory_order_acquire) || in_worker)
        return;
    int every = !c || !hcomm_ctx.thread_multiple;
    pthread_mutex_lock(&w.lock);
    while (every ? atomic_load(&w.pending) : c->stream_pending)
        pthread_cond_wait(&w.changed, &w.lock);
    int idle = atomic_load(&w.pending) == 0;
    pthread_mutex_unlock(&w.lock);
#ifdef HAVE_CUDA
    if (idle) hcomm_gpu_pools_trim(); /* no stream is held now */
#else
    (void)idle;
#endif
}

#ifdef HAVE_CUDA
int hcomm_stream_queue_ok(const hcomm_comm_impl_t *c) {
    return (strcmp(c->tp->ops->name, "mpi") != 0 ||
            hcomm_ctx.thread_multiple) &&
           hcomm_request_active() == 0;
}

/* Polls an event on the caller's stream: yielding for the first
 * millisecond, then sleeping 50 us between looks (the caller's earlier work
 * may be a long kernel, and this thread shares the rank's cores). */
static hcomm_status_t wait_event(const job_t *j, void *event,
                                 const char *what) {
    double t0 = hcomm_now_seconds(), limit = hcomm_comm_timeout(j->c), t = t0;
    int done;
    while ((done = hcomm_gpu_event_query(event)) == 0) {
        if (atomic_load_explicit(&j->c->aborted, memory_order_relaxed))
            return hcomm_error(HCOMM_ERR_ABORTED,
                               "stream-ordered call aborted by "
                               "hcomm_comm_abort while %s",
                               what);
        if (t - t0 > limit)
            return hcomm_error(HCOMM_ERR_TIMEOUT,
                               "stream-ordered call: %s took more than %.0f s",
                               what, limit);
        if (t - t0 < 1e-3) {
            sched_yield();
        } else {
            struct timespec pause = {0, 50000};
            nanosleep(&pause, NULL);
        }
        t = hcomm_now_seconds();
    }
    return done > 0 ? HCOMM_SUCCESS : HCOMM_ERR_INTERNAL;
}

/* The communicator's first queued failure, its message before its status
 * (run_call reads them in that order). */
static void note_failure(job_t *j, hcomm_status_t st) {
    if (st == HCOMM_SUCCESS || atomic_load(&j->c->stream_failed)) return;
    snprintf(j->c->stream_why, sizeof(j->c->stream_why), "%s",
             hcomm_last_error());
    atomic_store(&j->c->stream_failed, (int)st);
}

static void run_job(job_t *j) {
    hcomm_status_t st = j->failed;
    if (hcomm_gpu_use_device(j->device) < 0 && st == HCOMM_SUCCESS)
        st = HCOMM_ERR_INTERNAL;
    /* even for a failed call: its staging is written until then */
    hcomm_status_t in =
        wait_event(j, j->inputs, "the work enqueued before it on its stream");
    if (st == HCOMM_SUCCESS) st = in;
    if (st == HCOMM_SUCCESS) st = j->run(j->arg);
    /* Said before the stream goes on: the program's next call may come as
     * soon as its stream has passed this one, and must learn of it. */
    note_failure(j, st);
    /* The result is in the staging (or the call failed): the stream goes
     * on, and copies it out before the staging is given back. */
    __atomic_store_n(w.flag, j->ticket, __ATOMIC_RELEASE);
    if (j->copied) {
        note_failure(j, wait_event(j, j->copied, "copying its result out"));
        hcomm_gpu_event_put(j->gpu, j->copied);
    }
    hcomm_gpu_event_put(j->gpu, j->inputs);
    j->done(j->arg);
}

static void *worker_main(void *unused) {
    (void)unused;
    in_worker = 1;
    hcomm_gpu_frees_kept = 1;
    /* Below MPI_THREAD_MULTIPLE only the program's threads may call MPI. */
    if (!hcomm_ctx.thread_multiple) hcomm_in_mpi_progress = 1;
    pthread_mutex_lock(&w.lock);
    for (;;) {
        while (!w.head && !w.stopping)
            pthread_cond_wait(&w.changed, &w.lock);
        job_t *j = w.head;
        if (!j) break;
        w.head = j->next;
        if (!w.head) w.tail = NULL;
        pthread_mutex_unlock(&w.lock);
        run_job(j);
        pthread_mutex_lock(&w.lock);
        j->c->stream_pending--;
        atomic_fetch_sub(&w.pending, 1);
        pthread_cond_broadcast(&w.changed);
        free(j);
    }
    pthread_mutex_unlock(&w.lock);
    return NULL;
}

static hcomm_status_t start_once(void) {
    if (w.started) return HCOMM_SUCCESS;
    void *flag = NULL;
    cudaError_t e = cudaHostAlloc(&flag, sizeof(uint64_t),
                                  cudaHostAllocMapped | cudaHostAllocPortable);
    if (e != cudaSuccess)
        return hcomm_gpu_error(e, "allocating the stream worker's flag");
    w.flag = flag;
    *w.flag = w.issued;
    if (pthread_create(&w.thread, NULL, worker_main, NULL) != 0) {
        cudaFreeHost(flag);
        w.flag = NULL;
        return hcomm_error(HCOMM_ERR_INTERNAL,
                           "cannot start the stream worker thread");
    }
    w.started = 1;
    return HCOMM_SUCCESS;
}

hcomm_status_t hcomm_stream_queue(hcomm_comm_impl_t *c, void *stream,
                                  int device, hcomm_status_t (*run)(void *),
                                  void (*done)(void *), void *arg,
                                  void *result_dst, const void *result_src,
                                  size_t result_bytes) {
    struct hcomm_gpu_ctx *gpu;
    hcomm_status_t st = hcomm_comm_gpu(c, device, &gpu);
    job_t *j = st == HCOMM_SUCCESS ? calloc(1, sizeof(*j)) : NULL;
    if (st == HCOMM_SUCCESS && !j)
        st = hcomm_error(HCOMM_ERR_NO_MEMORY, "no memory to queue a call");
    pthread_mutex_lock(&w.enqueue);
    if (st == HCOMM_SUCCESS) st = start_once();
    if (st == HCOMM_SUCCESS) {
        *j = (job_t){.c = c,
                     .gpu = gpu,
                     .device = device,
                     .run = run,
                     .done = done,
                     .arg = arg};
        j->inputs = hcomm_gpu_event_record(gpu, stream);
        if (!j->inputs) st = HCOMM_ERR_INTERNAL;
    }
    if (st == HCOMM_SUCCESS) {
        j->ticket = w.issued + 1;
        int e = hcomm_cuda_wait_flag(w.flag, j->ticket, stream);
        if (e) {
            hcomm_gpu_event_put(gpu, j->inputs);
            st = hcomm_gpu_error(e, "holding the stream");
        }
    }
    if (st == HCOMM_SUCCESS) {
        /* The stream is held: the call is queued whatever follows, so that
         * the flag reaches its ticket; a failure now is the call's. */
        if (result_bytes)
            j->failed = hcomm_gpu_copy_async(result_dst, result_src,
                                             result_bytes, stream);
        if (!j->failed && !(j->copied = hcomm_gpu_event_record(gpu, stream)))
            j->failed = HCOMM_ERR_INTERNAL;
        w.issued = j->ticket;
        pthread_mutex_lock(&w.lock);
        if (w.tail)
            w.tail->next = j;
        else
            w.head = j;
        w.tail = j;
        c->stream_pending++;
        atomic_fetch_add(&w.pending, 1);
        pthread_cond_broadcast(&w.changed);
        pthread_mutex_unlock(&w.lock);
    }
    pthread_mutex_unlock(&w.enqueue);
    if (st != HCOMM_SUCCESS) free(j);
    return st;
}

void hcomm_stream_worker_stop(void) {
    pthread_mutex_lock(&w.enqueue);
    if (w.started) {
        pthread_mutex_lock(&w.lock);
        w.stopping = 1;
        pthread_cond_broadcast(&w.changed);
        pthread_mutex_unlock(&w.lock);
        pthread_join(w.thread, NULL);
        cudaFreeHost(w.flag); /* waits for the device: every stream is free */
        w.flag = NULL;
        w.started = w.stopping = 0;
    }
    pthread_mutex_unlock(&w.enqueue);
}
#else
void hcomm_stream_worker_stop(void) {}
#endif
