/* Broadcast from the root's receive buffer to everyone's (the send buffer
 * is the same user buffer and is never used).
 * - binomial: a tree of depth ceil(log2 n), chunk by chunk, so that deep
 *   ranks start forwarding before the root has finished; small messages;
 * - scatter_allgather: a binomial scatter of n blocks, then a ring
 *   allgather; moves about twice the message per rank whatever n, for large
 *   messages;
 * - chain: a pipeline through the ranks in order from the root; n-1 hops of
 *   latency, one chunk's worth once full, for large messages. */
#include "coll/algos.h"

#include <stdlib.h>

static hcomm_status_t done(const hcomm_plan_t *plan) {
    return plan->oom ? HCOMM_ERR_NO_MEMORY : HCOMM_SUCCESS;
}

static size_t min_size(size_t a, size_t b) {
    return a < b ? a : b;
}

hcomm_status_t hcomm_bcast_binomial(const hcomm_plan_args_t *args,
                                    hcomm_plan_t *plan) {
    int n = args->size, root = args->root;
    int v = hcomm_vrank(args->rank, root, n);
    size_t count = args->count, chunk = hcomm_chunk_elems(args);
    int span = hcomm_tree_span(v, n);
    for (size_t off = 0, c = 0; off < count; off += chunk, c++) {
        size_t len = min_size(chunk, count - off);
        hcomm_ref_t at = hcomm_ref(HCOMM_BUF_RECV, off);
        uint16_t tag = (uint16_t)c;
        int got = -1;
        if (v)
            got = hcomm_plan_recv(
                plan, hcomm_real_rank(hcomm_tree_parent(v), root, n), tag, at,
                len, -1, -1);
        /* The largest subtree first: its leaves are the farthest away. */
        for (int m = span / 2; m >= 1; m >>= 1)
            if (v + m < n)
                hcomm_plan_send(plan, hcomm_real_rank(v + m, root, n), tag, at,
                                len, got, -1);
    }
    return done(plan);
}

hcomm_status_t hcomm_bcast_chain(const hcomm_plan_args_t *args,
                                 hcomm_plan_t *plan) {
    int n = args->size, r = args->rank;
    int v = hcomm_vrank(r, args->root, n);
    size_t count = args->count, chunk = hcomm_chunk_elems(args);
    for (size_t off = 0, c = 0; off < count; off += chunk, c++) {
        size_t len = min_size(chunk, count - off);
        hcomm_ref_t at = hcomm_ref(HCOMM_BUF_RECV, off);
        int got = -1;
        if (v > 0)
            got = hcomm_plan_recv(plan, (r - 1 + n) % n, (uint16_t)c, at, len,
                                  -1, -1);
        if (v < n - 1)
            hcomm_plan_send(plan, (r + 1) % n, (uint16_t)c, at, len, got, -1);
    }
    return done(plan);
}

/* --- scatter then allgather ----------------------------------------------
 * Block b of the equal split of the buffer belongs to virtual rank b, so
 * every subtree's blocks are one contiguous range. */

typedef struct {
    const hcomm_plan_args_t *args;
    hcomm_plan_t *plan;
    int n, v;
    size_t chunk;
} sa_t;

static size_t blk_off(const sa_t *g, int b) {
    return hcomm_block_offset(g->args->count, g->n, b);
}

/* Receives virtual ranks [v, v + subtree) from the parent, chunked; the
 * receive of each chunk goes into got[]. Returns where the range starts. */
static size_t scatter_in(sa_t *g, int *got) {
    size_t lo = blk_off(g, g->v);
    size_t hi = blk_off(g, g->v + hcomm_subtree_size(g->v, g->n));
    int parent = hcomm_real_rank(hcomm_tree_parent(g->v), g->args->root, g->n);
    hcomm_plan_exchange(g->plan, parent, hcomm_ref(HCOMM_BUF_RECV, lo), 0,
                        hcomm_ref(HCOMM_BUF_RECV, lo), hi - lo, g->chunk, 0, -1,
                        NULL, got);
    return lo;
}

/* Forwards child u's range; each chunk waits for the (at most two)
 * received chunks it overlaps. */
static void scatter_out(sa_t *g, int u, size_t lo, const int *got) {
    size_t a = blk_off(g, u), b = blk_off(g, u + hcomm_subtree_size(u, g->n));
    int peer = hcomm_real_rank(u, g->args->root, g->n);
    for (size_t off = a, c = 0; off < b; off += g->chunk, c++) {
        size_t len = min_size(g->chunk, b - off);
        int d0 = -1, d1 = -1;
        if (g->v) {
            d0 = got[(off - lo) / g->chunk];
            d1 = got[(off + len - 1 - lo) / g->chunk];
        }
        hcomm_plan_send(g->plan, peer, (uint16_t)c,
                        hcomm_ref(HCOMM_BUF_RECV, off), len, d0, d1);
    }
}

hcomm_status_t hcomm_bcast_scatter_allgather(const hcomm_plan_args_t *args,
                                             hcomm_plan_t *plan) {
    int n = args->size, r = args->rank;
    sa_t g = {args, plan, n, hcomm_vrank(r, args->root, n),
              hcomm_chunk_elems(args)};
    int *got = malloc((args->count / g.chunk + 1) * sizeof(int));
    if (!got) return HCOMM_ERR_NO_MEMORY;
    size_t lo = g.v ? scatter_in(&g, got) : 0;
    for (int m = hcomm_tree_span(g.v, n) / 2; m >= 1; m >>= 1)
        if (g.v + m < n) scatter_out(&g, g.v + m, lo, got);
    free(got);
    /* The allgather sends our block, which the scatter delivers, and
     * receives over blocks the scatter may still be forwarding. */
    hcomm_plan_fence(plan);
    hcomm_ring_t ring = {.n = n,
                         .pos = g.v,
                         .left = (r - 1 + n) % n,
                         .right = (r + 1) % n,
                         .total = args->count,
                         .chunk = g.chunk,
                         .tag_base = (uint16_t)(args->count / g.chunk + 1)};
    hcomm_ring_allgather(plan, &ring, hcomm_ref(HCOMM_BUF_RECV, 0),
                         hcomm_ref(HCOMM_BUF_RECV, blk_off(&g, g.v)));
    return done(plan);
}
