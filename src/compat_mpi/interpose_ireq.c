/* Non-blocking calls taken by HCOMM, as MPI generalized requests that the
 * program waits for with MPI_Wait, MPI_Test and the rest, which we do not
 * intercept. A generalized request completes only when we say so, and
 * HCOMM's call moves only while something drives it, so MPI's progress
 * engine must run ours in every blocking call, not only in waits on the
 * request: a rank may block in MPI_Recv for a message its peer sends only
 * after its own MPI_Wait on the reduction. Open MPI calls back whatever is
 * registered with opal_progress (looked up at run time: it is not MPI API)
 * from every wait. MPICH 4.0 has no such hook (MPIX_Grequest_start's poll
 * function runs only while that request is waited for or tested, and that
 * program stalled), so there, as with any other MPI, the calls go to MPI. */
#include "compat_mpi/interpose.h"
#include "core/context.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct ireq {
    hcomm_request_t hreq;
    MPI_Request mpi;
    hcomm_status_t status;
    hcmpi_coll_t coll;
    int (*then)(void *, hcomm_status_t); /* once HCOMM has finished */
    void *arg;
    int refs; /* the pending list's and MPI's (until free_fn) */
    struct ireq *next;
} ireq_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static ireq_t *pending;
static atomic_int npending;
static int available;

static void unref(ireq_t *r) {
    pthread_mutex_lock(&lock);
    int last = --r->refs == 0;
    pthread_mutex_unlock(&lock);
    if (last) free(r);
}

/* MPI asks for the status once the request is complete. A collective's
 * status carries no source, tag or count. */
static int query_fn(void *state, MPI_Status *status) {
    ireq_t *r = state;
    PMPI_Status_set_elements(status, MPI_BYTE, 0);
    PMPI_Status_set_cancelled(status, 0);
    status->MPI_SOURCE = MPI_ANY_SOURCE;
    status->MPI_TAG = MPI_ANY_TAG;
    return r->status == HCOMM_SUCCESS ? MPI_SUCCESS : MPI_ERR_INTERN;
}

static int free_fn(void *state) {
    unref(state);
    return MPI_SUCCESS;
}

static int cancel_fn(void *state, int complete) {
    (void)state;
    (void)complete;
    return MPI_SUCCESS; /* a collective cannot be cancelled */
}

#if defined(OPEN_MPI)
/* Completes r in MPI once HCOMM has finished it. */
static void complete(ireq_t *r) {
    if (r->then && r->then(r->arg, r->status) != MPI_SUCCESS &&
        r->status == HCOMM_SUCCESS)
        r->status = HCOMM_ERR_INTERNAL; /* unpacking failed */
    if (r->status != HCOMM_SUCCESS)
        fprintf(stderr, "[hcomm_mpi rank %d] %s failed in HCOMM: %s: %s\n",
                hcmpi.world_rank, hcmpi_coll_name(r->coll),
                hcomm_strerror(r->status), hcomm_last_error());
    PMPI_Grequest_complete(r->mpi);
    unref(r);
}

/* Tests every pending request once (opal_progress calls it). Skipped while
 * this thread is inside HCOMM (MPI progress called from HCOMM's MPI
 * transport) or another thread is already here. */
static int progress_all(void) {
    if (!atomic_load_explicit(&npending, memory_order_relaxed) || hcmpi_depth)
        return 0;
    if (pthread_mutex_trylock(&lock) != 0) return 0;
    ireq_t *done = NULL, **p = &pending;
    hcmpi_depth++;
    hcomm_in_mpi_progress++; /* MPI is running us: tests must not probe */
    while (*p) {
        ireq_t *r = *p;
        hcomm_status_t st = hcomm_test(&r->hreq);
        if (st == HCOMM_ERR_IN_PROGRESS) {
            p = &r->next;
            continue;
        }
        r->status = st;
        *p = r->next;
        r->next = done;
        done = r;
        atomic_fetch_sub(&npending, 1);
    }
    hcomm_in_mpi_progress--;
    hcmpi_depth--;
    pthread_mutex_unlock(&lock);
    int n = 0;
    for (ireq_t *r = done, *next; r; r = next, n++) {
        next = r->next;
        complete(r);
    }
    if (n) hcmpi_comm_retry_frees();
    return n;
}

typedef int (*opal_cb_t)(void);
static int (*opal_register)(opal_cb_t);
static int (*opal_unregister)(opal_cb_t);
static int registered;
#endif

void hcmpi_ireq_init(void) {
#if defined(OPEN_MPI)
    opal_register =
        (int (*)(opal_cb_t))dlsym(RTLD_DEFAULT, "opal_progress_register");
    opal_unregister =
        (int (*)(opal_cb_t))dlsym(RTLD_DEFAULT, "opal_progress_unregister");
    available =
        opal_register && opal_unregister && opal_register(progress_all) == 0;
    registered = available;
#else
    available = 0;
#endif
}

void hcmpi_ireq_finalize(void) {
#if defined(OPEN_MPI)
    if (registered) opal_unregister(progress_all);
    registered = 0;
#endif
    available = 0;
}

int hcmpi_ireq_available(void) {
    return available;
}

int hcmpi_ireq_wrap(hcomm_request_t hreq, MPI_Comm comm, MPI_Request *out) {
    return hcmpi_ireq_wrap_then(hreq, comm, out, HCMPI_IALLREDUCE, NULL, NULL);
}

int hcmpi_ireq_wrap_then(hcomm_request_t hreq, MPI_Comm comm, MPI_Request *out,
                         hcmpi_coll_t coll, int (*then)(void *, hcomm_status_t),
                         void *arg) {
    ireq_t *r = calloc(1, sizeof(*r));
    int rc = MPI_ERR_NO_MEM;
    if (r) {
        r->hreq = hreq;
        r->coll = coll;
        r->then = then;
        r->arg = arg;
        r->refs = 2;
        hcmpi_depth++;
        rc = PMPI_Grequest_start(query_fn, free_fn, cancel_fn, r, out);
        hcmpi_depth--;
    }
    if (rc != MPI_SUCCESS) {
        /* No MPI request to hand back: finish here, report, and fail. */
        hcmpi_depth++;
        hcomm_status_t st = hcomm_wait(&hreq);
        hcmpi_depth--;
        free(r);
        if (then) then(arg, st);
        return hcmpi_report_failure(coll, comm, HCOMM_ERR_NO_MEMORY);
    }
    r->mpi = *out;
    pthread_mutex_lock(&lock);
    r->next = pending;
    pending = r;
    atomic_fetch_add(&npending, 1);
    pthread_mutex_unlock(&lock);
    return MPI_SUCCESS;
}

hcmpi_done_t *hcmpi_done_new(void) {
    hcmpi_done_t *d = calloc(1, sizeof(hcmpi_done_t));
    if (d) d->on_heap = 1;
    return d;
}

hcmpi_done_t *hcmpi_done_for(MPI_Request *request, hcmpi_done_t *local) {
    if (request) return hcmpi_done_new();
    memset(local, 0, offsetof(hcmpi_done_t, unpack));
    return local;
}

int hcmpi_done_run(void *arg, hcomm_status_t st) {
    hcmpi_done_t *d = arg;
    int err = MPI_SUCCESS;
    if (st == HCOMM_SUCCESS && d->from) err = hcmpi_unpack(&d->unpack, d->from);
    if (st == HCOMM_SUCCESS && d->move_bytes && d->move_from != d->move_to)
        memmove(d->move_to, d->move_from, d->move_bytes);
    hcmpi_scratch_put(d->scratch[0]);
    hcmpi_scratch_put(d->scratch[1]);
    if (d->on_heap) free(d);
    return err;
}

int hcmpi_complete(hcmpi_coll_t coll, MPI_Comm comm, hcomm_status_t st,
                   hcomm_request_t hreq, hcmpi_done_t *d, MPI_Request *request,
                   int *rc) {
    if (st == HCOMM_SUCCESS && request) {
        hcmpi_count_taken(coll);
        *rc =
            hcmpi_ireq_wrap_then(hreq, comm, request, coll, hcmpi_done_run, d);
        return 1;
    }
    int err = hcmpi_done_run(d, st);
    if (st == HCOMM_SUCCESS && err) {
        *rc = hcmpi_report_local(coll, comm, err, "unpacking failed");
        return 1;
    }
    return hcmpi_finish(coll, comm, st, rc);
}
