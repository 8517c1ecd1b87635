/* Internal declarations shared by the algorithm files. */
#ifndef HCOMM_COLL_ALGOS_H
#define HCOMM_COLL_ALGOS_H

#include "coll/plan.h"

/* Elements per pipelined chunk (at least 1). */
static inline size_t hcomm_chunk_elems(const hcomm_plan_args_t *args) {
    size_t c = args->chunk_bytes / (args->esize ? args->esize : 1);
    return c ? c : 1;
}

/* The one-rank plan: copy send to receive unless in place. */
hcomm_status_t hcomm_plan_local_copy(const hcomm_plan_args_t *args,
                                     hcomm_plan_t *plan);

/* Sends scount elements at src to peer and receives rcount elements from
 * peer into dst, both split into chunks; tags tag_base + chunk index. The
 * step index of every chunk's send and receive goes into send_idx and
 * recv_idx (when not NULL; -1 for none), which hold
 * max(scount, rcount) / chunk + 1 entries. All wait for dep. */
void hcomm_plan_exchange(hcomm_plan_t *plan, int peer, hcomm_ref_t src,
                         size_t scount, hcomm_ref_t dst, size_t rcount,
                         size_t chunk, uint16_t tag_base, int dep,
                         int *send_idx, int *recv_idx);

/* Non-power-of-two folding for recursive algorithms: with p the largest
 * power of two <= n and extra = n - p, ranks below 2 * extra pair up and the
 * even one of each pair sits out the power-of-two part. */
typedef struct {
    int p, extra;
    int vrank; /* rank among the p, or -1 for one that sits out */
} hcomm_fold_t;
hcomm_fold_t hcomm_fold(int n, int rank);
static inline int hcomm_fold_real(const hcomm_fold_t *f, int v) {
    return v < f->extra ? 2 * v + 1 : v + f->extra;
}

hcomm_status_t hcomm_allreduce_ring(const hcomm_plan_args_t *args,
                                    hcomm_plan_t *plan);
/* hierarchical.c: by nodes (args->node_of). */
hcomm_status_t hcomm_allreduce_hierarchical(const hcomm_plan_args_t *args,
                                            hcomm_plan_t *plan);
hcomm_status_t hcomm_bcast_hierarchical(const hcomm_plan_args_t *args,
                                        hcomm_plan_t *plan);
hcomm_status_t hcomm_allgather_hierarchical(const hcomm_plan_args_t *args,
                                            hcomm_plan_t *plan);
hcomm_status_t hcomm_reduce_scatter_hierarchical(const hcomm_plan_args_t *args,
                                                 hcomm_plan_t *plan);
/* hier_rhd.c: recursive halving and doubling between node leaders. */
hcomm_status_t hcomm_allreduce_hierarchical_rhd(const hcomm_plan_args_t *args,
                                                hcomm_plan_t *plan);
/* hier_tree.c: a double binary tree between node heads. */
hcomm_status_t hcomm_bcast_hierarchical_tree(const hcomm_plan_args_t *args,
                                             hcomm_plan_t *plan);
hcomm_status_t hcomm_allreduce_recursive_doubling(const hcomm_plan_args_t *args,
                                                  hcomm_plan_t *plan);
hcomm_status_t hcomm_allreduce_rabenseifner(const hcomm_plan_args_t *args,
                                            hcomm_plan_t *plan);

/* --- shared by the other collectives ------------------------------------ */

/* The last real step of a chain: an empty step's index is -1, and depending
 * on it would drop the order on the step before. */
static inline int hcomm_latest(int prev, int idx) {
    return idx >= 0 ? idx : prev;
}

static inline hcomm_ref_t hcomm_ref_add(hcomm_ref_t ref, size_t off) {
    return hcomm_ref((hcomm_buf_id_t)ref.buf, ref.offset + off);
}

/* Sends scount elements at src to `to` while receiving rcount from `from`
 * into dst, in chunks interleaved one for one; tags tag_base + chunk. */
void hcomm_plan_shift(hcomm_plan_t *plan, int to, hcomm_ref_t src,
                      size_t scount, int from, hcomm_ref_t dst, size_t rcount,
                      size_t chunk, uint16_t tag_base);

/* Binomial trees over virtual ranks, the root being 0: v's parent clears
 * v's lowest set bit (its span), its children are v + m for the powers of
 * two m below the span, and its subtree is [v, v + subtree size). */
static inline int hcomm_vrank(int rank, int root, int n) {
    return (rank - root + n) % n;
}
static inline int hcomm_real_rank(int v, int root, int n) {
    return (v + root) % n;
}
static inline int hcomm_tree_span(int v, int n) {
    int m = 1;
    if (v) return v & -v;
    while (m < n)
        m <<= 1;
    return m;
}
static inline int hcomm_tree_parent(int v) {
    return v & (v - 1);
}
static inline int hcomm_subtree_size(int v, int n) {
    int s = hcomm_tree_span(v, n);
    return s < n - v ? s : n - v;
}

/* A ring over n ranks carrying n blocks, the equal split of total elements;
 * the rank at pos owns block pos. Tags run from tag_base for
 * (n - 1) * hcomm_ring_chunks() messages each way. */
typedef struct {
    int n, pos;
    int left, right; /* real ranks of the neighbours */
    size_t total, chunk;
    uint16_t tag_base;
    /* Variable blocks (NULL: the equal split of total): block b is blen[b]
     * elements at boff[b]. */
    const size_t *boff, *blen;
} hcomm_ring_t;
size_t hcomm_ring_chunks(const hcomm_ring_t *g); /* chunks in a block */
size_t hcomm_ring_scratch(const hcomm_ring_t *g);
/* Every block into dst (block b at dst + its offset); our own block is
 * read from mine and not copied. */
void hcomm_ring_allgather(hcomm_plan_t *plan, const hcomm_ring_t *g,
                          hcomm_ref_t dst, hcomm_ref_t mine);
/* Our block, reduced over every rank's src, into dst. src's block pos is
 * read only by the reduces that write dst (so dst may be exactly that
 * block). Uses hcomm_ring_scratch() elements of scratch from slots.
 * final_idx (hcomm_ring_chunks() entries, or NULL) gets the step that
 * writes each chunk of dst. Allocation failures set plan->oom. */
void hcomm_ring_reduce_scatter(hcomm_plan_t *plan, const hcomm_ring_t *g,
                               hcomm_ref_t src, size_t slots, hcomm_ref_t dst,
                               int *final_idx);

/* Algorithms of the collectives other than allreduce, by collective. */
hcomm_status_t hcomm_allgather_ring(const hcomm_plan_args_t *args,
                                    hcomm_plan_t *plan);
hcomm_status_t hcomm_allgather_recursive_doubling(const hcomm_plan_args_t *args,
                                                  hcomm_plan_t *plan);
hcomm_status_t hcomm_allgather_bruck(const hcomm_plan_args_t *args,
                                     hcomm_plan_t *plan);
hcomm_status_t hcomm_reduce_scatter_ring(const hcomm_plan_args_t *args,
                                         hcomm_plan_t *plan);
hcomm_status_t
hcomm_reduce_scatter_recursive_halving(const hcomm_plan_args_t *args,
                                       hcomm_plan_t *plan);
hcomm_status_t hcomm_bcast_binomial(const hcomm_plan_args_t *args,
                                    hcomm_plan_t *plan);
hcomm_status_t hcomm_bcast_scatter_allgather(const hcomm_plan_args_t *args,
                                             hcomm_plan_t *plan);
hcomm_status_t hcomm_bcast_chain(const hcomm_plan_args_t *args,
                                 hcomm_plan_t *plan);
hcomm_status_t hcomm_reduce_binomial(const hcomm_plan_args_t *args,
                                     hcomm_plan_t *plan);
hcomm_status_t hcomm_reduce_scatter_gather(const hcomm_plan_args_t *args,
                                           hcomm_plan_t *plan);
hcomm_status_t hcomm_alltoall_pairwise(const hcomm_plan_args_t *args,
                                       hcomm_plan_t *plan);
hcomm_status_t hcomm_alltoall_bruck(const hcomm_plan_args_t *args,
                                    hcomm_plan_t *plan);
hcomm_status_t hcomm_barrier_dissemination(const hcomm_plan_args_t *args,
                                           hcomm_plan_t *plan);
hcomm_status_t hcomm_gather_binomial(const hcomm_plan_args_t *args,
                                     hcomm_plan_t *plan);
hcomm_status_t hcomm_scatter_binomial(const hcomm_plan_args_t *args,
                                      hcomm_plan_t *plan);
/* vcolls.c: the variable-count collectives (args->v). */
hcomm_status_t hcomm_allgatherv_ring(const hcomm_plan_args_t *args,
                                     hcomm_plan_t *plan);
hcomm_status_t hcomm_alltoallv_pairwise(const hcomm_plan_args_t *args,
                                        hcomm_plan_t *plan);
hcomm_status_t hcomm_reduce_scatterv_ring(const hcomm_plan_args_t *args,
                                          hcomm_plan_t *plan);
hcomm_status_t hcomm_send_direct(const hcomm_plan_args_t *args,
                                 hcomm_plan_t *plan);
hcomm_status_t hcomm_recv_direct(const hcomm_plan_args_t *args,
                                 hcomm_plan_t *plan);

#endif
