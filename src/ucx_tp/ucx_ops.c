/* The UCX transport's data path: the hcomm_tp_ops_t functions (and, at the
 * end, a diagnostic that describes an endpoint).
 *
 * Kept lean: no allocation, no locks beyond UCX's own, no logging unless the
 * level is enabled. Operations may complete immediately (then req->done is 1
 * on return and UCX holds no request); otherwise the completion callback,
 * run from ucp_worker_progress (test, progress, or another thread's progress
 * in MULTI mode), sets req->status, then req->done, and frees the UCX
 * request.
 *
 * Cancel handshake (needed in MULTI mode, where the callback can run on
 * another thread and the freed UCX request can be reused at once): the
 * callback sets HCOMM_UCX_RS_DONE in req->handle_store and frees the UCX
 * request only when HCOMM_UCX_RS_CANCELING was not set before; cancel sets
 * CANCELING and, when DONE was not set before, owns the UCX request from then
 * on and frees it itself.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include "ucx_tp/ucx_rails.h"
#include "ucx_tp/ucx_tag.h"
#include "ucx_tp/ucx_tp.h"
#include "core/clock.h"
#include "core/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HCOMM_UCX_CANCEL_WAIT_S 0.1

unsigned long hcomm_ucx_abandoned;

static inline void ucx_req_finish(hcomm_tp_req_t *req, void *ucx_req,
                                  hcomm_status_t status) {
    uint64_t old = __atomic_fetch_or(
        &req->handle_store, (uint64_t)HCOMM_UCX_RS_DONE, __ATOMIC_ACQ_REL);
    if (!(old & HCOMM_UCX_RS_CANCELING)) ucp_request_free(ucx_req);
    req->status = status;
    /* the last access to *req: after this the owner may reuse it */
    __atomic_store_n(&req->done, 1, __ATOMIC_RELEASE);
}

static void ucx_send_cb(void *ucx_req, ucs_status_t st, void *user_data) {
    hcomm_tp_req_t *req = user_data;

    if (__builtin_expect(st != UCS_OK, 0)) {
        hcomm_debug("ucx send completed with %s", ucs_status_string(st));
        ucx_req_finish(req, ucx_req, HCOMM_ERR_TRANSPORT);
        return;
    }
    ucx_req_finish(req, ucx_req, HCOMM_SUCCESS);
}

/* A receive's message of another length than posted: the ranks passed
 * different counts. req->arrived says how long (the executor names it);
 * UCX writes no further than the posted length. */
static hcomm_status_t ucx_length_differs(hcomm_tp_req_t *req, ucs_status_t st,
                                         size_t posted, size_t length) {
    if (st == UCS_ERR_MESSAGE_TRUNCATED)
        req->arrived = length > posted ? length : HCOMM_TP_LONGER;
    else
        req->arrived = length;
    return HCOMM_ERR_MISMATCH;
}

static void ucx_recv_cb(void *ucx_req, ucs_status_t st,
                        const ucp_tag_recv_info_t *info, void *user_data) {
    hcomm_tp_req_t *req = user_data;
    size_t expect = (size_t)(req->handle_store >> HCOMM_UCX_RS_LEN_SHIFT);

    if (__builtin_expect(st != UCS_OK || info->length != expect, 0)) {
        hcomm_status_t why = HCOMM_ERR_TRANSPORT;
        if (st == UCS_OK || st == UCS_ERR_MESSAGE_TRUNCATED)
            why = ucx_length_differs(req, st, expect, info->length);
        else
            hcomm_debug("ucx receive completed with %s", ucs_status_string(st));
        ucx_req_finish(req, ucx_req, why);
        return;
    }
    ucx_req_finish(req, ucx_req, HCOMM_SUCCESS);
}

static hcomm_status_t ucx_bad_peer(const hcomm_tp_t *tp, int peer,
                                   hcomm_tp_req_t *req) {
    req->status = HCOMM_ERR_INVALID_ARG;
    req->done = 1;
    return hcomm_error(HCOMM_ERR_INVALID_ARG,
                       "ucx: peer %d out of range (communicator size %d)", peer,
                       tp->size);
}

static hcomm_status_t ucx_post_failed(hcomm_tp_req_t *req, const char *what,
                                      int peer, size_t bytes, ucs_status_t st) {
    req->status = HCOMM_ERR_TRANSPORT;
    req->done = 1;
    return hcomm_error(HCOMM_ERR_TRANSPORT, "ucx: %s of %zu bytes, peer %d: %s",
                       what, bytes, peer, ucs_status_string(st));
}

/* What HCOMM knows of the buffer spares UCX finding out (and keeps staging
 * buffers off its CUDA paths: tp.h). */
static inline void ucx_set_memory_type(ucp_request_param_t *p, uint8_t mem) {
    if (mem == HCOMM_TP_MEM_UNKNOWN) return;
    p->op_attr_mask |= UCP_OP_ATTR_FIELD_MEMORY_TYPE;
    p->memory_type =
        mem == HCOMM_TP_MEM_CUDA ? UCS_MEMORY_TYPE_CUDA : UCS_MEMORY_TYPE_HOST;
}

/* The rail of a message of bytes between peer and this rank, sent by
 * sender (ucx_rails.h), -1 for the process-wide worker; kept in req->part
 * for cancel. */
static inline int ucx_rail(const hcomm_ucx_comm_t *c, int peer, int sender,
                           hcomm_tag_t tag, size_t bytes) {
    if (__builtin_expect(!c->nrails, 1) ||
        !c->rail_eps[(size_t)peer * (size_t)c->nrails])
        return -1;
    return hcomm_ucx_rail_of(c->pattern, tag, bytes, c->rail_near[sender]);
}

static inline ucp_worker_h ucx_req_worker(const hcomm_ucx_comm_t *c,
                                          const hcomm_tp_req_t *req) {
    return req->part >= 0 ? c->rail_worker[req->part] : c->worker;
}

static hcomm_status_t ucx_isend(hcomm_tp_t *tp, int peer, const void *buf,
                                size_t bytes, hcomm_tag_t tag,
                                hcomm_tp_req_t *req) {
    hcomm_ucx_comm_t *c = tp->priv;
    ucp_request_param_t p;
    ucs_status_ptr_t sp;

    if (__builtin_expect((unsigned)peer >= (unsigned)tp->size, 0))
        return ucx_bad_peer(tp, peer, req);

    req->done = 0;
    req->status = HCOMM_SUCCESS;
    req->handle = NULL;
    req->handle_store = 0;

    req->part = ucx_rail(c, peer, tp->rank, tag, bytes);

    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p.cb.send = ucx_send_cb;
    p.user_data = req;
    ucx_set_memory_type(&p, req->mem);
    sp = ucp_tag_send_nbx(
        req->part < 0 ? c->eps[peer]
                      : c->rail_eps[(size_t)peer * c->nrails + req->part],
        buf, bytes, c->send_base | hcomm_ucx_tag_low(tag), &p);
    if (__builtin_expect(sp == NULL, 1)) { /* completed immediately */
        req->done = 1;
        return HCOMM_SUCCESS;
    }
    if (__builtin_expect(UCS_PTR_IS_ERR(sp), 0))
        return ucx_post_failed(req, "send", peer, bytes, UCS_PTR_STATUS(sp));
    req->handle = sp;
    return HCOMM_SUCCESS;
}

static hcomm_status_t ucx_irecv(hcomm_tp_t *tp, int peer, void *buf,
                                size_t bytes, hcomm_tag_t tag,
                                hcomm_tp_req_t *req) {
    hcomm_ucx_comm_t *c = tp->priv;
    ucp_request_param_t p;
    ucp_tag_recv_info_t info;
    ucs_status_ptr_t sp;

    if (__builtin_expect((unsigned)peer >= (unsigned)tp->size, 0))
        return ucx_bad_peer(tp, peer, req);

    req->done = 0;
    req->status = HCOMM_SUCCESS;
    req->handle = NULL;
    req->handle_store = (uint64_t)bytes << HCOMM_UCX_RS_LEN_SHIFT;
    req->part = ucx_rail(c, peer, peer, tag, bytes);

    p.op_attr_mask = c->recv_attr;
    p.cb.recv = ucx_recv_cb;
    p.user_data = req;
    ucx_set_memory_type(&p, req->mem);
    p.recv_info.tag_info = &info;
    sp = ucp_tag_recv_nbx(
        ucx_req_worker(c, req), buf, bytes,
        c->recv_base | ((ucp_tag_t)(uint32_t)peer << HCOMM_UCX_SRC_SHIFT) |
            hcomm_ucx_tag_low(tag),
        HCOMM_UCX_TAG_MASK_FULL, &p);
    if (sp == NULL) { /* matched an unexpected eager message (UCX >= 1.16) */
        /* a length that differs fails the request, not the posting */
        if (__builtin_expect(info.length != bytes, 0))
            req->status = ucx_length_differs(req, UCS_OK, bytes, info.length);
        req->done = 1;
        return HCOMM_SUCCESS;
    }
    if (__builtin_expect(UCS_PTR_IS_ERR(sp), 0)) {
        if (UCS_PTR_STATUS(sp) == UCS_ERR_MESSAGE_TRUNCATED) {
            req->status = ucx_length_differs(req, UCS_ERR_MESSAGE_TRUNCATED,
                                             bytes, HCOMM_TP_LONGER);
            req->done = 1;
            return HCOMM_SUCCESS;
        }
        return ucx_post_failed(req, "receive", peer, bytes, UCS_PTR_STATUS(sp));
    }
    /* without immediate completion the callback may already have run (and
     * freed sp): then done is 1 and handle is never used */
    req->handle = sp;
    return HCOMM_SUCCESS;
}

/* The executor progresses the worker once per pass, and the callbacks set
 * done: nothing is left to do per request. */
static void ucx_test(hcomm_tp_t *tp, hcomm_tp_req_t *req) {
    (void)tp;
    (void)req;
}

static void ucx_progress(hcomm_tp_t *tp) {
    const hcomm_ucx_comm_t *c = tp->priv;
    ucp_worker_progress(c->worker);
    for (int r = 0; r < c->nrails; r++)
        ucp_worker_progress(c->rail_worker[r]);
}

/* Progresses until req->done or about HCOMM_UCX_CANCEL_WAIT_S passed. */
static void ucx_wait_bounded(ucp_worker_h worker, hcomm_tp_req_t *req) {
    double start = 0;
    unsigned i;

    for (i = 0; !__atomic_load_n(&req->done, __ATOMIC_ACQUIRE); i++) {
        ucp_worker_progress(worker);
        if ((i & 63) == 0) {
            double now = hcomm_now_seconds();
            if (i == 0)
                start = now;
            else if (now - start > HCOMM_UCX_CANCEL_WAIT_S)
                return;
        }
    }
}

/* On return req->done is 1 and UCX will not touch *req again. A receive that
 * has not matched yet is cancelled at once (status HCOMM_ERR_TRANSPORT). UCX
 * 1.13 cannot cancel a send or a receive whose data is already moving; those
 * get up to HCOMM_UCX_CANCEL_WAIT_S of progress to finish, and are then
 * abandoned: the UCX request is released without its callback (so *req is
 * free), but UCX may still read the send buffer or write the receive buffer
 * until the operation ends on its own. */
static void ucx_cancel(hcomm_tp_t *tp, hcomm_tp_req_t *req) {
    ucp_worker_h worker = ucx_req_worker(tp->priv, req);
    uint64_t old;
    void *h;

    if (__atomic_load_n(&req->done, __ATOMIC_ACQUIRE)) return;
    old = __atomic_fetch_or(&req->handle_store,
                            (uint64_t)HCOMM_UCX_RS_CANCELING, __ATOMIC_ACQ_REL);
    if (old & HCOMM_UCX_RS_DONE) {
        /* the callback is finishing on another thread and frees the UCX
         * request itself; done follows within a few instructions */
        while (!__atomic_load_n(&req->done, __ATOMIC_ACQUIRE))
            ucp_worker_progress(worker);
        return;
    }
    /* the UCX request is ours to free now: the callback will not free it */
    h = req->handle;
    ucp_request_cancel(worker, h); /* receives: completes it as CANCELED */
    ucx_wait_bounded(worker, req);
    /* completed: returns it to UCX; still running: UCX releases it when it
     * ends and no longer calls our callback (both under the worker lock) */
    ucp_request_free(h);
    if (!__atomic_load_n(&req->done, __ATOMIC_ACQUIRE)) {
        hcomm_warn("ucx: abandoning a request that could not be cancelled; "
                   "its buffer may still be accessed until it ends");
        __atomic_add_fetch(&hcomm_ucx_abandoned, 1, __ATOMIC_RELAXED);
        req->status = HCOMM_ERR_TRANSPORT;
        __atomic_store_n(&req->done, 1, __ATOMIC_RELEASE);
    }
}

const hcomm_tp_ops_t hcomm_ucx_ops = {
    .name = "ucx",
    .isend = ucx_isend,
    .irecv = ucx_irecv,
    .test = ucx_test,
    .progress = ucx_progress,
    .cancel = ucx_cancel,
    .destroy = hcomm_ucx_tp_destroy, /* in ucx_tp.c, next to create */
};

hcomm_status_t hcomm_ucx_describe_ep(hcomm_tp_t *tp, int peer, char *buf,
                                     size_t len) {
    hcomm_ucx_comm_t *c;
    char *text = NULL;
    size_t n = 0;
    FILE *f;

    if (tp == NULL || tp->ops != &hcomm_ucx_ops || buf == NULL || len == 0 ||
        peer < 0 || peer >= tp->size)
        return hcomm_error(HCOMM_ERR_INVALID_ARG, "ucx: describe_ep arguments");
    c = tp->priv;
    f = open_memstream(&text, &n);
    if (f == NULL)
        return hcomm_error(HCOMM_ERR_NO_MEMORY, "ucx: open_memstream");
    ucp_ep_print_info(c->eps[peer], f);
    if (fclose(f) != 0 || text == NULL) {
        free(text);
        return hcomm_error(HCOMM_ERR_NO_MEMORY, "ucx: describe_ep output");
    }
    if (n >= len) n = len - 1;
    memcpy(buf, text, n);
    buf[n] = '\0';
    free(text);
    return HCOMM_SUCCESS;
}
