/* The in-process verifier and its loopback transport. */
#include "coll/verify.h"
#include "coll/exec.h"
#include "core/pool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A posted send or receive waiting for its other half. */
typedef struct lb_msg {
    int src, dst;
    hcomm_tag_t tag;
    char *buf;
    size_t bytes;
    hcomm_tp_req_t *req;
    struct lb_msg *next;
} lb_msg_t;

/* Messages in posting order; tail: the last one's next (or &head), so
 * that a plan of thousands of pipelined messages appends in O(1). */
typedef struct {
    lb_msg_t *head, **tail;
} lb_queue_t;

typedef struct {
    int n;
    const int *node_of;  /* NULL: one node */
    uint64_t cross_node; /* bytes sent between nodes */
    lb_queue_t *sends;   /* per destination */
    lb_queue_t *recvs;   /* per destination */
    unsigned long events;
    char err[256];
} lb_world_t;

typedef struct {
    hcomm_tp_t tp;
    lb_world_t *world;
} lb_rank_t;

static int same_tag(hcomm_tag_t a, hcomm_tag_t b) {
    return a.kind == b.kind && a.seq == b.seq && a.step == b.step;
}

/* Removes and returns the first message in q from src with tag. */
static lb_msg_t *take(lb_queue_t *q, int src, hcomm_tag_t tag) {
    for (lb_msg_t **link = &q->head; *link; link = &(*link)->next) {
        lb_msg_t *m = *link;
        if (m->src == src && same_tag(m->tag, tag)) {
            *link = m->next;
            if (q->tail == &m->next) q->tail = link;
            return m;
        }
    }
    return NULL;
}

static void append(lb_queue_t *q, lb_msg_t *m) {
    m->next = NULL;
    *q->tail = m;
    q->tail = &m->next;
}

static hcomm_status_t deliver(lb_world_t *w, lb_msg_t *send, lb_msg_t *recv) {
    hcomm_status_t st = HCOMM_SUCCESS;
    if (send->bytes != recv->bytes) {
        snprintf(w->err, sizeof(w->err),
                 "rank %d sent %zu bytes to rank %d, which expected %zu "
                 "(tag %u)",
                 send->src, send->bytes, send->dst, recv->bytes,
                 (unsigned)send->tag.step);
        st = HCOMM_ERR_TRANSPORT;
    } else if (send->bytes) {
        memcpy(recv->buf, send->buf, send->bytes);
    }
    send->req->status = recv->req->status = st;
    send->req->done = recv->req->done = 1;
    free(send);
    free(recv);
    w->events++;
    return st;
}

static hcomm_status_t post(hcomm_tp_t *tp, int peer, void *buf, size_t bytes,
                           hcomm_tag_t tag, hcomm_tp_req_t *req, int is_send) {
    lb_rank_t *me = (lb_rank_t *)tp;
    lb_world_t *w = me->world;
    if (peer < 0 || peer >= w->n) {
        snprintf(w->err, sizeof(w->err), "rank %d addressed rank %d", tp->rank,
                 peer);
        return HCOMM_ERR_INTERNAL;
    }
    lb_msg_t *m = malloc(sizeof(*m));
    if (!m) return HCOMM_ERR_NO_MEMORY;
    *m = (lb_msg_t){.src = is_send ? tp->rank : peer,
                    .dst = is_send ? peer : tp->rank,
                    .tag = tag,
                    .buf = buf,
                    .bytes = bytes,
                    .req = req};
    req->done = 0;
    w->events++;
    if (is_send && w->node_of && w->node_of[tp->rank] != w->node_of[peer])
        w->cross_node += bytes;
    /* A send completes only when its receive is posted: no buffering, so
     * a plan that needs buffering to make progress deadlocks here. */
    lb_msg_t *other = is_send ? take(&w->recvs[m->dst], m->src, tag)
                              : take(&w->sends[m->dst], m->src, tag);
    if (other) return is_send ? deliver(w, m, other) : deliver(w, other, m);
    append(is_send ? &w->sends[m->dst] : &w->recvs[m->dst], m);
    return HCOMM_SUCCESS;
}

static hcomm_status_t lb_isend(hcomm_tp_t *tp, int peer, const void *buf,
                               size_t bytes, hcomm_tag_t tag,
                               hcomm_tp_req_t *req) {
    return post(tp, peer, (void *)(uintptr_t)buf, bytes, tag, req, 1);
}

static hcomm_status_t lb_irecv(hcomm_tp_t *tp, int peer, void *buf,
                               size_t bytes, hcomm_tag_t tag,
                               hcomm_tp_req_t *req) {
    return post(tp, peer, buf, bytes, tag, req, 0);
}

static void lb_nothing(hcomm_tp_t *tp) {
    (void)tp;
}

static void lb_test(hcomm_tp_t *tp, hcomm_tp_req_t *req) {
    (void)tp;
    (void)req;
}

static void lb_cancel(hcomm_tp_t *tp, hcomm_tp_req_t *req) {
    (void)tp;
    (void)req;
}

static const hcomm_tp_ops_t lb_ops = {"loopback", lb_isend,  lb_irecv,  lb_test,
                                      lb_nothing, lb_cancel, lb_nothing};

static void free_list(lb_msg_t *m) {
    while (m) {
        lb_msg_t *next = m->next;
        free(m);
        m = next;
    }
}

static void describe_leftovers(lb_world_t *w) {
    for (int r = 0; r < w->n; r++) {
        lb_msg_t *m = w->sends[r].head ? w->sends[r].head : w->recvs[r].head;
        if (!m) continue;
        snprintf(w->err, sizeof(w->err),
                 "unmatched %s: rank %d -> rank %d, %zu bytes, tag %u",
                 w->sends[r].head ? "send" : "receive", m->src, m->dst,
                 m->bytes, (unsigned)m->tag.step);
        return;
    }
}

/* Scratch for every run comes from one pool: the unit tests run thousands
 * of plans, and fresh pages for each would dominate their time. */
static hcomm_pool_t *scratch_pool(void) {
    static hcomm_pool_t pool;
    static int ready;
    if (!ready) {
        hcomm_pool_init(&pool, (size_t)1 << 31);
        ready = 1;
    }
    return &pool;
}

typedef struct {
    lb_world_t world;
    lb_rank_t *ranks;
    hcomm_plan_t *plans;
    hcomm_exec_t *execs;
    int *started;
    char **send_copies;
} verify_state_t;

static const hcomm_algo_t *rank_algo(const hcomm_verify_args_t *a, int r) {
    return a->rank_algos ? a->rank_algos[r] : a->algo;
}

static int rank_root(const hcomm_verify_args_t *a, int r) {
    return a->rank_roots ? a->rank_roots[r] : a->root;
}

static const hcomm_vspec_t *rank_v(const hcomm_verify_args_t *a, int r) {
    return a->vspecs ? &a->vspecs[r] : NULL;
}

/* Elements of rank r's send (send 1) or receive buffer. */
static size_t buffer_count(const hcomm_verify_args_t *a, int r, int send) {
    hcomm_coll_t coll = rank_algo(a, r)->coll;
    if (a->vspecs)
        return hcomm_coll_v_extent(coll, rank_v(a, r), a->size, r, send);
    return send ? hcomm_coll_send_count(coll, a->size, r, rank_root(a, r),
                                        a->count)
                : hcomm_coll_recv_count(coll, a->size, r, rank_root(a, r),
                                        a->count);
}

static hcomm_status_t build_all(verify_state_t *v, const hcomm_verify_args_t *a,
                                char *err, size_t errlen) {
    size_t esize = hcomm_dtype_size(a->dtype);
    for (int r = 0; r < a->size; r++) {
        const hcomm_algo_t *algo = rank_algo(a, r);
        hcomm_plan_args_t pa = {.coll = algo->coll,
                                .rank = r,
                                .size = a->size,
                                .root = rank_root(a, r),
                                .count = a->count,
                                .esize = esize,
                                .inplace = a->inplace,
                                .scale = a->op == HCOMM_AVG,
                                .chunk_bytes = a->chunk_bytes,
                                .node_of = a->node_of,
                                .v = rank_v(a, r)};
        hcomm_plan_init(&v->plans[r]);
        hcomm_status_t st = algo->build(&pa, &v->plans[r]);
        if (st != HCOMM_SUCCESS) {
            snprintf(err, errlen, "%s declined rank %d of %d", algo->name, r,
                     a->size);
            return st;
        }
        v->ranks[r].tp =
            (hcomm_tp_t){.ops = &lb_ops, .rank = r, .size = a->size};
        v->ranks[r].world = &v->world;
        hcomm_exec_args_t ea = {.plan = &v->plans[r],
                                .tp = &v->ranks[r].tp,
                                .pool = scratch_pool(),
                                .sendbuf = a->sendbufs[r],
                                .recvbuf = a->recvbufs[r],
                                .dtype = a->dtype,
                                .op = a->op,
                                .divisor = a->size,
                                .tag_kind = HCOMM_TAG_COLL,
                                .seq = 1,
                                .rng = a->seed * 2654435761u +
                                       (uint32_t)r * 40503u + 1u};
        if (!ea.rng) ea.rng = 1;
        st = hcomm_exec_start(&v->execs[r], &ea);
        if (st != HCOMM_SUCCESS) {
            snprintf(err, errlen, "executor start failed on rank %d", r);
            return st;
        }
        v->started[r] = 1;
    }
    return HCOMM_SUCCESS;
}

static hcomm_status_t run_all(verify_state_t *v, int n, char *err,
                              size_t errlen) {
    unsigned long last = (unsigned long)-1;
    for (;;) {
        int pending = 0;
        unsigned long sig = v->world.events;
        for (int r = 0; r < n; r++) {
            hcomm_status_t st = hcomm_exec_progress(&v->execs[r]);
            if (st == HCOMM_ERR_IN_PROGRESS) {
                pending++;
            } else if (st != HCOMM_SUCCESS) {
                snprintf(err, errlen, "rank %d failed: %s", r,
                         v->world.err[0] ? v->world.err : hcomm_strerror(st));
                return st;
            }
            sig += v->execs[r].first_open;
        }
        if (!pending) break;
        if (sig == last) {
            int w = snprintf(err, errlen, "deadlock:");
            for (int r = 0; r < n && w > 0 && (size_t)w < errlen; r++) {
                char what[256];
                if (hcomm_exec_describe_wait(&v->execs[r], what, sizeof(what)))
                    w += snprintf(err + w, errlen - (size_t)w, " [%d: %s]", r,
                                  what);
            }
            return HCOMM_ERR_INTERNAL;
        }
        last = sig;
    }
    describe_leftovers(&v->world);
    if (v->world.err[0]) {
        snprintf(err, errlen, "%s", v->world.err);
        return HCOMM_ERR_INTERNAL;
    }
    return HCOMM_SUCCESS;
}

/* A receive buffer inside the send buffer (an in-place form passed without
 * the in-place flag, as NCCL's reduce-scatter) changes the send buffer
 * legitimately: that rank's send buffer is not checked. */
static int recv_inside_send(const hcomm_verify_args_t *a, int r) {
    size_t esize = hcomm_dtype_size(a->dtype);
    uintptr_t s = (uintptr_t)a->sendbufs[r], q = (uintptr_t)a->recvbufs[r];
    size_t sn = esize * buffer_count(a, r, 1);
    size_t qn = esize * buffer_count(a, r, 0);
    return q && qn && q < s + sn && s < q + qn;
}

hcomm_status_t hcomm_verify_run(const hcomm_verify_args_t *a, char *err,
                                size_t errlen) {
    int n = a->size;
    size_t esize = hcomm_dtype_size(a->dtype);
    verify_state_t v;
    memset(&v, 0, sizeof(v));
    hcomm_status_t st = HCOMM_ERR_NO_MEMORY;
    err[0] = '\0';
    v.world.n = n;
    v.world.node_of = a->node_of;
    v.world.sends = calloc((size_t)n, sizeof(lb_queue_t));
    v.world.recvs = calloc((size_t)n, sizeof(lb_queue_t));
    v.ranks = calloc((size_t)n, sizeof(*v.ranks));
    v.plans = calloc((size_t)n, sizeof(*v.plans));
    v.execs = calloc((size_t)n, sizeof(*v.execs));
    v.started = calloc((size_t)n, sizeof(int));
    v.send_copies = calloc((size_t)n, sizeof(char *));
    if (!v.world.sends || !v.world.recvs || !v.ranks || !v.plans || !v.execs ||
        !v.started || !v.send_copies)
        goto out;
    for (int r = 0; r < n; r++) {
        v.world.sends[r].tail = &v.world.sends[r].head;
        v.world.recvs[r].tail = &v.world.recvs[r].head;
    }
    if (!a->inplace) {
        for (int r = 0; r < n; r++) {
            size_t send_bytes = esize * buffer_count(a, r, 1);
            if (!a->sendbufs[r] || !send_bytes || recv_inside_send(a, r))
                continue;
            if (!(v.send_copies[r] = malloc(send_bytes))) goto out;
            memcpy(v.send_copies[r], a->sendbufs[r], send_bytes);
        }
    }
    st = build_all(&v, a, err, errlen);
    if (st == HCOMM_SUCCESS) st = run_all(&v, n, err, errlen);
    if (a->cross_node_bytes) *a->cross_node_bytes = v.world.cross_node;
    for (int r = 0; st == HCOMM_SUCCESS && r < n; r++) {
        size_t send_bytes = esize * buffer_count(a, r, 1);
        if (v.send_copies[r] &&
            memcmp(v.send_copies[r], a->sendbufs[r], send_bytes) != 0) {
            snprintf(err, errlen, "rank %d's send buffer was written", r);
            st = HCOMM_ERR_INTERNAL;
        }
    }
out:
    for (int r = 0; r < n; r++) {
        if (v.started && v.started[r]) hcomm_exec_finish(&v.execs[r]);
        if (v.plans) hcomm_plan_release(&v.plans[r]);
        if (v.send_copies) free(v.send_copies[r]);
        if (v.world.sends) free_list(v.world.sends[r].head);
        if (v.world.recvs) free_list(v.world.recvs[r].head);
    }
    free(v.world.sends);
    free(v.world.recvs);
    free(v.ranks);
    free(v.plans);
    free(v.execs);
    free(v.started);
    free(v.send_copies);
    if (st != HCOMM_SUCCESS && !err[0])
        snprintf(err, errlen, "%s", hcomm_strerror(st));
    return st;
}
