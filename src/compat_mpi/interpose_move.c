/* The data-movement collectives (bcast, allgather, alltoall) as bytes.
 *
 * Each rank may describe its data with its own count and datatype (MPI's
 * type-signature rule), so whether HCOMM takes a call depends only on what
 * every rank must agree on: the communicator, the root, and the bytes of a
 * block (bcast: the message). Every datatype is then taken: a rank whose
 * data are contiguous hands HCOMM its buffer, any other packs into or
 * unpacks from scratch (interpose_dtype.c), and all ranks give HCOMM the
 * same element count and type, made from the bytes alone. Send arguments
 * that disagree with the receive side are an erroneous program: that rank
 * goes to MPI, which reports it. */
#include "compat_mpi/interpose_entry.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ENTER() hcmpi_depth++
#define LEAVE() hcmpi_depth--

/* What every data-movement call checks before HCOMM takes it: a block of
 * bytes > 0 and movable, the communicator. 1 with *c set; else the
 * fallback is counted and 0 returned. */
static int take(hcmpi_coll_t k, size_t block, MPI_Comm comm, hcmpi_comm_t **c) {
    hcmpi_why_t why;
    if (block == 0) return hcmpi_fallback(k, HCMPI_WHY_EMPTY);
    if (block > HCMPI_MAX_BLOCK) return hcmpi_fallback(k, HCMPI_WHY_LARGE);
    if (!(*c = hcmpi_comm_get(comm, &why))) return hcmpi_fallback(k, why);
    return 1;
}

/* The send side of a rank that is not in place (per blocks), which the
 * type-signature rule makes the size of the receive side's (r, one
 * block); most often the same count and datatype. */
static int send_matches(const void *sendbuf, int sendcount,
                        MPI_Datatype sendtype, int recvcount,
                        MPI_Datatype recvtype, size_t per,
                        const hcmpi_layout_t *r, hcmpi_layout_t *s) {
    if (sendtype == recvtype && sendcount == recvcount) {
        hcmpi_layout_at(s, r, sendbuf);
        return per == 1 || hcmpi_layout_times(s, per);
    }
    return sendcount >= 0 &&
           hcmpi_layout(sendbuf, (size_t)sendcount * per, sendtype, s) &&
           s->bytes == r->bytes * per;
}

/* A failure of our own after the call was taken (no scratch, a type MPI
 * would not pack): this rank reports it; its peers time out. */
static int failed(hcmpi_coll_t k, MPI_Comm comm, int err, int *rc) {
    *rc = hcmpi_report_local(k, comm, err,
                             err == MPI_ERR_NO_MEM ? "no memory for scratch"
                                                   : "packing failed");
    return 1;
}

/* A non-blocking call (request set) needs a way to progress it. */
static int no_progress(hcmpi_coll_t k, MPI_Request *request) {
    return request && !hcmpi_ireq_available()
               ? hcmpi_fallback(k, HCMPI_WHY_NO_PROGRESS) + 1
               : 0;
}

static int try_bcast(void *buf, int count, MPI_Datatype dtype, int root,
                     MPI_Comm comm, MPI_Request *request, int *rc) {
    const hcmpi_coll_t k = request ? HCMPI_IBCAST : HCMPI_BCAST;
    hcmpi_layout_t l;
    hcmpi_comm_t *c;
    if (!hcmpi_wants(k)) return hcmpi_fallback(k, hcmpi_why_not());
    if (no_progress(k, request)) return 0;
    if (count < 0 || !hcmpi_layout(buf, (size_t)count, dtype, &l))
        return hcmpi_fallback(k, HCMPI_WHY_ARGS);
    if (l.bytes && !hcmpi_in_window(k, l.bytes))
        return hcmpi_fallback(k, HCMPI_WHY_SIZE);
    if (!take(k, l.bytes, comm, &c)) return 0;
    if (root < 0 || root >= c->size) return hcmpi_fallback(k, HCMPI_WHY_ARGS);
    size_t n;
    hcomm_dtype_t t = hcmpi_unit(l.bytes, &n);
    hcmpi_done_t local, *d = hcmpi_done_for(request, &local);
    char *data = l.contiguous ? l.data : hcmpi_scratch(l.bytes);
    int err = data && d ? MPI_SUCCESS : MPI_ERR_NO_MEM;
    if (!err && !l.contiguous && c->rank == root) err = hcmpi_pack(&l, data);
    if (err) {
        if (data != l.data) hcmpi_scratch_put(data);
        if (d != &local) free(d);
        return failed(k, comm, err, rc);
    }
    if (!l.contiguous) {
        d->scratch[0] = data;
        if (c->rank != root) {
            d->unpack = l;
            d->from = data;
        }
    }
    hcomm_request_t hreq = HCOMM_REQUEST_NULL;
    ENTER();
    hcomm_status_t st = request
                            ? hcomm_ibroadcast(data, n, t, root, c->comm, &hreq)
                            : hcomm_broadcast(data, n, t, root, c->comm);
    LEAVE();
    return hcmpi_complete(k, comm, st, hreq, d, request, rc);
}

int hcmpi_try_bcast(void *buf, int count, MPI_Datatype dtype, int root,
                    MPI_Comm comm, int *rc) {
    return try_bcast(buf, count, dtype, root, comm, NULL, rc);
}

int hcmpi_try_ibcast(void *buf, int count, MPI_Datatype dtype, int root,
                     MPI_Comm comm, MPI_Request *request, int *rc) {
    return try_bcast(buf, count, dtype, root, comm, request, rc);
}

/* HCOMM's blocking and non-blocking forms of a collective that moves one
 * block per rank pair: allgather's and alltoall's take the same arguments. */
typedef struct {
    hcomm_status_t (*run)(const void *, void *, size_t, hcomm_dtype_t,
                          hcomm_comm_t);
    hcomm_status_t (*start)(const void *, void *, size_t, hcomm_dtype_t,
                            hcomm_comm_t, hcomm_request_t *);
} blocks_calls_t;

static const blocks_calls_t allgather_calls = {hcomm_allgather,
                                               hcomm_iallgather};
static const blocks_calls_t alltoall_calls = {hcomm_alltoall, hcomm_ialltoall};

/* What allgather and alltoall check before HCOMM takes them, in this
 * order: enabled, a way to progress, the receive side's block, the
 * communicator, the whole size, then the send side unless in place
 * (per_rank: alltoall's, a block for every rank). On 1, *block is the
 * block's bytes, *r the whole receive buffer and *s the send side. */
static int take_blocks(hcmpi_coll_t k, const void *sendbuf, int sendcount,
                       MPI_Datatype sendtype, void *recvbuf, int recvcount,
                       MPI_Datatype recvtype, MPI_Comm comm,
                       MPI_Request *request, int per_rank, hcmpi_comm_t **c,
                       size_t *block, hcmpi_layout_t *r, hcmpi_layout_t *s) {
    if (!hcmpi_wants(k)) return hcmpi_fallback(k, hcmpi_why_not());
    if (no_progress(k, request)) return 0;
    if (recvcount < 0 || !hcmpi_layout(recvbuf, (size_t)recvcount, recvtype, r))
        return hcmpi_fallback(k, HCMPI_WHY_ARGS);
    *block = r->bytes;
    if (!take(k, *block, comm, c)) return 0;
    size_t size = (size_t)(*c)->size;
    if (!hcmpi_in_window(k, size * *block))
        return hcmpi_fallback(k, HCMPI_WHY_SIZE);
    if (sendbuf != MPI_IN_PLACE &&
        !send_matches(sendbuf, sendcount, sendtype, recvcount, recvtype,
                      per_rank ? size : 1, r, s))
        return hcmpi_fallback(k, HCMPI_WHY_ARGS);
    hcmpi_layout_times(r, size);
    return 1;
}

/* Hands the blocks to HCOMM, blocking or started, and finishes the call. */
static int run_blocks(hcmpi_coll_t k, const blocks_calls_t *f, const void *src,
                      void *dst, size_t block, const hcmpi_comm_t *c,
                      MPI_Comm comm, hcmpi_done_t *d, MPI_Request *request,
                      int *rc) {
    size_t n;
    hcomm_dtype_t t = hcmpi_unit(block, &n);
    hcomm_request_t hreq = HCOMM_REQUEST_NULL;
    ENTER();
    hcomm_status_t st = request ? f->start(src, dst, n, t, c->comm, &hreq)
                                : f->run(src, dst, n, t, c->comm);
    LEAVE();
    return hcmpi_complete(k, comm, st, hreq, d, request, rc);
}

/* hcmpi_try_<name> and hcmpi_try_i<name> (interpose.h): the blocking and
 * the non-blocking door to try_<name>, for allgather and alltoall. */
#define BLOCKS_TRIES(name)                                                     \
    int hcmpi_try_##name HCMPI_APPEND(HCMPI_BLOCKS_PARAMS, int *rc) {          \
        return try_##name HCMPI_APPEND(HCMPI_BLOCKS_ARGS, NULL, rc);           \
    }                                                                          \
    int hcmpi_try_i##name HCMPI_APPEND(HCMPI_BLOCKS_PARAMS,                    \
                                       MPI_Request *request, int *rc) {        \
        return try_##name HCMPI_APPEND(HCMPI_BLOCKS_ARGS, request, rc);        \
    }

static int try_allgather(const void *sendbuf, int sendcount,
                         MPI_Datatype sendtype, void *recvbuf, int recvcount,
                         MPI_Datatype recvtype, MPI_Comm comm,
                         MPI_Request *request, int *rc) {
    const hcmpi_coll_t k = request ? HCMPI_IALLGATHER : HCMPI_ALLGATHER;
    hcmpi_layout_t r, s;
    hcmpi_comm_t *c;
    size_t block;
    int in_place = sendbuf == MPI_IN_PLACE;
    if (!take_blocks(k, sendbuf, sendcount, sendtype, recvbuf, recvcount,
                     recvtype, comm, request, 0, &c, &block, &r, &s))
        return 0;
    /* The whole receive buffer, and where this rank's block goes. */
    hcmpi_done_t local, *d = hcmpi_done_for(request, &local);
    char *all = r.contiguous ? r.data : hcmpi_scratch(r.bytes);
    if (!all || !d) {
        if (all && all != r.data) hcmpi_scratch_put(all);
        if (d != &local) free(d);
        return failed(k, comm, MPI_ERR_NO_MEM, rc);
    }
    if (!r.contiguous) {
        d->scratch[0] = all;
        d->unpack = r;
        d->from = all;
    }
    char *mine = all + (size_t)c->rank * block;
    const char *src = mine;
    int err = MPI_SUCCESS;
    if (in_place && !r.contiguous) {
        hcmpi_layout_t own;
        MPI_Aint at = (MPI_Aint)c->rank * recvcount * r.extent;
        hcmpi_layout((void *)((uintptr_t)recvbuf + (uintptr_t)at),
                     (size_t)recvcount, recvtype, &own);
        err = hcmpi_pack(&own, mine);
    } else if (!in_place && !s.contiguous) {
        err = hcmpi_pack(&s, mine);
    } else if (!in_place) {
        /* HCOMM copies our block; one inside the receive buffer elsewhere
         * moves to its place first (HCOMM refuses overlaps). */
        uintptr_t a = (uintptr_t)s.data, b = (uintptr_t)all;
        src = s.data;
        if (a + block > b && a < b + r.bytes) {
            if (src != mine) memmove(mine, src, block);
            src = mine;
        }
    }
    if (err) {
        hcmpi_done_run(d, HCOMM_ERR_INTERNAL);
        return failed(k, comm, err, rc);
    }
    return run_blocks(k, &allgather_calls, src, all, block, c, comm, d, request,
                      rc);
}

BLOCKS_TRIES(allgather)

static int try_alltoall(const void *sendbuf, int sendcount,
                        MPI_Datatype sendtype, void *recvbuf, int recvcount,
                        MPI_Datatype recvtype, MPI_Comm comm,
                        MPI_Request *request, int *rc) {
    const hcmpi_coll_t k = request ? HCMPI_IALLTOALL : HCMPI_ALLTOALL;
    hcmpi_layout_t r, s;
    hcmpi_comm_t *c;
    size_t block;
    int in_place = sendbuf == MPI_IN_PLACE;
    if (!take_blocks(k, sendbuf, sendcount, sendtype, recvbuf, recvcount,
                     recvtype, comm, request, 1, &c, &block, &r, &s))
        return 0;
    hcmpi_done_t local, *d = hcmpi_done_for(request, &local);
    char *dst = r.contiguous ? r.data : hcmpi_scratch(r.bytes);
    const char *src = dst; /* in place: HCOMM's in-place form */
    char *packed = NULL;
    int err = dst && d ? MPI_SUCCESS : MPI_ERR_NO_MEM;
    if (d && dst && !r.contiguous) {
        d->scratch[0] = dst;
        d->unpack = r;
        d->from = dst;
    } else if (!d && dst && !r.contiguous) {
        hcmpi_scratch_put(dst);
    }
    if (!err && in_place && !r.contiguous) {
        err = hcmpi_pack(&r, dst);
    } else if (!err && !in_place) {
        src = s.data;
        if (!s.contiguous) {
            src = packed = d->scratch[1] = hcmpi_scratch(s.bytes);
            err = packed ? hcmpi_pack(&s, packed) : MPI_ERR_NO_MEM;
        }
    }
    if (err) {
        if (d) hcmpi_done_run(d, HCOMM_ERR_INTERNAL);
        return failed(k, comm, err, rc);
    }
    return run_blocks(k, &alltoall_calls, src, dst, block, c, comm, d, request,
                      rc);
}

BLOCKS_TRIES(alltoall)
