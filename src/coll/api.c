/* Entry points: argument checks, algorithm choice, plan, run. */
#include "coll/check.h"
#include "coll/hier_node.h"
#include "coll/select.h"
#include "core/config.h"
#include "core/context.h"
#include "core/gpu.h"
#include "core/log.h"
#include "core/profile.h"
#include "core/request.h"
#include "core/stream_worker.h"
#include "cuda_ipc/ipc.h"
#include "kernels/reduce.h"
#ifdef HAVE_CUDA
#include "kernels/reduce_cuda.h"
#endif
#include "topo/topo.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    hcomm_coll_t coll;
    const void *sendbuf;
    void *recvbuf;
    size_t count;
    hcomm_dtype_t dtype;
    hcomm_op_t op;
    int root;      /* rooted collectives; the peer of send/recv */
    int tag;       /* send/recv */
    int on_stream; /* a stream-ordered form */
    void *stream;
    /* variable-count collectives; count is then what check.c compares */
    const hcomm_vspec_t *v;
    /* its flight recorder entry, when a part of it ran already (an
     * alltoallv the segment declined): the plan's request takes it on */
    uint64_t flight_call;
} call_t;

/* Where a call's buffers live. */
typedef struct {
    int on_gpu;                 /* some buffer is device or managed memory */
    int device;                 /* the GPU that runs its kernels */
    uint8_t send_dev, recv_dev; /* device memory (no CPU access) */
    uint8_t cpu_visible;        /* a buffer in managed or pinned host memory */
} call_mem_t;

static int reduces(hcomm_coll_t coll) {
    return coll == HCOMM_COLL_ALLREDUCE || coll == HCOMM_COLL_REDUCE_SCATTER ||
           coll == HCOMM_COLL_REDUCE || coll == HCOMM_COLL_REDUCE_SCATTERV;
}

/* Elements this rank's send or receive buffer holds. */
static size_t send_count(const call_t *k, const hcomm_comm_impl_t *c) {
    return k->v ? hcomm_coll_v_extent(k->coll, k->v, c->size, c->rank, 1)
                : hcomm_coll_send_count(k->coll, c->size, c->rank, k->root,
                                        k->count);
}
static size_t recv_count(const call_t *k, const hcomm_comm_impl_t *c) {
    return k->v ? hcomm_coll_v_extent(k->coll, k->v, c->size, c->rank, 0)
                : hcomm_coll_recv_count(k->coll, c->size, c->rank, k->root,
                                        k->count);
}

/* Which buffers this rank reads or writes. */
static void buffers_used(const call_t *k, const hcomm_comm_impl_t *c,
                         int *needs_send, int *needs_recv) {
    int is_root = c->rank == k->root;
    *needs_send = k->coll != HCOMM_COLL_RECV && k->coll != HCOMM_COLL_BARRIER &&
                  !(k->coll == HCOMM_COLL_SCATTER && !is_root);
    *needs_recv =
        k->coll != HCOMM_COLL_SEND && k->coll != HCOMM_COLL_BARRIER &&
        !((k->coll == HCOMM_COLL_REDUCE || k->coll == HCOMM_COLL_GATHER) &&
          !is_root);
}

/* Finds the memory type of the buffers this rank uses. A call whose buffer
 * is device (or managed) memory runs its reductions and copies on that GPU;
 * its other buffer must then be reachable from the GPU too. */
static hcomm_status_t classify(const call_t *k, const hcomm_comm_impl_t *c,
                               call_mem_t *m) {
    m->on_gpu = 0;
    m->device = -1;
    m->send_dev = m->recv_dev = m->cpu_visible = 0;
    if (__builtin_expect(!hcomm_gpu_present, 1) || (k->count == 0 && !k->v))
        return HCOMM_SUCCESS;
    int us, ur, sd = -1, rd = -1;
    buffers_used(k, c, &us, &ur);
    /* Pinned or not matters only beside GPU memory, which then asks of
     * both buffers. */
    if (hcomm_gpu_all_host(us ? k->sendbuf : NULL, ur ? k->recvbuf : NULL))
        return HCOMM_SUCCESS;
    hcomm_memtype_t st =
        us ? hcomm_gpu_memtype(k->sendbuf, &sd) : HCOMM_MEM_HOST;
    hcomm_memtype_t rt = HCOMM_MEM_HOST;
    if (ur && us && k->recvbuf == k->sendbuf) {
        rt = st;
        rd = sd;
    } else if (ur) {
        rt = hcomm_gpu_memtype(k->recvbuf, &rd);
    }
    if (st < HCOMM_MEM_MANAGED && rt < HCOMM_MEM_MANAGED) return HCOMM_SUCCESS;
    const char *name = hcomm_coll_name(k->coll);
#ifndef HAVE_CUDA
    return hcomm_error(HCOMM_ERR_UNSUPPORTED,
                       "%s: the %s buffer is GPU (%s) memory, and this HCOMM "
                       "was built without CUDA (configure --with-cuda)",
                       name, st >= HCOMM_MEM_MANAGED ? "send" : "receive",
                       hcomm_memtype_name(st >= HCOMM_MEM_MANAGED ? st : rt));
#endif
    if ((us && st == HCOMM_MEM_HOST) || (ur && rt == HCOMM_MEM_HOST))
        return hcomm_error(HCOMM_ERR_UNSUPPORTED,
                           "%s: the send buffer is %s memory and the receive "
                           "buffer %s memory; with GPU memory on one side the "
                           "other must be GPU, managed or pinned host memory",
                           name, hcomm_memtype_name(st),
                           hcomm_memtype_name(rt));
    if (sd >= 0 && rd >= 0 && sd != rd)
        return hcomm_error(HCOMM_ERR_INVALID_ARG,
                           "%s: the send buffer is on GPU %d and the receive "
                           "buffer on GPU %d",
                           name, sd, rd);
    m->on_gpu = 1;
    m->device = sd >= 0 ? sd : rd;
    m->send_dev = us && st == HCOMM_MEM_DEVICE;
    m->recv_dev = ur && rt == HCOMM_MEM_DEVICE;
    m->cpu_visible = (us && !m->send_dev) || (ur && !m->recv_dev);
    return HCOMM_SUCCESS;
}

/* The arrays of a variable-count call: present, and every block's end
 * (displacement plus count, in bytes) representable. */
static hcomm_status_t check_v(const call_t *k, const hcomm_comm_impl_t *c,
                              size_t esize) {
    const char *name = hcomm_coll_name(k->coll);
    const hcomm_vspec_t *v = k->v;
    int a2a = k->coll == HCOMM_COLL_ALLTOALLV;
    if (!v->rcounts || (k->coll != HCOMM_COLL_REDUCE_SCATTERV && !v->rdispls) ||
        (a2a && (!v->scounts || !v->sdispls)))
        return hcomm_error(HCOMM_ERR_INVALID_ARG,
                           "%s: a count or "
                           "displacement array is NULL",
                           name);
    size_t sum = 0, ssum = 0, end;
    for (int i = 0; i < c->size; i++) {
        if (__builtin_add_overflow(sum, v->rcounts[i], &sum) ||
            (v->rdispls &&
             __builtin_add_overflow(v->rdispls[i], v->rcounts[i], &end)) ||
            (a2a &&
             (__builtin_add_overflow(ssum, v->scounts[i], &ssum) ||
              __builtin_add_overflow(v->sdispls[i], v->scounts[i], &end))))
            return hcomm_error(HCOMM_ERR_OVERFLOW,
                               "%s: counts and displacements overflow", name);
    }
    if (__builtin_mul_overflow(sum > ssum ? sum : ssum, esize * 2, &end) ||
        __builtin_mul_overflow(send_count(k, c), esize * 2, &end) ||
        __builtin_mul_overflow(recv_count(k, c), esize * 2, &end))
        return hcomm_error(HCOMM_ERR_OVERFLOW,
                           "%s: buffers of %zu-byte elements overflow", name,
                           esize);
    if (a2a && v->scounts[c->rank] != v->rcounts[c->rank])
        return hcomm_error(HCOMM_ERR_INVALID_ARG,
                           "%s: rank %d sends itself %zu elements but "
                           "receives %zu",
                           name, c->rank, v->scounts[c->rank],
                           v->rcounts[c->rank]);
    if ((send_count(k, c) && !k->sendbuf) || (recv_count(k, c) && !k->recvbuf))
        return hcomm_error(HCOMM_ERR_INVALID_ARG,
                           "%s: %s buffer is NULL with elements to %s", name,
                           !k->sendbuf ? "send" : "receive",
                           !k->sendbuf ? "send" : "receive");
    return HCOMM_SUCCESS;
}

static hcomm_status_t check_call(const call_t *k, const hcomm_comm_impl_t *c) {
    size_t esize = hcomm_dtype_size(k->dtype), total;
    if (esize == 0)
        return hcomm_error(HCOMM_ERR_INVALID_DTYPE, "%s: unknown data type %d",
                           hcomm_coll_name(k->coll), (int)k->dtype);
    if (reduces(k->coll) && (unsigned)k->op >= HCOMM_OP_COUNT)
        return hcomm_error(HCOMM_ERR_INVALID_OP, "%s: unknown operation %d",
                           hcomm_coll_name(k->coll), (int)k->op);
    if (k->v) return check_v(k, c, esize);
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
    int needs_send, needs_recv;
    buffers_used(k, c, &needs_send, &needs_recv);
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
    case HCOMM_COLL_ALLGATHERV:
        return s == r + k->v->rdispls[c->rank] * esize;
    case HCOMM_COLL_REDUCE_SCATTERV: {
        size_t at = 0;
        for (int i = 0; i < c->rank; i++)
            at += k->v->rcounts[i];
        return r == s + at * esize;
    }
    default:
        return s == r;
    }
}

/* Buffers that overlap other than in the in-place form would be read
 * while written: refuse them before anything is sent. */
static hcomm_status_t check_overlap(const call_t *k, const hcomm_comm_impl_t *c,
                                    size_t esize, int inplace) {
    if (inplace || k->coll == HCOMM_COLL_BCAST) return HCOMM_SUCCESS;
    size_t sn = esize * send_count(k, c), rn = esize * recv_count(k, c);
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
    struct hcomm_request *req = out ? malloc(sizeof(*req)) : on_stack;
    if (!req) {
        hcomm_error(HCOMM_ERR_NO_MEMORY, "no memory for a request");
        return NULL;
    }
    req->ipc.comm = NULL;
    req->agree_only = 0;
    return req;
}

/* What a started request records when it ends: its flight recorder entry,
 * and, with the profiler on, its profile. */
static void track_request(struct hcomm_request *req, const call_t *k,
                          hcomm_comm_impl_t *c, uint32_t seq,
                          hcomm_prof_call_t *pc, const char *algo,
                          const char *transport) {
    req->bytes = k->count * hcomm_dtype_size(k->dtype);
    req->flight_call = k->flight_call
                           ? k->flight_call
                           : hcomm_flight_begin(&c->flight, k->coll, k->dtype,
                                                k->count, k->root, seq);
    /* a blocking call's clock starts in its wait (tick) */
    if (req->active) hcomm_flight_clock(&c->flight, req->flight_call);
    if (!pc) return;
    pc->algo = algo;
    pc->transport = transport;
    req->prof = *pc;
    req->profiled = 1;
}

/* A blocking direct call that ended in its first pass (a sender of a
 * rooted call, which waits for nobody, say) needs no request and no wait
 * loop: what their end does, done here. */
static hcomm_status_t finished_at_once(const call_t *k, hcomm_comm_impl_t *c,
                                       const hcomm_shm_op_t *op,
                                       hcomm_status_t st, hcomm_prof_call_t *pc,
                                       const char *algo) {
    uint64_t call =
        hcomm_flight_begin(&c->flight, k->coll, k->dtype, k->count, k->root, 0);
    hcomm_flight_end(&c->flight, call, st);
    if (pc) {
        pc->algo = algo;
        pc->transport = "shm";
        hcomm_profile_end(pc, st);
    }
    if (st == HCOMM_SUCCESS) return st;
    /* as hcomm_request_complete says it */
    char why[256];
    snprintf(why, sizeof(why), "%s", hcomm_last_error());
    c->broken = st;
    return hcomm_error(st, "%s (sequence %u) failed on rank %d: %s",
                       hcomm_coll_name(k->coll), (uint32_t)op->seq, c->rank,
                       why);
}

/* A communicator of one rank: the call is a copy of its block, or
 * nothing (in place, a broadcast, a barrier), whatever the operation (a
 * reduction over one rank, an average too, is its input). The plans came
 * to the same in 0.11-0.18 us where MPI takes 0.01-0.03 (hcomm_perf at 1
 * rank, 8 B to 2 KiB). */
static hcomm_status_t run_alone(const call_t *k, hcomm_comm_impl_t *c,
                                int inplace, size_t esize,
                                hcomm_prof_call_t *pc) {
    uint64_t call =
        hcomm_flight_begin(&c->flight, k->coll, k->dtype, k->count, k->root, 0);
    if (!inplace && k->coll != HCOMM_COLL_BCAST && k->count)
        memcpy(k->recvbuf, k->sendbuf, k->count * esize);
    hcomm_flight_end(&c->flight, call, HCOMM_SUCCESS);
    if (pc) {
        pc->algo = "alone";
        pc->transport = "self";
        hcomm_profile_end(pc, HCOMM_SUCCESS);
    }
    return HCOMM_SUCCESS;
}

/* A call that takes the node's shared segment instead of a plan. */
static hcomm_status_t run_direct(const call_t *k, hcomm_comm_impl_t *c,
                                 hcomm_shm_algo_t algo, hcomm_request_t *out,
                                 hcomm_prof_call_t *pc) {
    struct hcomm_request on_stack, *req = new_request(out, &on_stack);
    if (!req) return HCOMM_ERR_NO_MEMORY;
    hcomm_status_t st;
    if (k->coll == HCOMM_COLL_REDUCE_SCATTERV)
        st = hcomm_shm_op_start_rv(&req->direct, c->shm, k->sendbuf, k->recvbuf,
                                   k->v->rcounts, k->dtype, k->op);
    else if (k->v)
        st = hcomm_shm_op_start_v(&req->direct, c->shm, algo, k->sendbuf,
                                  k->recvbuf, k->v->rcounts, k->v->rdispls,
                                  k->dtype);
    else
        st = hcomm_shm_op_start(&req->direct, c->shm, algo, k->coll, k->sendbuf,
                                k->recvbuf, k->count, k->dtype, k->op, k->root);
    static const char *names[] = {"none", "oneshot", "twoshot", "cma"};
    if (st == HCOMM_SUCCESS && !out) {
        hcomm_status_t now = hcomm_shm_op_progress(&req->direct);
        if (now != HCOMM_ERR_IN_PROGRESS)
            return finished_at_once(k, c, &req->direct, now, pc, names[algo]);
    }
    if (st == HCOMM_SUCCESS)
        st = hcomm_request_start(req, c, k->coll, NULL, NULL, !out, 0);
    if (st != HCOMM_SUCCESS) {
        if (out) free(req);
        return st;
    }
    track_request(req, k, c, 0, pc, names[algo], "shm");
    if (!out) return hcomm_request_complete(req);
    *out = req;
    return HCOMM_SUCCESS;
}

/* A blocking alltoallv on host memory, on the segment: it moves the
 * blocks, or every rank declines alike (*declined), the call's flight
 * recorder entry still open in k->flight_call, for the plan that runs it. */
static hcomm_status_t run_direct_a2av(call_t *k, hcomm_comm_impl_t *c,
                                      hcomm_prof_call_t *pc, int *declined) {
    struct hcomm_request req;
    new_request(NULL, &req);
    k->flight_call =
        hcomm_flight_begin(&c->flight, k->coll, k->dtype, 0, k->root, 0);
    /* the wait below has no entry to clock (a declined call's plan
     * goes on with this one) */
    hcomm_flight_clock(&c->flight, k->flight_call);
    hcomm_status_t st = hcomm_shm_op_start_a2av(
        &req.direct, c->shm, k->sendbuf, k->recvbuf, k->v->scounts,
        k->v->sdispls, k->v->rcounts, k->v->rdispls, k->dtype);
    if (st == HCOMM_SUCCESS)
        st = hcomm_request_start(&req, c, k->coll, NULL, NULL, 1, 0);
    if (st == HCOMM_SUCCESS) st = hcomm_request_complete(&req);
    *declined = st == HCOMM_SUCCESS && req.direct.declined;
    if (*declined) return st;
    hcomm_flight_end(&c->flight, k->flight_call, st);
    if (pc) {
        pc->algo = "oneshot";
        pc->transport = "shm";
        hcomm_profile_end(pc, st);
    }
    return st;
}

/* The GPU a device call runs on, and its context. */
static hcomm_status_t gpu_context(hcomm_comm_impl_t *c, call_mem_t *m,
                                  struct hcomm_gpu_ctx **ctx) {
#ifdef HAVE_CUDA
    if (m->device < 0 && (m->device = hcomm_gpu_current_device()) < 0)
        return HCOMM_ERR_INTERNAL;
#endif
    return hcomm_comm_gpu(c, m->device, ctx);
}

#ifdef HAVE_CUDA
/* AVG's division of a node-stage allreduce on device memory, on the
 * communicator's IPC stream (which follows the default stream). */
static hcomm_status_t gpu_divide(const call_t *k, hcomm_comm_impl_t *c,
                                 call_mem_t *mem) {
    struct hcomm_gpu_ctx *ctx;
    hcomm_status_t st = gpu_context(c, mem, &ctx);
    if (st != HCOMM_SUCCESS) return st;
    void *s = hcomm_gpu_ctx_stream(ctx, HCOMM_GPU_STREAM_IPC);
    int e = hcomm_cuda_divide(k->recvbuf, k->count, k->dtype, c->size, s);
    return e ? hcomm_gpu_error(e, "allreduce AVG: the division")
             : hcomm_gpu_stream_sync(s);
}
#endif

/* A call as node and rail stages (coll/hier_node.h): on host memory any of
 * the four, in the host's chunks; on device memory allreduce, whose node
 * calls take the CUDA IPC path, in the chunks of the plans on device memory
 * (each node call launches a kernel). */
static hcomm_status_t run_node_stages(const call_t *k, hcomm_comm_impl_t *c,
                                      call_mem_t *mem) {
    size_t chunk = (size_t)hcomm_cfg_int(mem->on_gpu ? HCOMM_CFG_CUDA_CHUNK_SIZE
                                                     : HCOMM_CFG_CHUNK_SIZE);
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
        break;
    }
    int gpu_avg = mem->on_gpu && k->op == HCOMM_AVG;
    hcomm_status_t st =
        hcomm_hier_node_allreduce(c, k->sendbuf, k->recvbuf, k->count, k->dtype,
                                  gpu_avg ? HCOMM_SUM : k->op, chunk);
#ifdef HAVE_CUDA
    if (st == HCOMM_SUCCESS && gpu_avg) st = gpu_divide(k, c, mem);
#endif
    return st;
}

#ifdef HAVE_CUDA
/* The ranks agree on the call on the shared segment, and nothing more. */
static hcomm_status_t agree_alone(const call_t *k, hcomm_comm_impl_t *c) {
    struct hcomm_request req;
    new_request(NULL, &req);
    req.agree_only = 1;
    hcomm_status_t st = hcomm_shm_op_agree(&req.direct, c->shm, k->coll,
                                           k->count, k->dtype, k->op, k->root);
    if (st == HCOMM_SUCCESS)
        st = hcomm_request_start(&req, c, k->coll, NULL, NULL, 1, 1);
    return st == HCOMM_SUCCESS ? hcomm_request_complete(&req) : st;
}

/* A call on the CUDA IPC path (src/cuda_ipc/ipc.h): agreement on the
 * shared segment, then one kernel. *taken is 0 when the path turned out
 * unavailable on this communicator (every rank alike): the call then takes
 * the plans. */
static hcomm_status_t run_ipc(const call_t *k, hcomm_comm_impl_t *c,
                              call_mem_t *mem, hcomm_request_t *out,
                              hcomm_prof_call_t *pc, int *taken) {
    struct hcomm_gpu_ctx *ctx = NULL;
    hcomm_status_t st = hcomm_ipc_check(c);
    *taken = 1;
    if (st == HCOMM_SUCCESS) st = gpu_context(c, mem, &ctx);
    /* The first call makes the workspaces, every rank together: the ranks
     * agree first that all are in this call on GPU memory. */
    if (st == HCOMM_SUCCESS && c->ipc_state == 0 &&
        (st = agree_alone(k, c)) == HCOMM_SUCCESS && !hcomm_ipc_ready(c, ctx)) {
        *taken = 0;
        return HCOMM_SUCCESS;
    }
    if (st != HCOMM_SUCCESS) return st;
    struct hcomm_request on_stack, *req = new_request(out, &on_stack);
    if (!req) return HCOMM_ERR_NO_MEMORY;
    st = hcomm_shm_op_agree(&req->direct, c->shm, k->coll, k->count, k->dtype,
                            k->op, k->root);
    if (st == HCOMM_SUCCESS)
        st = hcomm_ipc_op_init(
            &req->ipc, c, k->coll, k->sendbuf, k->recvbuf, k->count, k->dtype,
            k->op, k->root, k->on_stream ? k->stream : NULL, mem->cpu_visible);
    req->direct.devreg = req->ipc.devreg; /* sent with the agreement */
    req->direct.devtail = req->ipc.devtail;
    if (st == HCOMM_SUCCESS)
        st = hcomm_request_start(req, c, k->coll, NULL, NULL, !out, 1);
    if (st != HCOMM_SUCCESS) {
        if (out) free(req);
        return st;
    }
    track_request(req, k, c, 0, pc,
                  req->ipc.k.kind == HCOMM_IPC_ONESHOT   ? "ipc_oneshot"
                  : req->ipc.k.kind == HCOMM_IPC_TWOSHOT ? "ipc_twoshot"
                                                         : "ipc_direct",
                  "cuda_ipc");
    if (!out) return hcomm_request_complete(req);
    *out = req;
    return HCOMM_SUCCESS;
}
#endif

#ifdef HAVE_CUDA
/* A blocking (or stream-ordered) call on GPU memory of at most STAGED_MAX
 * bytes that the shared segment would take on host memory runs there too,
 * its buffers staged through pinned host memory. Every rank then runs the
 * same direct algorithm whatever memory it passed: ranks of one call may
 * mix host and GPU memory (a reduce's root on the GPU, the others on the
 * host), which the agreement of the plans' path can only refuse. Larger
 * calls take the plans: on the GPU machine, staged, an 8 B allreduce took
 * 19.7 us against 36.7 through UCX, 32 KiB 38.7 against 48.4, but 2 MiB
 * 721 us against 61 and 8 MiB 2627 against 162 (the CPU copies). */
#define STAGED_MAX ((size_t)64 << 10)

/* A call's buffers staged through pinned host memory: h is the call on the
 * staging, sb bytes for what it sends, then rb for what it receives. */
typedef struct {
    call_t h;
    char *tmp;
    size_t sb, rb;
    int dev;
    hcomm_comm_t comm; /* a queued stream-ordered call's communicator */
} staging_t;

static void stage_free(staging_t *g) {
    hcomm_gpu_free(HCOMM_GPU_POOL_PINNED, g->dev, g->tmp, g->sb + g->rb + 1);
}

/* Makes the staging and enqueues on stream the copies into it: the receive
 * buffer's too (a broadcast root's data, the blocks a call leaves as they
 * were). On failure nothing is left to free. */
static hcomm_status_t stage_in(const call_t *k, const hcomm_comm_impl_t *c,
                               int dev, void *stream, staging_t *g) {
    size_t esize = hcomm_dtype_size(k->dtype);
    int us, ur;
    buffers_used(k, c, &us, &ur);
    int inplace = us && ur && k->sendbuf == k->recvbuf;
    g->sb = us && !inplace ? send_count(k, c) * esize : 0;
    g->rb = ur ? recv_count(k, c) * esize : 0;
    if (inplace && send_count(k, c) * esize > g->rb)
        g->rb = send_count(k, c) * esize;
    g->dev = dev;
    g->tmp = hcomm_gpu_alloc(HCOMM_GPU_POOL_PINNED, dev, g->sb + g->rb + 1);
    if (!g->tmp) return HCOMM_ERR_NO_MEMORY;
    g->h = *k;
    g->h.sendbuf = us ? g->tmp : NULL;
    g->h.recvbuf = ur ? g->tmp + g->sb : NULL;
    if (inplace) g->h.sendbuf = g->h.recvbuf;
    hcomm_status_t st = HCOMM_SUCCESS;
    if (g->sb) st = hcomm_gpu_copy_async(g->tmp, k->sendbuf, g->sb, stream);
    if (st == HCOMM_SUCCESS && g->rb)
        st = hcomm_gpu_copy_async(g->tmp + g->sb, k->recvbuf, g->rb, stream);
    if (st != HCOMM_SUCCESS) {
        hcomm_gpu_stream_sync(stream); /* a copy may have been enqueued */
        stage_free(g);
    }
    return st;
}

static hcomm_status_t run_staged(const call_t *k, hcomm_comm_impl_t *c,
                                 call_mem_t *mem, hcomm_shm_algo_t direct,
                                 hcomm_prof_call_t *pc) {
    struct hcomm_gpu_ctx *ctx;
    hcomm_status_t st = gpu_context(c, mem, &ctx);
    if (st != HCOMM_SUCCESS) return st;
    /* The communicator's IPC stream follows the default stream, as a
     * blocking call must (README, "GPU memory"). */
    void *s = hcomm_gpu_ctx_stream(ctx, HCOMM_GPU_STREAM_IPC);
    staging_t g;
    if ((st = stage_in(k, c, hcomm_gpu_ctx_device(ctx), s, &g))) return st;
    st = hcomm_gpu_stream_sync(s);
    if (st == HCOMM_SUCCESS) st = run_direct(&g.h, c, direct, NULL, pc);
    if (st == HCOMM_SUCCESS && g.rb) {
        st = hcomm_gpu_copy_async(k->recvbuf, g.tmp + g.sb, g.rb, s);
        if (st == HCOMM_SUCCESS) st = hcomm_gpu_stream_sync(s);
    }
    if (st != HCOMM_SUCCESS) hcomm_gpu_stream_sync(s); /* a copy out */
    stage_free(&g);
    return st;
}
#endif

static hcomm_status_t run(const call_t *k, hcomm_comm_t comm,
                          hcomm_request_t *out);

#ifdef HAVE_CUDA
/* A stream-ordered call on the plans, queued for HCOMM's worker, which runs
 * it on the staging (core/stream_worker.h). */
static hcomm_status_t run_queued(void *arg) {
    const staging_t *g = arg;
    return run(&g->h, g->comm, NULL);
}

static void queued_done(void *arg) {
    stage_free(arg);
    free(arg);
}

static hcomm_status_t queue_call(const call_t *k, hcomm_comm_impl_t *c,
                                 const call_mem_t *mem) {
    staging_t *g = malloc(sizeof(*g));
    if (!g)
        return hcomm_error(HCOMM_ERR_NO_MEMORY, "no memory to queue %s",
                           hcomm_coll_name(k->coll));
    int prev = hcomm_gpu_use_device(mem->device);
    hcomm_status_t st = prev < 0 ? HCOMM_ERR_INTERNAL
                                 : stage_in(k, c, mem->device, k->stream, g);
    if (st != HCOMM_SUCCESS) {
        free(g);
    } else {
        g->comm = c->handle;
        st = hcomm_stream_queue(c, k->stream, mem->device, run_queued,
                                queued_done, g, k->recvbuf, g->tmp + g->sb,
                                g->rb);
        if (st != HCOMM_SUCCESS) {
            hcomm_gpu_stream_sync(k->stream); /* copies into the staging */
            queued_done(g);
        }
    }
    if (prev >= 0) hcomm_gpu_use_device(prev);
    return st;
}
#endif

/* A stream-ordered call where the worker may not run it (MPI's transport
 * below MPI_THREAD_MULTIPLE), or on host memory, waits for the work
 * enqueued on its stream before it, then runs like a blocking one: work
 * enqueued after it then finds its result. */
static hcomm_status_t stream_inputs_ready(const call_t *k) {
#ifdef HAVE_CUDA
    return hcomm_gpu_stream_sync(k->stream);
#else
    return hcomm_error(HCOMM_ERR_UNSUPPORTED,
                       "%s_stream: this HCOMM was built without CUDA",
                       hcomm_coll_name(k->coll));
#endif
}

/* The plans' chunk: alike on every rank, whatever memory each passed. A
 * communicator whose every rank's UCX carries device memory takes larger
 * chunks: through UCX's CUDA transports each message costs several
 * microseconds (1 MiB between two processes on the GPU machine: 6.7 us,
 * 64 MiB 36.7), more than a host memory message's pipelining gains. */
static int gpu_direct(const hcomm_comm_impl_t *c) {
    return c->tp->device_ok && !hcomm_ctx.cuda_staging_forced;
}

static size_t chunk_bytes(const hcomm_comm_impl_t *c) {
    int device = gpu_direct(c);
    size_t chunk = (size_t)hcomm_cfg_int(device ? HCOMM_CFG_CUDA_CHUNK_SIZE
                                                : HCOMM_CFG_CHUNK_SIZE);
    /* the transport's own default, where the user set none (tp.h) */
    if (c->tp->chunk_max && !device && chunk > c->tp->chunk_max &&
        hcomm_cfg_source(HCOMM_CFG_CHUNK_SIZE) == HCOMM_CFG_SRC_DEFAULT)
        chunk = c->tp->chunk_max;
    return chunk;
}

static hcomm_status_t run_call(const call_t *k, hcomm_comm_t comm,
                               hcomm_request_t *out, hcomm_prof_call_t *pc) {
    hcomm_comm_impl_t *c;
    hcomm_status_t st;
    if (!hcomm_is_initialized())
        return hcomm_error(HCOMM_ERR_NOT_INITIALIZED, "%s before hcomm_init",
                           hcomm_coll_name(k->coll));
    if (out) *out = HCOMM_REQUEST_NULL;
    if ((st = hcomm_comm_lookup(comm, &c)) != HCOMM_SUCCESS) return st;
    hcomm_flight_poll();
    if (atomic_load_explicit(&c->aborted, memory_order_relaxed))
        c->broken = HCOMM_ERR_ABORTED;
    /* A queued call's failure, said once, whatever the worker's run of it
     * marked already (the communicator stays broken). Read before it is
     * exchanged: an exchange, a locked instruction, would wait on every
     * call for this core's stores still in flight (the last call's, to
     * lines its peers hold). */
    int failed = atomic_load_explicit(&c->stream_failed, memory_order_relaxed)
                     ? atomic_exchange(&c->stream_failed, 0)
                     : 0;
    if (failed) {
        if (!c->broken) c->broken = (hcomm_status_t)failed;
        return hcomm_error((hcomm_status_t)failed,
                           "communicator %u: a stream-ordered call failed "
                           "(%s); free it",
                           (unsigned)c->id, c->stream_why);
    }
    if (c->broken)
        return hcomm_error(c->broken,
                           "communicator %u failed earlier (%s); free it",
                           (unsigned)c->id, hcomm_strerror(c->broken));
    int p2p = k->coll == HCOMM_COLL_SEND || k->coll == HCOMM_COLL_RECV;
    size_t esize = hcomm_dtype_size(k->dtype);
    int inplace = 0;
    call_mem_t mem = {0, -1, 0, 0, 0};
    call_t kv;
    if ((st = check_call(k, c)) == HCOMM_SUCCESS) {
        if (k->v) { /* its count: what every rank passes alike (or 0) */
            kv = *k;
            kv.count = 0;
            for (int i = 0; k->coll != HCOMM_COLL_ALLTOALLV && i < c->size; i++)
                kv.count += k->v->rcounts[i];
            k = &kv;
        }
        inplace = !p2p && is_inplace(k, c, esize);
        if ((st = check_overlap(k, c, esize, inplace)) == HCOMM_SUCCESS)
            st = classify(k, c, &mem);
    }
    /* A stream-ordered call queued earlier, which HCOMM's worker now runs
     * (core/stream_worker.h) once its stream's earlier work has ended: its
     * arguments were checked when it was queued. */
    int queued = hcomm_stream_in_worker();
    /* HCOMM_CHECK: the ranks compare arguments, and refuse together */
    if (hcomm_check_on && !p2p && !queued)
        st = hcomm_check_call(c->mpi_comm, c->size, k->coll, k->dtype, k->op,
                              k->root, mem.on_gpu, k->count, st);
    if (st != HCOMM_SUCCESS) return st;
    if (k->on_stream && k->count == 0) return HCOMM_SUCCESS;
#ifdef HAVE_CUDA
    /* Device buffers of ranks on one node: kernels over CUDA IPC (a
     * stream-ordered call enqueues its kernel and returns). */
    if (!queued && mem.on_gpu && !hcomm_select_is_forced(k->coll) &&
        hcomm_ipc_applies(c, k->coll, k->count * esize)) {
        int taken;
        hcomm_stream_drain(c);
        st = run_ipc(k, c, &mem, out, pc, &taken);
        if (taken) return st;
    }
    /* On the plans: the worker runs it, and the call returns now. */
    if (!queued && k->on_stream && mem.on_gpu && hcomm_stream_queue_ok(c))
        return queue_call(k, c, &mem);
#endif
    hcomm_stream_drain(c);
    /* Stream-ordered: the stream's earlier work writes the inputs. */
    if (k->on_stream && !queued && (st = stream_inputs_ready(k))) return st;
    /* The shared segment and the node stages copy with the CPU. */
    int host_paths = !mem.on_gpu;
    if (c->size == 1 && host_paths && !out && !p2p && !k->v &&
        !hcomm_select_is_forced(k->coll))
        return run_alone(k, c, inplace, esize, pc);
    /* count 0 too: every rank's descriptor must meet the others' */
    /* alltoallv only blocking (its first round may add rounds to it, or
     * decline: a plan then runs after it), on host memory */
    int a2av = k->coll == HCOMM_COLL_ALLTOALLV;
    int shm_ok = !a2av || (host_paths && !out);
    if (c->shm && shm_ok && !hcomm_select_is_forced(k->coll) &&
        (host_paths || !out)) {
        int declined; /* k is &kv, as for every variable-count call */
        if (a2av && (st = run_direct_a2av(&kv, c, pc, &declined), !declined))
            return st;
        hcomm_shm_algo_t direct =
            a2av ? HCOMM_SHM_NONE
                 : hcomm_shm_select(c->shm, k->coll, k->count * esize);
        if (direct != HCOMM_SHM_NONE && host_paths)
            return run_direct(k, c, direct, out, pc);
#ifdef HAVE_CUDA
        if (direct != HCOMM_SHM_NONE && k->count * esize <= STAGED_MAX)
            return run_staged(k, c, &mem, direct, pc);
#endif
    }
    /* Algorithms see the node map unless HCOMM_ENABLE_TOPOLOGY_AWARE=0. */
    const int *node_of = c->topo->aware ? c->topo->map.node_of : NULL;
    const hcomm_algo_t *algo = hcomm_select(k->coll, k->count * esize, c->size,
                                            node_of ? c->topo->map.nnodes : 1);
    if (!algo)
        return hcomm_error(HCOMM_ERR_UNSUPPORTED, "%s is not implemented yet",
                           hcomm_coll_name(k->coll));
    /* Device memory takes the node stages in blocking allreduces up to
     * HCOMM_CUDA_NODE_STAGES_MAX (README, "Across nodes: node stages over
     * CUDA IPC": where they won on the GPU machine); not stream-ordered
     * ones, whose staging is the worker's, whose calls take no IPC path. */
    int gpu_stages = mem.on_gpu && !k->on_stream && !queued &&
                     k->coll == HCOMM_COLL_ALLREDUCE &&
                     k->count * esize <=
                         (size_t)hcomm_cfg_int(HCOMM_CFG_CUDA_NODE_STAGES_MAX);
    if (!out && (host_paths || gpu_stages) && node_of &&
        hcomm_hier_node_applies(c, k->coll, algo, k->count * esize)) {
        uint64_t call = hcomm_flight_begin(&c->flight, k->coll, k->dtype,
                                           k->count, k->root, 0);
        /* its stages wait on other communicators */
        hcomm_flight_clock(&c->flight, call);
        st = run_node_stages(k, c, &mem);
        hcomm_flight_end(&c->flight, call, st);
        if (pc) {
            pc->algo = "hierarchical";
            pc->transport = host_paths ? "shm+net" : "node+rail";
            hcomm_profile_end(pc, st);
        }
        return st;
    }
    struct hcomm_gpu_ctx *ctx = NULL;
    if (mem.on_gpu && (st = gpu_context(c, &mem, &ctx)) != HCOMM_SUCCESS)
        return st;
    int direct = gpu_direct(c);
#ifdef HAVE_CUDA
    /* A blocking or non-blocking call follows the default stream, as the
     * IPC path's does (README, "GPU memory"); a stream-ordered one follows
     * its own stream (above, or the worker's staging). */
    if (mem.on_gpu && !k->on_stream && !queued &&
        (st = hcomm_gpu_follow_default(ctx, direct)) != HCOMM_SUCCESS)
        return st;
#endif
    hcomm_plan_args_t pa = {.coll = k->coll,
                            .rank = c->rank,
                            .size = c->size,
                            .root = k->root,
                            .count = k->count,
                            .esize = esize,
                            .inplace = inplace,
                            .scale = reduces(k->coll) && k->op == HCOMM_AVG,
                            .chunk_bytes = chunk_bytes(c),
                            .node_of = node_of,
                            .v = k->v};
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
                            .seq = p2p ? (uint32_t)k->tag : c->seq++,
                            .gpu = mem.on_gpu ? ctx : NULL,
                            .send_on_device = mem.send_dev,
                            .recv_on_device = mem.recv_dev,
                            .gpu_direct = (uint8_t)direct};

    struct hcomm_request on_stack, *req = new_request(out, &on_stack);
    if (!req) {
        hcomm_comm_plan_put(c, plan);
        return HCOMM_ERR_NO_MEMORY;
    }
    /* On GPU memory, where the host form of the call would take the shared
     * segment, the ranks first agree there that all passed GPU memory (a
     * rank with host memory would wait on the segment while this one ran
     * the plan). */
    int agree =
        mem.on_gpu && c->shm && !hcomm_select_is_forced(k->coll) &&
        (a2av ? !out
              : k->count && shm_ok &&
                    hcomm_shm_select(c->shm, k->coll, k->count * esize) !=
                        HCOMM_SHM_NONE);
    if (agree)
        st = hcomm_shm_op_agree(&req->direct, c->shm, k->coll, k->count,
                                k->dtype, k->op, k->root);
    if (st == HCOMM_SUCCESS)
        st = hcomm_request_start(req, c, k->coll, plan, &ea, !out, agree);
    if (st != HCOMM_SUCCESS) {
        hcomm_comm_plan_put(c, plan);
        if (out) free(req);
        return st;
    }
    static const char *on_gpu[] = {"ucx+cuda", "mpi+staging", "ucx+staging"};
    const char *tp = c->tp->ops->name;
    if (mem.on_gpu)
        tp = ea.gpu_direct            ? on_gpu[0]
             : strcmp(tp, "mpi") == 0 ? on_gpu[1]
                                      : on_gpu[2];
    track_request(req, k, c, p2p ? 0 : ea.seq, pc, algo->name, tp);
    if (!out) return hcomm_request_complete(req);
    *out = req;
    return HCOMM_SUCCESS;
}

/* The profiler's record starts before anything else: its duration covers
 * the whole call. */
static hcomm_status_t run(const call_t *k, hcomm_comm_t comm,
                          hcomm_request_t *out) {
    if (__builtin_expect(!hcomm_profile_on, 1))
        return run_call(k, comm, out, NULL);
    hcomm_prof_call_t pc = {.coll = k->coll,
                            .dtype = k->dtype,
                            .count = k->count,
                            .root = k->root,
                            .algo = "none",
                            .transport = "none"};
    hcomm_comm_impl_t *c;
    if (hcomm_comm_lookup(comm, &c) != HCOMM_SUCCESS)
        return run_call(k, comm, out, NULL);
    pc.comm_id = c->id;
    pc.rank = c->rank;
    pc.size = c->size;
    hcomm_profile_begin(&pc);
    return run_call(k, comm, out, &pc);
}

#define CALL(coll, sbuf, rbuf, count, dtype, op, root, tag)                    \
    (call_t) {                                                                 \
        coll, sbuf, rbuf, count, dtype, op, root, tag, 0, NULL, NULL, 0        \
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

/* --- variable counts ------------------------------------------------------ */

/* Runs a variable-count call, blocking or started (NONBLOCKING: the
 * request must be given). v lives on this frame only: the call reads the
 * counts while it builds its plan, before it returns. */
static hcomm_status_t vrun(hcomm_coll_t coll, const void *sendbuf,
                           void *recvbuf, hcomm_dtype_t dtype, hcomm_op_t op,
                           hcomm_vspec_t v, hcomm_comm_t comm, int blocking,
                           hcomm_request_t *request) {
    call_t k = CALL(coll, sendbuf, recvbuf, 0, dtype, op, 0, 0);
    k.v = &v;
    return blocking ? run(&k, comm, NULL) : NONBLOCKING(k, comm, request);
}

hcomm_status_t hcomm_allgatherv(const void *sendbuf, void *recvbuf,
                                const size_t *recvcounts, const size_t *displs,
                                hcomm_dtype_t dtype, hcomm_comm_t comm) {
    return vrun(HCOMM_COLL_ALLGATHERV, sendbuf, recvbuf, dtype, HCOMM_SUM,
                (hcomm_vspec_t){NULL, NULL, recvcounts, displs}, comm, 1, NULL);
}

hcomm_status_t hcomm_iallgatherv(const void *sendbuf, void *recvbuf,
                                 const size_t *recvcounts, const size_t *displs,
                                 hcomm_dtype_t dtype, hcomm_comm_t comm,
                                 hcomm_request_t *request) {
    return vrun(HCOMM_COLL_ALLGATHERV, sendbuf, recvbuf, dtype, HCOMM_SUM,
                (hcomm_vspec_t){NULL, NULL, recvcounts, displs}, comm, 0,
                request);
}

hcomm_status_t hcomm_alltoallv(const void *sendbuf, const size_t *sendcounts,
                               const size_t *sdispls, void *recvbuf,
                               const size_t *recvcounts, const size_t *rdispls,
                               hcomm_dtype_t dtype, hcomm_comm_t comm) {
    return vrun(HCOMM_COLL_ALLTOALLV, sendbuf, recvbuf, dtype, HCOMM_SUM,
                (hcomm_vspec_t){sendcounts, sdispls, recvcounts, rdispls}, comm,
                1, NULL);
}

hcomm_status_t hcomm_ialltoallv(const void *sendbuf, const size_t *sendcounts,
                                const size_t *sdispls, void *recvbuf,
                                const size_t *recvcounts, const size_t *rdispls,
                                hcomm_dtype_t dtype, hcomm_comm_t comm,
                                hcomm_request_t *request) {
    return vrun(HCOMM_COLL_ALLTOALLV, sendbuf, recvbuf, dtype, HCOMM_SUM,
                (hcomm_vspec_t){sendcounts, sdispls, recvcounts, rdispls}, comm,
                0, request);
}

hcomm_status_t hcomm_reduce_scatterv(const void *sendbuf, void *recvbuf,
                                     const size_t *recvcounts,
                                     hcomm_dtype_t dtype, hcomm_op_t op,
                                     hcomm_comm_t comm) {
    return vrun(HCOMM_COLL_REDUCE_SCATTERV, sendbuf, recvbuf, dtype, op,
                (hcomm_vspec_t){NULL, NULL, recvcounts, NULL}, comm, 1, NULL);
}

hcomm_status_t hcomm_ireduce_scatterv(const void *sendbuf, void *recvbuf,
                                      const size_t *recvcounts,
                                      hcomm_dtype_t dtype, hcomm_op_t op,
                                      hcomm_comm_t comm,
                                      hcomm_request_t *request) {
    return vrun(HCOMM_COLL_REDUCE_SCATTERV, sendbuf, recvbuf, dtype, op,
                (hcomm_vspec_t){NULL, NULL, recvcounts, NULL}, comm, 0,
                request);
}

/* --- stream-ordered forms ---------------------------------------------- */

static hcomm_status_t on_stream(call_t k, hcomm_comm_t comm, void *stream) {
    k.on_stream = 1;
    k.stream = stream;
    return run(&k, comm, NULL);
}

hcomm_status_t hcomm_allreduce_stream(const void *sendbuf, void *recvbuf,
                                      size_t count, hcomm_dtype_t dtype,
                                      hcomm_op_t op, hcomm_comm_t comm,
                                      void *stream) {
    return on_stream(
        CALL(HCOMM_COLL_ALLREDUCE, sendbuf, recvbuf, count, dtype, op, 0, 0),
        comm, stream);
}

hcomm_status_t hcomm_allgather_stream(const void *sendbuf, void *recvbuf,
                                      size_t count, hcomm_dtype_t dtype,
                                      hcomm_comm_t comm, void *stream) {
    return on_stream(CALL(HCOMM_COLL_ALLGATHER, sendbuf, recvbuf, count, dtype,
                          HCOMM_SUM, 0, 0),
                     comm, stream);
}

hcomm_status_t hcomm_reduce_scatter_stream(const void *sendbuf, void *recvbuf,
                                           size_t count, hcomm_dtype_t dtype,
                                           hcomm_op_t op, hcomm_comm_t comm,
                                           void *stream) {
    return on_stream(CALL(HCOMM_COLL_REDUCE_SCATTER, sendbuf, recvbuf, count,
                          dtype, op, 0, 0),
                     comm, stream);
}

hcomm_status_t hcomm_broadcast_stream(void *buf, size_t count,
                                      hcomm_dtype_t dtype, int root,
                                      hcomm_comm_t comm, void *stream) {
    return on_stream(
        CALL(HCOMM_COLL_BCAST, buf, buf, count, dtype, HCOMM_SUM, root, 0),
        comm, stream);
}

hcomm_status_t hcomm_reduce_stream(const void *sendbuf, void *recvbuf,
                                   size_t count, hcomm_dtype_t dtype,
                                   hcomm_op_t op, int root, hcomm_comm_t comm,
                                   void *stream) {
    return on_stream(
        CALL(HCOMM_COLL_REDUCE, sendbuf, recvbuf, count, dtype, op, root, 0),
        comm, stream);
}

hcomm_status_t hcomm_alltoall_stream(const void *sendbuf, void *recvbuf,
                                     size_t count, hcomm_dtype_t dtype,
                                     hcomm_comm_t comm, void *stream) {
    return on_stream(CALL(HCOMM_COLL_ALLTOALL, sendbuf, recvbuf, count, dtype,
                          HCOMM_SUM, 0, 0),
                     comm, stream);
}

hcomm_status_t hcomm_gather_stream(const void *sendbuf, void *recvbuf,
                                   size_t count, hcomm_dtype_t dtype, int root,
                                   hcomm_comm_t comm, void *stream) {
    return on_stream(CALL(HCOMM_COLL_GATHER, sendbuf, recvbuf, count, dtype,
                          HCOMM_SUM, root, 0),
                     comm, stream);
}

hcomm_status_t hcomm_scatter_stream(const void *sendbuf, void *recvbuf,
                                    size_t count, hcomm_dtype_t dtype, int root,
                                    hcomm_comm_t comm, void *stream) {
    return on_stream(CALL(HCOMM_COLL_SCATTER, sendbuf, recvbuf, count, dtype,
                          HCOMM_SUM, root, 0),
                     comm, stream);
}

hcomm_status_t hcomm_send_stream(const void *buf, size_t count,
                                 hcomm_dtype_t dtype, int peer, int tag,
                                 hcomm_comm_t comm, void *stream) {
    return on_stream(
        CALL(HCOMM_COLL_SEND, buf, NULL, count, dtype, HCOMM_SUM, peer, tag),
        comm, stream);
}

hcomm_status_t hcomm_recv_stream(void *buf, size_t count, hcomm_dtype_t dtype,
                                 int peer, int tag, hcomm_comm_t comm,
                                 void *stream) {
    return on_stream(
        CALL(HCOMM_COLL_RECV, NULL, buf, count, dtype, HCOMM_SUM, peer, tag),
        comm, stream);
}
