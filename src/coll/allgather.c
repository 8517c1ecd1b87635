/* Allgather: every rank's block of count elements into every rank's
 * receive buffer, block r at r * count.
 * - ring: n-1 steps, each block chunked; bandwidth-optimal, any rank count;
 * - recursive doubling: log2(p) exchanges of doubling size, the ranks beyond
 *   the largest power of two p folded onto a partner (one extra step each
 *   way); for small and medium messages;
 * - Bruck: ceil(log2 n) steps for any rank count, through a rotated scratch
 *   copy; for small messages.
 * In place, the own block already sits in the receive buffer: the plans
 * never read the send buffer then. */
#include "coll/algos.h"

/* Where this rank's own block is. */
static hcomm_ref_t own_block(const hcomm_plan_args_t *args) {
    return args->inplace
               ? hcomm_ref(HCOMM_BUF_RECV, (size_t)args->rank * args->count)
               : hcomm_ref(HCOMM_BUF_SEND, 0);
}

static hcomm_status_t done(const hcomm_plan_t *plan) {
    return plan->oom ? HCOMM_ERR_NO_MEMORY : HCOMM_SUCCESS;
}

/* Out of place, the own block is copied in; nothing else reads it there. */
static void copy_own(const hcomm_plan_args_t *args, hcomm_plan_t *plan) {
    if (!args->inplace)
        hcomm_plan_copy(
            plan, hcomm_ref(HCOMM_BUF_RECV, (size_t)args->rank * args->count),
            hcomm_ref(HCOMM_BUF_SEND, 0), args->count, -1, -1);
}

hcomm_status_t hcomm_allgather_ring(const hcomm_plan_args_t *args,
                                    hcomm_plan_t *plan) {
    int n = args->size, r = args->rank;
    hcomm_ring_t g = {.n = n,
                      .pos = r,
                      .left = (r - 1 + n) % n,
                      .right = (r + 1) % n,
                      .total = (size_t)n * args->count,
                      .chunk = hcomm_chunk_elems(args),
                      .tag_base = 0};
    copy_own(args, plan);
    hcomm_ring_allgather(plan, &g, hcomm_ref(HCOMM_BUF_RECV, 0),
                         own_block(args));
    return done(plan);
}

/* --- recursive doubling ------------------------------------------------- */

typedef struct {
    const hcomm_plan_args_t *args;
    hcomm_plan_t *plan;
    hcomm_fold_t fold;
    size_t chunk, stride;
    int round;
} rd_t;

/* First block of virtual rank v's blocks: a folded pair owns two. */
static size_t first_block(const rd_t *g, int v) {
    return (size_t)(v < g->fold.extra ? 2 * v : v + g->fold.extra);
}

/* One transfer of whole blocks [sb, se) out and [rb, re) in, then a fence:
 * the next round forwards what this one received. */
static void swap_blocks(rd_t *g, int peer, hcomm_ref_t src, size_t sb,
                        size_t se, size_t rb, size_t re) {
    size_t c = g->args->count;
    uint16_t base = (uint16_t)((size_t)g->round++ * g->stride);
    hcomm_plan_exchange(g->plan, peer, src, (se - sb) * c,
                        hcomm_ref(HCOMM_BUF_RECV, rb * c), (re - rb) * c,
                        g->chunk, base, -1, NULL, NULL);
    hcomm_plan_fence(g->plan);
}

static hcomm_ref_t recv_at(const rd_t *g, size_t block) {
    return hcomm_ref(HCOMM_BUF_RECV, block * g->args->count);
}

hcomm_status_t hcomm_allgather_recursive_doubling(const hcomm_plan_args_t *args,
                                                  hcomm_plan_t *plan) {
    int n = args->size, r = args->rank;
    rd_t g = {args, plan, hcomm_fold(n, r), hcomm_chunk_elems(args), 0, 0};
    g.stride = (size_t)n * args->count / g.chunk + 1;
    size_t nb = (size_t)n, me = (size_t)r;
    copy_own(args, plan);
    /* Fold in: the rank that sits out hands its block to its partner. */
    if (g.fold.vrank < 0) {
        swap_blocks(&g, r + 1, own_block(args), me, me + 1, 0, 0);
    } else if (r < 2 * g.fold.extra) {
        swap_blocks(&g, r - 1, own_block(args), 0, 0, me - 1, me);
    } else {
        hcomm_plan_fence(plan); /* the round below sends the copied block */
        g.round++;
    }
    int v = g.fold.vrank;
    for (int mask = 1; mask < g.fold.p; mask <<= 1) {
        if (v < 0) {
            g.round++;
            continue;
        }
        int mine = v & ~(mask - 1), theirs = mine ^ mask;
        size_t mb = first_block(&g, mine), tb = first_block(&g, theirs);
        swap_blocks(&g, hcomm_fold_real(&g.fold, v ^ mask), recv_at(&g, mb), mb,
                    first_block(&g, mine + mask), tb,
                    first_block(&g, theirs + mask));
    }
    /* Fold out: everything but the block the partner already has. */
    if (v < 0) {
        swap_blocks(&g, r + 1, recv_at(&g, 0), 0, 0, 0, me);
        swap_blocks(&g, r + 1, recv_at(&g, 0), 0, 0, me + 1, nb);
    } else if (r < 2 * g.fold.extra) {
        swap_blocks(&g, r - 1, recv_at(&g, 0), 0, me - 1, 0, 0);
        swap_blocks(&g, r - 1, recv_at(&g, me), me, nb, 0, 0);
    }
    return done(plan);
}

/* --- Bruck ----------------------------------------------------------------
 * Scratch holds the blocks rotated so that ours is first: after the round
 * with distance d, scratch block i is rank (r + i)'s for i < 2d. The last
 * step rotates them into place. */

hcomm_status_t hcomm_allgather_bruck(const hcomm_plan_args_t *args,
                                     hcomm_plan_t *plan) {
    int n = args->size, r = args->rank;
    size_t count = args->count, chunk = hcomm_chunk_elems(args);
    size_t stride = (size_t)n * count / chunk + 1;
    if (n == 1) return hcomm_plan_local_copy(args, plan);
    plan->scratch_count = (size_t)n * count;
    copy_own(args, plan);
    hcomm_plan_copy(plan, hcomm_ref(HCOMM_BUF_SCRATCH, 0), own_block(args),
                    count, -1, -1);
    hcomm_plan_fence(plan);
    int round = 0;
    for (int d = 1; d < n; d *= 2, round++) {
        size_t m = (size_t)(d < n - d ? d : n - d) * count;
        hcomm_plan_shift(plan, (r - d + n) % n, hcomm_ref(HCOMM_BUF_SCRATCH, 0),
                         m, (r + d) % n,
                         hcomm_ref(HCOMM_BUF_SCRATCH, (size_t)d * count), m,
                         chunk, (uint16_t)((size_t)round * stride));
        hcomm_plan_fence(plan);
    }
    /* Scratch blocks 1 .. n-r-1 are ranks r+1 .. n-1; the rest 0 .. r-1. */
    size_t after = (size_t)(n - r - 1) * count;
    hcomm_plan_copy(plan, hcomm_ref(HCOMM_BUF_RECV, ((size_t)r + 1) * count),
                    hcomm_ref(HCOMM_BUF_SCRATCH, count), after, -1, -1);
    hcomm_plan_copy(plan, hcomm_ref(HCOMM_BUF_RECV, 0),
                    hcomm_ref(HCOMM_BUF_SCRATCH, count + after),
                    (size_t)r * count, -1, -1);
    return done(plan);
}
