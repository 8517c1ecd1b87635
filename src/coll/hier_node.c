/* Hierarchical calls whose stages inside a node run on the node's shared
 * segment, or over CUDA IPC on device memory: the communicator is split
 * into its nodes (each with a segment and an IPC path) and its rails
 * (local rank i of every node), and a call becomes direct calls on the node
 * communicator and plan calls on the rail communicator, pipelined chunk by
 * chunk: while one chunk crosses between nodes on the rails, the next is
 * reduced (or the previous spread) inside the node.
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

#include <stdlib.h>
#include <string.h>

/* Rails in flight at once: one crossing while the next is prepared. */
#define DEPTH 2

/* AllGather and ReduceScatter copy the whole message once more than the
 * plans (to group blocks by rail, or back into rank order) and make three
 * calls a chunk: across network-namespace hosts (README) they won from
 * 4 MiB in all and lost to the hierarchical plans below. */
#define MIN_REGROUPED_BYTES (4u << 20)

int hcomm_hier_node_shape_ok(const hcomm_comm_impl_t *c) {
    const hcomm_topo_map_t *m = &c->topo->map;
    if (!c->topo->aware || m->nnodes < 2 || m->node_size[0] < 2) return 0;
    for (int n = 1; n < m->nnodes; n++)
        if (m->node_size[n] != m->node_size[0]) return 0;
    return 1;
}

int hcomm_hier_node_applies(const hcomm_comm_impl_t *c, hcomm_coll_t coll,
                            const hcomm_algo_t *algo, size_t bytes) {
    if (coll != HCOMM_COLL_ALLREDUCE && coll != HCOMM_COLL_BCAST &&
        coll != HCOMM_COLL_REDUCE_SCATTER && coll != HCOMM_COLL_ALLGATHER)
        return 0;
    if (strcmp(algo->name, "hierarchical") != 0) return 0;
    if (hcomm_select_is_forced(coll)) return 0;
    if ((coll == HCOMM_COLL_ALLGATHER || coll == HCOMM_COLL_REDUCE_SCATTER) &&
        bytes * (size_t)c->size < MIN_REGROUPED_BYTES)
        return 0;
    return hcomm_hier_node_shape_ok(c);
}

hcomm_status_t hcomm_hier_subcomms(hcomm_comm_impl_t *c, hcomm_comm_t *node,
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

/* Chunks of step elements of count in flight on the rails: chunk k uses
 * slot k % DEPTH. */
typedef struct {
    hcomm_request_t req[DEPTH];
    size_t off[DEPTH], len[DEPTH];
    size_t started, finished;
    size_t count, step, next; /* next: where the next chunk starts */
} pipeline_t;

enum { PIPE_DONE, PIPE_START, PIPE_FINISHED };

/* The next move of a call's loop: PIPE_START the next chunk while a slot
 * is free (its slot in *s, where it lies in off[*s] and len[*s]), else
 * PIPE_FINISHED the oldest once its rail call is over (its slot in *s);
 * PIPE_DONE when every chunk is finished or *st is an error. */
static int pipe_step(pipeline_t *p, int *s, hcomm_status_t *st) {
    if (*st != HCOMM_SUCCESS) return PIPE_DONE;
    if (p->next < p->count && p->started - p->finished < DEPTH) {
        size_t left = p->count - p->next;
        *s = (int)(p->started++ % DEPTH);
        p->off[*s] = p->next;
        p->len[*s] = left < p->step ? left : p->step;
        p->next += p->len[*s];
        return PIPE_START;
    }
    if (p->finished == p->started) return PIPE_DONE;
    *s = (int)(p->finished++ % DEPTH);
    *st = hcomm_wait(&p->req[*s]);
    return *st == HCOMM_SUCCESS ? PIPE_FINISHED : PIPE_DONE;
}

/* Waits for every rail call still running (after a failure). */
static hcomm_status_t pipe_drain(pipeline_t *p, hcomm_status_t st) {
    for (int s = 0; s < DEPTH; s++) {
        hcomm_status_t w = hcomm_wait(&p->req[s]);
        if (st == HCOMM_SUCCESS) st = w;
    }
    return st;
}

/* Elements per chunk: chunk bytes of per elements each, rounded down to a
 * multiple of align (at least align). */
static size_t chunk_elems(size_t chunk, size_t per, size_t align) {
    size_t n = chunk / per;
    n -= n % align;
    return n ? n : align;
}

static size_t host_chunk(void) {
    return (size_t)hcomm_cfg_int(HCOMM_CFG_CHUNK_SIZE);
}

/* Columns [off, off + len) of every rank's block of count: between a
 * buffer in rank order and one grouped by rail, where block (i, n) holds
 * those of local rank i of node n (to_grouped says which way). */
static void regroup(const hcomm_topo_map_t *m, size_t count, size_t off,
                    size_t len, size_t es, char *ranked, char *grouped,
                    int to_grouped) {
    for (int i = 0; i < m->node_size[0]; i++)
        for (int n = 0; n < m->nnodes; n++) {
            size_t r = (size_t)m->ranks_by_node[m->node_start[n] + i];
            char *a = ranked + (r * count + off) * es;
            char *g = grouped +
                      ((size_t)i * (size_t)m->nnodes + (size_t)n) * len * es;
            if (to_grouped)
                memcpy(g, a, len * es);
            else
                memcpy(a, g, len * es);
        }
}

/* Two scratch buffers, or an error naming the call. */
static hcomm_status_t scratch(size_t a, size_t b, char **pa, char **pb,
                              const char *what) {
    *pa = malloc(a);
    *pb = malloc(b);
    if (*pa && *pb) return HCOMM_SUCCESS;
    free(*pa);
    free(*pb);
    return hcomm_error(HCOMM_ERR_NO_MEMORY, "%s: no memory for node stages",
                       what);
}

/* Allreduce: per chunk, reduce-scatter inside the node (rank i keeps
 * block i), allreduce of block i along rail i, allgather inside the node.
 * A chunk's remainder of fewer than L elements is allreduced inside the
 * node and then along every rail alike. AVG sums and divides at the end. */
hcomm_status_t hcomm_hier_node_allreduce(hcomm_comm_impl_t *c,
                                         const void *sendbuf, void *recvbuf,
                                         size_t count, hcomm_dtype_t dtype,
                                         hcomm_op_t op, size_t chunk) {
    hcomm_comm_t node, rail;
    hcomm_status_t st = hcomm_hier_subcomms(c, &node, &rail);
    if (st != HCOMM_SUCCESS) return st;
    const hcomm_topo_map_t *m = &c->topo->map;
    const int L = m->node_size[0], li = m->local_rank[c->rank];
    const size_t es = hcomm_dtype_size(dtype), step = chunk_elems(chunk, es, L);
    const hcomm_op_t rop = op == HCOMM_AVG ? HCOMM_SUM : op;
    const char *src = sendbuf;
    char *dst = recvbuf;
    pipeline_t p = {.count = count, .step = step};
    int s, move;
    while ((move = pipe_step(&p, &s, &st)) != PIPE_DONE) {
        size_t off = p.off[s], blk = p.len[s] / (size_t)L;
        if (move == PIPE_FINISHED) {
            /* The oldest block is back from its rail: spread it in the
             * node. */
            if (blk)
                st = hcomm_allgather(dst + (off + (size_t)li * blk) * es,
                                     dst + off * es, blk, dtype, node);
            continue;
        }
        if (blk) {
            char *mine = dst + (off + (size_t)li * blk) * es;
            st = hcomm_reduce_scatter(src + off * es, mine, blk, dtype, rop,
                                      node);
            if (st == HCOMM_SUCCESS)
                st = hcomm_iallreduce(mine, mine, blk, dtype, rop, rail,
                                      &p.req[s]);
        }
        size_t rest = p.len[s] % (size_t)L;
        if (rest && st == HCOMM_SUCCESS) { /* the last few elements */
            size_t at = (off + (size_t)L * blk) * es;
            st = hcomm_allreduce(src + at, dst + at, rest, dtype, rop, node);
            if (st == HCOMM_SUCCESS)
                st =
                    hcomm_allreduce(dst + at, dst + at, rest, dtype, rop, rail);
        }
    }
    st = pipe_drain(&p, st);
    if (st == HCOMM_SUCCESS && op == HCOMM_AVG)
        hcomm_kernel_scale(dtype)(recvbuf, count, c->size);
    return st;
}

/* Reduce-scatter: per chunk of columns (the same elements of every
 * block), the node reduce-scatters blocks grouped by rail (local rank i
 * gets the node's sum of the blocks of rail i's ranks), then rail i
 * reduce-scatters those, each rank keeping its own. */
hcomm_status_t hcomm_hier_node_reduce_scatter(hcomm_comm_impl_t *c,
                                              const void *sendbuf,
                                              void *recvbuf, size_t count,
                                              hcomm_dtype_t dtype,
                                              hcomm_op_t op) {
    hcomm_comm_t node, rail;
    hcomm_status_t st = hcomm_hier_subcomms(c, &node, &rail);
    if (st != HCOMM_SUCCESS) return st;
    const hcomm_topo_map_t *m = &c->topo->map;
    const size_t N = (size_t)m->nnodes, es = hcomm_dtype_size(dtype);
    const size_t step = chunk_elems(host_chunk(), es * (size_t)c->size, 1);
    const hcomm_op_t rop = op == HCOMM_AVG ? HCOMM_SUM : op;
    char *grouped, *partial;
    if ((st = scratch((size_t)c->size * step * es, DEPTH * N * step * es,
                      &grouped, &partial, "reduce_scatter")) != HCOMM_SUCCESS)
        return st;
    pipeline_t p = {.count = count, .step = step};
    int s, move;
    while ((move = pipe_step(&p, &s, &st)) != PIPE_DONE) {
        if (move == PIPE_FINISHED) continue; /* its block is in place */
        size_t off = p.off[s], len = p.len[s];
        regroup(m, count, off, len, es, (char *)sendbuf, grouped, 1);
        char *mine = partial + (size_t)s * N * step * es;
        st = hcomm_reduce_scatter(grouped, mine, N * len, dtype, rop, node);
        if (st == HCOMM_SUCCESS)
            st = hcomm_ireduce_scatter(mine, (char *)recvbuf + off * es, len,
                                       dtype, rop, rail, &p.req[s]);
    }
    st = pipe_drain(&p, st);
    free(grouped);
    free(partial);
    if (st == HCOMM_SUCCESS && op == HCOMM_AVG)
        hcomm_kernel_scale(dtype)(recvbuf, count, c->size);
    return st;
}

/* Allgather: per chunk of columns, rail i gathers its ranks' columns, the
 * node gathers the rails', and they are put in rank order. */
hcomm_status_t hcomm_hier_node_allgather(hcomm_comm_impl_t *c,
                                         const void *sendbuf, void *recvbuf,
                                         size_t count, hcomm_dtype_t dtype) {
    hcomm_comm_t node, rail;
    hcomm_status_t st = hcomm_hier_subcomms(c, &node, &rail);
    if (st != HCOMM_SUCCESS) return st;
    const hcomm_topo_map_t *m = &c->topo->map;
    const size_t N = (size_t)m->nnodes, es = hcomm_dtype_size(dtype);
    const size_t step = chunk_elems(host_chunk(), es * (size_t)c->size, 1);
    char *railed, *all;
    if ((st = scratch(DEPTH * N * step * es, (size_t)c->size * step * es,
                      &railed, &all, "allgather")) != HCOMM_SUCCESS)
        return st;
    pipeline_t p = {.count = count, .step = step};
    int s, move;
    while ((move = pipe_step(&p, &s, &st)) != PIPE_DONE) {
        char *slot = railed + (size_t)s * N * step * es;
        if (move == PIPE_START) {
            st = hcomm_iallgather((const char *)sendbuf + p.off[s] * es, slot,
                                  p.len[s], dtype, rail, &p.req[s]);
            continue;
        }
        st = hcomm_allgather(slot, all, N * p.len[s], dtype, node);
        if (st == HCOMM_SUCCESS) /* all is grouped by rail */
            regroup(m, count, p.off[s], p.len[s], es, recvbuf, all, 0);
    }
    st = pipe_drain(&p, st);
    free(railed);
    free(all);
    return st;
}

/* Broadcast: per chunk, along the root's rail (its local rank on every
 * node), then inside every node from that rank. */
hcomm_status_t hcomm_hier_node_bcast(hcomm_comm_impl_t *c, void *buf,
                                     size_t count, hcomm_dtype_t dtype,
                                     int root) {
    hcomm_comm_t node, rail;
    hcomm_status_t st = hcomm_hier_subcomms(c, &node, &rail);
    if (st != HCOMM_SUCCESS) return st;
    const hcomm_topo_map_t *m = &c->topo->map;
    const int head = m->local_rank[root];
    const int on_rail = m->local_rank[c->rank] == head;
    const size_t es = hcomm_dtype_size(dtype);
    const size_t step = chunk_elems(host_chunk(), es, 1);
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
    hcomm_status_t w = hcomm_wait(&req);
    return st != HCOMM_SUCCESS ? st : w;
}
