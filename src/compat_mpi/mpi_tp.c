/* The MPI transport. */
#include "compat_mpi/mpi_tp.h"
#include "core/log.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* Tag layout, when the MPI allows tags of 23 bits (Open MPI and MPICH do):
 * [kind:1][seq:6][step:16]: the call's sequence number keeps apart the
 * messages of calls in flight at once on one communicator (the chunks of
 * a pipeline). With the 15 bits MPI guarantees: [kind:1][step:14], where
 * only one call at a time per communicator is safe. */
#define BIG_BLOCK (1 << 20) /* messages past INT_MAX bytes go in blocks */

typedef struct {
    hcomm_tp_t tp;
    MPI_Comm comm;
    int wide_tags;
    MPI_Datatype big; /* BIG_BLOCK bytes */
} mpi_tp_t;

_Static_assert(sizeof(MPI_Request) <= sizeof(uint64_t),
               "an MPI_Request must fit in hcomm_tp_req_t");

static int make_tag(const mpi_tp_t *m, hcomm_tag_t tag) {
    if (m->wide_tags)
        return (int)((uint32_t)tag.kind << 22 | (tag.seq & 0x3f) << 16 |
                     (tag.step & 0xffff));
    return (int)((uint32_t)tag.kind << 14 | (tag.step & 0x3fff));
}

/* A request holds up to two MPI requests: the bulk of a huge message in
 * BIG_BLOCK units, and its remainder. */
static MPI_Request *slot(hcomm_tp_req_t *req, int i) {
    return i == 0 ? (MPI_Request *)&req->handle_store
                  : (MPI_Request *)&req->handle;
}

static hcomm_status_t post(hcomm_tp_t *tp, int peer, void *buf, size_t bytes,
                           hcomm_tag_t tag, hcomm_tp_req_t *req, int is_send) {
    mpi_tp_t *m = (mpi_tp_t *)tp;
    int t = make_tag(m, tag);
    size_t blocks = bytes > INT_MAX ? bytes / BIG_BLOCK : 0;
    size_t rest = bytes - blocks * BIG_BLOCK;
    req->done = 0;
    *slot(req, 0) = MPI_REQUEST_NULL;
    *slot(req, 1) = MPI_REQUEST_NULL;
    if (blocks > INT_MAX)
        return hcomm_error(HCOMM_ERR_UNSUPPORTED, "message of %zu bytes",
                           bytes);
    int rc = MPI_SUCCESS;
    if (is_send) {
        if (blocks)
            rc = PMPI_Isend(buf, (int)blocks, m->big, peer, t, m->comm,
                            slot(req, 1));
        if (rc == MPI_SUCCESS)
            rc = PMPI_Isend((char *)buf + blocks * BIG_BLOCK, (int)rest,
                            MPI_BYTE, peer, t, m->comm, slot(req, 0));
    } else {
        if (blocks)
            rc = PMPI_Irecv(buf, (int)blocks, m->big, peer, t, m->comm,
                            slot(req, 1));
        if (rc == MPI_SUCCESS)
            rc = PMPI_Irecv((char *)buf + blocks * BIG_BLOCK, (int)rest,
                            MPI_BYTE, peer, t, m->comm, slot(req, 0));
    }
    if (rc != MPI_SUCCESS) {
        req->status = HCOMM_ERR_TRANSPORT;
        req->done = 1;
        return hcomm_error(HCOMM_ERR_TRANSPORT, "MPI_I%s to rank %d failed",
                           is_send ? "send" : "recv", peer);
    }
    return HCOMM_SUCCESS;
}

static hcomm_status_t mpi_isend(hcomm_tp_t *tp, int peer, const void *buf,
                                size_t bytes, hcomm_tag_t tag,
                                hcomm_tp_req_t *req) {
    return post(tp, peer, (void *)(uintptr_t)buf, bytes, tag, req, 1);
}

static hcomm_status_t mpi_irecv(hcomm_tp_t *tp, int peer, void *buf,
                                size_t bytes, hcomm_tag_t tag,
                                hcomm_tp_req_t *req) {
    return post(tp, peer, buf, bytes, tag, req, 0);
}

static void mpi_test(hcomm_tp_t *tp, hcomm_tp_req_t *req) {
    (void)tp;
    int done = 1;
    for (int i = 0; i < 2; i++) {
        MPI_Request *r = slot(req, i);
        if (*r == MPI_REQUEST_NULL) continue;
        int flag = 0;
        MPI_Status status;
        if (PMPI_Test(r, &flag, &status) != MPI_SUCCESS) {
            req->status = HCOMM_ERR_TRANSPORT;
            flag = 1;
        }
        done &= flag;
    }
    if (done) req->done = 1;
}

static void mpi_progress(hcomm_tp_t *tp) {
    (void)tp; /* PMPI_Test progresses MPI */
}

static void mpi_cancel(hcomm_tp_t *tp, hcomm_tp_req_t *req) {
    (void)tp;
    for (int i = 0; i < 2; i++) {
        MPI_Request *r = slot(req, i);
        if (*r == MPI_REQUEST_NULL) continue;
        PMPI_Cancel(r);
        PMPI_Request_free(r);
    }
    req->done = 1;
}

static void mpi_destroy(hcomm_tp_t *tp) {
    mpi_tp_t *m = (mpi_tp_t *)tp;
    PMPI_Type_free(&m->big);
    PMPI_Comm_free(&m->comm);
    free(m);
}

static const hcomm_tp_ops_t mpi_ops = {"mpi",      mpi_isend,    mpi_irecv,
                                       mpi_test,   mpi_progress, mpi_cancel,
                                       mpi_destroy};

hcomm_status_t hcomm_mpi_tp_create(MPI_Comm comm, hcomm_tp_t **out) {
    mpi_tp_t *m = calloc(1, sizeof(*m));
    if (!m) return hcomm_error(HCOMM_ERR_NO_MEMORY, "no memory");
    if (PMPI_Comm_dup(comm, &m->comm) != MPI_SUCCESS) {
        free(m);
        return hcomm_error(HCOMM_ERR_TRANSPORT, "MPI_Comm_dup failed");
    }
    /* MPI_TAG_UB is an attribute of MPI_COMM_WORLD; Open MPI does not
     * carry it to split or duplicated communicators. */
    int *ub = NULL, flag = 0;
    PMPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
    m->wide_tags = flag && ub && *ub >= (1 << 23) - 1;
    PMPI_Type_contiguous(BIG_BLOCK, MPI_BYTE, &m->big);
    PMPI_Type_commit(&m->big);
    m->tp.ops = &mpi_ops;
    m->tp.priv = m;
    PMPI_Comm_rank(m->comm, &m->tp.rank);
    PMPI_Comm_size(m->comm, &m->tp.size);
    *out = &m->tp;
    return HCOMM_SUCCESS;
}
