/* The CUDA IPC collectives' kernels (ipc_kernels.cu), callable from C.
 *
 * Every rank of a node has a workspace in device memory that every peer
 * maps (ipc.h): flags, then two data areas used by alternate rounds. A call
 * moves its data in rounds ("pieces") of at most area_bytes; in each round
 * a rank's blocks copy their share of its input into its data area, raise
 * their flag in every peer's workspace, wait for the peers' flags, then
 * read the peers' areas directly. Block b of every rank handles the same
 * elements, so it waits only for block b of its peers, and no host or grid
 * synchronisation is on the way.
 *
 * Why alternate areas are enough: a rank writes an area again two rounds
 * later, after it waited in the round between for every peer's flag, which
 * each peer raised only once done with the earlier round (in the same
 * launch, its block b read the area; in an earlier launch, the stream ran
 * it to the end first). Epochs grow with every round of every call, so a
 * flag never needs resetting. */
#ifndef HCOMM_CUDA_IPC_KERNELS_H
#define HCOMM_CUDA_IPC_KERNELS_H

#include "hcomm_types.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HCOMM_IPC_MAX_RANKS 16 /* a GPU node's ranks; also the max sources */
#define HCOMM_IPC_MAX_BLOCKS 64
#define HCOMM_IPC_PHASES 2
#define HCOMM_IPC_THREADS 512

/* Flags at the start of every workspace: [phase][block][source rank]. */
#define HCOMM_IPC_FLAG_BYTES                                                   \
    ((size_t)HCOMM_IPC_PHASES * HCOMM_IPC_MAX_BLOCKS * HCOMM_IPC_MAX_RANKS *   \
     sizeof(uint64_t))

typedef enum {
    HCOMM_IPC_ONESHOT = 0, /* allreduce: each rank reduces all of it */
    HCOMM_IPC_TWOSHOT,     /* allreduce: reduce-scatter, then allgather */
    HCOMM_IPC_REDUCE_SCATTER,
    HCOMM_IPC_ALLGATHER,
    HCOMM_IPC_BCAST,
    HCOMM_IPC_NKINDS
} hcomm_ipc_kind_t;

/* What a failed kernel leaves in the status words (host-mapped memory). */
enum { HCOMM_IPC_OK = 0, HCOMM_IPC_TIMED_OUT = 1, HCOMM_IPC_ABORTED = 2 };

typedef struct {
    /* Every rank's workspace as this process maps it (own one included). */
    char *ws[HCOMM_IPC_MAX_RANKS];
    int rank, nranks, root;
    int one_gpu; /* every workspace is on this GPU: flags of its scope */
    hcomm_ipc_kind_t kind;
    const void *in;
    void *out;
    /* Elements: allreduce and broadcast, the whole buffer; reduce-scatter
     * and allgather, one rank's block. */
    size_t count;
    size_t piece; /* elements of count per round */
    size_t area_bytes;
    uint64_t epoch0; /* the first round's epoch (> every earlier one) */
    int blocks;
    int divisor; /* HCOMM_AVG: the rank count, else 0 */
    /* Two-shot on registered buffers (hcomm_mem_alloc_device) on every
     * rank: no workspace, one round, every rank's input and output as
     * mapped here. */
    int direct;
    const void *peer_in[HCOMM_IPC_MAX_RANKS];
    void *peer_out[HCOMM_IPC_MAX_RANKS];
    uint64_t timeout_ns; /* a wait longer than this fails the call */
    /* Host-mapped: abort[0] set by the host stops every wait; status[0] is
     * the first failure, status[1] the epoch it happened in, status[2] a
     * mask of the ranks waited for in vain. */
    volatile uint32_t *abort;
    unsigned long long *status;
    /* Host-mapped, NULL on a stream-ordered call: block b writes done_value
     * into done[b] once all its writes are visible, so that a waiting host
     * sees the end sooner than through an event. */
    unsigned long long *done;
    unsigned long long done_value;
    /* The launch's, not the kernel's: the kernel may be started while the
     * one before it on its stream ends (programmatic dependent launch);
     * it waits for that end before it touches memory. */
    int early;
} hcomm_ipc_kargs_t;

#ifdef __CUDACC__
#define HCOMM_IPC_HOST_DEVICE __host__ __device__
#else
#define HCOMM_IPC_HOST_DEVICE
#endif

/* [lo, hi) of len elements: part i of parts, in whole vectors of vw
 * elements so that every part of an aligned buffer stays aligned. How a
 * round splits into chunks (two-shot: part r of n for rank r) and chunks
 * into blocks (part b of the grid for block b of every rank). */
static inline HCOMM_IPC_HOST_DEVICE void hcomm_ipc_part(size_t len, int parts,
                                                        int i, size_t vw,
                                                        size_t *lo,
                                                        size_t *hi) {
    size_t per = (len + (size_t)parts - 1) / (size_t)parts;
    per = (per + vw - 1) / vw * vw;
    *lo = (size_t)i * per < len ? (size_t)i * per : len;
    *hi = *lo + per < len ? *lo + per : len;
}

/* [lo, hi) of a round of len elements (at most piece): part b of parts of
 * chunk c of chunks, laid out as in a full round of piece elements, then
 * cut at len. A call's last, shorter round thus gives block b of a rank
 * the same places in the areas as its full rounds, or fewer: what their
 * reuse needs, since block b waits for block b of its peers only (a
 * partition of len itself moved the last round's parts onto places other
 * blocks of the peers could still be reading, two rounds before). */
static inline HCOMM_IPC_HOST_DEVICE void
hcomm_ipc_slice(size_t piece, size_t len, int chunks, int c, int parts, int b,
                size_t vw, size_t *lo, size_t *hi) {
    size_t c0, c1, p0, p1;
    hcomm_ipc_part(piece, chunks, c, vw, &c0, &c1);
    hcomm_ipc_part(c1 - c0, parts, b, vw, &p0, &p1);
    *lo = c0 + p0 < len ? c0 + p0 : len;
    *hi = c0 + p1 < len ? c0 + p1 : len;
}

/* Where a two-shot round keeps its result: after its input, 256-byte
 * aligned. */
static inline HCOMM_IPC_HOST_DEVICE size_t
hcomm_ipc_result_offset(size_t piece, size_t esize) {
    return (piece * esize + 255) / 256 * 256;
}

/* Whether the kernels, as built, may be launched early (a->early). */
int hcomm_ipc_kernels_start_early(void);

/* Enqueues the collective on stream. Returns a cudaError_t (0: enqueued). */
int hcomm_ipc_kernel_launch(const hcomm_ipc_kargs_t *a, hcomm_dtype_t dtype,
                            hcomm_op_t op, void *stream);

#ifdef __cplusplus
}
#endif
#endif
