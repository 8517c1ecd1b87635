/* Plan fragments that several algorithms share. */
#include "coll/algos.h"

hcomm_status_t hcomm_plan_local_copy(const hcomm_plan_args_t *args,
                                     hcomm_plan_t *plan) {
    if (!args->inplace)
        hcomm_plan_copy(plan, hcomm_ref(HCOMM_BUF_RECV, 0),
                        hcomm_ref(HCOMM_BUF_SEND, 0), args->count, -1, -1);
    return plan->oom ? HCOMM_ERR_NO_MEMORY : HCOMM_SUCCESS;
}

void hcomm_plan_exchange(hcomm_plan_t *plan, int peer, hcomm_ref_t src,
                         size_t scount, hcomm_ref_t dst, size_t rcount,
                         size_t chunk, uint16_t tag_base, int dep,
                         int *send_idx, int *recv_idx) {
    size_t most = scount > rcount ? scount : rcount;
    size_t nchunks = (most + chunk - 1) / chunk;
    for (size_t c = 0; c < nchunks; c++) {
        size_t off = c * chunk;
        size_t sn =
            off < scount ? (scount - off < chunk ? scount - off : chunk) : 0;
        size_t rn =
            off < rcount ? (rcount - off < chunk ? rcount - off : chunk) : 0;
        uint16_t tag = (uint16_t)(tag_base + c);
        int r = hcomm_plan_recv(
            plan, peer, tag, hcomm_ref(dst.buf, dst.offset + off), rn, dep, -1);
        int s = hcomm_plan_send(
            plan, peer, tag, hcomm_ref(src.buf, src.offset + off), sn, dep, -1);
        if (send_idx) send_idx[c] = s;
        if (recv_idx) recv_idx[c] = r;
    }
}

hcomm_fold_t hcomm_fold(int n, int rank) {
    hcomm_fold_t f;
    f.p = 1;
    while (f.p * 2 <= n)
        f.p *= 2;
    f.extra = n - f.p;
    if (rank < 2 * f.extra)
        f.vrank = rank % 2 ? rank / 2 : -1;
    else
        f.vrank = rank - f.extra;
    return f;
}

size_t hcomm_coll_send_count(hcomm_coll_t coll, int size, int rank, int root,
                             size_t count) {
    switch (coll) {
    case HCOMM_COLL_REDUCE_SCATTER:
    case HCOMM_COLL_ALLTOALL:
        return (size_t)size * count;
    case HCOMM_COLL_SCATTER:
        return rank == root ? (size_t)size * count : 0;
    case HCOMM_COLL_BARRIER:
    case HCOMM_COLL_RECV:
        return 0;
    default:
        return count;
    }
}

size_t hcomm_coll_recv_count(hcomm_coll_t coll, int size, int rank, int root,
                             size_t count) {
    switch (coll) {
    case HCOMM_COLL_ALLGATHER:
    case HCOMM_COLL_ALLTOALL:
        return (size_t)size * count;
    case HCOMM_COLL_GATHER:
        return rank == root ? (size_t)size * count : 0;
    case HCOMM_COLL_REDUCE:
        return rank == root ? count : 0;
    case HCOMM_COLL_BARRIER:
    case HCOMM_COLL_SEND:
        return 0;
    default:
        return count;
    }
}

/* The end of the furthest block of counts at displs (packed when displs is
 * NULL). */
static size_t blocks_extent(const size_t *counts, const size_t *displs, int n) {
    size_t end = 0, at = 0;
    for (int i = 0; i < n; i++) {
        size_t from = displs ? displs[i] : at;
        if (counts[i] && from + counts[i] > end) end = from + counts[i];
        at += counts[i];
    }
    return end;
}

size_t hcomm_coll_v_extent(hcomm_coll_t coll, const hcomm_vspec_t *v, int size,
                           int rank, int send) {
    switch (coll) {
    case HCOMM_COLL_ALLGATHERV:
        return send ? v->rcounts[rank]
                    : blocks_extent(v->rcounts, v->rdispls, size);
    case HCOMM_COLL_REDUCE_SCATTERV:
        return send ? blocks_extent(v->rcounts, NULL, size) : v->rcounts[rank];
    case HCOMM_COLL_ALLTOALLV:
        return send ? blocks_extent(v->scounts, v->sdispls, size)
                    : blocks_extent(v->rcounts, v->rdispls, size);
    default:
        return 0;
    }
}
