/* The variable-count collectives: every rank's block has its own count
 * (args->v, plan.h).
 * - allgatherv, ring: the allgather ring over blocks of their own length
 *   and place; n-1 steps, each block chunked;
 * - reduce_scatterv, ring: the reduce-scatter ring over the send buffer's
 *   packed blocks;
 * - alltoallv, pairwise: step i sends to rank + i and receives from
 *   rank - i, each message chunked. A pair of ranks exchanges one message
 *   each way, so a chunk's index is its tag.
 * Empty blocks send nothing (both sides skip them alike). */
#include "coll/algos.h"

#include <stdlib.h>

static hcomm_status_t done(const hcomm_plan_t *plan) {
    return plan->oom ? HCOMM_ERR_NO_MEMORY : HCOMM_SUCCESS;
}

static hcomm_ring_t vring(const hcomm_plan_args_t *args, const size_t *boff) {
    int n = args->size, r = args->rank;
    hcomm_ring_t g = {.n = n,
                      .pos = r,
                      .left = (r - 1 + n) % n,
                      .right = (r + 1) % n,
                      .chunk = hcomm_chunk_elems(args),
                      .boff = boff,
                      .blen = args->v->rcounts};
    return g;
}

hcomm_status_t hcomm_allgatherv_ring(const hcomm_plan_args_t *args,
                                     hcomm_plan_t *plan) {
    const hcomm_vspec_t *v = args->v;
    int r = args->rank;
    hcomm_ref_t own = hcomm_ref(HCOMM_BUF_RECV, v->rdispls[r]);
    /* In place, the own block already sits at its place. */
    if (!args->inplace)
        hcomm_plan_copy(plan, own, hcomm_ref(HCOMM_BUF_SEND, 0), v->rcounts[r],
                        -1, -1);
    if (args->size == 1) return done(plan);
    hcomm_ring_t g = vring(args, v->rdispls);
    hcomm_ring_allgather(plan, &g, hcomm_ref(HCOMM_BUF_RECV, 0),
                         args->inplace ? own : hcomm_ref(HCOMM_BUF_SEND, 0));
    return done(plan);
}

/* Flagged in place, the receive buffer may alias any part of the send
 * buffer (MPI's in place: its start), so the result waits in scratch until
 * every read is done, as in reduce_scatter.c. */
hcomm_status_t hcomm_reduce_scatterv_ring(const hcomm_plan_args_t *args,
                                          hcomm_plan_t *plan) {
    const hcomm_vspec_t *v = args->v;
    int n = args->size, r = args->rank;
    size_t mine = v->rcounts[r];
    if (n == 1) {
        if (!args->inplace)
            hcomm_plan_copy(plan, hcomm_ref(HCOMM_BUF_RECV, 0),
                            hcomm_ref(HCOMM_BUF_SEND, 0), mine, -1, -1);
        return done(plan);
    }
    size_t *boff = malloc((size_t)n * sizeof(size_t));
    if (!boff) return HCOMM_ERR_NO_MEMORY;
    boff[0] = 0;
    for (int i = 1; i < n; i++)
        boff[i] = boff[i - 1] + v->rcounts[i - 1];
    hcomm_ring_t g = vring(args, boff);
    size_t cmax = hcomm_ring_chunks(&g), slots = hcomm_ring_scratch(&g);
    int *final_idx = malloc(cmax * sizeof(int));
    if (!final_idx) {
        free(boff);
        return HCOMM_ERR_NO_MEMORY;
    }
    hcomm_ref_t dst = args->inplace ? hcomm_ref(HCOMM_BUF_SCRATCH, slots)
                                    : hcomm_ref(HCOMM_BUF_RECV, 0);
    plan->scratch_count = slots + (args->inplace ? mine : 0);
    hcomm_ring_reduce_scatter(plan, &g, hcomm_ref(HCOMM_BUF_SEND, 0), 0, dst,
                              final_idx);
    for (size_t c = 0; args->scale && c < cmax; c++) {
        size_t off = c * g.chunk;
        if (off < mine)
            hcomm_plan_scale(plan, hcomm_ref_add(dst, off),
                             mine - off < g.chunk ? mine - off : g.chunk,
                             final_idx[c], -1);
    }
    free(final_idx);
    free(boff);
    if (args->inplace) {
        hcomm_plan_fence(plan);
        hcomm_plan_copy(plan, hcomm_ref(HCOMM_BUF_RECV, 0), dst, mine, -1, -1);
    }
    return done(plan);
}

/* In place, every block but our own is sent from a packed scratch copy,
 * so that the replies can land in the buffer. */
hcomm_status_t hcomm_alltoallv_pairwise(const hcomm_plan_args_t *args,
                                        hcomm_plan_t *plan) {
    const hcomm_vspec_t *v = args->v;
    int n = args->size, r = args->rank;
    size_t chunk = hcomm_chunk_elems(args);
    size_t *from_at = NULL;
    if (args->inplace) {
        if (!(from_at = malloc((size_t)n * sizeof(size_t))))
            return HCOMM_ERR_NO_MEMORY;
        size_t at = 0;
        for (int j = 0; j < n; j++) {
            from_at[j] = at;
            if (j == r) continue;
            hcomm_plan_copy(plan, hcomm_ref(HCOMM_BUF_SCRATCH, at),
                            hcomm_ref(HCOMM_BUF_RECV, v->rdispls[j]),
                            v->rcounts[j], -1, -1);
            at += v->rcounts[j];
        }
        plan->scratch_count = at;
        hcomm_plan_fence(plan);
    } else {
        hcomm_plan_copy(plan, hcomm_ref(HCOMM_BUF_RECV, v->rdispls[r]),
                        hcomm_ref(HCOMM_BUF_SEND, v->sdispls[r]), v->rcounts[r],
                        -1, -1);
    }
    for (int i = 1; i < n; i++) {
        int to = (r + i) % n, from = (r - i + n) % n;
        /* In place, we send to `to` what we hold for it: rcounts[to]. */
        hcomm_ref_t src = args->inplace
                              ? hcomm_ref(HCOMM_BUF_SCRATCH, from_at[to])
                              : hcomm_ref(HCOMM_BUF_SEND, v->sdispls[to]);
        size_t scount = args->inplace ? v->rcounts[to] : v->scounts[to];
        hcomm_plan_shift(plan, to, src, scount, from,
                         hcomm_ref(HCOMM_BUF_RECV, v->rdispls[from]),
                         v->rcounts[from], chunk, 0);
    }
    free(from_at);
    return done(plan);
}
