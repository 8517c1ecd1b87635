/* The variable-count collectives: MPI_Allgatherv, MPI_Alltoallv and
 * MPI_Reduce_scatter, and their non-blocking forms.
 *
 * What every rank must pass alike, and so what decides: for
 * MPI_Reduce_scatter the datatype, operation and recvcounts (as for the
 * other reductions); for MPI_Allgatherv the bytes of every rank's block
 * (recvcounts[i] elements of each rank's own receive datatype); for
 * MPI_Alltoallv only the communicator, since each pair of ranks agrees on
 * its own messages and nothing else (so HCOMM_MPI_INTERCEPT's size window
 * and the count-0 rule do not apply to it).
 *
 * Data move as bytes (HCOMM_UINT8): a side whose datatype is a mapped
 * predefined one is handed over in place, with displacements in bytes; any
 * other is packed block by block into scratch, and unpacked after. */
#include "compat_mpi/interpose_entry.h"

#include <stdlib.h>
#include <string.h>

#define ENTER() hcmpi_depth++
#define LEAVE() hcmpi_depth--

/* Communicators up to this size keep a call's per-rank arrays in the
 * call's record (vdone_t), which a blocking call keeps on its stack: its
 * small-message path allocates nothing. */
#define SMALL_RANKS 32

/* One side of a call (n blocks) as HCOMM sees it: bytes and byte offsets
 * into data, either the user's buffer (direct) or packed scratch. */
typedef struct {
    const void *buf; /* the user's */
    const int *counts, *displs;
    MPI_Datatype dtype;
    MPI_Aint extent;
    int n, packed;
    size_t *bytes, *off; /* n each */
    int allocated;       /* they are one allocation, else the record's */
    size_t total;        /* packed: the scratch's size */
    char *data;
} vside_t;

static void vside_free(vside_t *v) {
    if (v->packed && v->data) hcmpi_scratch_put(v->data);
    if (v->allocated) free(v->bytes);
    v->bytes = v->off = NULL;
    v->data = NULL;
}

/* Describes the side, its arrays in small (2 * SMALL_RANKS) where n
 * allows: 1; 0 when MPI would refuse its arguments (negative counts, a
 * datatype MPI cannot describe), for MPI to report; -1 when memory for
 * the arrays is short, which this rank reports itself: its peers, whose
 * arguments were good, take the call, and a rank that went to MPI would
 * wait there for them forever. A packed side's data come with
 * vside_stage. */
static int vside_init(vside_t *v, const void *buf, const int *counts,
                      const int *displs, MPI_Datatype dtype, int n,
                      size_t *small) {
    size_t size = hcmpi_map_size(dtype);
    MPI_Aint lb;
    memset(v, 0, sizeof(*v));
    v->buf = buf;
    v->counts = counts;
    v->displs = displs;
    v->dtype = dtype;
    v->n = n;
    if (!counts || !displs) return 0;
    v->allocated = n > SMALL_RANKS;
    v->bytes = v->allocated ? malloc(2 * (size_t)n * sizeof(size_t)) : small;
    if (!v->bytes) return -1;
    v->off = v->bytes + n;
    v->packed = size == 0;
    if (size)
        v->extent = (MPI_Aint)size;
    else if (PMPI_Type_get_extent(dtype, &lb, &v->extent) != MPI_SUCCESS)
        return 0;
    for (int i = 0; i < n; i++) {
        if (counts[i] < 0) return 0;
        if (size) {
            v->bytes[i] = (size_t)counts[i] * size;
            v->off[i] = (size_t)displs[i] * size;
            if (displs[i] < 0) return 0; /* HCOMM's offsets are unsigned */
            continue;
        }
        hcmpi_layout_t l;
        if (!hcmpi_layout(buf, (size_t)counts[i], dtype, &l)) return 0;
        v->bytes[i] = l.bytes;
        v->off[i] = v->total;
        v->total += l.bytes;
    }
    v->data = v->packed ? NULL : (char *)(uintptr_t)buf;
    return 1;
}

/* A packed side's scratch, once the call is taken: MPI_SUCCESS, or
 * MPI_ERR_NO_MEM for this rank to report (as vside_init's -1). */
static int vside_stage(vside_t *v) {
    if (v->packed && !(v->data = hcmpi_scratch(v->total ? v->total : 1)))
        return MPI_ERR_NO_MEM;
    return MPI_SUCCESS;
}

/* Packs (or unpacks) block i of a packed side. */
static int vside_copy(const vside_t *v, int i, int unpack) {
    hcmpi_layout_t l;
    const char *at = (const char *)v->buf + (MPI_Aint)v->displs[i] * v->extent;
    if (!v->bytes[i]) return MPI_SUCCESS;
    if (!hcmpi_layout(at, (size_t)v->counts[i], v->dtype, &l))
        return MPI_ERR_TYPE;
    return unpack ? hcmpi_unpack(&l, v->data + v->off[i])
                  : hcmpi_pack(&l, v->data + v->off[i]);
}

static int vside_copy_all(const vside_t *v, int unpack) {
    int err = MPI_SUCCESS;
    for (int i = 0; i < v->n && !err; i++)
        err = vside_copy(v, i, unpack);
    return err;
}

/* A failure of our own after the call was taken: this rank reports it. */
static int failed(hcmpi_coll_t k, MPI_Comm comm, int err, int *rc) {
    *rc = hcmpi_report_local(k, comm, err,
                             err == MPI_ERR_NO_MEM ? "no memory for scratch"
                                                   : "packing failed");
    return 1;
}

/* A side vside_init could not describe (its result, <= 0): MPI reports
 * arguments it refuses, this rank a shortage of memory. */
static int undescribed(hcmpi_coll_t k, MPI_Comm comm, int described, int *rc) {
    return described ? failed(k, comm, MPI_ERR_NO_MEM, rc)
                     : hcmpi_fallback(k, HCMPI_WHY_ARGS);
}

/* What a call finishes once HCOMM has: unpacks, moves a result into
 * place, frees. */
typedef struct {
    vside_t recv, send;
    char *move_from, *move_to; /* MPI_(I)reduce_scatter in place */
    size_t move_bytes;
    int on_heap; /* a non-blocking call's */
    /* last, not zeroed: the sides' arrays (reduce_scatter's counts) */
    size_t small[2][2 * SMALL_RANKS];
} vdone_t;

/* local for a blocking call, request NULL, else on the heap; zeroed up to
 * its arrays */
static vdone_t *vdone_for(MPI_Request *request, vdone_t *local) {
    vdone_t *d = request ? malloc(sizeof(*d)) : local;
    if (d) {
        memset(d, 0, offsetof(vdone_t, small));
        d->on_heap = d != local;
    }
    return d;
}

static int vdone_run(void *arg, hcomm_status_t st) {
    vdone_t *d = arg;
    int err = MPI_SUCCESS;
    if (st == HCOMM_SUCCESS && d->recv.packed)
        err = vside_copy_all(&d->recv, 1);
    if (st == HCOMM_SUCCESS && d->move_bytes && d->move_from != d->move_to)
        memmove(d->move_to, d->move_from, d->move_bytes);
    vside_free(&d->recv);
    vside_free(&d->send);
    if (d->on_heap) free(d);
    return err;
}

/* Ends a call HCOMM took: finishes d now (a blocking call, request NULL,
 * which HCOMM has run, or a call that failed to start), or hands the
 * started call to MPI as a generalized request that finishes d. */
static int complete(hcmpi_coll_t k, MPI_Comm comm, hcomm_status_t st,
                    hcomm_request_t hreq, vdone_t *d, MPI_Request *request,
                    int *rc) {
    if (st == HCOMM_SUCCESS && request) {
        hcmpi_count_taken(k);
        *rc = hcmpi_ireq_wrap_then(hreq, comm, request, k, vdone_run, d);
        return 1;
    }
    int err = vdone_run(d, st);
    if (st == HCOMM_SUCCESS && err) return failed(k, comm, err, rc);
    return hcmpi_finish(k, comm, st, rc);
}

/* The gate every call passes: enabled, and for a non-blocking call a way
 * to progress it. */
static int wanted(hcmpi_coll_t k, MPI_Request *request) {
    if (!hcmpi_wants(k)) return hcmpi_fallback(k, hcmpi_why_not());
    if (request && !hcmpi_ireq_available())
        return hcmpi_fallback(k, HCMPI_WHY_NO_PROGRESS);
    return 1;
}

int hcmpi_try_allgatherv(const void *sendbuf, int sendcount,
                         MPI_Datatype sendtype, void *recvbuf,
                         const int *recvcounts, const int *displs,
                         MPI_Datatype recvtype, MPI_Comm comm,
                         MPI_Request *request, int *rc) {
    const hcmpi_coll_t k = request ? HCMPI_IALLGATHERV : HCMPI_ALLGATHERV;
    hcmpi_why_t why;
    hcmpi_comm_t *c;
    if (!wanted(k, request)) return 0;
    if (!(c = hcmpi_comm_get(comm, &why))) return hcmpi_fallback(k, why);
    vdone_t local, *d = vdone_for(request, &local);
    if (!d) return failed(k, comm, MPI_ERR_NO_MEM, rc);
    vside_t *r = &d->recv;
    int described = vside_init(r, recvbuf, recvcounts, displs, recvtype,
                               c->size, d->small[0]);
    if (described <= 0) {
        vdone_run(d, HCOMM_ERR_INVALID_ARG);
        return undescribed(k, comm, described, rc);
    }
    /* Every rank knows every block's bytes: the decision is theirs. */
    size_t total = 0, most = 0;
    for (int i = 0; i < c->size; i++) {
        total += r->bytes[i];
        if (r->bytes[i] > most) most = r->bytes[i];
    }
    hcmpi_why_t no = !total                       ? HCMPI_WHY_EMPTY
                     : most > HCMPI_MAX_BLOCK     ? HCMPI_WHY_LARGE
                     : !hcmpi_in_window(k, total) ? HCMPI_WHY_SIZE
                                                  : HCMPI_NWHY;
    size_t mine = r->bytes[c->rank];
    hcmpi_layout_t s;
    int in_place = sendbuf == MPI_IN_PLACE;
    if (no == HCMPI_NWHY && !in_place &&
        (sendcount < 0 ||
         !hcmpi_layout(sendbuf, (size_t)sendcount, sendtype, &s) ||
         s.bytes != mine))
        no = HCMPI_WHY_ARGS; /* MPI reports it */
    if (no != HCMPI_NWHY) {
        vdone_run(d, HCOMM_ERR_INVALID_ARG);
        return hcmpi_fallback(k, no);
    }
    int err = vside_stage(r);
    if (err) {
        vdone_run(d, HCOMM_ERR_INTERNAL);
        return failed(k, comm, err, rc);
    }
    char *own = r->data + r->off[c->rank];
    const char *src = own; /* HCOMM's in-place form */
    if (r->packed && in_place) {
        err = vside_copy(r, c->rank, 0);
    } else if (!in_place && (r->packed || !s.contiguous)) {
        err = r->packed ? hcmpi_pack(&s, own) : MPI_SUCCESS;
        if (!r->packed) { /* a packed copy of the send side */
            vside_t *p = &d->send;
            p->packed = 1;
            p->data = hcmpi_scratch(mine ? mine : 1);
            err = p->data ? hcmpi_pack(&s, p->data) : MPI_ERR_NO_MEM;
            src = p->data;
        }
    } else if (!in_place) {
        src = s.data;
        /* a send block inside the receive buffer goes to its place first
         * (HCOMM refuses other overlaps) */
        uintptr_t a = (uintptr_t)src, lo = (uintptr_t)r->data;
        size_t span = 0;
        for (int i = 0; i < c->size; i++)
            if (r->bytes[i] && r->off[i] + r->bytes[i] > span)
                span = r->off[i] + r->bytes[i];
        if (mine && a + mine > lo && a < lo + span) {
            if (src != own) memmove(own, src, mine);
            src = own;
        }
    }
    if (err) {
        vdone_run(d, HCOMM_ERR_INTERNAL);
        return failed(k, comm, err, rc);
    }
    hcomm_request_t hreq = HCOMM_REQUEST_NULL;
    ENTER();
    hcomm_status_t st = request
                            ? hcomm_iallgatherv(src, r->data, r->bytes, r->off,
                                                HCOMM_UINT8, c->comm, &hreq)
                            : hcomm_allgatherv(src, r->data, r->bytes, r->off,
                                               HCOMM_UINT8, c->comm);
    LEAVE();
    return complete(k, comm, st, hreq, d, request, rc);
}

int hcmpi_try_alltoallv(const void *sendbuf, const int *sendcounts,
                        const int *sdispls, MPI_Datatype sendtype,
                        void *recvbuf, const int *recvcounts,
                        const int *rdispls, MPI_Datatype recvtype,
                        MPI_Comm comm, MPI_Request *request, int *rc) {
    const hcmpi_coll_t k = request ? HCMPI_IALLTOALLV : HCMPI_ALLTOALLV;
    hcmpi_why_t why;
    hcmpi_comm_t *c;
    if (!wanted(k, request)) return 0;
    if (!(c = hcmpi_comm_get(comm, &why))) return hcmpi_fallback(k, why);
    vdone_t local, *d = vdone_for(request, &local);
    if (!d) return failed(k, comm, MPI_ERR_NO_MEM, rc);
    int in_place = sendbuf == MPI_IN_PLACE, err = MPI_SUCCESS;
    vside_t *r = &d->recv, *s = &d->send;
    /* Nothing here is agreed between ranks: a rank whose arguments MPI
     * would refuse is an erroneous program, reported by MPI; its peers
     * time out. */
    int described = vside_init(r, recvbuf, recvcounts, rdispls, recvtype,
                               c->size, d->small[0]);
    if (described > 0 && !in_place) {
        described = vside_init(s, sendbuf, sendcounts, sdispls, sendtype,
                               c->size, d->small[1]);
        if (described > 0 && s->bytes[c->rank] != r->bytes[c->rank])
            described = 0;
    }
    if (described <= 0) {
        vdone_run(d, HCOMM_ERR_INVALID_ARG);
        return undescribed(k, comm, described, rc);
    }
    for (int i = 0; i < c->size; i++)
        if (r->bytes[i] > HCMPI_MAX_BLOCK && (r->packed || s->packed))
            err = MPI_ERR_COUNT; /* MPI_Pack counts in int */
    if (!err) err = vside_stage(r);
    if (!err) err = vside_stage(s);
    if (!err && in_place && r->packed) err = vside_copy_all(r, 0);
    if (!err && s->packed) err = vside_copy_all(s, 0);
    if (err) {
        vdone_run(d, HCOMM_ERR_INTERNAL);
        return failed(k, comm, err, rc);
    }
    const vside_t *from = in_place ? r : s;
    hcomm_request_t hreq = HCOMM_REQUEST_NULL;
    ENTER();
    hcomm_status_t st =
        request
            ? hcomm_ialltoallv(from->data, from->bytes, from->off, r->data,
                               r->bytes, r->off, HCOMM_UINT8, c->comm, &hreq)
            : hcomm_alltoallv(from->data, from->bytes, from->off, r->data,
                              r->bytes, r->off, HCOMM_UINT8, c->comm);
    LEAVE();
    return complete(k, comm, st, hreq, d, request, rc);
}

int hcmpi_try_reduce_scatter(const void *sendbuf, void *recvbuf,
                             const int *recvcounts, MPI_Datatype dtype,
                             MPI_Op op, MPI_Comm comm, MPI_Request *request,
                             int *rc) {
    const hcmpi_coll_t k =
        request ? HCMPI_IREDUCE_SCATTER : HCMPI_REDUCE_SCATTER;
    hcomm_dtype_t t;
    hcomm_op_t o;
    hcmpi_why_t why;
    hcmpi_comm_t *c;
    if (!wanted(k, request)) return 0;
    if (!hcmpi_map_dtype(dtype, 1, &t, &why) || !hcmpi_map_op(op, &o, &why))
        return hcmpi_fallback(k, why);
    if (!recvcounts) return hcmpi_fallback(k, HCMPI_WHY_ARGS);
    if (!(c = hcmpi_comm_get(comm, &why))) return hcmpi_fallback(k, why);
    size_t es = hcomm_dtype_size(t), total = 0, before = 0;
    for (int i = 0; i < c->size; i++) {
        if (recvcounts[i] < 0) return hcmpi_fallback(k, HCMPI_WHY_ARGS);
        if (i < c->rank) before += (size_t)recvcounts[i];
        total += (size_t)recvcounts[i];
    }
    if (!total) return hcmpi_fallback(k, HCMPI_WHY_EMPTY);
    if (!hcmpi_in_window(k, total * es))
        return hcmpi_fallback(k, HCMPI_WHY_SIZE);
    vdone_t local, *d = vdone_for(request, &local);
    size_t *counts = !d ? NULL
                     : c->size <= SMALL_RANKS
                         ? d->small[0]
                         : malloc((size_t)c->size * sizeof(size_t));
    if (!counts) {
        if (d) vdone_run(d, HCOMM_ERR_NO_MEMORY);
        return failed(k, comm, MPI_ERR_NO_MEM, rc);
    }
    for (int i = 0; i < c->size; i++)
        counts[i] = (size_t)recvcounts[i];
    char *mine = recvbuf;
    /* MPI in place reads every block from recvbuf and leaves the result in
     * its start; HCOMM's in-place form leaves it in this rank's block, from
     * where it moves to the front. */
    if (sendbuf == MPI_IN_PLACE || sendbuf == recvbuf) {
        sendbuf = recvbuf;
        mine += before * es;
        d->move_from = mine;
        d->move_to = recvbuf;
        d->move_bytes = counts[c->rank] * es;
    }
    hcomm_request_t hreq = HCOMM_REQUEST_NULL;
    ENTER();
    hcomm_status_t st =
        request ? hcomm_ireduce_scatterv(sendbuf, mine, counts, t, o, c->comm,
                                         &hreq)
                : hcomm_reduce_scatterv(sendbuf, mine, counts, t, o, c->comm);
    LEAVE();
    if (counts != d->small[0]) free(counts); /* read by now (hcomm.h) */
    return complete(k, comm, st, hreq, d, request, rc);
}

/* --- the exported C entry points ----------------------------------------- */

HCMPI_ENTRY_NULL_PAIR(Allgatherv, Iallgatherv, hcmpi_try_allgatherv,
                      (const void *sendbuf, int sendcount,
                       MPI_Datatype sendtype, void *recvbuf,
                       const int recvcounts[], const int displs[],
                       MPI_Datatype recvtype, MPI_Comm comm),
                      (sendbuf, sendcount, sendtype, recvbuf, recvcounts,
                       displs, recvtype, comm))

HCMPI_ENTRY_NULL_PAIR(Alltoallv, Ialltoallv, hcmpi_try_alltoallv,
                      (const void *sendbuf, const int sendcounts[],
                       const int sdispls[], MPI_Datatype sendtype,
                       void *recvbuf, const int recvcounts[],
                       const int rdispls[], MPI_Datatype recvtype,
                       MPI_Comm comm),
                      (sendbuf, sendcounts, sdispls, sendtype, recvbuf,
                       recvcounts, rdispls, recvtype, comm))

HCMPI_ENTRY_NULL_PAIR(Reduce_scatter, Ireduce_scatter, hcmpi_try_reduce_scatter,
                      (const void *sendbuf, void *recvbuf,
                       const int recvcounts[], MPI_Datatype datatype, MPI_Op op,
                       MPI_Comm comm),
                      (sendbuf, recvbuf, recvcounts, datatype, op, comm))
