/* Recursive allreduces, for any rank count through folding (algos.h):
 * - recursive doubling: log2(p) full-size exchanges; fewest steps, for small
 *   messages;
 * - Rabenseifner: recursive halving reduce-scatter then recursive doubling
 *   allgather; log2(p) steps each way moving 2(p-1)/p of the data, for
 *   medium messages.
 * Rounds are separated by fences; inside a round chunks pipeline. */
#include "coll/algos.h"

#include <stdlib.h>

typedef struct {
    const hcomm_plan_args_t *args;
    hcomm_plan_t *plan;
    hcomm_fold_t fold;
    size_t chunk, tag_stride;
    int round; /* advances the tag base once per exchange */
    int *sends, *recvs;
} rec_t;

static uint16_t next_tag_base(rec_t *g) {
    return (uint16_t)((size_t)g->round++ * g->tag_stride);
}

/* Exchange then reduce: dst = cur op received, chunk by chunk. */
static void exchange_reduce(rec_t *g, int peer, hcomm_ref_t send_from,
                            size_t scount, hcomm_ref_t cur, hcomm_ref_t dst,
                            size_t rcount) {
    hcomm_plan_exchange(g->plan, peer, send_from, scount,
                        hcomm_ref(HCOMM_BUF_SCRATCH, 0), rcount, g->chunk,
                        next_tag_base(g), -1, g->sends, g->recvs);
    for (size_t off = 0, c = 0; off < rcount; off += g->chunk, c++) {
        size_t n = rcount - off < g->chunk ? rcount - off : g->chunk;
        /* The chunk's send may still read the region the reduce writes. */
        hcomm_plan_reduce(g->plan, hcomm_ref(dst.buf, dst.offset + off),
                          hcomm_ref(cur.buf, cur.offset + off),
                          hcomm_ref(HCOMM_BUF_SCRATCH, off), n, g->recvs[c],
                          off < scount ? g->sends[c] : -1);
    }
    hcomm_plan_fence(g->plan);
}

static void transfer(rec_t *g, int peer, hcomm_ref_t src, size_t scount,
                     hcomm_ref_t dst, size_t rcount) {
    hcomm_plan_exchange(g->plan, peer, src, scount, dst, rcount, g->chunk,
                        next_tag_base(g), -1, NULL, NULL);
    hcomm_plan_fence(g->plan);
}

/* Before the power-of-two part: the rank that sits out hands its data to
 * its odd neighbour, which adds it in. Returns where the data now is. */
static hcomm_ref_t fold_in(rec_t *g) {
    int r = g->args->rank;
    size_t n = g->args->count;
    hcomm_ref_t send = hcomm_ref(HCOMM_BUF_SEND, 0);
    if (r >= 2 * g->fold.extra) {
        g->round++; /* keep tag bases equal on every rank */
        return send;
    }
    if (g->fold.vrank < 0) {
        transfer(g, r + 1, send, n, send, 0);
        return send;
    }
    exchange_reduce(g, r - 1, send, 0, send, hcomm_ref(HCOMM_BUF_RECV, 0), n);
    return hcomm_ref(HCOMM_BUF_RECV, 0);
}

/* After: the odd neighbour returns the result to the rank that sat out. */
static void fold_out(rec_t *g) {
    int r = g->args->rank;
    size_t n = g->args->count;
    hcomm_ref_t recv = hcomm_ref(HCOMM_BUF_RECV, 0);
    if (r >= 2 * g->fold.extra) return;
    if (g->fold.vrank < 0)
        transfer(g, r + 1, recv, 0, recv, n);
    else
        transfer(g, r - 1, recv, n, recv, 0);
}

static hcomm_status_t rec_setup(rec_t *g, const hcomm_plan_args_t *args,
                                hcomm_plan_t *plan) {
    g->args = args;
    g->plan = plan;
    g->fold = hcomm_fold(args->size, args->rank);
    g->chunk = hcomm_chunk_elems(args);
    g->tag_stride = args->count / g->chunk + 1;
    g->round = 0;
    g->sends = malloc(g->tag_stride * sizeof(int));
    g->recvs = malloc(g->tag_stride * sizeof(int));
    plan->scratch_count = args->count;
    return g->sends && g->recvs ? HCOMM_SUCCESS : HCOMM_ERR_NO_MEMORY;
}

static hcomm_status_t rec_done(rec_t *g) {
    free(g->sends);
    free(g->recvs);
    return g->plan->oom ? HCOMM_ERR_NO_MEMORY : HCOMM_SUCCESS;
}

hcomm_status_t hcomm_allreduce_recursive_doubling(const hcomm_plan_args_t *args,
                                                  hcomm_plan_t *plan) {
    if (args->size == 1) return hcomm_plan_local_copy(args, plan);
    rec_t g;
    if (rec_setup(&g, args, plan) != HCOMM_SUCCESS) return rec_done(&g);
    size_t n = args->count;
    hcomm_ref_t recv = hcomm_ref(HCOMM_BUF_RECV, 0);
    hcomm_ref_t cur = fold_in(&g);
    int v = g.fold.vrank;
    for (int mask = 1; mask < g.fold.p; mask <<= 1) {
        if (v < 0) {
            g.round++;
            continue;
        }
        int peer = hcomm_fold_real(&g.fold, v ^ mask);
        exchange_reduce(&g, peer, cur, n, cur, recv, n);
        cur = recv;
    }
    if (args->scale && v >= 0) {
        hcomm_plan_scale(plan, recv, n, -1, -1);
        hcomm_plan_fence(plan);
    }
    fold_out(&g);
    return rec_done(&g);
}

hcomm_status_t hcomm_allreduce_rabenseifner(const hcomm_plan_args_t *args,
                                            hcomm_plan_t *plan) {
    if (args->size == 1) return hcomm_plan_local_copy(args, plan);
    rec_t g;
    if (rec_setup(&g, args, plan) != HCOMM_SUCCESS) return rec_done(&g);
    size_t n = args->count;
    int p = g.fold.p, v = g.fold.vrank;
    hcomm_ref_t cur = fold_in(&g);
    int lo = 0, hi = p; /* the blocks this rank is still reducing */
    for (int mask = p / 2; mask >= 1; mask >>= 1) {
        if (v < 0) {
            g.round++;
            continue;
        }
        int mid = lo + (hi - lo) / 2;
        int keep_lo = (v & mask) ? mid : lo, keep_hi = (v & mask) ? hi : mid;
        int give_lo = (v & mask) ? lo : mid, give_hi = (v & mask) ? mid : hi;
        size_t keep_off = hcomm_block_offset(n, p, keep_lo);
        size_t keep_n = hcomm_block_offset(n, p, keep_hi) - keep_off;
        size_t give_off = hcomm_block_offset(n, p, give_lo);
        size_t give_n = hcomm_block_offset(n, p, give_hi) - give_off;
        exchange_reduce(&g, hcomm_fold_real(&g.fold, v ^ mask),
                        hcomm_ref(cur.buf, give_off), give_n,
                        hcomm_ref(cur.buf, keep_off),
                        hcomm_ref(HCOMM_BUF_RECV, keep_off), keep_n);
        cur = hcomm_ref(HCOMM_BUF_RECV, 0);
        lo = keep_lo;
        hi = keep_hi;
    }
    if (args->scale && v >= 0) {
        size_t off = hcomm_block_offset(n, p, v);
        hcomm_plan_scale(plan, hcomm_ref(HCOMM_BUF_RECV, off),
                         hcomm_block_count(n, p, v), -1, -1);
        hcomm_plan_fence(plan);
    }
    for (int mask = 1; mask < p; mask <<= 1) {
        if (v < 0) {
            g.round++;
            continue;
        }
        int mine = v & ~(mask - 1), theirs = (v ^ mask) & ~(mask - 1);
        size_t moff = hcomm_block_offset(n, p, mine);
        size_t toff = hcomm_block_offset(n, p, theirs);
        transfer(&g, hcomm_fold_real(&g.fold, v ^ mask),
                 hcomm_ref(HCOMM_BUF_RECV, moff),
                 hcomm_block_offset(n, p, mine + mask) - moff,
                 hcomm_ref(HCOMM_BUF_RECV, toff),
                 hcomm_block_offset(n, p, theirs + mask) - toff);
    }
    fold_out(&g);
    return rec_done(&g);
}
