/* Requests: a running plan or direct shared-memory call, progressed by
 * hcomm_wait/hcomm_test (and while any other call waits, so that no rank
 * starves a peer). */
#ifndef HCOMM_CORE_REQUEST_H
#define HCOMM_CORE_REQUEST_H

#include "coll/exec.h"
#include "core/comm.h"
#include "core/profile.h"
#include "cuda_ipc/ipc.h"
#include "shm_tp/shm.h"

#include <stdatomic.h>

struct hcomm_request {
    hcomm_exec_t exec;     /* a plan (plan != NULL) */
    hcomm_shm_op_t direct; /* or a direct call (plan == NULL) */
    hcomm_ipc_op_t ipc;    /* or a CUDA IPC call (ipc.comm != NULL) */
    int agree_only;        /* or an agreement alone (direct) */
    hcomm_comm_impl_t *comm;
    const hcomm_plan_t *plan;
    hcomm_coll_t coll;
    /* Written by whichever thread advances the request, read by any that
     * tests or waits on it: the final value is stored with release once
     * why[] and the request's results are written, and loaded with acquire
     * (req_status), so that a thread seeing it done sees them too. */
    _Atomic(hcomm_status_t) status;
    int active;       /* in the process-wide list of running requests */
    atomic_flag busy; /* a thread is progressing it */
    unsigned polls;   /* of the current wait, or tests so far */
    double last_look, waiting_since; /* the clock, for the timeout */
    double last_liveness;            /* when peers were last found alive */
    char why[512]; /* a failure's message, from where it was found */
    int told;      /* the failure's message is final (fail_waiting) */
    int agreeing;  /* req->direct's agreement round runs before the plan */
    struct hcomm_request *prev, *next;
    uint64_t flight_call; /* its flight recorder entry (0: none) */
    size_t bytes;         /* of its data, for messages */
    int profiled;         /* prof is recorded when the request ends */
    hcomm_prof_call_t prof;
};

/* Starts plan on comm (or, with plan NULL, the direct call already set up
 * in req->direct); on success the request runs. With agree, req->direct
 * holds a call's agreement round on the shared segment
 * (hcomm_shm_op_agree), which completes before the plan moves anything. A
 * blocking call's request (driven to completion by its own thread at once)
 * stays out of the list of running requests that waits in other threads
 * progress. */
hcomm_status_t hcomm_request_start(struct hcomm_request *req,
                                   hcomm_comm_impl_t *comm, hcomm_coll_t coll,
                                   const hcomm_plan_t *plan,
                                   const hcomm_exec_args_t *args, int blocking,
                                   int agree);
/* Drives req to completion, progressing every other running request too,
 * within HCOMM_TIMEOUT; releases what it holds. */
hcomm_status_t hcomm_request_complete(struct hcomm_request *req);
/* One progress attempt: HCOMM_ERR_IN_PROGRESS, or the final status (the
 * request is then released); HCOMM_ERR_TIMEOUT once tests have come back
 * to back for HCOMM_TIMEOUT, so that a loop of tests ends too. */
hcomm_status_t hcomm_request_test(struct hcomm_request *req);
/* Requests started and not yet completed, on every communicator. */
int hcomm_request_active(void);

#endif
