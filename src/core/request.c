/* Running requests and the wait loop: progress, yield, timeout. */
#include "core/request.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/context.h"
#include "core/log.h"
#include "core/stream_worker.h"

#include <math.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* Every request still running, so that whoever waits drives them all: a
 * peer blocked in one collective may need this rank to advance another. */
static pthread_mutex_t active_lock = PTHREAD_MUTEX_INITIALIZER;
static struct hcomm_request *active_head;
static atomic_int active_count;

static void list_add(struct hcomm_request *req) {
    atomic_flag_clear(&req->busy);
    pthread_mutex_lock(&active_lock);
    req->prev = NULL;
    req->next = active_head;
    if (active_head) active_head->prev = req;
    active_head = req;
    req->active = 1;
    req->comm->inflight++;
    atomic_fetch_add(&active_count, 1);
    pthread_mutex_unlock(&active_lock);
}

static void list_remove(struct hcomm_request *req) {
    if (!req->active) return;
    pthread_mutex_lock(&active_lock);
    if (req->prev)
        req->prev->next = req->next;
    else
        active_head = req->next;
    if (req->next) req->next->prev = req->prev;
    req->active = 0;
    req->comm->inflight--;
    atomic_fetch_sub(&active_count, 1);
    pthread_mutex_unlock(&active_lock);
}

static hcomm_status_t req_status(const struct hcomm_request *req) {
    return atomic_load_explicit(&req->status, memory_order_acquire);
}

static void set_status(struct hcomm_request *req, hcomm_status_t st) {
    atomic_store_explicit(&req->status, st, memory_order_release);
}

static void advance(struct hcomm_request *req) {
    if (req_status(req) != HCOMM_ERR_IN_PROGRESS) return;
    hcomm_status_t st = HCOMM_ERR_IN_PROGRESS;
    if (req->agreeing) {
        st = hcomm_shm_op_progress(&req->direct);
        if (st == HCOMM_SUCCESS) {
            req->agreeing = 0;
            st = HCOMM_ERR_IN_PROGRESS;
        }
    }
    if (req->agreeing) {
        /* still agreeing (st says), or failed */
    } else if (req->plan) {
        st = hcomm_exec_progress(&req->exec);
    } else if (req->agree_only) {
        st = HCOMM_SUCCESS;
#ifdef HAVE_CUDA
    } else if (req->ipc.comm) {
        st = hcomm_ipc_op_progress(&req->ipc);
#endif
    } else {
        st = hcomm_shm_op_progress(&req->direct);
    }
    /* Kept with the request: whoever waits for it (later, or on another
     * thread) reports what went wrong, not only the status. Every failure
     * below records its message as it returns. Written before the status
     * is published, which a tester on another thread reads first. */
    if (st != HCOMM_ERR_IN_PROGRESS && st != HCOMM_SUCCESS)
        snprintf(req->why, sizeof(req->why), "%s", hcomm_last_error());
    if (st != HCOMM_ERR_IN_PROGRESS) set_status(req, st);
}

/* Progresses req unless another thread is doing so right now (only a
 * request in the list can be seen by other threads). */
static void progress_one(struct hcomm_request *req) {
    if (!req->active) {
        advance(req);
        return;
    }
    if (atomic_flag_test_and_set(&req->busy)) return;
    advance(req);
    atomic_flag_clear(&req->busy);
}

static void progress_others(struct hcomm_request *self) {
    if (pthread_mutex_trylock(&active_lock) != 0) return;
    for (struct hcomm_request *r = active_head; r; r = r->next)
        if (r != self) progress_one(r);
    pthread_mutex_unlock(&active_lock);
}

hcomm_status_t hcomm_request_start(struct hcomm_request *req,
                                   hcomm_comm_impl_t *comm, hcomm_coll_t coll,
                                   const hcomm_plan_t *plan,
                                   const hcomm_exec_args_t *args, int blocking,
                                   int agree) {
    req->comm = comm;
    req->agreeing = agree;
    req->plan = plan;
    req->coll = coll;
    req->active = 0;
    req->profiled = 0;
    req->flight_call = 0;
    req->told = 0;
    req->bytes = 0;
    req->last_liveness = 0;
    atomic_init(&req->status, HCOMM_ERR_IN_PROGRESS);
    req->polls = 0;
    req->last_look = 0;
    req->why[0] = '\0';
    if (plan) {
        hcomm_status_t st = hcomm_exec_start(&req->exec, args);
        if (st != HCOMM_SUCCESS) return st;
    }
    /* A non-blocking request counts as in flight on its communicator until
     * it is released, even when it finished here already: its release
     * still reads the communicator. */
    if (!blocking) list_add(req);
    progress_one(req);
    return HCOMM_SUCCESS;
}

static uint32_t request_seq(const struct hcomm_request *req) {
    return req->plan && !req->agreeing ? req->exec.seq
                                       : (uint32_t)req->direct.seq;
}

static void release(struct hcomm_request *req) {
    hcomm_status_t st = req_status(req);
    hcomm_flight_end(&req->comm->flight, req->flight_call, st);
    /* a CUDA IPC call learns at its launch whether it goes direct */
    if (req->ipc.comm && req->ipc.k.direct) req->prof.algo = "ipc_direct";
    if (req->profiled) hcomm_profile_end(&req->prof, st);
    /* The ranks' calls no longer pair up: no later call can succeed. */
    if (st == HCOMM_ERR_MISMATCH) req->comm->broken = st;
    if (req->plan) {
        if (st == HCOMM_SUCCESS)
            hcomm_exec_finish(&req->exec);
        else
            hcomm_exec_abort(&req->exec);
        hcomm_comm_plan_put(req->comm, req->plan);
    }
    /* Last: until here the request counts as in flight on its
     * communicator, which hcomm_comm_free then refuses to destroy (it was
     * destroyed under the lines above: a heap-use-after-free, ASan). */
    list_remove(req);
}

/* Where the ranks a message names are in MPI_COMM_WORLD, on a communicator
 * of its own ranks (a split, or a hierarchical call's node or rail): all of
 * them up to 16 ranks, else this rank's. */
static void world_names(const hcomm_comm_impl_t *c, char *out, size_t len) {
    if (!c->world) return;
    if (c->size > 16) {
        snprintf(out, len, " (rank %d is MPI_COMM_WORLD's %d)", c->rank,
                 c->world[c->rank]);
        return;
    }
    size_t used = (size_t)snprintf(
        out, len, " (ranks 0 to %d are MPI_COMM_WORLD's", c->size - 1);
    for (int i = 0; i < c->size && used < len; i++)
        used += (size_t)snprintf(out + used, len - used, "%s %d", i ? "," : "",
                                 c->world[i]);
    if (used < len) snprintf(out + used, len - used, ")");
}

/* Fails req with st, saying why (how long it waited, and for what); 0
 * (nothing done) while another thread is advancing it, which must not see
 * its state change under it. The communicator is broken from then on. */
static int fail_waiting(struct hcomm_request *req, hcomm_status_t st,
                        double waited, const char *why) {
    char what[512];
    hcomm_comm_impl_t *c = req->comm;
    if (req->active && atomic_flag_test_and_set(&req->busy)) return 0;
#ifdef HAVE_CUDA
    if (req->ipc.comm && !req->agreeing)
        hcomm_ipc_op_describe(&req->ipc, what, sizeof(what));
    else
#endif
        if (!req->plan || req->agreeing)
        hcomm_shm_op_describe(&req->direct, what, sizeof(what));
    else if (!hcomm_exec_describe_wait(&req->exec, what, sizeof(what)))
        snprintf(what, sizeof(what), "local steps");
    req->told = 1;
    set_status(req, st);
    c->broken = st;
    char world[192] = "";
    world_names(c, world, sizeof(world));
    hcomm_error(st,
                "%s (sequence %u, %zu bytes) on communicator %u, rank %d of "
                "%d, %s after %.1f s waiting for: %s%s",
                hcomm_coll_name(req->coll), request_seq(req), req->bytes,
                (unsigned)c->id, c->rank, c->size, why, waited, what, world);
    if (req->active) atomic_flag_clear(&req->busy);
    if (st == HCOMM_ERR_TIMEOUT) hcomm_flight_dump("timeout");
    return 1;
}

/* A shared-memory peer that has died (its pid is gone): found at most every
 * quarter second, so that a killed rank ends its peers' calls at once
 * rather than at the timeout. */
static int peer_died(struct hcomm_request *req, double t, char *why,
                     size_t len) {
    if ((req->plan && !req->agreeing) || t - req->last_liveness < 0.25)
        return 0;
    req->last_liveness = t;
    int peer = atomic_load_explicit(&req->direct.waiting_for,
                                    memory_order_relaxed),
        pid = 0;
    if (peer < 0 || hcomm_shm_peer_alive(req->direct.shm, peer, &pid)) return 0;
    snprintf(why, len, "rank %d (pid %d) has died", peer, pid);
    return 1;
}

/* One poll of a wait or a test. Every mask + 1 of them MPI gets to
 * progress (hcomm_mpi_progress) and the clock is read: it costs as much as
 * a poll, and a call done sooner never needs either. 1 once req has been
 * polled for HCOMM_TIMEOUT (it is then failed); the time counts from the
 * first look, or from one more than gap seconds after the previous. */
static int tick(struct hcomm_request *req, unsigned mask, double gap) {
    char why[96];
    if ((++req->polls & mask) != 0) return 0;
    hcomm_comm_impl_t *c = req->comm;
    if ((req->polls & 1023) == 0) hcomm_mpi_progress();
    hcomm_flight_poll();
    double t = hcomm_now_seconds();
    hcomm_flight_clock(&c->flight, req->flight_call);
    if (req->last_look == 0 || t - req->last_look > gap) req->waiting_since = t;
    req->last_look = t;
    double waited = t - req->waiting_since;
    if (atomic_load_explicit(&c->aborted, memory_order_relaxed))
        return fail_waiting(req, HCOMM_ERR_ABORTED, waited,
                            "aborted by hcomm_comm_abort");
    if (peer_died(req, t, why, sizeof(why)))
        return fail_waiting(req, HCOMM_ERR_TRANSPORT, waited, why);
    return waited > hcomm_comm_timeout(c) &&
           fail_waiting(req, HCOMM_ERR_TIMEOUT, waited, "gave up");
}

/* Tests more than a second apart are a program working between them, not
 * waiting (it may compute for longer than the timeout while the call is in
 * flight): their time out counts from when tests come back to back. */
hcomm_status_t hcomm_request_test(struct hcomm_request *req) {
    progress_one(req);
    if (req_status(req) == HCOMM_ERR_IN_PROGRESS) {
        if (atomic_load(&active_count) > req->active) progress_others(req);
        if (!tick(req, 63, 1.0)) return HCOMM_ERR_IN_PROGRESS;
    }
    release(req);
    return req_status(req);
}

/* A wait is one stretch of waiting: its time out counts from its start. */
hcomm_status_t hcomm_request_complete(struct hcomm_request *req) {
    long spin = hcomm_ctx.spin_count;
    req->polls = 0;
    req->last_look = 0;
    for (long polls = 0;; polls++) {
        progress_one(req);
        if (req_status(req) != HCOMM_ERR_IN_PROGRESS) break;
        if (atomic_load(&active_count) > req->active) progress_others(req);
        /* The clock every 256 spinning polls, and at every yield, which
         * may take a whole time slice: the timeout then overshoots by one
         * poll at most. */
        int yielding = polls >= spin;
        if (yielding) sched_yield();
        if (tick(req, yielding ? 0 : 255, INFINITY)) break;
    }
    hcomm_status_t st = req_status(req);
    release(req);
    if (st != HCOMM_SUCCESS && !req->told) {
        req->comm->broken = st;
        hcomm_error(st, "%s (sequence %u) failed on rank %d: %s",
                    hcomm_coll_name(req->coll), request_seq(req),
                    req->comm->rank,
                    req->why[0] ? req->why : hcomm_strerror(st));
    }
    return st;
}

int hcomm_request_active(void) {
    return atomic_load(&active_count);
}

hcomm_status_t hcomm_wait(hcomm_request_t *request) {
    if (!request)
        return hcomm_error(HCOMM_ERR_INVALID_ARG, "request pointer is NULL");
    struct hcomm_request *req = *request;
    if (!req) return HCOMM_SUCCESS;
    hcomm_stream_drain(req->comm);
    hcomm_status_t st = hcomm_request_complete(req);
    free(req);
    *request = HCOMM_REQUEST_NULL;
    return st;
}

hcomm_status_t hcomm_test(hcomm_request_t *request) {
    if (!request)
        return hcomm_error(HCOMM_ERR_INVALID_ARG, "request pointer is NULL");
    struct hcomm_request *req = *request;
    if (!req) return HCOMM_SUCCESS;
    hcomm_stream_drain(req->comm);
    hcomm_status_t st = hcomm_request_test(req);
    if (st == HCOMM_ERR_IN_PROGRESS) return st;
    free(req);
    *request = HCOMM_REQUEST_NULL;
    return st;
}

hcomm_status_t hcomm_waitall(size_t n, hcomm_request_t *requests) {
    hcomm_status_t first = HCOMM_SUCCESS;
    if (n && !requests)
        return hcomm_error(HCOMM_ERR_INVALID_ARG, "requests array is NULL");
    for (size_t i = 0; i < n; i++) {
        hcomm_status_t st = hcomm_wait(&requests[i]);
        if (st != HCOMM_SUCCESS && first == HCOMM_SUCCESS) first = st;
    }
    return first;
}
