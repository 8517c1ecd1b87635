/* The in-process verifier: runs one algorithm's plans for N virtual ranks on
 * real data, through the real executor and an in-memory transport that
 * completes a send only when its receive is posted (so a plan that relies on
 * buffering deadlocks here, as it would at scale), issuing ready steps in a
 * random order (so a missing dependency shows). Used by the unit tests. */
#ifndef HCOMM_COLL_VERIFY_H
#define HCOMM_COLL_VERIFY_H

#include "coll/plan.h"

typedef struct {
    const hcomm_algo_t *algo;
    int size;
    int root;
    size_t count;
    hcomm_dtype_t dtype;
    hcomm_op_t op;
    int inplace;
    size_t chunk_bytes;
    uint32_t seed;
    /* Per rank, as a user would pass them; for in place, pointers into one
     * buffer as the collective's in-place convention says (hcomm.h), e.g.
     * allreduce sendbufs[r] == recvbufs[r]. */
    void **sendbufs;
    void **recvbufs;
    /* Optional, per rank (NULL: algo and root everywhere): for plans that
     * differ between ranks, such as a send on one and a recv on another. */
    const hcomm_algo_t *const *rank_algos;
    const int *rank_roots;
    /* Optional: the node of each rank (plan.h), for hierarchical plans;
     * when set, bytes sent between ranks of different nodes are added up
     * in cross_node_bytes (if not NULL). */
    const int *node_of;
    uint64_t *cross_node_bytes;
    /* Variable-count collectives: each rank's counts (vspecs[r]). */
    const hcomm_vspec_t *vspecs;
} hcomm_verify_args_t;

/* Runs to completion. On failure returns an error and writes why to err
 * (deadlock, unmatched messages, a plan writing the send buffer, ...).
 * HCOMM_ERR_UNSUPPORTED when the algorithm declines the shape. */
hcomm_status_t hcomm_verify_run(const hcomm_verify_args_t *args, char *err,
                                size_t errlen);

#endif
