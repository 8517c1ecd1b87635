/* Algorithms are data: a plan is the list of steps one rank performs for one
 * collective. Plans are built by pure functions of the communicator's shape
 * and the message, run by the executor (exec.c) over a transport, and by the
 * verifier (verify.c) for N virtual ranks in one process.
 *
 * Semantics: a step may start once its dependencies (dep[0], dep[1], indices
 * of earlier steps, or -1) have completed, and once every step before its
 * epoch has (hcomm_plan_fence starts a new epoch). Nothing else orders steps:
 * the executor and the verifier may run ready steps in any order, so every
 * hazard must be a dependency or a fence. The executor looks at most 256
 * steps past the first incomplete one, so append the steps of every rank in
 * the same logical order (interleave peers chunk by chunk), or a rank can
 * wait on a step its peer has not reached.
 * Plans never write to HCOMM_BUF_SEND. Offsets and counts are in elements. */
#ifndef HCOMM_COLL_PLAN_H
#define HCOMM_COLL_PLAN_H

#include "hcomm.h"

#include <stddef.h>
#include <stdint.h>

typedef enum {
    HCOMM_STEP_SEND,   /* send count elements at a to peer */
    HCOMM_STEP_RECV,   /* receive count elements from peer into dst */
    HCOMM_STEP_REDUCE, /* dst = a op b */
    HCOMM_STEP_COPY,   /* dst = a (regions do not overlap) */
    HCOMM_STEP_SCALE   /* dst = dst / comm size (finishes HCOMM_AVG) */
} hcomm_step_kind_t;

typedef enum {
    HCOMM_BUF_SEND = 0, /* the user's send buffer (read only) */
    HCOMM_BUF_RECV,     /* the user's receive buffer */
    HCOMM_BUF_SCRATCH,  /* plan->scratch_count elements, from the pool */
    HCOMM_BUF_COUNT
} hcomm_buf_id_t;

typedef struct {
    uint8_t buf;   /* hcomm_buf_id_t */
    size_t offset; /* elements */
} hcomm_ref_t;

typedef struct {
    uint8_t kind;   /* hcomm_step_kind_t */
    uint16_t tag;   /* send/recv: pairs the two sides; unique in flight */
    uint32_t epoch; /* index of the first step of this step's epoch */
    int32_t peer;   /* send/recv */
    int32_t dep[2];
    size_t count; /* elements */
    hcomm_ref_t dst, a, b;
} hcomm_step_t;

typedef enum {
    HCOMM_COLL_ALLREDUCE = 0,
    HCOMM_COLL_ALLGATHER,
    HCOMM_COLL_REDUCE_SCATTER,
    HCOMM_COLL_BCAST,
    HCOMM_COLL_REDUCE,
    HCOMM_COLL_ALLTOALL,
    HCOMM_COLL_BARRIER,
    HCOMM_COLL_GATHER,
    HCOMM_COLL_SCATTER,
    HCOMM_COLL_SEND,
    HCOMM_COLL_RECV,
    HCOMM_COLL_ALLGATHERV, /* the variable-count forms (hcomm_vspec_t) */
    HCOMM_COLL_ALLTOALLV,
    HCOMM_COLL_REDUCE_SCATTERV,
    HCOMM_COLL_COUNT
} hcomm_coll_t;

/* The per-rank counts of a variable-count collective, in elements, as the
 * calling rank passed them (hcomm.h):
 * - allgatherv: rcounts[i] elements of rank i at rdispls[i] of the receive
 *   buffer (rcounts alike on every rank, rdispls this rank's own);
 * - reduce_scatterv: rank i's block of the result has rcounts[i] elements,
 *   the blocks packed in the send buffer in rank order (rdispls unused);
 * - alltoallv: scounts[j] elements at sdispls[j] go to rank j, rcounts[j]
 *   elements from rank j land at rdispls[j]. */
typedef struct {
    const size_t *scounts, *sdispls;
    const size_t *rcounts, *rdispls;
} hcomm_vspec_t;

static inline int hcomm_coll_is_v(hcomm_coll_t coll) {
    return coll >= HCOMM_COLL_ALLGATHERV && coll <= HCOMM_COLL_REDUCE_SCATTERV;
}

/* What a plan is built from. */
typedef struct {
    hcomm_coll_t coll;
    int rank, size;
    int root; /* rooted collectives; the peer for send/recv */
    size_t count;
    size_t esize;       /* bytes per element */
    int inplace;        /* send and receive buffer are the same */
    int scale;          /* HCOMM_AVG: the plan divides by size at the end */
    size_t chunk_bytes; /* pipelining granularity */
    /* [size]: the node of each rank, nodes numbered by their lowest rank
     * (topo.h); NULL: one node. Only hierarchical algorithms read it. */
    const int *node_of;
    /* Variable-count collectives: their counts (count is then this rank's
     * block of the result for reduce_scatterv, else unused). Such plans
     * are built per call, never cached: the arrays are the caller's. */
    const hcomm_vspec_t *v;
} hcomm_plan_args_t;

typedef struct hcomm_plan {
    hcomm_step_t *steps;
    uint32_t nsteps, cap;
    size_t scratch_count; /* elements of scratch the plan needs */
    int has_reduce;       /* uses the reduction kernel */
    int oom;              /* an append failed; the builder reports it */
    uint32_t epoch;       /* where the current epoch starts */
} hcomm_plan_t;

/* Building blocks for algorithm files. Each append returns the new step's
 * index, or -1 when count is 0 (nothing is added: both sides of a message
 * skip it alike) or when out of memory (which also sets plan->oom). */
void hcomm_plan_init(hcomm_plan_t *plan);
void hcomm_plan_release(hcomm_plan_t *plan);
int hcomm_plan_send(hcomm_plan_t *plan, int peer, uint16_t tag, hcomm_ref_t src,
                    size_t count, int dep0, int dep1);
int hcomm_plan_recv(hcomm_plan_t *plan, int peer, uint16_t tag, hcomm_ref_t dst,
                    size_t count, int dep0, int dep1);
int hcomm_plan_reduce(hcomm_plan_t *plan, hcomm_ref_t dst, hcomm_ref_t a,
                      hcomm_ref_t b, size_t count, int dep0, int dep1);
int hcomm_plan_copy(hcomm_plan_t *plan, hcomm_ref_t dst, hcomm_ref_t src,
                    size_t count, int dep0, int dep1);
int hcomm_plan_scale(hcomm_plan_t *plan, hcomm_ref_t dst, size_t count,
                     int dep0, int dep1);
/* Steps appended from now on wait for every step appended before. */
void hcomm_plan_fence(hcomm_plan_t *plan);
static inline hcomm_ref_t hcomm_ref(hcomm_buf_id_t buf, size_t offset) {
    hcomm_ref_t r = {(uint8_t)buf, offset};
    return r;
}

/* Equal split of count elements into n blocks, the first count % n one
 * element larger: where block i starts and how long it is. */
static inline size_t hcomm_block_offset(size_t count, int n, int i) {
    size_t q = count / (size_t)n, r = count % (size_t)n;
    return (size_t)i * q + ((size_t)i < r ? (size_t)i : r);
}
static inline size_t hcomm_block_count(size_t count, int n, int i) {
    return count / (size_t)n + ((size_t)i < count % (size_t)n ? 1 : 0);
}

/* Elements the send and the receive buffer of one rank hold (the
 * conventions of hcomm.h: count per rank block where there are blocks). */
size_t hcomm_coll_send_count(hcomm_coll_t coll, int size, int rank, int root,
                             size_t count);
size_t hcomm_coll_recv_count(hcomm_coll_t coll, int size, int rank, int root,
                             size_t count);

/* The same for a variable-count collective (elements the buffer must
 * hold: the largest displacement plus its count). */
size_t hcomm_coll_v_extent(hcomm_coll_t coll, const hcomm_vspec_t *v, int size,
                           int rank, int send);

/* An algorithm: builds the plan for one rank. Returns HCOMM_SUCCESS,
 * HCOMM_ERR_NO_MEMORY, or HCOMM_ERR_UNSUPPORTED for shapes it cannot do. */
typedef hcomm_status_t (*hcomm_plan_builder_t)(const hcomm_plan_args_t *args,
                                               hcomm_plan_t *plan);

typedef struct {
    const char *name;
    hcomm_coll_t coll;
    hcomm_plan_builder_t build;
} hcomm_algo_t;

/* The table of every algorithm (algos.c), in a fixed order. */
extern const hcomm_algo_t hcomm_algos[];
extern const int hcomm_nalgos;
const hcomm_algo_t *hcomm_algo_find(hcomm_coll_t coll, const char *name);
const char *hcomm_coll_name(hcomm_coll_t coll);

#endif
