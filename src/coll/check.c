/* HCOMM_CHECK=1: before a collective does anything, its ranks compare what
 * they passed, through an allgather on the communicator's private MPI
 * duplicate, and all refuse the call alike when anything differs. Nothing
 * has moved then, so the communicator stays usable. */
#include "coll/check.h"
#include "core/log.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int32_t coll, dtype, op, root, on_gpu, local;
    uint64_t count;
} signature_t;

int hcomm_check_on;

static const char *field_names[] = {
    "collective",           "data type", "operation", "root",
    "memory (host or GPU)", "count"};

/* The value of field f, for messages. */
static unsigned long long field(const signature_t *s, int f) {
    switch (f) {
    case 0:
        return (unsigned long long)s->coll;
    case 1:
        return (unsigned long long)s->dtype;
    case 2:
        return (unsigned long long)s->op;
    case 3:
        return (unsigned long long)s->root;
    case 4:
        return (unsigned long long)s->on_gpu;
    default:
        return s->count;
    }
}

hcomm_status_t hcomm_check_call(MPI_Comm mc, int size, hcomm_coll_t coll,
                                hcomm_dtype_t dtype, hcomm_op_t op, int root,
                                int on_gpu, size_t count,
                                hcomm_status_t local) {
    /* what every rank must agree on: no op or root where there is none */
    int reduces =
        coll == HCOMM_COLL_ALLREDUCE || coll == HCOMM_COLL_REDUCE_SCATTER ||
        coll == HCOMM_COLL_REDUCE || coll == HCOMM_COLL_REDUCE_SCATTERV;
    int rooted = coll == HCOMM_COLL_BCAST || coll == HCOMM_COLL_REDUCE ||
                 coll == HCOMM_COLL_GATHER || coll == HCOMM_COLL_SCATTER;
    signature_t mine = {(int32_t)coll,     (int32_t)dtype, reduces ? op : 0,
                        rooted ? root : 0, on_gpu,         (int32_t)local,
                        (uint64_t)count};
    signature_t *all = malloc((size_t)size * sizeof(*all));
    if (!all) return hcomm_error(HCOMM_ERR_NO_MEMORY, "HCOMM_CHECK: no memory");
    if (PMPI_Allgather(&mine, sizeof(mine), MPI_BYTE, all, sizeof(mine),
                       MPI_BYTE, mc) != MPI_SUCCESS) {
        free(all);
        return hcomm_error(HCOMM_ERR_TRANSPORT, "HCOMM_CHECK: MPI_Allgather "
                                                "failed");
    }
    hcomm_status_t st = local;
    for (int r = 0; r < size && st == HCOMM_SUCCESS; r++)
        if (all[r].local != HCOMM_SUCCESS)
            st = hcomm_error(HCOMM_ERR_INVALID_ARG,
                             "%s (HCOMM_CHECK): rank %d refused its arguments "
                             "(%s); its own error says why",
                             hcomm_coll_name(coll), r,
                             hcomm_strerror((hcomm_status_t)all[r].local));
    for (int r = 1; r < size && st == HCOMM_SUCCESS; r++)
        for (int f = 0; f < 6 && st == HCOMM_SUCCESS; f++)
            if (field(&all[r], f) != field(&all[0], f))
                st = hcomm_error(
                    HCOMM_ERR_MISMATCH,
                    "%s (HCOMM_CHECK): %s differs: rank 0 passed %llu%s%s%s, "
                    "rank %d passed %llu%s%s%s",
                    hcomm_coll_name((hcomm_coll_t)all[0].coll), field_names[f],
                    field(&all[0], f), f == 0 ? " (" : "",
                    f == 0 ? hcomm_coll_name((hcomm_coll_t)all[0].coll) : "",
                    f == 0 ? ")" : "", r, field(&all[r], f), f == 0 ? " (" : "",
                    f == 0 ? hcomm_coll_name((hcomm_coll_t)all[r].coll) : "",
                    f == 0 ? ")" : "");
    free(all);
    return st;
}
