/* Dissemination barrier: in round k every rank signals rank + 2^k and waits
 * for rank - 2^k; after ceil(log2 n) rounds each rank has heard, directly
 * or not, from every other, for any rank count. */
#include "coll/algos.h"

hcomm_status_t hcomm_barrier_dissemination(const hcomm_plan_args_t *args,
                                           hcomm_plan_t *plan) {
    int n = args->size, r = args->rank;
    if (n == 1) return HCOMM_SUCCESS;
    /* Empty messages would be dropped: one element each way, in scratch. */
    plan->scratch_count = 2;
    uint16_t round = 0;
    for (int d = 1; d < n; d *= 2, round++) {
        hcomm_plan_send(plan, (r + d) % n, round,
                        hcomm_ref(HCOMM_BUF_SCRATCH, 0), 1, -1, -1);
        hcomm_plan_recv(plan, (r - d + n) % n, round,
                        hcomm_ref(HCOMM_BUF_SCRATCH, 1), 1, -1, -1);
        /* The next signal must carry this round's news. */
        hcomm_plan_fence(plan);
    }
    return plan->oom ? HCOMM_ERR_NO_MEMORY : HCOMM_SUCCESS;
}
