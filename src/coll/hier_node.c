/* Hierarchical calls whose stages inside a node run on the node's shared
 * segment: the communicator is split into its nodes (each with a segment)
 * and its rails (local rank i of every node), and a call becomes direct
 * calls on the node communicator and plan calls on the rail communicator,
 * pipelined chunk by chunk: while one chunk crosses between nodes on the
 * rails, the next is reduced (or the previous spread) on shared memory.
 *
 * Every rank runs the same schedule, so the calls on each sub-communicator
 * come in the same order everywhere. Only blocking calls take this form
 * (hcomm_i* run the hierarchical plan), and only on nodes of equal size,
 * so that every rail has one rank on every node. */
#include "coll/hier_node.h"
#include "core/config.h"
#include "core/log.h"
#include "kernels/reduce.h"
#include "topo/topo.h"

#include <string.h>

/* Rails in flight at once: one crossing while the next is prepared. */
#define DEPTH 2

int hcomm_hier_node_applies(const hcomm_comm_impl_t *c, hcomm_coll_t coll,
                            const hcomm_algo_t *algo) {
    const hcomm_topo_map_t *m = &c->topo->map;
    if (coll != HCOMM_COLL_ALLREDUCE && coll != HCOMM_COLL_BCAST) return 0;
    if (!c->topo->aware || m->nnodes < 2 || m->node_size[0] < 2) return 0;
    if (strcmp(algo->name, "hierarchical") != 0) return 0;
    if (hcomm_select_is_forced(coll)) return 0;
    for (int n = 1; n < m->nnodes; n++)
        if (m->node_size[n] != m->node_size[0]) return 0;
    return 1;
}

/* The node and rail communicators, made on first use (collective: every
 * rank reaches here in the same call). */
static hcomm_status_t subcomms(hcomm_comm_impl_t *c, hcomm_comm_t *node,
                               hcomm_comm_t *rail) {
    if (!c->node_comm) {
        const hcomm_topo_map_t *m = &c->topo->map;
        int me = c->rank;
        hcomm_status_t st = hcomm_comm_split(c->handle, m->node_of[me],
                                             m->local_rank[me], &c->node_comm);
        if (st == HCOMM_SUCCESS)
            st = hcomm_comm_split(c->handle, m->local_rank[me], m->node_of[me],
                                  &c->rail_comm);
        if (st != HCOMM_SUCCESS) {
            if (c->node_comm) hcomm_comm_free(&c->node_comm);
            return st;
        }
    }
    *node = c->node_comm;
    *rail = c->rail_comm;
    return HCOMM_SUCCESS;
}

/* Waits for every rail call still running; the first failure wins. */
static hcomm_status_t drain(hcomm_request_t *reqs, int n, hcomm_status_t st) {
    for (int i = 0; i < n; i++) {
        hcomm_status_t w = hcomm_wait(&reqs[i]);
        if (st == HCOMM_SUCCESS) st = w;
    }
    return st;
}

/* Chunks hold a multiple of L elements, so that they split into L equal
 * blocks (the last one may be shorter and leave a remainder). */
static size_t chunk_elems(size_t esize, int L) {
    size_t n = (size_t)hcomm_cfg_int(HCOMM_CFG_CHUNK_SIZE) / esize;
    n -= n % (size_t)L;
    return n ? n : (size_t)L;
}

/* Allreduce: per chunk, reduce-scatter inside the node (rank i keeps
 * block i), allreduce of block i along rail i, allgather inside the node.
 * A remainder of fewer than L elements is allreduced inside the node and
 * then along every rail alike. AVG sums and divides at the end. */
hcomm_status_t hcomm_hier_node_allreduce(hcomm_comm_impl_t *c,
                                         const void *sendbuf, void *recvbuf,
                                         size_t count, hcomm_dtype_t dtype,
                                         hcomm_op_t op) {
    hcomm_comm_t node, rail;
    hcomm_status_t st = subcomms(c, &node, &rail);
    if (st != HCOMM_SUCCESS) return st;
    const hcomm_topo_map_t *m = &c->topo->map;
    const int L = m->node_size[0], li = m->local_rank[c->rank];
    const size_t es = hcomm_dtype_size(dtype), step = chunk_elems(es, L);
    const hcomm_op_t rop = op == HCOMM_AVG ? HCOMM_SUM : op;
    const char *src = sendbuf;
    char *dst = recvbuf;
    /* Chunk k's block runs on its rail while chunk k + 1 is reduced. */
    hcomm_request_t reqs[DEPTH] = {HCOMM_REQUEST_NULL};
    size_t offs[DEPTH] = {0}, blks[DEPTH] = {0};
    int inflight = 0;
    size_t off = 0;
    while (st == HCOMM_SUCCESS && (off < count || inflight)) {
        if (off < count && inflight < DEPTH) {
            size_t len = count - off < step ? count - off : step;
            size_t blk = len / (size_t)L, rest = len % (size_t)L;
            if (blk) {
                char *mine = dst + (off + (size_t)li * blk) * es;
                st = hcomm_reduce_scatter(src + off * es, mine, blk, dtype, rop,
                                          node);
                if (st == HCOMM_SUCCESS)
                    st = hcomm_iallreduce(mine, mine, blk, dtype, rop, rail,
                                          &reqs[inflight]);
                if (st != HCOMM_SUCCESS) break;
                offs[inflight] = off;
                blks[inflight++] = blk;
            }
            if (rest) { /* the last few elements */
                size_t at = (off + (size_t)L * blk) * es;
                st =
                    hcomm_allreduce(src + at, dst + at, rest, dtype, rop, node);
                if (st == HCOMM_SUCCESS)
                    st = hcomm_allreduce(dst + at, dst + at, rest, dtype, rop,
                                         rail);
            }
            off += len;
            continue;
        }
        /* The oldest block is back from its rail: spread it in the node. */
        st = hcomm_wait(&reqs[0]);
        if (st == HCOMM_SUCCESS)
            st = hcomm_allgather(dst + (offs[0] + (size_t)li * blks[0]) * es,
                                 dst + offs[0] * es, blks[0], dtype, node);
        inflight--;
        memmove(reqs, reqs + 1, sizeof(reqs[0]) * (size_t)inflight);
        memmove(offs, offs + 1, sizeof(offs[0]) * (size_t)inflight);
        memmove(blks, blks + 1, sizeof(blks[0]) * (size_t)inflight);
    }
    st = drain(reqs, inflight, st);
    if (st == HCOMM_SUCCESS && op == HCOMM_AVG)
        hcomm_kernel_scale(dtype)(recvbuf, count, c->size);
    return st;
}

/* Broadcast: per chunk, along the root's rail (its local rank on every
 * node), then inside every node from that rank. */
hcomm_status_t hcomm_hier_node_bcast(hcomm_comm_impl_t *c, void *buf,
                                     size_t count, hcomm_dtype_t dtype,
                                     int root) {
    hcomm_comm_t node, rail;
    hcomm_status_t st = subcomms(c, &node, &rail);
    if (st != HCOMM_SUCCESS) return st;
    const hcomm_topo_map_t *m = &c->topo->map;
    const int head = m->local_rank[root];
    const int on_rail = m->local_rank[c->rank] == head;
    const size_t es = hcomm_dtype_size(dtype);
    const size_t step = chunk_elems(es, m->node_size[0]);
    char *data = buf;
    hcomm_request_t req = HCOMM_REQUEST_NULL;
    /* The root's rail sends chunk k + 1 while chunk k spreads in nodes. */
    if (on_rail)
        st = hcomm_ibroadcast(data, count < step ? count : step, dtype,
                              m->node_of[root], rail, &req);
    for (size_t off = 0; st == HCOMM_SUCCESS && off < count; off += step) {
        size_t len = count - off < step ? count - off : step;
        if (on_rail) {
            st = hcomm_wait(&req);
            size_t next = off + len;
            if (st == HCOMM_SUCCESS && next < count)
                st = hcomm_ibroadcast(data + next * es,
                                      count - next < step ? count - next : step,
                                      dtype, m->node_of[root], rail, &req);
        }
        if (st == HCOMM_SUCCESS)
            st = hcomm_broadcast(data + off * es, len, dtype, head, node);
    }
    return drain(&req, 1, st);
}
