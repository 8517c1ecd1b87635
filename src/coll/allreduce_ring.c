/* Ring allreduce: a reduce-scatter ring then an allgather ring, each block
 * split into chunks so that sending one chunk overlaps reducing the last.
 * Bandwidth-optimal (2(n-1)/n of the data per rank), n-1 steps of latency
 * twice, any rank count. */
#include "coll/algos.h"

#include <stdlib.h>

typedef struct {
    int n, r, left, right;
    size_t count, chunk;
    size_t cmax; /* chunks in the largest block */
} ring_t;

/* Block b is [b * count / n, (b + 1) * count / n): the count % n longer
 * blocks are spread evenly over the ring rather than put first. Either split
 * moves the same bytes; this one repeats every n / gcd(count % n, n) ranks,
 * so that with fewer elements than ranks the plans of ranks that far apart
 * are still images of each other, and the simulator (tools/hcomm_sim_sym.c)
 * runs one period of ranks instead of every rank. */
static size_t block_offset(const ring_t *g, int b) {
    size_t q = g->count / (size_t)g->n, rem = g->count % (size_t)g->n;
    return (size_t)b * q + (size_t)b * rem / (size_t)g->n;
}

static size_t block_count(const ring_t *g, int b) {
    return block_offset(g, b + 1) - block_offset(g, b);
}

static size_t chunk_count(const ring_t *g, int block, size_t c) {
    size_t len = block_count(g, block);
    if (c * g->chunk >= len) return 0;
    size_t rest = len - c * g->chunk;
    return rest < g->chunk ? rest : g->chunk;
}

static size_t chunk_offset(const ring_t *g, int block, size_t c) {
    return block_offset(g, block) + c * g->chunk;
}

/* Whether block b holds nothing (with fewer elements than ranks, all but
 * count blocks). A step of two empty blocks adds nothing, so the loops skip
 * it before computing its chunks: building every rank's plan of a
 * 16,384-rank ring at 512 B took a minute of such steps. */
static int block_empty(const ring_t *g, int b) {
    return block_count(g, b) == 0;
}

/* Empty chunks add no step (index -1): keep the dependency on the last real
 * one, or a scratch slot could be refilled before it was read. */
static int latest(int prev, int idx) {
    return idx >= 0 ? idx : prev;
}

static uint16_t ring_tag(const ring_t *g, int phase, int s, size_t c) {
    return (uint16_t)(((size_t)(phase * (g->n - 1) + s) * g->cmax + c) &
                      0xffff);
}

hcomm_status_t hcomm_allreduce_ring(const hcomm_plan_args_t *args,
                                    hcomm_plan_t *plan) {
    ring_t g;
    g.n = args->size;
    g.r = args->rank;
    g.left = (g.r - 1 + g.n) % g.n;
    g.right = (g.r + 1) % g.n;
    g.count = args->count;
    g.chunk = hcomm_chunk_elems(args);
    size_t longest = g.count / (size_t)g.n + (g.count % (size_t)g.n != 0);
    g.cmax = (longest + g.chunk - 1) / g.chunk;
    if (g.n == 1) return hcomm_plan_local_copy(args, plan);

    /* Per chunk: the step that last reduced it (scratch slot reuse and the
     * next send wait for it), the reduce-scatter sends (the allgather
     * receive into the same block waits for them), the last receive. */
    int *last_reduce = malloc(g.cmax * sizeof(int));
    int *rs_send = malloc((size_t)(g.n - 1) * g.cmax * sizeof(int));
    int *ag_recv = malloc(g.cmax * sizeof(int));
    hcomm_status_t st = HCOMM_ERR_NO_MEMORY;
    if (!last_reduce || !rs_send || !ag_recv) goto out;
    for (size_t c = 0; c < g.cmax; c++)
        last_reduce[c] = ag_recv[c] = -1;
    plan->scratch_count = longest;

    for (int s = 0; s < g.n - 1; s++) {
        int sb = (g.r - s + g.n) % g.n, rb = (g.r - s - 1 + 2 * g.n) % g.n;
        if (block_empty(&g, sb) && block_empty(&g, rb)) {
            for (size_t c = 0; c < g.cmax; c++)
                rs_send[s * g.cmax + c] = -1;
            continue;
        }
        for (size_t c = 0; c < g.cmax; c++) {
            hcomm_ref_t slot = hcomm_ref(HCOMM_BUF_SCRATCH, c * g.chunk);
            int rcv =
                hcomm_plan_recv(plan, g.left, ring_tag(&g, 0, s, c), slot,
                                chunk_count(&g, rb, c), last_reduce[c], -1);
            hcomm_ref_t src =
                hcomm_ref(s == 0 ? HCOMM_BUF_SEND : HCOMM_BUF_RECV,
                          chunk_offset(&g, sb, c));
            rs_send[s * g.cmax + c] =
                hcomm_plan_send(plan, g.right, ring_tag(&g, 0, s, c), src,
                                chunk_count(&g, sb, c), last_reduce[c], -1);
            size_t off = chunk_offset(&g, rb, c);
            last_reduce[c] =
                latest(last_reduce[c],
                       hcomm_plan_reduce(plan, hcomm_ref(HCOMM_BUF_RECV, off),
                                         hcomm_ref(HCOMM_BUF_SEND, off), slot,
                                         chunk_count(&g, rb, c), rcv, -1));
        }
    }
    int own = (g.r + 1) % g.n;
    if (args->scale)
        for (size_t c = 0; c < g.cmax; c++)
            last_reduce[c] = latest(
                last_reduce[c],
                hcomm_plan_scale(
                    plan, hcomm_ref(HCOMM_BUF_RECV, chunk_offset(&g, own, c)),
                    chunk_count(&g, own, c), last_reduce[c], -1));

    for (int s = 0; s < g.n - 1; s++) {
        int sb = (g.r + 1 - s + g.n) % g.n, rb = (g.r - s + g.n) % g.n;
        if (block_empty(&g, sb) && block_empty(&g, rb)) continue;
        for (size_t c = 0; c < g.cmax; c++) {
            int ready = s == 0 ? last_reduce[c] : ag_recv[c];
            hcomm_plan_send(plan, g.right, ring_tag(&g, 1, s, c),
                            hcomm_ref(HCOMM_BUF_RECV, chunk_offset(&g, sb, c)),
                            chunk_count(&g, sb, c), ready, -1);
            ag_recv[c] = latest(
                ag_recv[c],
                hcomm_plan_recv(
                    plan, g.left, ring_tag(&g, 1, s, c),
                    hcomm_ref(HCOMM_BUF_RECV, chunk_offset(&g, rb, c)),
                    chunk_count(&g, rb, c), rs_send[s * g.cmax + c], -1));
        }
    }
    st = plan->oom ? HCOMM_ERR_NO_MEMORY : HCOMM_SUCCESS;
out:
    free(last_reduce);
    free(rs_send);
    free(ag_recv);
    return st;
}
