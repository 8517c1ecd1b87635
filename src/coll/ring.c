/* Ring fragments shared by allgather, reduce-scatter, broadcast and reduce:
 * n blocks of an equal split (hcomm_block_offset) travel around the ring,
 * each block cut into chunks so that forwarding one chunk overlaps receiving
 * the next. */
#include "coll/algos.h"

#include <stdlib.h>

static size_t block_len(const hcomm_ring_t *g, int b) {
    return g->blen ? g->blen[b] : hcomm_block_count(g->total, g->n, b);
}

static size_t block_off(const hcomm_ring_t *g, int b) {
    return g->boff ? g->boff[b] : hcomm_block_offset(g->total, g->n, b);
}

/* The largest block: the equal split's first, else the longest. */
static size_t block_max(const hcomm_ring_t *g) {
    size_t most = block_len(g, 0);
    for (int b = 1; g->blen && b < g->n; b++)
        if (g->blen[b] > most) most = g->blen[b];
    return most;
}

/* Elements of chunk c of block b (0 past its end). */
static size_t chunk_len(const hcomm_ring_t *g, int b, size_t c) {
    size_t len = block_len(g, b);
    if (c * g->chunk >= len) return 0;
    size_t rest = len - c * g->chunk;
    return rest < g->chunk ? rest : g->chunk;
}

static int mod(int a, int n) {
    return ((a % n) + n) % n;
}

static uint16_t ring_tag(const hcomm_ring_t *g, int s, size_t c) {
    return (uint16_t)(g->tag_base + (size_t)s * hcomm_ring_chunks(g) + c);
}

size_t hcomm_ring_chunks(const hcomm_ring_t *g) {
    size_t most = block_max(g);
    return most ? (most + g->chunk - 1) / g->chunk : 1;
}

size_t hcomm_ring_scratch(const hcomm_ring_t *g) {
    return 2 * block_max(g);
}

void hcomm_ring_allgather(hcomm_plan_t *plan, const hcomm_ring_t *g,
                          hcomm_ref_t dst, hcomm_ref_t mine) {
    size_t cmax = hcomm_ring_chunks(g);
    int *prev = malloc(cmax * sizeof(int)), *cur = malloc(cmax * sizeof(int));
    if (!prev || !cur) {
        plan->oom = 1;
        goto out;
    }
    for (int s = 0; s < g->n - 1; s++) {
        int sb = mod(g->pos - s, g->n), rb = mod(g->pos - s - 1, g->n);
        if (!block_len(g, sb) && !block_len(g, rb)) {
            /* nothing moves (most steps where blocks outnumber elements):
             * skipped before its chunks are computed */
            for (size_t c = 0; c < cmax; c++)
                prev[c] = -1;
            continue;
        }
        for (size_t c = 0; c < cmax; c++) {
            cur[c] = hcomm_plan_recv(
                plan, g->left, ring_tag(g, s, c),
                hcomm_ref_add(dst, block_off(g, rb) + c * g->chunk),
                chunk_len(g, rb, c), -1, -1);
            /* Block sb arrived in the previous step (the same chunks). */
            hcomm_ref_t src =
                s == 0 ? hcomm_ref_add(mine, c * g->chunk)
                       : hcomm_ref_add(dst, block_off(g, sb) + c * g->chunk);
            hcomm_plan_send(plan, g->right, ring_tag(g, s, c), src,
                            chunk_len(g, sb, c), s == 0 ? -1 : prev[c], -1);
        }
        int *t = prev;
        prev = cur;
        cur = t;
    }
out:
    free(prev);
    free(cur);
}

/* Partial sums alternate between two scratch slots per chunk: one is being
 * sent on while the next arrives in the other. Every access to a slot waits
 * for the access before it (last[]), so no slot is refilled while read. */
void hcomm_ring_reduce_scatter(hcomm_plan_t *plan, const hcomm_ring_t *g,
                               hcomm_ref_t src, size_t slots, hcomm_ref_t dst,
                               int *final_idx) {
    size_t cmax = hcomm_ring_chunks(g), half = block_max(g);
    int *last = malloc(2 * cmax * sizeof(int));
    if (!last) {
        plan->oom = 1;
        return;
    }
    for (size_t c = 0; c < 2 * cmax; c++)
        last[c] = -1;
    for (size_t c = 0; final_idx && c < cmax; c++)
        final_idx[c] = -1;
    for (int s = 0; s < g->n - 1; s++) {
        int sb = mod(g->pos - s - 1, g->n), rb = mod(g->pos - s - 2, g->n);
        int p = s % 2, q = 1 - p, final = s == g->n - 2;
        for (size_t c = 0; c < cmax; c++) {
            size_t off = c * g->chunk;
            int *lp = &last[(size_t)p * cmax + c], *lq = &last[q * cmax + c];
            hcomm_ref_t slot =
                hcomm_ref(HCOMM_BUF_SCRATCH, slots + p * half + off);
            *lp = hcomm_latest(
                *lp, hcomm_plan_recv(plan, g->left, ring_tag(g, s, c), slot,
                                     chunk_len(g, rb, c), *lp, -1));
            /* The first step sends our own data; later ones the partial sum
             * reduced in the step before. */
            hcomm_ref_t from =
                s == 0 ? hcomm_ref_add(src, block_off(g, sb) + off)
                       : hcomm_ref(HCOMM_BUF_SCRATCH, slots + q * half + off);
            int snd =
                hcomm_plan_send(plan, g->right, ring_tag(g, s, c), from,
                                chunk_len(g, sb, c), s == 0 ? -1 : *lq, -1);
            if (s > 0) *lq = hcomm_latest(*lq, snd);
            int red =
                hcomm_plan_reduce(plan, final ? hcomm_ref_add(dst, off) : slot,
                                  hcomm_ref_add(src, block_off(g, rb) + off),
                                  slot, chunk_len(g, rb, c), *lp, -1);
            *lp = hcomm_latest(*lp, red);
            if (final && final_idx) final_idx[c] = red;
        }
    }
    free(last);
}
