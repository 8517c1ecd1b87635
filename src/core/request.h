/* Requests: a running plan, progressed by hcomm_wait/hcomm_test (and while
 * any other call waits, so that no rank starves a peer). */
#ifndef HCOMM_CORE_REQUEST_H
#define HCOMM_CORE_REQUEST_H

#include "coll/exec.h"
#include "core/comm.h"

#include <stdatomic.h>

struct hcomm_request {
    hcomm_exec_t exec;
    hcomm_comm_impl_t *comm;
    const hcomm_plan_t *plan;
    hcomm_coll_t coll;
    hcomm_status_t status;
    int active;       /* in the process-wide list of running requests */
    atomic_flag busy; /* a thread is progressing it */
    struct hcomm_request *prev, *next;
};

/* Starts plan on comm; on success the request runs. */
hcomm_status_t hcomm_request_start(struct hcomm_request *req,
                                   hcomm_comm_impl_t *comm, hcomm_coll_t coll,
                                   const hcomm_plan_t *plan,
                                   const hcomm_exec_args_t *args);
/* Drives req to completion, progressing every other running request too,
 * within HCOMM_TIMEOUT; releases what it holds. */
hcomm_status_t hcomm_request_complete(struct hcomm_request *req);
/* One progress attempt: HCOMM_ERR_IN_PROGRESS, or the final status (the
 * request is then released). */
hcomm_status_t hcomm_request_test(struct hcomm_request *req);

#endif
