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
hcomm_status_t hcomm_allreduce_recursive_doubling(const hcomm_plan_args_t *args,
                                                  hcomm_plan_t *plan);
hcomm_status_t hcomm_allreduce_rabenseifner(const hcomm_plan_args_t *args,
                                            hcomm_plan_t *plan);

#endif
