/* Reduce to the root's receive buffer (other ranks have none: they work in
 * scratch). HCOMM_AVG is scaled once, at the root.
 * - binomial: partial sums flow up a binomial tree, chunk by chunk; log2(n)
 *   steps, for small messages;
 * - reduce_scatter_gather: a ring reduce-scatter leaves each rank one block
 *   of the result, which it sends to the root; about twice the message per
 *   rank whatever n, for large messages. */
#include "coll/algos.h"

#include <stdlib.h>

/* Receive slots per child in the binomial tree: how many chunks a child may
 * run ahead of the reduce that consumes them. */
#define REDUCE_SLOTS 4

static hcomm_status_t done(const hcomm_plan_t *plan) {
    return plan->oom ? HCOMM_ERR_NO_MEMORY : HCOMM_SUCCESS;
}

static size_t min_size(size_t a, size_t b) {
    return a < b ? a : b;
}

/* Children of v, smallest subtree first (they finish first). */
static int children(int v, int n, int *kids) {
    int k = 0;
    for (int m = 1; m < hcomm_tree_span(v, n); m <<= 1)
        if (v + m < n) kids[k++] = v + m;
    return k;
}

hcomm_status_t hcomm_reduce_binomial(const hcomm_plan_args_t *args,
                                     hcomm_plan_t *plan) {
    int n = args->size, root = args->root, kids[32];
    int v = hcomm_vrank(args->rank, root, n);
    size_t count = args->count, chunk = hcomm_chunk_elems(args);
    if (n == 1) return hcomm_plan_local_copy(args, plan);
    int nk = children(v, n, kids);
    size_t nchunks = (count + chunk - 1) / chunk;
    size_t depth = min_size(REDUCE_SLOTS, nchunks ? nchunks : 1);
    size_t slen = min_size(chunk, count);
    /* The running sum: the root's receive buffer, else scratch. */
    hcomm_ref_t acc = hcomm_ref(v ? HCOMM_BUF_SCRATCH : HCOMM_BUF_RECV, 0);
    size_t slots = v && nk ? count : 0;
    plan->scratch_count = slots + (size_t)nk * depth * slen;
    int slot_last[32 * REDUCE_SLOTS];
    for (size_t i = 0; i < (size_t)nk * depth; i++)
        slot_last[i] = -1;
    for (size_t off = 0, c = 0; off < count; off += chunk, c++) {
        size_t len = min_size(chunk, count - off);
        hcomm_ref_t sum = hcomm_ref_add(acc, off);
        int prev = -1;
        for (int k = 0; k < nk; k++) {
            size_t si = (size_t)k * depth + c % depth;
            hcomm_ref_t slot = hcomm_ref(HCOMM_BUF_SCRATCH, slots + si * slen);
            int got =
                hcomm_plan_recv(plan, hcomm_real_rank(kids[k], root, n),
                                (uint16_t)c, slot, len, slot_last[si], -1);
            prev = hcomm_plan_reduce(plan, sum,
                                     k ? sum : hcomm_ref(HCOMM_BUF_SEND, off),
                                     slot, len, got, prev);
            slot_last[si] = prev;
        }
        if (v)
            hcomm_plan_send(
                plan, hcomm_real_rank(hcomm_tree_parent(v), root, n),
                (uint16_t)c, nk ? sum : hcomm_ref(HCOMM_BUF_SEND, off), len,
                prev, -1);
        else if (args->scale)
            hcomm_plan_scale(plan, sum, len, prev, -1);
    }
    return done(plan);
}

/* --- reduce-scatter then gather ------------------------------------------
 * Block b of the equal split goes to virtual rank b; the root's block lands
 * in place and the others are received straight into the root's buffer. */

static void gather_blocks(const hcomm_plan_args_t *args, hcomm_plan_t *plan,
                          const hcomm_ring_t *g, uint16_t tag_base) {
    int n = args->size;
    /* In place, the blocks received land on send data the ring read, its
     * first send (of block n-1) perhaps not yet complete. */
    if (args->inplace) hcomm_plan_fence(plan);
    for (int w = 1; w < n; w++) {
        size_t off = hcomm_block_offset(args->count, n, w);
        size_t blen = hcomm_block_count(args->count, n, w);
        for (size_t o = 0, c = 0; o < blen; o += g->chunk, c++) {
            hcomm_ref_t at = hcomm_ref(HCOMM_BUF_RECV, off + o);
            size_t len = min_size(g->chunk, blen - o);
            int got =
                hcomm_plan_recv(plan, hcomm_real_rank(w, args->root, n),
                                (uint16_t)(tag_base + c), at, len, -1, -1);
            if (args->scale) hcomm_plan_scale(plan, at, len, got, -1);
        }
    }
}

hcomm_status_t hcomm_reduce_scatter_gather(const hcomm_plan_args_t *args,
                                           hcomm_plan_t *plan) {
    int n = args->size, r = args->rank;
    int v = hcomm_vrank(r, args->root, n);
    if (n == 1) return hcomm_plan_local_copy(args, plan);
    hcomm_ring_t g = {.n = n,
                      .pos = v,
                      .left = (r - 1 + n) % n,
                      .right = (r + 1) % n,
                      .total = args->count,
                      .chunk = hcomm_chunk_elems(args),
                      .tag_base = 0};
    size_t cmax = hcomm_ring_chunks(&g), ring_scratch = hcomm_ring_scratch(&g);
    size_t blen = hcomm_block_count(args->count, n, v);
    int *final_idx = malloc(cmax * sizeof(int));
    if (!final_idx) return HCOMM_ERR_NO_MEMORY;
    /* Block 0 (the root's) starts at offset 0 of the receive buffer. */
    hcomm_ref_t mine = v ? hcomm_ref(HCOMM_BUF_SCRATCH, ring_scratch)
                         : hcomm_ref(HCOMM_BUF_RECV, 0);
    plan->scratch_count = ring_scratch + (v ? blen : 0);
    hcomm_ring_reduce_scatter(plan, &g, hcomm_ref(HCOMM_BUF_SEND, 0), 0, mine,
                              final_idx);
    uint16_t tag_base = (uint16_t)((size_t)(n - 1) * cmax);
    for (size_t o = 0, c = 0; o < blen; o += g.chunk, c++) {
        size_t len = min_size(g.chunk, blen - o);
        hcomm_ref_t at = hcomm_ref_add(mine, o);
        if (v)
            hcomm_plan_send(plan, args->root, (uint16_t)(tag_base + c), at, len,
                            final_idx[c], -1);
        else if (args->scale)
            hcomm_plan_scale(plan, at, len, final_idx[c], -1);
    }
    if (!v) gather_blocks(args, plan, &g, tag_base);
    free(final_idx);
    return done(plan);
}
