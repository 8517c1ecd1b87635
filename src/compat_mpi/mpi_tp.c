/* The MPI transport.
 *
 * A receive learns its message's length before it takes the message
 * (PMPI_Improbe, then PMPI_Imrecv): a message longer than the receive
 * (ranks that passed different counts) must fail the call, and MPI cannot
 * be trusted with it. Truncation is an error that aborts the job where
 * the error handler is fatal (MPICH 4.0 raises it on MPI_COMM_WORLD's, not
 * the communicator's), and Open MPI 4.1 writes a truncated rendezvous
 * message past the end of the receive buffer. A message of another length
 * is taken whole (into scratch memory when it is longer), so that its
 * sender completes too, and the receive fails with HCOMM_ERR_MISMATCH. */
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
#define SEND SIZE_MAX       /* req->posted of a send */
#define DRAINING (-1)       /* req->part: taking a message of the wrong size */

typedef struct {
    hcomm_tp_t tp;
    MPI_Comm comm;
    int wide_tags;
    MPI_Datatype big; /* BIG_BLOCK bytes */
} mpi_tp_t;

_Static_assert(sizeof(MPI_Request) <= sizeof(uint64_t) &&
                   sizeof(MPI_Request) <= sizeof(void *),
               "an MPI_Request must fit in hcomm_tp_req_t");

static int make_tag(const mpi_tp_t *m, hcomm_tag_t tag) {
    if (m->wide_tags)
        return (int)((uint32_t)tag.kind << 22 | (tag.seq & 0x3f) << 16 |
                     (tag.step & 0xffff));
    return (int)((uint32_t)tag.kind << 14 | (tag.step & 0x3fff));
}

/* A send holds up to two MPI requests: the bulk of a huge message in
 * BIG_BLOCK units, and its remainder. A receive holds one at a time, in
 * slot 0, and its buffer in handle. */
static MPI_Request *slot(hcomm_tp_req_t *req, int i) {
    return i == 0 ? (MPI_Request *)&req->handle_store
                  : (MPI_Request *)&req->handle;
}

/* A huge message's whole blocks, sent first as one message of them. */
static size_t blocks_of(size_t bytes) {
    return bytes > INT_MAX ? bytes / BIG_BLOCK : 0;
}

static hcomm_status_t mpi_isend(hcomm_tp_t *tp, int peer, const void *buf,
                                size_t bytes, hcomm_tag_t tag,
                                hcomm_tp_req_t *req) {
    mpi_tp_t *m = (mpi_tp_t *)tp;
    int t = make_tag(m, tag);
    size_t blocks = blocks_of(bytes), rest = bytes - blocks * BIG_BLOCK;
    char *p = (char *)(uintptr_t)buf;
    req->done = 0;
    req->posted = SEND;
    req->peer = peer;
    *slot(req, 0) = MPI_REQUEST_NULL;
    *slot(req, 1) = MPI_REQUEST_NULL;
    if (blocks > INT_MAX)
        return hcomm_error(HCOMM_ERR_UNSUPPORTED, "message of %zu bytes",
                           bytes);
    int rc = MPI_SUCCESS;
    if (blocks)
        rc = PMPI_Isend(p, (int)blocks, m->big, peer, t, m->comm, slot(req, 1));
    if (rc == MPI_SUCCESS)
        rc = PMPI_Isend(p + blocks * BIG_BLOCK, (int)rest, MPI_BYTE, peer, t,
                        m->comm, slot(req, 0));
    if (rc != MPI_SUCCESS) {
        req->status = HCOMM_ERR_TRANSPORT;
        req->done = 1;
        return hcomm_error(HCOMM_ERR_TRANSPORT, "MPI_Isend to rank %d failed",
                           peer);
    }
    return HCOMM_SUCCESS;
}

static void finish(hcomm_tp_req_t *req, hcomm_status_t st) {
    req->status = st;
    req->done = 1;
}

static void failed(hcomm_tp_req_t *req, const char *call, int rc) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    PMPI_Error_string(rc, text, &len);
    hcomm_error(HCOMM_ERR_TRANSPORT, "%s (%s rank %d): %s", call,
                req->posted == SEND ? "to" : "from", req->peer, text);
    finish(req, HCOMM_ERR_TRANSPORT);
}

/* A message of n bytes where the part at off, of len bytes, was
 * expected: taken whole, into the part's place when it fits, else into
 * scratch memory; the receive fails once it is in. */
static void take_wrong_size(hcomm_tp_req_t *req, MPI_Message *msg, size_t n,
                            size_t off, size_t len) {
    req->arrived = n + (req->posted - len); /* a huge one: its other part */
    char *to = NULL;
    if (n <= INT_MAX) to = n <= len ? (char *)req->handle + off : malloc(n);
    if (!to) { /* left unreceived: its sender may wait for it in vain */
        finish(req, HCOMM_ERR_MISMATCH);
        return;
    }
    int rc = PMPI_Imrecv(to, (int)n, MPI_BYTE, msg, slot(req, 0));
    if (rc != MPI_SUCCESS) {
        if (n > len) free(to);
        failed(req, "MPI_Imrecv", rc);
        return;
    }
    req->handle = n > len ? to : NULL; /* scratch to free */
    req->part = DRAINING;
}

/* Matches and takes the receive's parts as they arrive. */
static void recv_advance(mpi_tp_t *m, hcomm_tp_req_t *req) {
    MPI_Request *r = slot(req, 0);
    for (;;) {
        int flag = 0, rc;
        MPI_Status status;
        if (*r != MPI_REQUEST_NULL) {
            if ((rc = PMPI_Test(r, &flag, &status)) != MPI_SUCCESS) {
                failed(req, "MPI_Test", rc);
                return;
            }
            if (!flag) return;
            if (req->part == DRAINING) {
                free(req->handle);
                finish(req, HCOMM_ERR_MISMATCH);
                return;
            }
            if (++req->part == (blocks_of(req->posted) ? 2 : 1)) {
                finish(req, HCOMM_SUCCESS);
                return;
            }
            continue;
        }
        MPI_Message msg;
        rc = PMPI_Improbe(req->peer, req->tag, m->comm, &flag, &msg, &status);
        if (rc != MPI_SUCCESS) {
            failed(req, "MPI_Improbe", rc);
            return;
        }
        if (!flag) return;
        MPI_Count n = 0;
        PMPI_Get_elements_x(&status, MPI_BYTE, &n);
        size_t blocks = blocks_of(req->posted);
        int bulk = blocks && req->part == 0; /* a huge message's blocks */
        size_t off = req->part ? blocks * BIG_BLOCK : 0;
        size_t len = bulk ? blocks * BIG_BLOCK : req->posted - off;
        if (n < 0 || (size_t)n != len) {
            take_wrong_size(req, &msg, n < 0 ? 0 : (size_t)n, off, len);
            if (req->done) return;
            continue;
        }
        char *at = (char *)req->handle + off;
        rc = bulk ? PMPI_Imrecv(at, (int)blocks, m->big, &msg, r)
                  : PMPI_Imrecv(at, (int)len, MPI_BYTE, &msg, r);
        if (rc != MPI_SUCCESS) {
            failed(req, "MPI_Imrecv", rc);
            return;
        }
    }
}

static hcomm_status_t mpi_irecv(hcomm_tp_t *tp, int peer, void *buf,
                                size_t bytes, hcomm_tag_t tag,
                                hcomm_tp_req_t *req) {
    mpi_tp_t *m = (mpi_tp_t *)tp;
    req->done = 0;
    req->posted = bytes;
    req->peer = peer;
    req->tag = make_tag(m, tag);
    req->part = 0;
    req->handle = buf;
    *slot(req, 0) = MPI_REQUEST_NULL;
    if (blocks_of(bytes) > INT_MAX) {
        finish(req, HCOMM_ERR_UNSUPPORTED);
        return hcomm_error(HCOMM_ERR_UNSUPPORTED, "message of %zu bytes",
                           bytes);
    }
    recv_advance(m, req);
    return req->status == HCOMM_ERR_TRANSPORT ? HCOMM_ERR_TRANSPORT
                                              : HCOMM_SUCCESS;
}

static void mpi_test(hcomm_tp_t *tp, hcomm_tp_req_t *req) {
    if (req->posted != SEND) {
        recv_advance((mpi_tp_t *)tp, req);
        return;
    }
    int done = 1;
    for (int i = 0; i < 2; i++) {
        MPI_Request *r = slot(req, i);
        if (*r == MPI_REQUEST_NULL) continue;
        int flag = 0, rc = PMPI_Test(r, &flag, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) {
            failed(req, "MPI_Test", rc);
            return;
        }
        done &= flag;
    }
    if (done) req->done = 1;
}

static void mpi_progress(hcomm_tp_t *tp) {
    (void)tp; /* PMPI_Test and PMPI_Improbe progress MPI */
}

/* A receive that matched its message may still write into its buffer
 * (or scratch, which is then left allocated) after the request is freed. */
static void mpi_cancel(hcomm_tp_t *tp, hcomm_tp_req_t *req) {
    (void)tp;
    int parts = req->posted == SEND ? 2 : 1;
    for (int i = 0; i < parts; i++) {
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
    /* Errors come back as return codes; the job never aborts on them. */
    PMPI_Comm_set_errhandler(m->comm, MPI_ERRORS_RETURN);
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
