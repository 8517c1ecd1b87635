/* Point-to-point as one-step plans, so that send and receive share the
 * executor, its timeouts and its requests with the collectives. The peer is
 * args->root; the user's tag travels in the message tag's sequence field. */
#include "coll/algos.h"

hcomm_status_t hcomm_send_direct(const hcomm_plan_args_t *args,
                                 hcomm_plan_t *plan) {
    hcomm_plan_send(plan, args->root, 0, hcomm_ref(HCOMM_BUF_SEND, 0),
                    args->count, -1, -1);
    return plan->oom ? HCOMM_ERR_NO_MEMORY : HCOMM_SUCCESS;
}

hcomm_status_t hcomm_recv_direct(const hcomm_plan_args_t *args,
                                 hcomm_plan_t *plan) {
    hcomm_plan_recv(plan, args->root, 0, hcomm_ref(HCOMM_BUF_RECV, 0),
                    args->count, -1, -1);
    return plan->oom ? HCOMM_ERR_NO_MEMORY : HCOMM_SUCCESS;
}
