/* The UCX transport's setup: the process-wide UCP context, worker and
 * endpoint cache, and the per-communicator transport instances. The data
 * path is in ucx_ops.c, the tag layout in ucx_tag.h. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include "ucx_tp/ucx_tp.h"
#include "ucx_tp/ucx_tag.h"
#include "ucx_tp/ucx_rails.h"
#include "core/clock.h"
#include "core/comm.h"
#include "core/config.h"
#include "core/log.h"

#include <stdarg.h>
#include <stdio.h>

#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

double hcomm_ucx_close_seconds(void) {
    double t = hcomm_cfg_double(HCOMM_CFG_TIMEOUT);
    return t < 10.0 ? t : 10.0;
}
#define HCOMM_UCX_QUIESCE_S 1.0 /* with abandoned ops */

/* Process-wide state. lock guards all of it during init, finalize and
 * transport creation; the data path only reads worker and the endpoints,
 * which do not change while a transport exists. */
static struct {
    pthread_mutex_t lock;
    int init_called;     /* hcomm_ucx_init was called: finalize must fence */
    int available;       /* context, worker and address exist */
    int thread_multiple; /* the worker is UCS_THREAD_MODE_MULTI */
    int cuda_memory;     /* UCX moves CUDA device memory */
    ucp_context_h ctx;
    ucp_worker_h worker;
    ucp_address_t *addr;
    size_t addr_len;
    uint32_t recv_attr; /* see HCOMM_UCX_RECV_ATTR_* in ucx_tag.h */
    ucp_ep_h *eps;      /* by MPI_COMM_WORLD rank; NULL where not met yet */
    int neps;           /* length of eps: the size of MPI_COMM_WORLD */
    int num_eps;        /* endpoints created */
} g = {.lock = PTHREAD_MUTEX_INITIALIZER};

static int mpi_active(void) {
    int init = 0, fin = 0;
    PMPI_Initialized(&init);
    PMPI_Finalized(&fin);
    return init && !fin;
}

/* ---- init / finalize -------------------------------------------------- */

const char *hcomm_ucx_rndv_thresh(char *ver, size_t len) {
    unsigned major = 0, minor = 0, release = 0;
    ucp_get_version(&major, &minor, &release);
    if (ver) snprintf(ver, len, "%u.%u.%u", major, minor, release);
    if (getenv("UCX_RNDV_THRESH") || (major == 1 && minor < 17)) return NULL;
    return HCOMM_UCX_RNDV_THRESH;
}

static void ucx_tune_config(ucp_config_t *cfg) {
    const char *thresh = hcomm_ucx_rndv_thresh(NULL, 0);
    if (!thresh) return;
    ucs_status_t us = ucp_config_modify(cfg, "RNDV_THRESH", thresh);
    hcomm_debug("ucx: RNDV_THRESH=%s %s", thresh,
                us == UCS_OK ? "set" : ucs_status_string(us));
}

static hcomm_status_t ucx_init_locked(int thread_multiple) {
    ucp_config_t *cfg = NULL;
    ucp_params_t params;
    ucp_worker_params_t wparams;
    ucp_worker_attr_t wattr;
    ucs_status_t us;
    hcomm_status_t st;
    int world_size = 0;
    unsigned major = 0, minor = 0, release = 0;

    us = ucp_config_read(NULL, NULL, &cfg);
    if (us != UCS_OK)
        return hcomm_error(HCOMM_ERR_TRANSPORT, "ucx: ucp_config_read: %s",
                           ucs_status_string(us));
    ucx_tune_config(cfg);

    memset(&params, 0, sizeof params);
    params.field_mask =
        UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
    params.features = UCP_FEATURE_TAG;
    params.mt_workers_shared = 0; /* one worker */
    if (mpi_active() &&
        PMPI_Comm_size(MPI_COMM_WORLD, &world_size) == MPI_SUCCESS) {
        params.field_mask |= UCP_PARAM_FIELD_ESTIMATED_NUM_EPS;
        params.estimated_num_eps = (size_t)world_size;
    }
    us = ucp_init(&params, cfg, &g.ctx);
    ucp_config_release(cfg);
    if (us != UCS_OK) {
        g.ctx = NULL;
        return hcomm_error(HCOMM_ERR_TRANSPORT, "ucx: ucp_init: %s",
                           ucs_status_string(us));
    }

    memset(&wparams, 0, sizeof wparams);
    wparams.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wparams.thread_mode =
        thread_multiple ? UCS_THREAD_MODE_MULTI : UCS_THREAD_MODE_SERIALIZED;
    us = ucp_worker_create(g.ctx, &wparams, &g.worker);
    if (us != UCS_OK) {
        g.worker = NULL;
        st = hcomm_error(HCOMM_ERR_TRANSPORT, "ucx: ucp_worker_create: %s",
                         ucs_status_string(us));
        goto err_ctx;
    }

    wattr.field_mask = UCP_WORKER_ATTR_FIELD_THREAD_MODE;
    us = ucp_worker_query(g.worker, &wattr);
    if (us != UCS_OK) {
        st = hcomm_error(HCOMM_ERR_TRANSPORT, "ucx: ucp_worker_query: %s",
                         ucs_status_string(us));
        goto err_worker;
    }
    if (thread_multiple && wattr.thread_mode != UCS_THREAD_MODE_MULTI) {
        st = hcomm_error(HCOMM_ERR_UNSUPPORTED,
                         "ucx: this UCX build has no multi-threaded worker");
        goto err_worker;
    }

    us = ucp_worker_get_address(g.worker, &g.addr, &g.addr_len);
    if (us != UCS_OK) {
        g.addr = NULL;
        st = hcomm_error(HCOMM_ERR_TRANSPORT, "ucx: ucp_worker_get_address: %s",
                         ucs_status_string(us));
        goto err_worker;
    }

    ucp_get_version(&major, &minor, &release);
    g.recv_attr = (major > 1 || (major == 1 && minor >= 16))
                      ? HCOMM_UCX_RECV_ATTR_IMM
                      : HCOMM_UCX_RECV_ATTR_NO_IMM;
    g.thread_multiple = thread_multiple != 0;
    /* UCX built with CUDA (cuda_copy, cuda_ipc) moves device memory
     * itself; without it HCOMM stages device data through host memory. */
    ucp_context_attr_t cattr;
    cattr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
    g.cuda_memory = ucp_context_query(g.ctx, &cattr) == UCS_OK &&
                    (cattr.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA));
    __atomic_store_n(&g.available, 1, __ATOMIC_RELEASE);
    hcomm_debug("ucx: UCX %u.%u.%u initialised, worker address %zu bytes, "
                "thread mode %s, CUDA memory %s",
                major, minor, release, g.addr_len,
                thread_multiple ? "multi" : "serialized",
                g.cuda_memory ? "yes" : "no");
    return HCOMM_SUCCESS;

err_worker:
    ucp_worker_destroy(g.worker);
    g.worker = NULL;
err_ctx:
    ucp_cleanup(g.ctx);
    g.ctx = NULL;
    return st;
}

/* UCX prints its own warnings on stdout by default. HCOMM never writes
 * there, so while HCOMM holds UCX, UCX's messages go through HCOMM's log,
 * on stderr, at the matching level. */
static ucs_log_func_rc_t
ucx_log_to_stderr(const char *file, unsigned line, const char *function,
                  ucs_log_level_t level, const ucs_log_component_config_t *comp,
                  const char *message, va_list ap) {
    (void)comp;
    hcomm_log_level_t ours = level <= UCS_LOG_LEVEL_ERROR  ? HCOMM_LOG_ERROR
                             : level == UCS_LOG_LEVEL_WARN ? HCOMM_LOG_WARN
                             : level <= UCS_LOG_LEVEL_INFO ? HCOMM_LOG_INFO
                                                           : HCOMM_LOG_DEBUG;
    if ((int)ours <= hcomm_log_level) {
        char text[512];
        vsnprintf(text, sizeof(text), message, ap);
        hcomm_log_write(ours, file, (int)line, "ucx %s: %s", function, text);
    }
    return UCS_LOG_FUNC_RC_STOP;
}

hcomm_status_t hcomm_ucx_init(int thread_multiple) {
    hcomm_status_t st = HCOMM_SUCCESS;

    pthread_mutex_lock(&g.lock);
    if (!g.init_called) ucs_log_push_handler(ucx_log_to_stderr);
    g.init_called = 1;
    if (!g.available)
        st = ucx_init_locked(thread_multiple);
    else if (thread_multiple && !g.thread_multiple)
        st = hcomm_error(HCOMM_ERR_UNSUPPORTED,
                         "ucx: already initialised without thread support");
    pthread_mutex_unlock(&g.lock);
    return st;
}

int hcomm_ucx_available(void) {
    return __atomic_load_n(&g.available, __ATOMIC_ACQUIRE);
}

int hcomm_ucx_num_endpoints(void) {
    int n;
    pthread_mutex_lock(&g.lock);
    n = g.num_eps;
    pthread_mutex_unlock(&g.lock);
    return n;
}

/* Waits for an endpoint close request until deadline, then frees it. */
static void ucx_wait_close(void *req, double deadline) {
    ucs_status_t us;
    unsigned i;

    for (i = 0; (us = ucp_request_check_status(req)) == UCS_INPROGRESS; i++) {
        ucp_worker_progress(g.worker);
        if ((i & 1023) == 1023 && hcomm_now_seconds() > deadline) break;
    }
    if (us != UCS_OK)
        hcomm_warn("ucx: closing an endpoint: %s", ucs_status_string(us));
    ucp_request_free(req);
}

/* Progresses until the worker has been idle for a while (bounded), so that
 * messages already on their way (e.g. the rendezvous acknowledgement for an
 * abandoned send, see ucx_cancel) are handled before their endpoint closes:
 * UCX 1.13 crashes on such a message after the close. */
static void ucx_quiesce(void) {
    unsigned long abandoned =
        __atomic_load_n(&hcomm_ucx_abandoned, __ATOMIC_RELAXED);
    double deadline =
        hcomm_now_seconds() +
        (abandoned ? HCOMM_UCX_QUIESCE_S : HCOMM_UCX_QUIESCE_S / 10);
    unsigned idle = 0, i;

    if (abandoned)
        hcomm_warn("ucx: finalize: %lu requests were abandoned by cancel and "
                   "may still be running",
                   abandoned);
    for (i = 1; idle < 1024; i++) {
        idle = ucp_worker_progress(g.worker) ? 0 : idle + 1;
        if ((i & 255) == 0 && hcomm_now_seconds() > deadline) break;
    }
}

/* Flush-closes every cached endpoint, all in flight at once. */
static void ucx_close_eps(void) {
    double deadline = hcomm_now_seconds() + hcomm_ucx_close_seconds();
    void **reqs = g.neps > 0 ? calloc((size_t)g.neps, sizeof *reqs) : NULL;
    ucp_request_param_t p;
    ucs_status_ptr_t sp;
    int i;

    memset(&p, 0, sizeof p);
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = 0; /* flush mode: our operations reach the peers first */
    for (i = 0; i < g.neps; i++) {
        if (g.eps[i] == NULL) continue;
        sp = ucp_ep_close_nbx(g.eps[i], &p);
        g.eps[i] = NULL;
        if (UCS_PTR_IS_ERR(sp))
            hcomm_warn("ucx: closing the endpoint to world rank %d: %s", i,
                       ucs_status_string(UCS_PTR_STATUS(sp)));
        else if (sp != NULL && reqs != NULL)
            reqs[i] = sp;
        else if (sp != NULL) /* no memory for the array: one at a time */
            ucx_wait_close(sp, deadline);
    }
    for (i = 0; reqs != NULL && i < g.neps; i++)
        if (reqs[i] != NULL) ucx_wait_close(reqs[i], deadline);
    free(reqs);
    g.num_eps = 0;
}

/* A barrier over MPI_COMM_WORLD that keeps the worker progressing, so that
 * peers still flushing towards us complete before our worker goes away. */
static void ucx_fence(void) {
    MPI_Request r;
    int flag = 0;

    if (!mpi_active()) return;
    if (PMPI_Ibarrier(MPI_COMM_WORLD, &r) != MPI_SUCCESS) {
        hcomm_warn("ucx: finalize: PMPI_Ibarrier failed");
        return;
    }
    /* Bounded: a dead peer never reaches the barrier. */
    double deadline = hcomm_now_seconds() + hcomm_cfg_double(HCOMM_CFG_TIMEOUT);
    for (unsigned i = 1; !flag; i++) {
        if (g.worker != NULL) ucp_worker_progress(g.worker);
        hcomm_ucx_rails_progress();
        if (PMPI_Test(&r, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
            hcomm_warn("ucx: finalize: PMPI_Test failed");
            return;
        }
        if ((i & 1023) == 0 && hcomm_now_seconds() > deadline) {
            hcomm_warn("ucx: finalize: some rank never reached the final "
                       "barrier (HCOMM_TIMEOUT); going on without it");
            return;
        }
    }
}

void hcomm_ucx_finalize(void) {
    pthread_mutex_lock(&g.lock);
    if (!g.init_called) {
        pthread_mutex_unlock(&g.lock);
        return;
    }
    if (g.available) {
        ucx_quiesce();
        ucx_close_eps();
        hcomm_ucx_rails_close_eps();
    }
    ucx_fence();
    hcomm_ucx_rails_close();
    if (g.available) {
        __atomic_store_n(&g.available, 0, __ATOMIC_RELEASE);
        ucp_worker_release_address(g.worker, g.addr);
        ucp_worker_destroy(g.worker);
        ucp_cleanup(g.ctx);
    }
    free(g.eps);
    g.eps = NULL;
    g.neps = 0;
    g.addr = NULL;
    g.addr_len = 0;
    g.worker = NULL;
    g.ctx = NULL;
    g.init_called = 0;
    g.thread_multiple = 0;
    ucs_log_pop_handler();
    pthread_mutex_unlock(&g.lock);
}

/* ---- transport creation ----------------------------------------------- */

/* Every rank contributes vals[0..n) and gets their maxima. vals[0] is each
 * rank's status so far (mine, whose message is already recorded), so that
 * all ranks agree on failure and return the same status. */
hcomm_status_t hcomm_ucx_agree(MPI_Comm comm, int *vals, int n) {
    int mine = vals[0];

    if (PMPI_Allreduce(MPI_IN_PLACE, vals, n, MPI_INT, MPI_MAX, comm) !=
        MPI_SUCCESS)
        return hcomm_error(HCOMM_ERR_TRANSPORT, "ucx: PMPI_Allreduce failed");
    if (vals[0] != HCOMM_SUCCESS && vals[0] != mine)
        return hcomm_error((hcomm_status_t)vals[0],
                           "ucx: creating the transport failed on another "
                           "rank (%s)",
                           hcomm_strerror((hcomm_status_t)vals[0]));
    return (hcomm_status_t)vals[0];
}

void hcomm_ucx_lock(void) {
    pthread_mutex_lock(&g.lock);
}

void hcomm_ucx_unlock(void) {
    pthread_mutex_unlock(&g.lock);
}

int hcomm_ucx_world_size(void) {
    return g.neps;
}

/* hcomm_world_ranks, each of them one of this process's endpoint slots. */
static hcomm_status_t ucx_world_ranks(MPI_Comm comm, int size, int *world) {
    hcomm_status_t st = hcomm_world_ranks(comm, size, world);
    for (int i = 0; st == HCOMM_SUCCESS && i < size; i++)
        if (world[i] == MPI_UNDEFINED || world[i] < 0 || world[i] >= g.neps)
            st = hcomm_error(HCOMM_ERR_UNSUPPORTED,
                             "ucx: rank %d of the communicator is not in "
                             "MPI_COMM_WORLD",
                             i);
    return st;
}

/* Makes sure the endpoint cache has one slot per MPI_COMM_WORLD rank. */
static hcomm_status_t ucx_cache_ready_locked(void) {
    int n;

    if (g.eps != NULL) return HCOMM_SUCCESS;
    if (PMPI_Comm_size(MPI_COMM_WORLD, &n) != MPI_SUCCESS || n <= 0)
        return hcomm_error(HCOMM_ERR_TRANSPORT,
                           "ucx: PMPI_Comm_size(MPI_COMM_WORLD) failed");
    g.eps = calloc((size_t)n, sizeof *g.eps);
    if (g.eps == NULL)
        return hcomm_error(HCOMM_ERR_NO_MEMORY, "ucx: endpoint cache of %d", n);
    g.neps = n;
    return HCOMM_SUCCESS;
}

/* Points c->eps at the cached endpoints, creating the missing ones from the
 * gathered addresses (slot bytes per rank: a uint32_t length, then the
 * address). */
static hcomm_status_t ucx_connect_locked(hcomm_ucx_comm_t *c, int size,
                                         const int *world, const char *all,
                                         size_t slot) {
    ucp_ep_params_t ep;
    ucs_status_t us;
    uint32_t len;
    int i;

    for (i = 0; i < size; i++) {
        const char *s = all + (size_t)i * slot;
        if (g.eps[world[i]] == NULL) {
            memcpy(&len, s, sizeof len);
            if (len == 0 || len > slot - sizeof len)
                return hcomm_error(HCOMM_ERR_INTERNAL,
                                   "ucx: bad address length %u from rank %d",
                                   (unsigned)len, i);
            memset(&ep, 0, sizeof ep);
            ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
            ep.address = (const ucp_address_t *)(s + sizeof len);
            us = ucp_ep_create(g.worker, &ep, &g.eps[world[i]]);
            if (us != UCS_OK) {
                g.eps[world[i]] = NULL;
                return hcomm_error(HCOMM_ERR_TRANSPORT,
                                   "ucx: ucp_ep_create to world rank %d: %s",
                                   world[i], ucs_status_string(us));
            }
            g.num_eps++;
        }
        c->eps[i] = g.eps[world[i]];
    }
    return HCOMM_SUCCESS;
}

hcomm_status_t hcomm_ucx_tp_create(MPI_Comm comm, uint16_t comm_id,
                                   const struct hcomm_topo *topo,
                                   hcomm_tp_t **out) {
    hcomm_tp_t *tp = NULL;
    hcomm_ucx_comm_t *c = NULL;
    int *world = NULL;
    char *all = NULL;
    size_t slot = 0;
    int rank, size, inter = 0, i, vals[6], device_ok, nrails;
    hcomm_status_t st = HCOMM_SUCCESS;

    if (out == NULL)
        return hcomm_error(HCOMM_ERR_INVALID_ARG, "ucx: out is NULL");
    *out = NULL;
    if (!hcomm_ucx_available())
        return hcomm_error(HCOMM_ERR_NOT_INITIALIZED, "ucx: not initialised");
    if (comm == MPI_COMM_NULL)
        return hcomm_error(HCOMM_ERR_INVALID_COMM, "ucx: MPI_COMM_NULL");
    if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS ||
        PMPI_Comm_rank(comm, &rank) != MPI_SUCCESS ||
        PMPI_Comm_size(comm, &size) != MPI_SUCCESS)
        return hcomm_error(HCOMM_ERR_INVALID_COMM, "ucx: not a communicator");
    if (inter)
        return hcomm_error(HCOMM_ERR_UNSUPPORTED,
                           "ucx: intercommunicators are not supported");
    if (size > HCOMM_UCX_MAX_RANKS)
        return hcomm_error(HCOMM_ERR_UNSUPPORTED,
                           "ucx: %d ranks, the tag has room for %d", size,
                           HCOMM_UCX_MAX_RANKS);

    /* 1. local preparation; then agree on success and the address size */
    tp = calloc(1, sizeof *tp);
    c = calloc(1, sizeof *c + (size_t)size * sizeof c->eps[0]);
    world = malloc(2 * (size_t)size * sizeof *world);
    if (tp == NULL || c == NULL || world == NULL)
        st = hcomm_error(HCOMM_ERR_NO_MEMORY, "ucx: transport for %d ranks",
                         size);
    if (st == HCOMM_SUCCESS) {
        pthread_mutex_lock(&g.lock);
        st = ucx_cache_ready_locked();
        pthread_mutex_unlock(&g.lock);
    }
    if (st == HCOMM_SUCCESS) st = ucx_world_ranks(comm, size, world);
    vals[0] = (int)st;
    vals[1] = g.addr_len > INT_MAX - 64 ? INT_MAX - 64 : (int)g.addr_len;
    vals[2] = 0; /* does any rank meet a world rank for the first time? */
    vals[3] = !g.cuda_memory; /* does any rank's UCX lack device memory? */
    /* multipath: the fewest rails of any rank (as minus the maximum) */
    vals[4] = 0;
    pthread_mutex_lock(&g.lock);
    vals[5] = -hcomm_ucx_rails_count();
    pthread_mutex_unlock(&g.lock);
    if (st == HCOMM_SUCCESS) {
        pthread_mutex_lock(&g.lock);
        for (i = 0; i < size && !vals[2]; i++)
            vals[2] = g.eps[world[i]] == NULL;
        pthread_mutex_unlock(&g.lock);
    }
    if ((st = hcomm_ucx_agree(comm, vals, 6)) != HCOMM_SUCCESS) goto out;
    nrails = -vals[5];
    /* Every rank alike, as the plans' chunk size that depends on it must
     * be (api.c). */
    device_ok = !vals[3];
    if (!vals[2]) { /* all endpoints exist everywhere: no exchange */
        pthread_mutex_lock(&g.lock);
        for (i = 0; i < size; i++)
            c->eps[i] = g.eps[world[i]];
        pthread_mutex_unlock(&g.lock);
        goto ready;
    }

    /* 2. room for every rank's address in a fixed-size slot */
    slot = (sizeof(uint32_t) + (size_t)vals[1] + 7) & ~(size_t)7;
    all = malloc(slot * (size_t)size);
    vals[0] = (int)(all == NULL ? hcomm_error(HCOMM_ERR_NO_MEMORY,
                                              "ucx: %zu bytes for addresses",
                                              slot * (size_t)size)
                                : HCOMM_SUCCESS);
    if ((st = hcomm_ucx_agree(comm, vals, 1)) != HCOMM_SUCCESS) goto out;

    /* 3. exchange the worker addresses */
    {
        char *mine = all + (size_t)rank * slot;
        uint32_t len = (uint32_t)g.addr_len;
        memset(mine, 0, slot);
        memcpy(mine, &len, sizeof len);
        memcpy(mine + sizeof len, g.addr, g.addr_len);
    }
    if (PMPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, (int)slot,
                       MPI_BYTE, comm) != MPI_SUCCESS) {
        st = hcomm_error(HCOMM_ERR_TRANSPORT, "ucx: PMPI_Allgather failed");
        goto out;
    }

    /* 4. endpoints for the world ranks not met before; agree once more */
    pthread_mutex_lock(&g.lock);
    vals[0] = ucx_connect_locked(c, size, world, all, slot);
    pthread_mutex_unlock(&g.lock);
    if ((st = hcomm_ucx_agree(comm, vals, 1)) != HCOMM_SUCCESS) goto out;

ready:
    c->worker = g.worker;
    c->comm_id = comm_id;
    c->size = size;
    c->send_base = hcomm_ucx_tag_base(comm_id, rank);
    c->recv_base = hcomm_ucx_tag_base(comm_id, 0);
    c->recv_attr = g.recv_attr;
    if (nrails >= 2 &&
        (st = hcomm_ucx_rails_setup(
             comm, c, rank, world, nrails, topo, g.thread_multiple,
             hcomm_cfg_double(HCOMM_CFG_TIMEOUT))) != HCOMM_SUCCESS)
        goto out;
    tp->ops = &hcomm_ucx_ops;
    tp->priv = c;
    tp->rank = rank;
    tp->size = size;
    tp->device_ok = device_ok;
    /* Multipath sends each message over one device: more, smaller ones
     * keep every device busy. 2 hosts x 2 ranks on links of 1 Gbit/s and
     * 500 Mbit/s (perf/netns_links.sh), a 64 MiB allreduce: 635 ms with
     * 1 MiB chunks, 495 with 128 KiB, 426 with 64 KiB and with 32 KiB,
     * against 601 over the faster link alone. */
    tp->chunk_max = c->nrails ? (size_t)64 << 10 : 0;
    *out = tp;
    tp = NULL;
    c = NULL;
    hcomm_debug("ucx: transport for comm_id %u, rank %d of %d, %d endpoints",
                (unsigned)comm_id, rank, size, g.num_eps);
out:
    free(all);
    free(world);
    free(c);
    free(tp);
    return st;
}

void hcomm_ucx_tp_destroy(hcomm_tp_t *tp) {
    if (tp == NULL) return;
    free(((hcomm_ucx_comm_t *)tp->priv)->rail_eps);
    free(((hcomm_ucx_comm_t *)tp->priv)->rail_near);
    free(tp->priv);
    free(tp);
}
