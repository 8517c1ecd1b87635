/* The cases of the collective tests: a call's shape, the buffers each rank
 * passes (honouring the in-place forms of hcomm.h) with the result it must
 * get, computed here from reference.h, and the check of that result. Shared
 * by the host tests (test_colls.c) and the GPU ones (test/gpu). */
#include "coll_cases.h"
#include "mpi_check.h"
#include "reference.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int case_reduces(hcomm_coll_t c) {
    return c == HCOMM_COLL_ALLREDUCE || c == HCOMM_COLL_REDUCE_SCATTER ||
           c == HCOMM_COLL_REDUCE;
}
int case_rooted(hcomm_coll_t c) {
    return c == HCOMM_COLL_BCAST || c == HCOMM_COLL_REDUCE ||
           c == HCOMM_COLL_GATHER || c == HCOMM_COLL_SCATTER;
}

/* Rank r's element at global index i of the data it starts with. */
static void input_at(const shape_t *s, int r, size_t i, void *buf, size_t j) {
    int64_t v =
        ref_input(s->t, case_reduces(s->coll) ? s->op : HCOMM_SUM, r, i);
    ref_store(s->t, buf, j, (double)v, v);
}

void case_prepare(const shape_t *s, int n, int r, bufs_t *b) {
    size_t es = hcomm_dtype_size(s->t), c = s->count, nc = (size_t)n * c;
    size_t rcount = hcomm_coll_recv_count(s->coll, n, r, s->root, c);
    memset(b, 0, sizeof(*b));
    b->bytes = nc * es + 1;
    b->mem_send = malloc(nc * es + 1);
    b->mem_recv = malloc(nc * es + 1);
    b->want = malloc(nc * es + 1);
    b->send = b->mem_send;
    b->recv = b->mem_recv;
    memset(b->recv, 0x5a, nc * es + 1);
    b->want_count = rcount;
    switch (s->coll) {
    case HCOMM_COLL_ALLGATHER:
    case HCOMM_COLL_GATHER:
        for (size_t i = 0; i < c; i++)
            input_at(s, r, r * c + i, b->send, i);
        for (int q = 0; q < n && rcount; q++)
            for (size_t i = 0; i < c; i++)
                input_at(s, q, q * c + i, b->want, q * c + i);
        if (s->inplace && rcount) {
            b->send = b->recv + (size_t)r * c * es;
            memcpy(b->send, b->mem_send, c * es);
        }
        break;
    case HCOMM_COLL_REDUCE_SCATTER:
        for (size_t i = 0; i < nc; i++)
            input_at(s, r, i, b->send, i);
        for (size_t i = 0; i < c; i++)
            ref_expect(s->t, s->op, n, r * c, i, b->want);
        if (s->inplace) b->recv = b->send + (size_t)r * c * es;
        break;
    case HCOMM_COLL_SCATTER:
        if (r == s->root)
            for (size_t i = 0; i < nc; i++)
                input_at(s, r, i, b->send, i);
        for (size_t i = 0; i < c; i++)
            input_at(s, s->root, r * c + i, b->want, i);
        if (s->inplace && r == s->root) b->recv = b->send + (size_t)r * c * es;
        break;
    case HCOMM_COLL_BCAST:
        if (r == s->root)
            for (size_t i = 0; i < c; i++)
                input_at(s, r, i, b->recv, i);
        for (size_t i = 0; i < c; i++)
            input_at(s, s->root, i, b->want, i);
        b->send = b->recv;
        break;
    case HCOMM_COLL_ALLTOALL:
        for (size_t i = 0; i < nc; i++)
            input_at(s, r, i, b->send, i);
        for (int q = 0; q < n; q++)
            for (size_t i = 0; i < c; i++)
                input_at(s, q, r * c + i, b->want, q * c + i);
        if (s->inplace) {
            memcpy(b->recv, b->send, nc * es);
            b->send = b->recv;
        }
        break;
    default: /* allreduce, reduce */
        for (size_t i = 0; i < c; i++)
            input_at(s, r, i, b->send, i);
        for (size_t i = 0; i < c && rcount; i++)
            ref_expect(s->t, s->op, n, 0, i, b->want);
        if (s->inplace && rcount) {
            memcpy(b->recv, b->send, c * es);
            b->send = b->recv;
        }
        break;
    }
}

hcomm_status_t case_start(const shape_t *s, bufs_t *b, hcomm_comm_t comm,
                          hcomm_request_t *req) {
    size_t c = s->count;
    switch (s->coll) {
    case HCOMM_COLL_ALLREDUCE:
        return hcomm_iallreduce(b->send, b->recv, c, s->t, s->op, comm, req);
    case HCOMM_COLL_ALLGATHER:
        return hcomm_iallgather(b->send, b->recv, c, s->t, comm, req);
    case HCOMM_COLL_REDUCE_SCATTER:
        return hcomm_ireduce_scatter(b->send, b->recv, c, s->t, s->op, comm,
                                     req);
    case HCOMM_COLL_BCAST:
        return hcomm_ibroadcast(b->recv, c, s->t, s->root, comm, req);
    case HCOMM_COLL_REDUCE:
        return hcomm_ireduce(b->send, b->recv, c, s->t, s->op, s->root, comm,
                             req);
    case HCOMM_COLL_ALLTOALL:
        return hcomm_ialltoall(b->send, b->recv, c, s->t, comm, req);
    case HCOMM_COLL_GATHER:
        return hcomm_igather(b->send, b->recv, c, s->t, s->root, comm, req);
    case HCOMM_COLL_SCATTER:
        return hcomm_iscatter(b->send, b->recv, c, s->t, s->root, comm, req);
    default:
        return hcomm_ibarrier(comm, req);
    }
}

void case_describe(const shape_t *s, char *out, size_t len) {
    snprintf(out, len, "%s[%s] %s %s count %zu root %d %s",
             hcomm_coll_name(s->coll), s->algo, ref_dtype_names[s->t],
             case_reduces(s->coll) ? ref_op_names[s->op] : "-", s->count,
             s->root, s->inplace ? "in place" : "out of place");
}

void case_finish(const shape_t *s, bufs_t *b, hcomm_status_t st) {
    case_finish_at(s, b, st, "");
}

void case_finish_at(const shape_t *s, bufs_t *b, hcomm_status_t st,
                    const char *where) {
    char what[240];
    case_describe(s, what, sizeof(what) - 80);
    strncat(what, where, 79);
    CHECK(st == HCOMM_SUCCESS, "%s: %s (%s)", what, hcomm_strerror(st),
          hcomm_last_error());
    size_t es = hcomm_dtype_size(s->t), bad = 0, first = 0;
    for (size_t i = 0; i < b->want_count; i++)
        if (memcmp(b->recv + i * es, b->want + i * es, es) != 0 && bad++ == 0)
            first = i;
    CHECK(bad == 0, "%s: %zu wrong elements, first at %zu", what, bad, first);
    free(b->mem_send);
    free(b->mem_recv);
    free(b->want);
}
