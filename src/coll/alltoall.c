/* Alltoall: block j of rank i's send buffer becomes block i of rank j's
 * receive buffer.
 * - pairwise: n-1 steps, step i sending to rank + i and receiving from
 *   rank - i, chunked; each block moves once, for large messages;
 * - Bruck: ceil(log2 n) steps, each moving about half of the blocks packed
 *   into one message, through scratch; for small messages.
 * In place (one buffer), pairwise swaps blocks through two scratch blocks;
 * Bruck reads the buffer before it writes any of it. */
#include "coll/algos.h"

#include <stdlib.h>

static hcomm_status_t done(const hcomm_plan_t *plan) {
    return plan->oom ? HCOMM_ERR_NO_MEMORY : HCOMM_SUCCESS;
}

static size_t min_size(size_t a, size_t b) {
    return a < b ? a : b;
}

/* --- pairwise ------------------------------------------------------------
 * The message from rank a to rank b is step (b - a) mod n; its chunk c has
 * tag step * chunks + c on both sides. */

typedef struct {
    const hcomm_plan_args_t *args;
    hcomm_plan_t *plan;
    int n, r;
    size_t count, chunk, nchunks;
} pw_t;

static uint16_t pw_tag(const pw_t *g, int step, size_t c) {
    return (uint16_t)((size_t)step * g->nchunks + c);
}

static size_t chunk_len(const pw_t *g, size_t c) {
    return min_size(g->chunk, g->count - c * g->chunk);
}

static hcomm_ref_t block(const pw_t *g, hcomm_buf_id_t buf, int b, size_t c) {
    return hcomm_ref(buf, (size_t)b * g->count + c * g->chunk);
}

static void pairwise_out_of_place(pw_t *g) {
    hcomm_plan_copy(g->plan, block(g, HCOMM_BUF_RECV, g->r, 0),
                    block(g, HCOMM_BUF_SEND, g->r, 0), g->count, -1, -1);
    for (int i = 1; i < g->n; i++) {
        int to = (g->r + i) % g->n, from = (g->r - i + g->n) % g->n;
        for (size_t c = 0; c < g->nchunks; c++) {
            hcomm_plan_recv(g->plan, from, pw_tag(g, i, c),
                            block(g, HCOMM_BUF_RECV, from, c), chunk_len(g, c),
                            -1, -1);
            hcomm_plan_send(g->plan, to, pw_tag(g, i, c),
                            block(g, HCOMM_BUF_SEND, to, c), chunk_len(g, c),
                            -1, -1);
        }
    }
}

/* In place, step i and step n-i swap blocks r+i and r-i in one round: both
 * go out from a scratch copy, so the replies can land in the buffer. The
 * two peers alternate chunk by chunk (see hcomm_plan_shift for why).
 * last[] orders each scratch chunk's reuse after the send that read it. */
static void swap_chunk(pw_t *g, int peer, int slot, size_t c, int *last) {
    int out_step = (peer - g->r + g->n) % g->n;
    int in_step = (g->r - peer + g->n) % g->n;
    size_t len = chunk_len(g, c);
    int *lc = &last[(size_t)slot * g->nchunks + c];
    hcomm_ref_t tmp =
        hcomm_ref(HCOMM_BUF_SCRATCH, (size_t)slot * g->count + c * g->chunk);
    int cp = hcomm_plan_copy(g->plan, tmp, block(g, HCOMM_BUF_RECV, peer, c),
                             len, *lc, -1);
    *lc =
        hcomm_latest(*lc, hcomm_plan_send(g->plan, peer, pw_tag(g, out_step, c),
                                          tmp, len, cp, -1));
    hcomm_plan_recv(g->plan, peer, pw_tag(g, in_step, c),
                    block(g, HCOMM_BUF_RECV, peer, c), len, cp, -1);
}

static hcomm_status_t pairwise_in_place(pw_t *g) {
    int *last = malloc(2 * g->nchunks * sizeof(int));
    if (!last) return HCOMM_ERR_NO_MEMORY;
    for (size_t c = 0; c < 2 * g->nchunks; c++)
        last[c] = -1;
    g->plan->scratch_count = (g->n > 2 ? 2 : 1) * g->count;
    for (int i = 1; 2 * i <= g->n; i++) {
        int up = (g->r + i) % g->n, down = (g->r - i + g->n) % g->n;
        for (size_t c = 0; c < g->nchunks; c++) {
            swap_chunk(g, up, 0, c, last);
            if (down != up) swap_chunk(g, down, 1, c, last);
        }
    }
    free(last);
    return done(g->plan);
}

hcomm_status_t hcomm_alltoall_pairwise(const hcomm_plan_args_t *args,
                                       hcomm_plan_t *plan) {
    pw_t g = {.args = args,
              .plan = plan,
              .n = args->size,
              .r = args->rank,
              .count = args->count,
              .chunk = hcomm_chunk_elems(args)};
    g.nchunks = (g.count + g.chunk - 1) / g.chunk;
    if (g.n == 1) return hcomm_plan_local_copy(args, plan);
    if (args->inplace) return pairwise_in_place(&g);
    pairwise_out_of_place(&g);
    return done(plan);
}

/* --- Bruck ----------------------------------------------------------------
 * Scratch: the rotated blocks (tmp: block j is for rank r + j), then a
 * packed send area and a packed receive area. In the round of distance d
 * every block j with bit d set moves to rank r + d, keeping its index j;
 * after all rounds tmp block j came from rank r - j. */

typedef struct {
    const hcomm_plan_args_t *args;
    hcomm_plan_t *plan;
    int n, r;
    size_t count, pack_s, pack_r; /* scratch offsets of the pack areas */
} br_t;

static hcomm_ref_t tmp_block(const br_t *g, int j) {
    return hcomm_ref(HCOMM_BUF_SCRATCH, (size_t)j * g->count);
}

/* Blocks j < n with bit d set. */
static size_t moving(int n, int d) {
    size_t m = 0;
    for (int j = 1; j < n; j++)
        m += (j & d) != 0;
    return m;
}

/* Copies the moving blocks between tmp and a pack area. */
static void pack(br_t *g, int d, size_t area, int unpack) {
    size_t k = 0;
    for (int j = 1; j < g->n; j++) {
        if (!(j & d)) continue;
        hcomm_ref_t packed =
            hcomm_ref(HCOMM_BUF_SCRATCH, area + k++ * g->count);
        hcomm_ref_t t = tmp_block(g, j);
        hcomm_plan_copy(g->plan, unpack ? t : packed, unpack ? packed : t,
                        g->count, -1, -1);
    }
    hcomm_plan_fence(g->plan);
}

hcomm_status_t hcomm_alltoall_bruck(const hcomm_plan_args_t *args,
                                    hcomm_plan_t *plan) {
    int n = args->size, r = args->rank;
    size_t count = args->count, chunk = hcomm_chunk_elems(args);
    if (n == 1) return hcomm_plan_local_copy(args, plan);
    size_t most = moving(n, 1);
    for (int d = 2; d < n; d *= 2)
        if (moving(n, d) > most) most = moving(n, d);
    br_t g = {.args = args,
              .plan = plan,
              .n = n,
              .r = r,
              .count = count,
              .pack_s = (size_t)n * count,
              .pack_r = (size_t)n * count + most * count};
    plan->scratch_count = g.pack_r + most * count;
    /* Rotate: tmp block j = send block r + j. */
    size_t upper = (size_t)(n - r) * count;
    hcomm_plan_copy(plan, tmp_block(&g, 0),
                    hcomm_ref(HCOMM_BUF_SEND, (size_t)r * count), upper, -1,
                    -1);
    hcomm_plan_copy(plan, hcomm_ref(HCOMM_BUF_SCRATCH, upper),
                    hcomm_ref(HCOMM_BUF_SEND, 0), (size_t)r * count, -1, -1);
    hcomm_plan_fence(plan);
    size_t stride = (size_t)n * count / chunk + 1;
    int round = 0;
    for (int d = 1; d < n; d *= 2, round++) {
        size_t m = moving(n, d) * count;
        pack(&g, d, g.pack_s, 0);
        hcomm_plan_shift(
            plan, (r + d) % n, hcomm_ref(HCOMM_BUF_SCRATCH, g.pack_s), m,
            (r - d + n) % n, hcomm_ref(HCOMM_BUF_SCRATCH, g.pack_r), m, chunk,
            (uint16_t)((size_t)round * stride));
        hcomm_plan_fence(plan);
        pack(&g, d, g.pack_r, 1);
    }
    /* Receive block r - j is tmp block j. */
    for (int j = 0; j < n; j++)
        hcomm_plan_copy(
            plan, hcomm_ref(HCOMM_BUF_RECV, (size_t)((r - j + n) % n) * count),
            tmp_block(&g, j), count, -1, -1);
    return done(plan);
}
