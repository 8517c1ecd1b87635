/* Runs one plan over a transport: posts sends and receives as their
 * dependencies complete, runs reductions on the CPU kernels, and reports when
 * the plan is done. A state machine, so that blocking calls, non-blocking
 * requests and the verifier all drive it the same way. */
#ifndef HCOMM_COLL_EXEC_H
#define HCOMM_COLL_EXEC_H

#include "core/tp.h"
#include "coll/plan.h"
#include "kernels/reduce.h"

struct hcomm_pool;

typedef struct hcomm_exec {
    const hcomm_plan_t *plan;
    hcomm_tp_t *tp;
    struct hcomm_pool *pool; /* scratch comes from here (NULL: malloc) */
    char *buf[HCOMM_BUF_COUNT];
    size_t esize;
    hcomm_reduce_fn_t reduce;
    hcomm_scale_fn_t scale;
    int divisor; /* for HCOMM_STEP_SCALE */
    uint8_t kind;
    uint32_t seq;
    uint32_t first_open; /* lowest step not yet complete */
    uint8_t *state;      /* per step: 0 waiting, 1 in flight, 2 complete */
    hcomm_tp_req_t *reqs;
    uint32_t rng; /* nonzero: scan ready steps in random order (verifier) */
    hcomm_status_t status;
    /* small plans (latency path) use these instead of allocating */
    uint8_t state_inline[8];
    hcomm_tp_req_t reqs_inline[8];
} hcomm_exec_t;

typedef struct {
    const hcomm_plan_t *plan;
    hcomm_tp_t *tp;
    struct hcomm_pool *pool;
    const void *sendbuf;
    void *recvbuf;
    hcomm_dtype_t dtype;
    hcomm_op_t op; /* ignored unless the plan reduces */
    int divisor;   /* the communicator size, for HCOMM_AVG */
    hcomm_tag_kind_t tag_kind;
    uint32_t seq;
    uint32_t rng;
} hcomm_exec_args_t;

hcomm_status_t hcomm_exec_start(hcomm_exec_t *ex, const hcomm_exec_args_t *a);
/* HCOMM_SUCCESS when the plan has completed, HCOMM_ERR_IN_PROGRESS while it
 * runs, or an error. Never blocks. */
hcomm_status_t hcomm_exec_progress(hcomm_exec_t *ex);
/* Cancels what is in flight and releases what start took. */
void hcomm_exec_abort(hcomm_exec_t *ex);
/* Releases what start took, after completion. */
void hcomm_exec_finish(hcomm_exec_t *ex);
/* Which peers the plan is still waiting for, for timeout messages. */
int hcomm_exec_describe_wait(const hcomm_exec_t *ex, char *out, size_t len);

#endif
