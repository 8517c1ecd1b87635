/* MPI_Gather and MPI_Scatter, and their non-blocking forms, as bytes.
 *
 * What every rank agrees on, and so what decides: the root and the bytes of
 * one block. Each rank reads them from the arguments MPI makes significant
 * on it (the root: its receive side for gather, its send side for scatter;
 * the others: the other side), which the type-signature rule makes the
 * same number. A side whose data lie contiguous is handed to HCOMM; any
 * other is packed into scratch (and unpacked after), as in
 * interpose_move.c. */
#include "compat_mpi/interpose_entry.h"

#include <stdlib.h>
#include <string.h>

#define ENTER() hcmpi_depth++
#define LEAVE() hcmpi_depth--

static int failed(hcmpi_coll_t k, MPI_Comm comm, int err, int *rc) {
    *rc = hcmpi_report_local(k, comm, err,
                             err == MPI_ERR_NO_MEM ? "no memory for scratch"
                                                   : "packing failed");
    return 1;
}

/* The decision, from the agreed block bytes: 1 with *c set and *d ready
 * (local for a blocking call); 0, the fallback counted; -1, no memory for
 * *d, reported in *rc (not a fallback: the peers take the call). */
static int take(hcmpi_coll_t k, size_t block, int root, MPI_Comm comm,
                MPI_Request *request, hcmpi_comm_t **c, hcmpi_done_t *local,
                hcmpi_done_t **d, int *rc) {
    hcmpi_why_t why;
    if (request && !hcmpi_ireq_available())
        return hcmpi_fallback(k, HCMPI_WHY_NO_PROGRESS);
    if (block == 0) return hcmpi_fallback(k, HCMPI_WHY_EMPTY);
    if (block > HCMPI_MAX_BLOCK) return hcmpi_fallback(k, HCMPI_WHY_LARGE);
    if (!(*c = hcmpi_comm_get(comm, &why))) return hcmpi_fallback(k, why);
    if (root < 0 || root >= (*c)->size)
        return hcmpi_fallback(k, HCMPI_WHY_ARGS);
    if (!hcmpi_in_window(k, (size_t)(*c)->size * block))
        return hcmpi_fallback(k, HCMPI_WHY_SIZE);
    if (!(*d = hcmpi_done_for(request, local)))
        return -failed(k, comm, MPI_ERR_NO_MEM, rc);
    return 1;
}

/* The bytes of count elements of dtype at buf, contiguous (*data) or
 * packed into new scratch; an MPI error code. */
static int bytes_of(const hcmpi_layout_t *l, hcmpi_done_t *d, int slot,
                    const char **data) {
    if (l->contiguous) {
        *data = l->data;
        return MPI_SUCCESS;
    }
    char *p = d->scratch[slot] = hcmpi_scratch(l->bytes);
    *data = p;
    return p ? hcmpi_pack(l, p) : MPI_ERR_NO_MEM;
}

int hcmpi_try_gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                     void *recvbuf, int recvcount, MPI_Datatype recvtype,
                     int root, MPI_Comm comm, MPI_Request *request, int *rc) {
    const hcmpi_coll_t k = request ? HCMPI_IGATHER : HCMPI_GATHER;
    hcmpi_layout_t s, r;
    hcmpi_comm_t *c;
    hcmpi_done_t local, *d;
    int in_place = sendbuf == MPI_IN_PLACE, me;
    if (!hcmpi_wants(k)) return hcmpi_fallback(k, hcmpi_why_not());
    if (PMPI_Comm_rank(comm, &me) != MPI_SUCCESS)
        return hcmpi_fallback(k, HCMPI_WHY_ARGS);
    /* the block, from the side MPI reads on this rank */
    const int at_root = me == root;
    if (at_root ? recvcount < 0 ||
                      !hcmpi_layout(recvbuf, (size_t)recvcount, recvtype, &r)
                : in_place || sendcount < 0 ||
                      !hcmpi_layout(sendbuf, (size_t)sendcount, sendtype, &s))
        return hcmpi_fallback(k, HCMPI_WHY_ARGS);
    size_t block = at_root ? r.bytes : s.bytes;
    if (at_root && !in_place &&
        (sendcount < 0 ||
         !hcmpi_layout(sendbuf, (size_t)sendcount, sendtype, &s) ||
         s.bytes != block))
        return hcmpi_fallback(k, HCMPI_WHY_ARGS);
    int taken = take(k, block, root, comm, request, &c, &local, &d, rc);
    if (taken <= 0) return taken < 0;
    size_t n, size = (size_t)c->size;
    hcomm_dtype_t t = hcmpi_unit(block, &n);
    char *all = NULL;
    const char *src = NULL;
    int err = MPI_SUCCESS;
    if (at_root) {
        hcmpi_layout_times(&r, size);
        all = r.contiguous ? r.data : (d->scratch[0] = hcmpi_scratch(r.bytes));
        if (!all) err = MPI_ERR_NO_MEM;
        char *own = all ? all + (size_t)root * block : NULL;
        src = own; /* HCOMM's in-place form */
        if (!err && in_place && !r.contiguous) {
            hcmpi_layout_t mine;
            MPI_Aint at = (MPI_Aint)root * recvcount * r.extent;
            hcmpi_layout((const char *)recvbuf + at, (size_t)recvcount,
                         recvtype, &mine);
            err = hcmpi_pack(&mine, own);
        } else if (!err && !in_place) {
            err = bytes_of(&s, d, 1, &src);
            uintptr_t a = (uintptr_t)src, b = (uintptr_t)all;
            if (!err && a + block > b && a < b + r.bytes) { /* inside recv */
                if (src != own) memmove(own, src, block);
                src = own;
            }
        }
        if (!r.contiguous) {
            d->unpack = r;
            d->from = all;
        }
    } else {
        err = bytes_of(&s, d, 1, &src);
    }
    if (err) {
        hcmpi_done_run(d, HCOMM_ERR_INTERNAL);
        return failed(k, comm, err, rc);
    }
    hcomm_request_t hreq = HCOMM_REQUEST_NULL;
    ENTER();
    hcomm_status_t st =
        request ? hcomm_igather(src, all, n, t, root, c->comm, &hreq)
                : hcomm_gather(src, all, n, t, root, c->comm);
    LEAVE();
    return hcmpi_complete(k, comm, st, hreq, d, request, rc);
}

int hcmpi_try_scatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                      void *recvbuf, int recvcount, MPI_Datatype recvtype,
                      int root, MPI_Comm comm, MPI_Request *request, int *rc) {
    const hcmpi_coll_t k = request ? HCMPI_ISCATTER : HCMPI_SCATTER;
    hcmpi_layout_t s, r;
    hcmpi_comm_t *c;
    hcmpi_done_t local, *d;
    int in_place = recvbuf == MPI_IN_PLACE, me;
    if (!hcmpi_wants(k)) return hcmpi_fallback(k, hcmpi_why_not());
    if (PMPI_Comm_rank(comm, &me) != MPI_SUCCESS)
        return hcmpi_fallback(k, HCMPI_WHY_ARGS);
    const int at_root = me == root;
    if (at_root ? sendcount < 0 ||
                      !hcmpi_layout(sendbuf, (size_t)sendcount, sendtype, &s)
                : in_place || recvcount < 0 ||
                      !hcmpi_layout(recvbuf, (size_t)recvcount, recvtype, &r))
        return hcmpi_fallback(k, HCMPI_WHY_ARGS);
    size_t block = at_root ? s.bytes : r.bytes;
    if (at_root && !in_place &&
        (recvcount < 0 ||
         !hcmpi_layout(recvbuf, (size_t)recvcount, recvtype, &r) ||
         r.bytes != block))
        return hcmpi_fallback(k, HCMPI_WHY_ARGS);
    int taken = take(k, block, root, comm, request, &c, &local, &d, rc);
    if (taken <= 0) return taken < 0;
    size_t n, size = (size_t)c->size;
    hcomm_dtype_t t = hcmpi_unit(block, &n);
    const char *all = NULL;
    char *dst = NULL;
    int err = MPI_SUCCESS;
    if (at_root) {
        hcmpi_layout_times(&s, size);
        err = bytes_of(&s, d, 0, &all);
        dst = (char *)(uintptr_t)all + (size_t)root * block; /* in place */
        if (!err && !in_place) {
            if (r.contiguous) {
                uintptr_t a = (uintptr_t)r.data, b = (uintptr_t)all;
                /* a receive block inside the send buffer elsewhere is
                 * written after the call (HCOMM refuses the overlap) */
                if (!(a + block > b && a < b + s.bytes)) dst = r.data;
                if (dst != r.data) {
                    d->unpack = r;
                    d->from = dst;
                }
            } else {
                d->unpack = r;
                d->from = dst;
            }
        }
    } else if (r.contiguous) {
        dst = r.data;
    } else {
        dst = d->scratch[1] = hcmpi_scratch(block);
        if (!dst) err = MPI_ERR_NO_MEM;
        d->unpack = r;
        d->from = dst;
    }
    if (err) {
        hcmpi_done_run(d, HCOMM_ERR_INTERNAL);
        return failed(k, comm, err, rc);
    }
    /* the root's own block, when it goes elsewhere, is copied after: a
     * packed send buffer is scratch, so dst points into it */
    hcomm_request_t hreq = HCOMM_REQUEST_NULL;
    ENTER();
    hcomm_status_t st =
        request ? hcomm_iscatter(all, dst, n, t, root, c->comm, &hreq)
                : hcomm_scatter(all, dst, n, t, root, c->comm);
    LEAVE();
    return hcmpi_complete(k, comm, st, hreq, d, request, rc);
}

/* --- the exported C entry points ----------------------------------------- */

HCMPI_ENTRY_NULL_PAIR(Gather, Igather, hcmpi_try_gather, HCMPI_ROOTED_PARAMS,
                      HCMPI_ROOTED_ARGS)

HCMPI_ENTRY_NULL_PAIR(Scatter, Iscatter, hcmpi_try_scatter, HCMPI_ROOTED_PARAMS,
                      HCMPI_ROOTED_ARGS)
