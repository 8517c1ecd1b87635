/* HCOMM_CHECK=1: every collective's ranks compare their arguments first
 * (check.c). */
#ifndef HCOMM_COLL_CHECK_H
#define HCOMM_COLL_CHECK_H

#include "coll/plan.h"
#include "hcomm.h"

#include <mpi.h>

extern int hcomm_check_on; /* set from HCOMM_CHECK at hcomm_init */

/* Collective over mc (size ranks); local: what this rank's own checks of
 * its arguments said. HCOMM_SUCCESS on every rank when all passed the same
 * and none was refused; else an error on every rank: a refused rank keeps
 * its own, the others get HCOMM_ERR_INVALID_ARG naming it, or all get
 * HCOMM_ERR_MISMATCH naming the first field that differs and two ranks. */
hcomm_status_t hcomm_check_call(MPI_Comm mc, int size, hcomm_coll_t coll,
                                hcomm_dtype_t dtype, hcomm_op_t op, int root,
                                int on_gpu, size_t count, hcomm_status_t local);

#endif
