/* Entry points: argument checks, algorithm choice, plan, run. */
#include "coll/hier_node.h"
#include "coll/select.h"
#include "core/config.h"
#include "core/context.h"
#include "core/log.h"
#include "core/request.h"
#include "kernels/reduce.h"
#include "topo/topo.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    hcomm_coll_t coll;
    const void *sendbuf;
    void *recvbuf;
    size_t count;
    hcomm_dtype_t dtype;
    hcomm_op_t op;
    int root; /* rooted collectives; the peer of send/recv */
    int tag;  /* send/recv */
} call_t;

static int reduces(hcomm_coll_t coll) {
    return coll == HCOMM_COLL_ALLREDUCE || coll == HCOMM_COLL_REDUCE_SCATTER ||
           coll == HCOMM_COLL_REDUCE;
}

static hcomm_status_t check_call(const call_t *k, const hcomm_comm_impl_t *c) {
    size_t esize = hcomm_dtype_size(k->dtype), total;
    if (esize == 0)
        return hcomm_error(HCOMM_ERR_INVALID_DTYPE, "%s: unknown data type %d",
                           hcomm_coll_name(k->coll), (int)k->dtype);
    if (reduces(k->coll) && (unsigned)k->op >= HCOMM_OP_COUNT)
        return hcomm_error(HCOMM_ERR_INVALID_OP, "%s: unknown operation %d",
                           hcomm_coll_name(k->coll), (int)k->op);
    /* Every buffer holds at most size * count elements; offsets inside
     * plans must not wrap either (checked without a division, which costs
     * as much as the rest of a small call's checks). */
    if (__builtin_mul_overflow(k->count, esize * (size_t)c->size * 2, &total))
        return hcomm_error(HCOMM_ERR_OVERFLOW,
                           "%s: %zu elements of %zu bytes overflow",
                           hcomm_coll_name(k->coll), k->count, esize);
    int rooted = k->coll == HCOMM_COLL_BCAST || k->coll == HCOMM_COLL_REDUCE ||
                 k->coll == HCOMM_COLL_GATHER || k->coll == HCOMM_COLL_SCATTER;
    int p2p = k->coll == HCOMM_COLL_SEND || k->coll == HCOMM_COLL_RECV;
    if ((rooted || p2p) && (k->root < 0 || k->root >= c->size))
        return hcomm_error(HCOMM_ERR_INVALID_ARG,
                           "%s: %s %d is out of range (communicator of %d)",
                           hcomm_coll_name(k->coll), p2p ? "peer" : "root",
                           k->root, c->size);
    if (p2p && (k->tag < 0 || k->tag > HCOMM_TAG_MAX))
        return hcomm_error(HCOMM_ERR_INVALID_ARG,
                           "%s: tag %d is out of range 0..%d",
                           hcomm_coll_name(k->coll), k->tag, HCOMM_TAG_MAX);
    /* Which buffers this rank reads or writes. */
    int is_root = c->rank == k->root;
    int needs_send = k->coll != HCOMM_COLL_RECV &&
                     k->coll != HCOMM_COLL_BARRIER &&
                     !(k->coll == HCOMM_COLL_SCATTER && !is_root);
    int needs_recv =
        k->coll != HCOMM_COLL_SEND && k->coll != HCOMM_COLL_BARRIER &&
        !((k->coll == HCOMM_COLL_REDUCE || k->coll == HCOMM_COLL_GATHER) &&
          !is_root);
    if (k->count > 0 &&
        ((needs_send && !k->sendbuf) || (needs_recv && !k->recvbuf)))
        return hcomm_error(
            HCOMM_ERR_INVALID_ARG, "%s: %s buffer is NULL with count %zu",
            hcomm_coll_name(k->coll),
            needs_send && !k->sendbuf ? "send" : "receive", k->count);
    return HCOMM_SUCCESS;
}

/* The in-place forms of hcomm.h: the same buffer, or this rank's block of
 * the larger buffer given as the smaller one. */
static int is_inplace(const call_t *k, const hcomm_comm_impl_t *c,
                      size_t esize) {
    const char *s = k->sendbuf, *r = k->recvbuf;
    size_t block = k->count * esize;
    switch (k->coll) {
    case HCOMM_COLL_ALLGATHER:
        return s == r + (size_t)c->rank * block;
    case HCOMM_COLL_GATHER:
        return c->rank == k->root && s == r + (size_t)k->root * block;
    case HCOMM_COLL_REDUCE_SCATTER:
        return r == s + (size_t)c->rank * block;
    case HCOMM_COLL_SCATTER:
        return c->rank == k->root && r == s + (size_t)k->root * block;
    case HCOMM_COLL_BCAST:
        return 1;
    default:
        return s == r;
    }
}

/* Buffers that overlap other than in the in-place form would be read
 * while written: refuse them before anything is sent. */
static hcomm_status_t check_overlap(const call_t *k, const hcomm_comm_impl_t *c,
                                    size_t esize, int inplace) {
    if (inplace || k->coll == HCOMM_COLL_BCAST) return HCOMM_SUCCESS;
    size_t sn = esize * hcomm_coll_send_count(k->coll, c->size, c->rank,
                                              k->root, k->count);
    size_t rn = esize * hcomm_coll_recv_count(k->coll, c->size, c->rank,
                                              k->root, k->count);
    uintptr_t s = (uintptr_t)k->sendbuf, r = (uintptr_t)k->recvbuf;
    if (!sn || !rn || s + sn <= r || r + rn <= s) return HCOMM_SUCCESS;
    return hcomm_error(HCOMM_ERR_INVALID_ARG,
                       "%s: send and receive buffers overlap, but not in the "
                       "in-place form (see hcomm.h)",
                       hcomm_coll_name(k->coll));
}

/* The request for a call: on the stack for a blocking one. */
static struct hcomm_request *new_request(hcomm_request_t *out,
                                         struct hcomm_request *on_stack) {
    if (!out) return on_stack;
    struct hcomm_request *req = malloc(sizeof(*req));
    if (!req) hcomm_error(HCOMM_ERR_NO_MEMORY, "no memory for a request");
    return req;
}

/* A call that takes the node's shared segment instead of a plan. */
static hcomm_status_t run_direct(const call_t *k, hcomm_comm_impl_t *c,
                                 hcomm_shm_algo_t algo, hcomm_request_t *out) {
    struct hcomm_request on_stack, *req = new_request(out, &on_stack);
    if (!req) return HCOMM_ERR_NO_MEMORY;
    hcomm_status_t st =
        hcomm_shm_op_start(&req->direct, c->shm, algo, k->coll, k->sendbuf,
                           k->recvbuf, k->count, k->dtype, k->op, k->root);
    if (st == HCOMM_SUCCESS)
        st = hcomm_request_start(req, c, k->coll, NULL, NULL, !out);
    if (st != HCOMM_SUCCESS) {
        if (out) free(req);
        return st;
    }
    if (!out) return hcomm_request_complete(req);
    *out = req;
    return HCOMM_SUCCESS;
}

/* A blocking hierarchical call whose node stages run on shared memory. */
static hcomm_status_t run_node_stages(const call_t *k, hcomm_comm_impl_t *c) {
    switch (k->coll) {
    case HCOMM_COLL_BCAST:
        return hcomm_hier_node_bcast(c, k->recvbuf, k->count, k->dtype,
                                     k->root);
    case HCOMM_COLL_ALLGATHER:
        return hcomm_hier_node_allgather(c, k->sendbuf, k->recvbuf, k->count,
                                         k->dtype);
    case HCOMM_COLL_REDUCE_SCATTER:
        return hcomm_hier_node_reduce_scatter(c, k->sendbuf, k->recvbuf,
                                              k->count, k->dtype, k->op);
    default:
        return hcomm_hier_node_allreduce(c, k->sendbuf, k->recvbuf, k->count,
                                         k->dtype, k->op);
    }
}

static hcomm_status_t run(const call_t *k, hcomm_comm_t comm,
                          hcomm_request_t *out) {
    hcomm_comm_impl_t *c;
    hcomm_status_t st;
    if (!hcomm_is_initialized())
        return hcomm_error(HCOMM_ERR_NOT_INITIALIZED, "%s before hcomm_init",
                           hcomm_coll_name(k->coll));
    if (out) *out = HCOMM_REQUEST_NULL;
    if ((st = hcomm_comm_lookup(comm, &c)) != HCOMM_SUCCESS) return st;
    if (c->broken)
        return hcomm_error(c->broken,
                           "communicator %u failed earlier (%s); free it",
                           (unsigned)c->id, hcomm_strerror(c->broken));
    if ((st = check_call(k, c)) != HCOMM_SUCCESS) return st;
    int p2p = k->coll == HCOMM_COLL_SEND || k->coll == HCOMM_COLL_RECV;

    size_t esize = hcomm_dtype_size(k->dtype);
    int inplace = !p2p && is_inplace(k, c, esize);
    if ((st = check_overlap(k, c, esize, inplace)) != HCOMM_SUCCESS) return st;
    /* count 0 too: every rank's descriptor must meet the others' */
    if (c->shm && !hcomm_select_is_forced(k->coll)) {
        hcomm_shm_algo_t direct =
            hcomm_shm_select(c->shm, k->coll, k->count * esize);
        if (direct != HCOMM_SHM_NONE) return run_direct(k, c, direct, out);
    }
    /* Algorithms see the node map unless HCOMM_ENABLE_TOPOLOGY_AWARE=0. */
    const int *node_of = c->topo->aware ? c->topo->map.node_of : NULL;
    const hcomm_algo_t *algo = hcomm_select(k->coll, k->count * esize, c->size,
                                            node_of ? c->topo->map.nnodes : 1);
    if (!algo)
        return hcomm_error(HCOMM_ERR_UNSUPPORTED, "%s is not implemented yet",
                           hcomm_coll_name(k->coll));
    if (!out && node_of &&
        hcomm_hier_node_applies(c, k->coll, algo, k->count * esize))
        return run_node_stages(k, c);
    hcomm_plan_args_t pa = {.coll = k->coll,
                            .rank = c->rank,
                            .size = c->size,
                            .root = k->root,
                            .count = k->count,
                            .esize = esize,
                            .inplace = inplace,
                            .scale = reduces(k->coll) && k->op == HCOMM_AVG,
                            .chunk_bytes =
                                (size_t)hcomm_cfg_int(HCOMM_CFG_CHUNK_SIZE),
                            .node_of = node_of};
    const hcomm_plan_t *plan;
    if ((st = hcomm_comm_plan_get(c, algo, &pa, &plan)) != HCOMM_SUCCESS)
        return st;
    hcomm_exec_args_t ea = {.plan = plan,
                            .tp = c->tp,
                            .pool = &hcomm_ctx.pool,
                            .sendbuf = k->sendbuf,
                            .recvbuf = k->recvbuf,
                            .dtype = k->dtype,
                            .op = k->op,
                            .divisor = c->size,
                            .tag_kind = p2p ? HCOMM_TAG_P2P : HCOMM_TAG_COLL,
                            .seq = p2p ? (uint32_t)k->tag : c->seq++};

    struct hcomm_request on_stack, *req = new_request(out, &on_stack);
    if (!req) {
        hcomm_comm_plan_put(c, plan);
        return HCOMM_ERR_NO_MEMORY;
    }
    st = hcomm_request_start(req, c, k->coll, plan, &ea, !out);
    if (st != HCOMM_SUCCESS) {
        hcomm_comm_plan_put(c, plan);
        if (out) free(req);
        return st;
    }
    if (!out) return hcomm_request_complete(req);
    *out = req;
    return HCOMM_SUCCESS;
}

#define CALL(coll, sbuf, rbuf, count, dtype, op, root, tag)                    \
    (call_t) {                                                                 \
        coll, sbuf, rbuf, count, dtype, op, root, tag                          \
    }
#define NONBLOCKING(k, comm, request)                                          \
    ((request)                                                                 \
         ? run(&(k), comm, request)                                            \
         : hcomm_error(HCOMM_ERR_INVALID_ARG, "request pointer is NULL"))

hcomm_status_t hcomm_allreduce(const void *sendbuf, void *recvbuf, size_t count,
                               hcomm_dtype_t dtype, hcomm_op_t op,
                               hcomm_comm_t comm) {
    call_t k =
        CALL(HCOMM_COLL_ALLREDUCE, sendbuf, recvbuf, count, dtype, op, 0, 0);
    return run(&k, comm, NULL);
}

hcomm_status_t hcomm_iallreduce(const void *sendbuf, void *recvbuf,
                                size_t count, hcomm_dtype_t dtype,
                                hcomm_op_t op, hcomm_comm_t comm,
                                hcomm_request_t *request) {
    call_t k =
        CALL(HCOMM_COLL_ALLREDUCE, sendbuf, recvbuf, count, dtype, op, 0, 0);
    return NONBLOCKING(k, comm, request);
}

hcomm_status_t hcomm_allgather(const void *sendbuf, void *recvbuf, size_t count,
                               hcomm_dtype_t dtype, hcomm_comm_t comm) {
    call_t k = CALL(HCOMM_COLL_ALLGATHER, sendbuf, recvbuf, count, dtype,
                    HCOMM_SUM, 0, 0);
    return run(&k, comm, NULL);
}

hcomm_status_t hcomm_iallgather(const void *sendbuf, void *recvbuf,
                                size_t count, hcomm_dtype_t dtype,
                                hcomm_comm_t comm, hcomm_request_t *request) {
    call_t k = CALL(HCOMM_COLL_ALLGATHER, sendbuf, recvbuf, count, dtype,
                    HCOMM_SUM, 0, 0);
    return NONBLOCKING(k, comm, request);
}

hcomm_status_t hcomm_reduce_scatter(const void *sendbuf, void *recvbuf,
                                    size_t count, hcomm_dtype_t dtype,
                                    hcomm_op_t op, hcomm_comm_t comm) {
    call_t k = CALL(HCOMM_COLL_REDUCE_SCATTER, sendbuf, recvbuf, count, dtype,
                    op, 0, 0);
    return run(&k, comm, NULL);
}

hcomm_status_t hcomm_ireduce_scatter(const void *sendbuf, void *recvbuf,
                                     size_t count, hcomm_dtype_t dtype,
                                     hcomm_op_t op, hcomm_comm_t comm,
                                     hcomm_request_t *request) {
    call_t k = CALL(HCOMM_COLL_REDUCE_SCATTER, sendbuf, recvbuf, count, dtype,
                    op, 0, 0);
    return NONBLOCKING(k, comm, request);
}

hcomm_status_t hcomm_broadcast(void *buf, size_t count, hcomm_dtype_t dtype,
                               int root, hcomm_comm_t comm) {
    call_t k =
        CALL(HCOMM_COLL_BCAST, buf, buf, count, dtype, HCOMM_SUM, root, 0);
    return run(&k, comm, NULL);
}

hcomm_status_t hcomm_ibroadcast(void *buf, size_t count, hcomm_dtype_t dtype,
                                int root, hcomm_comm_t comm,
                                hcomm_request_t *request) {
    call_t k =
        CALL(HCOMM_COLL_BCAST, buf, buf, count, dtype, HCOMM_SUM, root, 0);
    return NONBLOCKING(k, comm, request);
}

hcomm_status_t hcomm_reduce(const void *sendbuf, void *recvbuf, size_t count,
                            hcomm_dtype_t dtype, hcomm_op_t op, int root,
                            hcomm_comm_t comm) {
    call_t k =
        CALL(HCOMM_COLL_REDUCE, sendbuf, recvbuf, count, dtype, op, root, 0);
    return run(&k, comm, NULL);
}

hcomm_status_t hcomm_ireduce(const void *sendbuf, void *recvbuf, size_t count,
                             hcomm_dtype_t dtype, hcomm_op_t op, int root,
                             hcomm_comm_t comm, hcomm_request_t *request) {
    call_t k =
        CALL(HCOMM_COLL_REDUCE, sendbuf, recvbuf, count, dtype, op, root, 0);
    return NONBLOCKING(k, comm, request);
}

hcomm_status_t hcomm_alltoall(const void *sendbuf, void *recvbuf, size_t count,
                              hcomm_dtype_t dtype, hcomm_comm_t comm) {
    call_t k = CALL(HCOMM_COLL_ALLTOALL, sendbuf, recvbuf, count, dtype,
                    HCOMM_SUM, 0, 0);
    return run(&k, comm, NULL);
}

hcomm_status_t hcomm_ialltoall(const void *sendbuf, void *recvbuf, size_t count,
                               hcomm_dtype_t dtype, hcomm_comm_t comm,
                               hcomm_request_t *request) {
    call_t k = CALL(HCOMM_COLL_ALLTOALL, sendbuf, recvbuf, count, dtype,
                    HCOMM_SUM, 0, 0);
    return NONBLOCKING(k, comm, request);
}

hcomm_status_t hcomm_gather(const void *sendbuf, void *recvbuf, size_t count,
                            hcomm_dtype_t dtype, int root, hcomm_comm_t comm) {
    call_t k = CALL(HCOMM_COLL_GATHER, sendbuf, recvbuf, count, dtype,
                    HCOMM_SUM, root, 0);
    return run(&k, comm, NULL);
}

hcomm_status_t hcomm_igather(const void *sendbuf, void *recvbuf, size_t count,
                             hcomm_dtype_t dtype, int root, hcomm_comm_t comm,
                             hcomm_request_t *request) {
    call_t k = CALL(HCOMM_COLL_GATHER, sendbuf, recvbuf, count, dtype,
                    HCOMM_SUM, root, 0);
    return NONBLOCKING(k, comm, request);
}

hcomm_status_t hcomm_scatter(const void *sendbuf, void *recvbuf, size_t count,
                             hcomm_dtype_t dtype, int root, hcomm_comm_t comm) {
    call_t k = CALL(HCOMM_COLL_SCATTER, sendbuf, recvbuf, count, dtype,
                    HCOMM_SUM, root, 0);
    return run(&k, comm, NULL);
}

hcomm_status_t hcomm_iscatter(const void *sendbuf, void *recvbuf, size_t count,
                              hcomm_dtype_t dtype, int root, hcomm_comm_t comm,
                              hcomm_request_t *request) {
    call_t k = CALL(HCOMM_COLL_SCATTER, sendbuf, recvbuf, count, dtype,
                    HCOMM_SUM, root, 0);
    return NONBLOCKING(k, comm, request);
}

hcomm_status_t hcomm_barrier(hcomm_comm_t comm) {
    call_t k =
        CALL(HCOMM_COLL_BARRIER, NULL, NULL, 0, HCOMM_UINT8, HCOMM_SUM, 0, 0);
    return run(&k, comm, NULL);
}

hcomm_status_t hcomm_ibarrier(hcomm_comm_t comm, hcomm_request_t *request) {
    call_t k =
        CALL(HCOMM_COLL_BARRIER, NULL, NULL, 0, HCOMM_UINT8, HCOMM_SUM, 0, 0);
    return NONBLOCKING(k, comm, request);
}

hcomm_status_t hcomm_send(const void *buf, size_t count, hcomm_dtype_t dtype,
                          int peer, int tag, hcomm_comm_t comm) {
    call_t k =
        CALL(HCOMM_COLL_SEND, buf, NULL, count, dtype, HCOMM_SUM, peer, tag);
    return run(&k, comm, NULL);
}

hcomm_status_t hcomm_recv(void *buf, size_t count, hcomm_dtype_t dtype,
                          int peer, int tag, hcomm_comm_t comm) {
    call_t k =
        CALL(HCOMM_COLL_RECV, NULL, buf, count, dtype, HCOMM_SUM, peer, tag);
    return run(&k, comm, NULL);
}

hcomm_status_t hcomm_isend(const void *buf, size_t count, hcomm_dtype_t dtype,
                           int peer, int tag, hcomm_comm_t comm,
                           hcomm_request_t *request) {
    call_t k =
        CALL(HCOMM_COLL_SEND, buf, NULL, count, dtype, HCOMM_SUM, peer, tag);
    return NONBLOCKING(k, comm, request);
}

hcomm_status_t hcomm_irecv(void *buf, size_t count, hcomm_dtype_t dtype,
                           int peer, int tag, hcomm_comm_t comm,
                           hcomm_request_t *request) {
    call_t k =
        CALL(HCOMM_COLL_RECV, NULL, buf, count, dtype, HCOMM_SUM, peer, tag);
    return NONBLOCKING(k, comm, request);
}
