/* Reduce-scatter: rank r gets block r (count elements) of the reduction of
 * every rank's n * count send buffer.
 * - ring: n-1 steps, chunked; bandwidth-optimal, any rank count;
 * - recursive halving: log2(p) exchanges of halving size; the ranks beyond
 *   the largest power of two p hand their whole buffer to a partner first
 *   and get their block back at the end.
 * Out of place the receive buffer may still be block r of the send buffer
 * (NCCL's in place): it is written only after every read of the send
 * buffer, or by the reduce that reads exactly the same elements. Flagged in
 * place, it may alias any part of the send buffer (MPI's in place: its
 * start), so the result waits in scratch until every read is done. */
#include "coll/algos.h"

#include <stdlib.h>

static hcomm_status_t done(const hcomm_plan_t *plan) {
    return plan->oom ? HCOMM_ERR_NO_MEMORY : HCOMM_SUCCESS;
}

hcomm_status_t hcomm_reduce_scatter_ring(const hcomm_plan_args_t *args,
                                         hcomm_plan_t *plan) {
    int n = args->size, r = args->rank;
    if (n == 1) return hcomm_plan_local_copy(args, plan);
    hcomm_ring_t g = {.n = n,
                      .pos = r,
                      .left = (r - 1 + n) % n,
                      .right = (r + 1) % n,
                      .total = (size_t)n * args->count,
                      .chunk = hcomm_chunk_elems(args),
                      .tag_base = 0};
    size_t cmax = hcomm_ring_chunks(&g), slots = hcomm_ring_scratch(&g);
    int *final_idx = malloc(cmax * sizeof(int));
    if (!final_idx) return HCOMM_ERR_NO_MEMORY;
    hcomm_ref_t dst = args->inplace ? hcomm_ref(HCOMM_BUF_SCRATCH, slots)
                                    : hcomm_ref(HCOMM_BUF_RECV, 0);
    plan->scratch_count = slots + (args->inplace ? args->count : 0);
    hcomm_ring_reduce_scatter(plan, &g, hcomm_ref(HCOMM_BUF_SEND, 0), 0, dst,
                              final_idx);
    for (size_t c = 0; args->scale && c < cmax; c++) {
        size_t off = c * g.chunk;
        if (off < args->count)
            hcomm_plan_scale(plan, hcomm_ref_add(dst, off),
                             args->count - off < g.chunk ? args->count - off
                                                         : g.chunk,
                             final_idx[c], -1);
    }
    free(final_idx);
    if (args->inplace) {
        hcomm_plan_fence(plan);
        hcomm_plan_copy(plan, hcomm_ref(HCOMM_BUF_RECV, 0), dst, args->count,
                        -1, -1);
    }
    return done(plan);
}

/* --- recursive halving ---------------------------------------------------
 * Scratch: the running partial sums of the whole vector (acc, n * count),
 * then the halves received (tmp). */

typedef struct {
    const hcomm_plan_args_t *args;
    hcomm_plan_t *plan;
    hcomm_fold_t fold;
    size_t chunk, stride, total, tmp, tmp_used;
    int round;
    int *sends, *recvs;
} rh_t;

static uint16_t next_tag_base(rh_t *g) {
    return (uint16_t)((size_t)g->round++ * g->stride);
}

static size_t first_elem(const rh_t *g, int v) {
    int b = v < g->fold.extra ? 2 * v : v + g->fold.extra;
    return (size_t)b * g->args->count;
}

/* dst = cur op tmp over elements [lo, hi) of the vector, which a chunk's
 * receive (dep) delivered. In the last round our own block goes straight
 * to the receive buffer (direct); everything else to acc. */
static void reduce_span(rh_t *g, hcomm_ref_t cur, size_t lo, size_t hi,
                        size_t tmp_off, int direct, int dep) {
    size_t own = (size_t)g->args->rank * g->args->count;
    size_t own_end = own + g->args->count;
    while (lo < hi) {
        int mine = direct && lo >= own && lo < own_end;
        size_t end = hi;
        if (direct && !mine && lo < own && hi > own) end = own;
        if (mine && hi > own_end) end = own_end;
        hcomm_ref_t dst = mine ? hcomm_ref(HCOMM_BUF_RECV, lo - own)
                               : hcomm_ref(HCOMM_BUF_SCRATCH, lo);
        hcomm_plan_reduce(g->plan, dst, hcomm_ref_add(cur, lo),
                          hcomm_ref(HCOMM_BUF_SCRATCH, tmp_off), end - lo, dep,
                          -1);
        tmp_off += end - lo;
        lo = end;
    }
}

/* Sends cur's [glo, ghi) to peer, receives its partial sums of [klo, khi)
 * and adds ours, chunk by chunk. */
static void halve(rh_t *g, int peer, hcomm_ref_t cur, size_t glo, size_t ghi,
                  size_t klo, size_t khi, int last) {
    size_t klen = khi - klo;
    if (klen > g->tmp_used) g->tmp_used = klen;
    hcomm_plan_exchange(g->plan, peer, hcomm_ref_add(cur, glo), ghi - glo,
                        hcomm_ref(HCOMM_BUF_SCRATCH, g->tmp), klen, g->chunk,
                        next_tag_base(g), -1, g->sends, g->recvs);
    for (size_t off = 0, c = 0; off < klen; off += g->chunk, c++) {
        size_t end = klen - off < g->chunk ? klen : off + g->chunk;
        reduce_span(g, cur, klo + off, klo + end, g->tmp + off,
                    last && !g->args->inplace, g->recvs[c]);
    }
    hcomm_plan_fence(g->plan);
}

/* The partner of a rank that sits out: acc = its vector op ours. */
static void fold_in(rh_t *g) {
    hcomm_plan_exchange(g->plan, g->args->rank - 1,
                        hcomm_ref(HCOMM_BUF_SEND, 0), 0,
                        hcomm_ref(HCOMM_BUF_SCRATCH, 0), g->total, g->chunk,
                        next_tag_base(g), -1, NULL, g->recvs);
    for (size_t off = 0, c = 0; off < g->total; off += g->chunk, c++) {
        size_t len = g->total - off < g->chunk ? g->total - off : g->chunk;
        hcomm_plan_reduce(g->plan, hcomm_ref(HCOMM_BUF_SCRATCH, off),
                          hcomm_ref(HCOMM_BUF_SEND, off),
                          hcomm_ref(HCOMM_BUF_SCRATCH, off), len, g->recvs[c],
                          -1);
    }
    hcomm_plan_fence(g->plan);
}

/* A rank that sits out: its vector out, its block back, reduced. */
static void sit_out(rh_t *g) {
    const hcomm_plan_args_t *args = g->args;
    int peer = args->rank + 1;
    hcomm_plan_exchange(g->plan, peer, hcomm_ref(HCOMM_BUF_SEND, 0), g->total,
                        hcomm_ref(HCOMM_BUF_SEND, 0), 0, g->chunk,
                        next_tag_base(g), -1, NULL, NULL);
    /* In place the block received overwrites part of what was sent. */
    hcomm_plan_fence(g->plan);
    for (int m = 1; m < g->fold.p; m <<= 1)
        g->round++;
    hcomm_plan_exchange(g->plan, peer, hcomm_ref(HCOMM_BUF_SEND, 0), 0,
                        hcomm_ref(HCOMM_BUF_RECV, 0), args->count, g->chunk,
                        next_tag_base(g), -1, NULL, NULL);
}

static void halving_rounds(rh_t *g) {
    int v = g->fold.vrank, lo = 0, hi = g->fold.p;
    hcomm_ref_t cur = hcomm_ref(HCOMM_BUF_SEND, 0);
    if (g->args->rank < 2 * g->fold.extra) {
        fold_in(g);
        cur = hcomm_ref(HCOMM_BUF_SCRATCH, 0);
    } else {
        g->round++;
    }
    for (int mask = g->fold.p / 2; mask >= 1; mask >>= 1) {
        int mid = lo + mask, up = v & mask;
        int keep_lo = up ? mid : lo, keep_hi = up ? hi : mid;
        int give_lo = up ? lo : mid, give_hi = up ? mid : hi;
        halve(g, hcomm_fold_real(&g->fold, v ^ mask), cur,
              first_elem(g, give_lo), first_elem(g, give_hi),
              first_elem(g, keep_lo), first_elem(g, keep_hi), mask == 1);
        cur = hcomm_ref(HCOMM_BUF_SCRATCH, 0);
        lo = keep_lo;
        hi = keep_hi;
    }
    /* Hand the block of the rank that sat out back to it. */
    if (g->args->rank < 2 * g->fold.extra)
        hcomm_plan_exchange(
            g->plan, g->args->rank - 1,
            hcomm_ref(HCOMM_BUF_SCRATCH,
                      (size_t)(g->args->rank - 1) * g->args->count),
            g->args->count, cur, 0, g->chunk, next_tag_base(g), -1, NULL, NULL);
}

hcomm_status_t
hcomm_reduce_scatter_recursive_halving(const hcomm_plan_args_t *args,
                                       hcomm_plan_t *plan) {
    int n = args->size;
    if (n == 1) return hcomm_plan_local_copy(args, plan);
    rh_t g = {.args = args, .plan = plan, .fold = hcomm_fold(n, args->rank)};
    g.chunk = hcomm_chunk_elems(args);
    g.total = (size_t)n * args->count;
    g.stride = g.total / g.chunk + 1;
    g.tmp = g.total;
    g.sends = malloc(g.stride * sizeof(int));
    g.recvs = malloc(g.stride * sizeof(int));
    hcomm_status_t st = HCOMM_ERR_NO_MEMORY;
    if (!g.sends || !g.recvs) goto out;
    if (g.fold.vrank < 0) {
        sit_out(&g);
    } else {
        halving_rounds(&g);
        plan->scratch_count = g.tmp + g.tmp_used;
        if (args->inplace) /* see the ring: our block waited in acc */
            hcomm_plan_copy(
                plan, hcomm_ref(HCOMM_BUF_RECV, 0),
                hcomm_ref(HCOMM_BUF_SCRATCH, (size_t)args->rank * args->count),
                args->count, -1, -1);
    }
    if (args->scale) {
        hcomm_plan_fence(plan);
        hcomm_plan_scale(plan, hcomm_ref(HCOMM_BUF_RECV, 0), args->count, -1,
                         -1);
    }
    st = done(plan);
out:
    free(g.sends);
    free(g.recvs);
    return st;
}
