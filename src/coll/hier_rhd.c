/* Hierarchical allreduce whose part between nodes grows with log(nodes):
 * per chunk, a chain inside each node reduces toward its leader (as in
 * hierarchical.c), the leaders run a recursive-halving reduce-scatter and
 * a recursive-doubling allgather of the chunk (Rabenseifner's allreduce,
 * nodes past the largest power of two folded into a partner), and a chain
 * hands the result back down. Between nodes: 2 log2(nodes) messages per
 * chunk instead of the ring's 2 (nodes - 1), and still 2 (N - 1) / N of the
 * chunk per leader each way. Chunks pipeline: no fences, every hazard is a
 * dependency, and scratch is a few slots reused chunk after chunk. */
#include "coll/hier_layout.h"

#include <stdlib.h>

#define NSLOT 4 /* scratch slots per use (chain, leaders), by chunk */

enum { ST_UP = 0, ST_DOWN, ST_FOLD_IN, ST_FOLD_OUT, ST_ROUNDS };

typedef struct {
    hcomm_plan_t *plan;
    const hcomm_plan_args_t *a;
    hcomm_hier_layout_t l;
    hcomm_fold_t fold;
    int R; /* rounds: log2(fold.p) */
    size_t chunk, slot_len, nchunks;
    int slot_free[2][NSLOT]; /* the last step that read each slot */
    int *rs_send;            /* [R] */
} rhd_t;

static hcomm_ref_t at(size_t off) {
    return hcomm_ref(HCOMM_BUF_RECV, off);
}

static hcomm_ref_t slot_ref(const rhd_t *g, int use, size_t c) {
    return hcomm_ref(HCOMM_BUF_SCRATCH,
                     ((size_t)use * NSLOT + c % NSLOT) * g->slot_len);
}

static uint16_t tag(const rhd_t *g, int stage, size_t c) {
    return hcomm_hier_tag(stage, g->nchunks, c);
}

/* The leaders' allreduce of chunk c (elements [off, off + k) of the
 * receive buffer, written last by step ready). Returns a step after which
 * the chunk is final, *other a second one. */
static int leaders(rhd_t *g, size_t c, size_t off, size_t k, int ready,
                   int *other) {
    hcomm_plan_t *plan = g->plan;
    const hcomm_hier_layout_t *l = &g->l;
    int j = l->node, v = g->fold.vrank, p = g->fold.p;
    int *slot_free = &g->slot_free[1][c % NSLOT];
    hcomm_ref_t slot = slot_ref(g, 1, c);
    int last = ready, slot_dep = *slot_free;
    *other = -1;
    if (j < 2 * g->fold.extra) {
        if (v < 0) { /* sits out: hands its chunk over, gets the result */
            int peer = l->leader[j + 1];
            int s = hcomm_plan_send(plan, peer, tag(g, ST_FOLD_IN, c), at(off),
                                    k, last, -1);
            return hcomm_plan_recv(plan, peer, tag(g, ST_FOLD_OUT, c), at(off),
                                   k, s, last);
        }
        int rcv = hcomm_plan_recv(plan, l->leader[j - 1], tag(g, ST_FOLD_IN, c),
                                  slot, k, slot_dep, -1);
        last = hcomm_latest(last, hcomm_plan_reduce(plan, at(off), at(off),
                                                    slot, k, rcv, last));
        slot_dep = last;
    }
    /* Reduce-scatter: keep half of the blocks still held, give the other
     * half to the partner, whose half arrives into the slot. */
    int lo = 0, hi = p;
    for (int i = 0, mask = p / 2; mask >= 1; i++, mask >>= 1) {
        int mid = lo + (hi - lo) / 2, upper = (v & mask) != 0;
        int klo = upper ? mid : lo, khi = upper ? hi : mid;
        int glo = upper ? lo : mid, ghi = upper ? mid : hi;
        size_t ko = hcomm_block_offset(k, p, klo),
               kn = hcomm_block_offset(k, p, khi) - ko;
        size_t go = hcomm_block_offset(k, p, glo),
               gn = hcomm_block_offset(k, p, ghi) - go;
        int peer = l->leader[hcomm_fold_real(&g->fold, v ^ mask)];
        uint16_t t = tag(g, ST_ROUNDS + i, c);
        int rcv = hcomm_plan_recv(plan, peer, t, slot, kn,
                                  i == 0 ? slot_dep : last, -1);
        g->rs_send[i] =
            hcomm_plan_send(plan, peer, t, at(off + go), gn, last, -1);
        last = hcomm_latest(last,
                            hcomm_plan_reduce(plan, at(off + ko), at(off + ko),
                                              slot, kn, rcv, last));
        lo = klo;
        hi = khi;
    }
    *slot_free = last;
    if (g->a->scale)
        last = hcomm_latest(
            last, hcomm_plan_scale(plan, at(off + hcomm_block_offset(k, p, v)),
                                   hcomm_block_count(k, p, v), last, -1));
    /* Allgather: the held blocks double each round. A receive overwrites
     * what the reduce-scatter gave away in the round of the same mask (its
     * send must be done), and the first waits for the whole reduce-scatter
     * (tags wrap: no receive may be posted ahead of one of the same tag). */
    int got = -1;
    for (int i = 0, mask = 1; mask < p; i++, mask <<= 1) {
        int mine = v & ~(mask - 1), theirs = (v ^ mask) & ~(mask - 1);
        size_t mo = hcomm_block_offset(k, p, mine),
               mn = hcomm_block_offset(k, p, mine + mask) - mo;
        size_t to = hcomm_block_offset(k, p, theirs),
               tn = hcomm_block_offset(k, p, theirs + mask) - to;
        int peer = l->leader[hcomm_fold_real(&g->fold, v ^ mask)];
        uint16_t t = tag(g, ST_ROUNDS + g->R + i, c);
        hcomm_plan_send(plan, peer, t, at(off + mo), mn, last, got);
        got = hcomm_latest(got, hcomm_plan_recv(plan, peer, t, at(off + to), tn,
                                                g->rs_send[g->R - 1 - i],
                                                i == 0 ? last : got));
    }
    if (j < 2 * g->fold.extra) /* the result to the one that sat out */
        hcomm_plan_send(plan, l->leader[j - 1], tag(g, ST_FOLD_OUT, c), at(off),
                        k, last, got);
    *other = got;
    return last;
}

hcomm_status_t hcomm_allreduce_hierarchical_rhd(const hcomm_plan_args_t *args,
                                                hcomm_plan_t *plan) {
    if (args->size == 1) return hcomm_plan_local_copy(args, plan);
    rhd_t g = {.plan = plan, .a = args};
    if (hcomm_hier_layout_make(args, &g.l) != HCOMM_SUCCESS)
        return HCOMM_ERR_NO_MEMORY;
    const hcomm_hier_layout_t *l = &g.l;
    size_t count = args->count;
    g.chunk = hcomm_chunk_elems(args);
    g.nchunks = (count + g.chunk - 1) / g.chunk;
    g.slot_len = count < g.chunk ? count : g.chunk;
    g.fold = hcomm_fold(l->nnodes, l->node);
    while ((1 << g.R) < g.fold.p)
        g.R++;
    g.rs_send = malloc(((size_t)g.R + 1) * sizeof(int));
    if (!g.rs_send) {
        hcomm_hier_layout_free(&g.l);
        return HCOMM_ERR_NO_MEMORY;
    }
    for (int u = 0; u < 2; u++)
        for (int s = 0; s < NSLOT; s++)
            g.slot_free[u][s] = -1;
    plan->scratch_count = 2 * NSLOT * g.slot_len;
    int leader = l->li == 0, up = leader ? -1 : l->local[l->li - 1];
    int down = l->li + 1 < l->m ? l->local[l->li + 1] : -1;
    for (size_t c = 0; c < g.nchunks; c++) {
        size_t off = c * g.chunk,
               k = count - off < g.chunk ? count - off : g.chunk;
        /* Up the chain: this rank's input, plus what comes from below. */
        int acc = -1;
        hcomm_ref_t mine = hcomm_ref(HCOMM_BUF_SEND, off);
        if (down >= 0) {
            int *free_at = &g.slot_free[0][c % NSLOT];
            hcomm_ref_t in = slot_ref(&g, 0, c);
            int rcv = hcomm_plan_recv(plan, down, tag(&g, ST_UP, c), in, k,
                                      *free_at, -1);
            acc = hcomm_plan_reduce(plan, at(off), mine, in, k, rcv, -1);
            *free_at = acc;
            mine = at(off);
        } else if (leader && !args->inplace) {
            acc = hcomm_plan_copy(plan, at(off), mine, k, -1, -1);
            mine = at(off);
        }
        if (!leader) {
            int sent =
                hcomm_plan_send(plan, up, tag(&g, ST_UP, c), mine, k, acc, -1);
            /* Down the chain: the result, once the input has gone up. */
            int rcv = hcomm_plan_recv(plan, up, tag(&g, ST_DOWN, c), at(off), k,
                                      sent, acc);
            if (down >= 0)
                hcomm_plan_send(plan, down, tag(&g, ST_DOWN, c), at(off), k,
                                rcv, -1);
            continue;
        }
        int done = acc, other = -1;
        if (l->nnodes > 1)
            done = leaders(&g, c, off, k, acc, &other);
        else if (args->scale)
            done =
                hcomm_latest(done, hcomm_plan_scale(plan, at(off), k, acc, -1));
        if (down >= 0)
            hcomm_plan_send(plan, down, tag(&g, ST_DOWN, c), at(off), k, done,
                            other);
    }
    free(g.rs_send);
    hcomm_hier_layout_free(&g.l);
    return plan->oom ? HCOMM_ERR_NO_MEMORY : HCOMM_SUCCESS;
}
