/* A CUDA IPC call's shape (ipc_shape.h): plain arithmetic, built and
 * unit-tested without CUDA. */
#include "cuda_ipc/ipc_shape.h"

#include <string.h>

size_t hcomm_ipc_round_bytes(hcomm_ipc_kind_t kind, int nranks, size_t piece,
                             size_t esize) {
    switch (kind) {
    case HCOMM_IPC_TWOSHOT:
        return hcomm_ipc_result_offset(piece, esize) + piece * esize;
    case HCOMM_IPC_REDUCE_SCATTER:
        return (size_t)nranks * piece * esize;
    default:
        return piece * esize;
    }
}

hcomm_ipc_kind_t hcomm_ipc_kind(hcomm_coll_t coll, size_t bytes,
                                const char *algo, size_t oneshot_max) {
    switch (coll) {
    case HCOMM_COLL_REDUCE_SCATTER:
        return HCOMM_IPC_REDUCE_SCATTER;
    case HCOMM_COLL_ALLGATHER:
        return HCOMM_IPC_ALLGATHER;
    case HCOMM_COLL_BCAST:
        return HCOMM_IPC_BCAST;
    default:
        if (strcmp(algo, "oneshot") == 0) return HCOMM_IPC_ONESHOT;
        if (strcmp(algo, "twoshot") == 0) return HCOMM_IPC_TWOSHOT;
        return bytes <= oneshot_max ? HCOMM_IPC_ONESHOT : HCOMM_IPC_TWOSHOT;
    }
}

void hcomm_ipc_shape(hcomm_ipc_kind_t kind, int nranks, size_t count,
                     size_t esize, size_t area_bytes, long long max_blocks,
                     hcomm_ipc_shape_t *out) {
    size_t vw = 16 / esize;
    /* The most elements, in whole vectors, whose round fits in an area: a
     * two-shot round holds its input, then its result 256-byte aligned. */
    size_t per_elem = hcomm_ipc_round_bytes(kind, nranks, 1, esize);
    if (kind == HCOMM_IPC_TWOSHOT) per_elem = 2 * esize;
    size_t piece = (area_bytes - 256) / per_elem / vw * vw;
    out->piece = piece < count ? piece : count;
    out->rounds = out->piece ? (count + out->piece - 1) / out->piece : 0;
    out->blocks = hcomm_ipc_blocks(
        hcomm_ipc_round_bytes(kind, nranks, out->piece, esize), max_blocks);
}

int hcomm_ipc_blocks(size_t round_bytes, long long max_blocks) {
    size_t cap = max_blocks < 1                      ? 1
                 : max_blocks > HCOMM_IPC_MAX_BLOCKS ? HCOMM_IPC_MAX_BLOCKS
                                                     : (size_t)max_blocks;
    size_t blocks = (round_bytes + HCOMM_IPC_BYTES_PER_BLOCK - 1) /
                    HCOMM_IPC_BYTES_PER_BLOCK;
    size_t small = (round_bytes + HCOMM_IPC_SMALL_BYTES_PER_BLOCK - 1) /
                   HCOMM_IPC_SMALL_BYTES_PER_BLOCK;
    if (small > HCOMM_IPC_SMALL_BLOCKS) small = HCOMM_IPC_SMALL_BLOCKS;
    if (blocks < small) blocks = small;
    if (blocks > cap) blocks = cap;
    return blocks < 1 ? 1 : (int)blocks;
}

int hcomm_ipc_resident_blocks(int n, const int *sms, const int *gpu_of) {
    int most = HCOMM_IPC_MAX_BLOCKS;
    for (int p = 0; p < n; p++) {
        int sharing = 0;
        for (int q = 0; q < n; q++)
            sharing += gpu_of[q] == gpu_of[p];
        if (sms[p] / sharing < most) most = sms[p] / sharing;
    }
    return most < 1 ? 1 : most;
}
