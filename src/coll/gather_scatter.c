/* Binomial gather and scatter over virtual ranks (the root is 0), whose
 * subtrees are contiguous ranges of virtual ranks.
 * - Blocks of at least a chunk travel block by block, chunk by chunk, each
 *   forwarded as soon as it arrives: large messages pipeline down (or up)
 *   the tree.
 * - Smaller blocks travel as one message per subtree, stored and forwarded
 *   whole: log2(n) messages instead of one per rank.
 * The root's buffer is in real rank order, so a range of virtual ranks that
 * wraps past real rank n-1 moves as two pieces, on both sides alike.
 * In place at the root the own block is already where it belongs. */
#include "coll/algos.h"

typedef struct {
    const hcomm_plan_args_t *args;
    hcomm_plan_t *plan;
    int n, root, v, sub, gather;
    size_t count, chunk, cpb; /* chunks per block */
} gs_t;

static void gs_init(gs_t *g, const hcomm_plan_args_t *args, hcomm_plan_t *plan,
                    int gather) {
    g->args = args;
    g->plan = plan;
    g->n = args->size;
    g->root = args->root;
    g->v = hcomm_vrank(args->rank, args->root, args->size);
    g->sub = hcomm_subtree_size(g->v, g->n);
    g->gather = gather;
    g->count = args->count;
    g->chunk = hcomm_chunk_elems(args);
    g->cpb = (g->count + g->chunk - 1) / g->chunk;
}

static hcomm_status_t done(const hcomm_plan_t *plan) {
    return plan->oom ? HCOMM_ERR_NO_MEMORY : HCOMM_SUCCESS;
}

static int peer(const gs_t *g, int u) {
    return hcomm_real_rank(u, g->root, g->n);
}

static int parent(const gs_t *g) {
    return peer(g, hcomm_tree_parent(g->v));
}

/* The child of v whose subtree holds u, for v < u < v + subtree. */
static int child_towards(int v, int u) {
    int m = 1;
    while (2 * m <= u - v)
        m *= 2;
    return v + m;
}

/* The root's user buffer of n blocks: gather receives into it, scatter
 * sends from it. */
static hcomm_ref_t root_block(const gs_t *g, int u) {
    return hcomm_ref(g->gather ? HCOMM_BUF_RECV : HCOMM_BUF_SEND,
                     (size_t)peer(g, u) * g->count);
}

/* A non-root rank keeps the blocks of its subtree in scratch. */
static hcomm_ref_t tmp_block(const gs_t *g, int u, int skip_own) {
    return hcomm_ref(HCOMM_BUF_SCRATCH,
                     (size_t)(u - g->v - skip_own) * g->count);
}

static void root_own_block(const gs_t *g) {
    if (g->args->inplace) return;
    hcomm_ref_t send =
        g->gather ? hcomm_ref(HCOMM_BUF_SEND, 0) : root_block(g, 0);
    hcomm_ref_t recv =
        g->gather ? root_block(g, 0) : hcomm_ref(HCOMM_BUF_RECV, 0);
    hcomm_plan_copy(g->plan, recv, send, g->count, -1, -1);
}

/* --- block by block -------------------------------------------------------
 * Chunk j of virtual rank u's block has tag u * cpb + j on every hop. */

static uint16_t block_tag(const gs_t *g, int u, size_t j) {
    return (uint16_t)((size_t)u * g->cpb + j);
}

/* One block's chunks from `from` to `to` (-1: not sent or not received),
 * each forwarded when it has arrived. */
static void relay_block(gs_t *g, int u, int from, hcomm_ref_t in, int to,
                        hcomm_ref_t out) {
    for (size_t j = 0, off = 0; off < g->count; j++, off += g->chunk) {
        size_t len = g->count - off < g->chunk ? g->count - off : g->chunk;
        int got = -1;
        if (from >= 0)
            got = hcomm_plan_recv(g->plan, from, block_tag(g, u, j),
                                  hcomm_ref_add(in, off), len, -1, -1);
        if (to >= 0)
            hcomm_plan_send(g->plan, to, block_tag(g, u, j),
                            hcomm_ref_add(out, off), len, got, -1);
    }
}

static void by_blocks(gs_t *g) {
    int v = g->v, gather = g->gather;
    if (v == 0) {
        root_own_block(g);
        for (int u = 1; u < g->n; u++) {
            int c = peer(g, child_towards(0, u));
            hcomm_ref_t at = root_block(g, u);
            relay_block(g, u, gather ? c : -1, at, gather ? -1 : c, at);
        }
        return;
    }
    g->plan->scratch_count = (size_t)(g->sub - 1) * g->count;
    /* Our own block: straight from the send or into the receive buffer. */
    if (gather)
        relay_block(g, v, -1, hcomm_ref(HCOMM_BUF_SEND, 0), parent(g),
                    hcomm_ref(HCOMM_BUF_SEND, 0));
    else
        relay_block(g, v, parent(g), hcomm_ref(HCOMM_BUF_RECV, 0), -1,
                    hcomm_ref(HCOMM_BUF_RECV, 0));
    for (int u = v + 1; u < v + g->sub; u++) {
        int c = peer(g, child_towards(v, u));
        hcomm_ref_t at = tmp_block(g, u, 1);
        relay_block(g, u, gather ? c : parent(g), at, gather ? parent(g) : c,
                    at);
    }
}

/* --- whole subtrees -------------------------------------------------------
 * A piece of virtual ranks [a, b) carries tags a + chunk index: blocks are
 * smaller than a chunk here, so the pieces a sender sends never share a
 * tag. */

static void move_piece(gs_t *g, int to, int a, int b, int send) {
    hcomm_ref_t at = g->v ? tmp_block(g, a, 0) : root_block(g, a);
    size_t len = (size_t)(b - a) * g->count;
    hcomm_plan_exchange(g->plan, to, at, send ? len : 0, at, send ? 0 : len,
                        g->chunk, (uint16_t)a, -1, NULL, NULL);
}

static void move_range(gs_t *g, int to, int a, int b, int send) {
    int wrap = g->n - g->root; /* the virtual rank of real rank 0 */
    int cut = a < wrap && wrap < b ? wrap : b;
    move_piece(g, to, a, cut, send);
    if (cut < b) move_piece(g, to, cut, b, send);
}

static void by_subtrees(gs_t *g) {
    int v = g->v;
    if (v) g->plan->scratch_count = (size_t)g->sub * g->count;
    if (v == 0) {
        root_own_block(g);
    } else if (g->gather) {
        hcomm_plan_copy(g->plan, tmp_block(g, v, 0),
                        hcomm_ref(HCOMM_BUF_SEND, 0), g->count, -1, -1);
    } else {
        move_range(g, parent(g), v, v + g->sub, 0);
        hcomm_plan_fence(g->plan);
        hcomm_plan_copy(g->plan, hcomm_ref(HCOMM_BUF_RECV, 0),
                        tmp_block(g, v, 0), g->count, -1, -1);
    }
    /* Children: the largest subtree first, as it has the longest way on. */
    for (int m = hcomm_tree_span(v, g->n) / 2; m >= 1; m >>= 1) {
        int c = v + m;
        if (c >= g->n) continue;
        move_range(g, peer(g, c), c, c + hcomm_subtree_size(c, g->n),
                   !g->gather);
    }
    if (v && g->gather) {
        hcomm_plan_fence(g->plan);
        move_range(g, parent(g), v, v + g->sub, 1);
    }
}

static hcomm_status_t gather_scatter(const hcomm_plan_args_t *args,
                                     hcomm_plan_t *plan, int gather) {
    gs_t g;
    gs_init(&g, args, plan, gather);
    if (g.count >= g.chunk)
        by_blocks(&g);
    else
        by_subtrees(&g);
    return done(plan);
}

hcomm_status_t hcomm_gather_binomial(const hcomm_plan_args_t *args,
                                     hcomm_plan_t *plan) {
    return gather_scatter(args, plan, 1);
}

hcomm_status_t hcomm_scatter_binomial(const hcomm_plan_args_t *args,
                                      hcomm_plan_t *plan) {
    return gather_scatter(args, plan, 0);
}
