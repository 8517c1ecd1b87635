/* The reductions and the barrier: what HCOMM takes, how MPI's conventions
 * (MPI_IN_PLACE, int counts) become HCOMM's, and the C entry points of
 * every collective, which hand what HCOMM does not take to PMPI.
 *
 * MPI requires every rank of a reduction to pass the same datatype, count
 * and operation, so a reduction is taken when HCOMM reduces that datatype
 * (predefined and mapped) with that operation; MPI_IN_PLACE, which only
 * the root of MPI_Reduce passes, plays no part in the choice. The
 * data-movement collectives are in interpose_move.c. */
#include "compat_mpi/interpose.h"
#include "compat_mpi/interpose_entry.h"

#include <string.h>

/* Bytes of count elements of t. */
static size_t bytes_of(int count, hcomm_dtype_t t) {
    return (size_t)count * hcomm_dtype_size(t);
}
#define OUTSIDE(k, bytes) (!hcmpi_in_window(k, bytes))

#define ENTER() hcmpi_depth++
#define LEAVE() hcmpi_depth--

int hcmpi_try_allreduce(const void *sendbuf, void *recvbuf, int count,
                        MPI_Datatype dtype, MPI_Op op, MPI_Comm comm, int *rc) {
    const hcmpi_coll_t k = HCMPI_ALLREDUCE;
    hcomm_dtype_t t;
    hcomm_op_t o;
    hcmpi_why_t why;
    hcmpi_comm_t *c;
    if (!hcmpi_wants(k)) return hcmpi_fallback(k, hcmpi_why_not());
    if (!hcmpi_map_dtype(dtype, 1, &t, &why) || !hcmpi_map_op(op, &o, &why))
        return hcmpi_fallback(k, why);
    if (count <= 0)
        return hcmpi_fallback(k, count ? HCMPI_WHY_ARGS : HCMPI_WHY_EMPTY);
    if (OUTSIDE(k, bytes_of(count, t)))
        return hcmpi_fallback(k, HCMPI_WHY_SIZE);
    if (!(c = hcmpi_comm_get(comm, &why))) return hcmpi_fallback(k, why);
    if (sendbuf == MPI_IN_PLACE) sendbuf = recvbuf;
    ENTER();
    hcomm_status_t st =
        hcomm_allreduce(sendbuf, recvbuf, (size_t)count, t, o, c->comm);
    LEAVE();
    return hcmpi_finish(k, comm, st, rc);
}

int hcmpi_try_iallreduce(const void *sendbuf, void *recvbuf, int count,
                         MPI_Datatype dtype, MPI_Op op, MPI_Comm comm,
                         MPI_Request *request, int *rc) {
    const hcmpi_coll_t k = HCMPI_IALLREDUCE;
    hcomm_dtype_t t;
    hcomm_op_t o;
    hcmpi_why_t why;
    hcmpi_comm_t *c;
    hcomm_request_t hreq;
    if (!hcmpi_wants(k)) return hcmpi_fallback(k, hcmpi_why_not());
    if (!hcmpi_ireq_available())
        return hcmpi_fallback(k, HCMPI_WHY_NO_PROGRESS);
    if (!hcmpi_map_dtype(dtype, 1, &t, &why) || !hcmpi_map_op(op, &o, &why))
        return hcmpi_fallback(k, why);
    if (count <= 0 || !request)
        return hcmpi_fallback(k, count ? HCMPI_WHY_ARGS : HCMPI_WHY_EMPTY);
    if (OUTSIDE(k, bytes_of(count, t)))
        return hcmpi_fallback(k, HCMPI_WHY_SIZE);
    if (!(c = hcmpi_comm_get(comm, &why))) return hcmpi_fallback(k, why);
    if (sendbuf == MPI_IN_PLACE) sendbuf = recvbuf;
    ENTER();
    hcomm_status_t st =
        hcomm_iallreduce(sendbuf, recvbuf, (size_t)count, t, o, c->comm, &hreq);
    LEAVE();
    if (st != HCOMM_SUCCESS) return hcmpi_finish(k, comm, st, rc);
    hcmpi_count_taken(k);
    *rc = hcmpi_ireq_wrap(hreq, comm, request);
    return 1;
}

/* A non-blocking call hands its HCOMM request to MPI (interpose_ireq.c). */
static int started(hcmpi_coll_t k, MPI_Comm comm, hcomm_status_t st,
                   hcomm_request_t hreq, MPI_Request *request, int *rc) {
    if (st != HCOMM_SUCCESS) return hcmpi_finish(k, comm, st, rc);
    hcmpi_count_taken(k);
    *rc = hcmpi_ireq_wrap_then(hreq, comm, request, k, NULL, NULL);
    return 1;
}

static int try_reduce(const void *sendbuf, void *recvbuf, int count,
                      MPI_Datatype dtype, MPI_Op op, int root, MPI_Comm comm,
                      MPI_Request *request, int *rc) {
    const hcmpi_coll_t k = request ? HCMPI_IREDUCE : HCMPI_REDUCE;
    hcomm_dtype_t t;
    hcomm_op_t o;
    hcmpi_why_t why;
    hcmpi_comm_t *c;
    hcomm_request_t hreq;
    if (!hcmpi_wants(k)) return hcmpi_fallback(k, hcmpi_why_not());
    if (request && !hcmpi_ireq_available())
        return hcmpi_fallback(k, HCMPI_WHY_NO_PROGRESS);
    if (!hcmpi_map_dtype(dtype, 1, &t, &why) || !hcmpi_map_op(op, &o, &why))
        return hcmpi_fallback(k, why);
    if (count <= 0)
        return hcmpi_fallback(k, count ? HCMPI_WHY_ARGS : HCMPI_WHY_EMPTY);
    if (OUTSIDE(k, bytes_of(count, t)))
        return hcmpi_fallback(k, HCMPI_WHY_SIZE);
    if (!(c = hcmpi_comm_get(comm, &why))) return hcmpi_fallback(k, why);
    if (root < 0 || root >= c->size) return hcmpi_fallback(k, HCMPI_WHY_ARGS);
    if (sendbuf == MPI_IN_PLACE) sendbuf = recvbuf; /* the root's only */
    ENTER();
    hcomm_status_t st = request ? hcomm_ireduce(sendbuf, recvbuf, (size_t)count,
                                                t, o, root, c->comm, &hreq)
                                : hcomm_reduce(sendbuf, recvbuf, (size_t)count,
                                               t, o, root, c->comm);
    LEAVE();
    if (request) return started(k, comm, st, hreq, request, rc);
    return hcmpi_finish(k, comm, st, rc);
}

int hcmpi_try_reduce(const void *sendbuf, void *recvbuf, int count,
                     MPI_Datatype dtype, MPI_Op op, int root, MPI_Comm comm,
                     int *rc) {
    return try_reduce(sendbuf, recvbuf, count, dtype, op, root, comm, NULL, rc);
}

int hcmpi_try_ireduce(const void *sendbuf, void *recvbuf, int count,
                      MPI_Datatype dtype, MPI_Op op, int root, MPI_Comm comm,
                      MPI_Request *request, int *rc) {
    return try_reduce(sendbuf, recvbuf, count, dtype, op, root, comm, request,
                      rc);
}

static int try_reduce_scatter_block(const void *sendbuf, void *recvbuf,
                                    int recvcount, MPI_Datatype dtype,
                                    MPI_Op op, MPI_Comm comm,
                                    MPI_Request *request, int *rc) {
    const hcmpi_coll_t k =
        request ? HCMPI_IREDUCE_SCATTER_BLOCK : HCMPI_REDUCE_SCATTER_BLOCK;
    hcomm_dtype_t t;
    hcomm_op_t o;
    hcmpi_why_t why;
    hcmpi_comm_t *c;
    hcomm_request_t hreq;
    if (!hcmpi_wants(k)) return hcmpi_fallback(k, hcmpi_why_not());
    if (request && !hcmpi_ireq_available())
        return hcmpi_fallback(k, HCMPI_WHY_NO_PROGRESS);
    if (!hcmpi_map_dtype(dtype, 1, &t, &why) || !hcmpi_map_op(op, &o, &why))
        return hcmpi_fallback(k, why);
    if (recvcount <= 0)
        return hcmpi_fallback(k, recvcount ? HCMPI_WHY_ARGS : HCMPI_WHY_EMPTY);
    if (!(c = hcmpi_comm_get(comm, &why))) return hcmpi_fallback(k, why);
    if (OUTSIDE(k, (size_t)c->size * bytes_of(recvcount, t)))
        return hcmpi_fallback(k, HCMPI_WHY_SIZE);
    size_t block = (size_t)recvcount * hcomm_dtype_size(t);
    char *mine = recvbuf;
    /* MPI in place reads size blocks from recvbuf and leaves the result in
     * its first block; HCOMM's in-place form leaves it in this rank's block
     * (and writes nothing else), from where it moves to the front. */
    if (sendbuf == MPI_IN_PLACE || sendbuf == recvbuf) {
        sendbuf = recvbuf;
        mine += (size_t)c->rank * block;
    }
    if (request) { /* the result moves to the front once done */
        hcmpi_done_t *d = hcmpi_done_new();
        if (!d)
            return (*rc = hcmpi_report_local(k, comm, MPI_ERR_NO_MEM,
                                             "no memory")),
                   1;
        d->move_from = mine;
        d->move_to = recvbuf;
        d->move_bytes = block;
        ENTER();
        hcomm_status_t st = hcomm_ireduce_scatter(
            sendbuf, mine, (size_t)recvcount, t, o, c->comm, &hreq);
        LEAVE();
        return hcmpi_complete(k, comm, st, hreq, d, request, rc);
    }
    ENTER();
    hcomm_status_t st =
        hcomm_reduce_scatter(sendbuf, mine, (size_t)recvcount, t, o, c->comm);
    LEAVE();
    if (st == HCOMM_SUCCESS && mine != (char *)recvbuf)
        memmove(recvbuf, mine, block);
    return hcmpi_finish(k, comm, st, rc);
}

int hcmpi_try_reduce_scatter_block(const void *sendbuf, void *recvbuf,
                                   int recvcount, MPI_Datatype dtype, MPI_Op op,
                                   MPI_Comm comm, int *rc) {
    return try_reduce_scatter_block(sendbuf, recvbuf, recvcount, dtype, op,
                                    comm, NULL, rc);
}

int hcmpi_try_ireduce_scatter_block(const void *sendbuf, void *recvbuf,
                                    int recvcount, MPI_Datatype dtype,
                                    MPI_Op op, MPI_Comm comm,
                                    MPI_Request *request, int *rc) {
    return try_reduce_scatter_block(sendbuf, recvbuf, recvcount, dtype, op,
                                    comm, request, rc);
}

int hcmpi_try_barrier(MPI_Comm comm, int *rc) {
    const hcmpi_coll_t k = HCMPI_BARRIER;
    hcmpi_why_t why;
    hcmpi_comm_t *c;
    if (!hcmpi_wants(k)) return hcmpi_fallback(k, hcmpi_why_not());
    if (!(c = hcmpi_comm_get(comm, &why))) return hcmpi_fallback(k, why);
    ENTER();
    hcomm_status_t st = hcomm_barrier(c->comm);
    LEAVE();
    return hcmpi_finish(k, comm, st, rc);
}

int hcmpi_try_ibarrier(MPI_Comm comm, MPI_Request *request, int *rc) {
    const hcmpi_coll_t k = HCMPI_IBARRIER;
    hcmpi_why_t why;
    hcmpi_comm_t *c;
    hcomm_request_t hreq;
    if (!hcmpi_wants(k)) return hcmpi_fallback(k, hcmpi_why_not());
    if (!hcmpi_ireq_available())
        return hcmpi_fallback(k, HCMPI_WHY_NO_PROGRESS);
    if (!(c = hcmpi_comm_get(comm, &why))) return hcmpi_fallback(k, why);
    ENTER();
    hcomm_status_t st = hcomm_ibarrier(c->comm, &hreq);
    LEAVE();
    return started(k, comm, st, hreq, request, rc);
}

/* --- the exported C entry points ----------------------------------------- */

HCMPI_ENTRY(Allreduce, hcmpi_try_allreduce,
            (const void *sendbuf, void *recvbuf, int count,
             MPI_Datatype datatype, MPI_Op op, MPI_Comm comm),
            (sendbuf, recvbuf, count, datatype, op, comm))

HCMPI_ENTRY(Iallreduce, hcmpi_try_iallreduce,
            (const void *sendbuf, void *recvbuf, int count,
             MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
             MPI_Request *request),
            (sendbuf, recvbuf, count, datatype, op, comm, request))

/* The others with their non-blocking forms: a request HCOMM runs from
 * MPI's progress engine (Open MPI), else MPI's own call. */

HCMPI_ENTRY_PAIR(Allgather, hcmpi_try_allgather, Iallgather,
                 hcmpi_try_iallgather, HCMPI_BLOCKS_PARAMS, HCMPI_BLOCKS_ARGS)

HCMPI_ENTRY_PAIR(Alltoall, hcmpi_try_alltoall, Ialltoall, hcmpi_try_ialltoall,
                 HCMPI_BLOCKS_PARAMS, HCMPI_BLOCKS_ARGS)

HCMPI_ENTRY_PAIR(Bcast, hcmpi_try_bcast, Ibcast, hcmpi_try_ibcast,
                 (void *buffer, int count, MPI_Datatype datatype, int root,
                  MPI_Comm comm),
                 (buffer, count, datatype, root, comm))

HCMPI_ENTRY_PAIR(Reduce, hcmpi_try_reduce, Ireduce, hcmpi_try_ireduce,
                 (const void *sendbuf, void *recvbuf, int count,
                  MPI_Datatype datatype, MPI_Op op, int root, MPI_Comm comm),
                 (sendbuf, recvbuf, count, datatype, op, root, comm))

HCMPI_ENTRY_PAIR(Reduce_scatter_block, hcmpi_try_reduce_scatter_block,
                 Ireduce_scatter_block, hcmpi_try_ireduce_scatter_block,
                 (const void *sendbuf, void *recvbuf, int recvcount,
                  MPI_Datatype datatype, MPI_Op op, MPI_Comm comm),
                 (sendbuf, recvbuf, recvcount, datatype, op, comm))

HCMPI_ENTRY_PAIR(Barrier, hcmpi_try_barrier, Ibarrier, hcmpi_try_ibarrier,
                 (MPI_Comm comm), (comm))
