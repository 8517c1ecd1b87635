/* GPUs inside a node: the CUDA IPC path, the GPU twin of src/shm_tp/.
 *
 * A communicator whose ranks share a node gets, on its first call on device
 * memory that this path takes, a workspace per rank in device memory
 * (ipc_kernels.h says what is in it), which every peer maps once through a
 * CUDA IPC handle and keeps until the communicator is freed. AllReduce,
 * ReduceScatter, AllGather and Broadcast then run as one kernel each that
 * reads the peers' workspaces directly and synchronises through flags in
 * them: no message, no host round trip between the GPUs. Calls of one
 * communicator run in order on one stream (what the flags' reuse needs):
 * a stream-ordered call enqueues its kernel on the caller's stream, made to
 * follow the communicator's previous one when that ran on another stream.
 *
 * Before the kernel the ranks agree on the call on the shared segment (the
 * descriptor compare of src/shm_tp/shm_check.c), so mismatched counts,
 * types, operations, roots or memory kinds fail on every rank before any
 * kernel reads a peer's memory. A kernel waits at most the communicator's
 * timeout for a peer's flag, then ends and names the peers it waited for. */
#ifndef HCOMM_CUDA_IPC_H
#define HCOMM_CUDA_IPC_H

#include "core/comm.h"
#include "cuda_ipc/ipc_kernels.h"
#include "shm_tp/shm.h"

typedef struct hcomm_ipc hcomm_ipc_t;

/* One call on the IPC path, from agreement to its kernel's end. */
typedef struct {
    hcomm_comm_impl_t *comm;
    hcomm_ipc_kargs_t k;
    hcomm_dtype_t dtype;
    hcomm_op_t op;
    void *user_stream; /* a stream-ordered call's stream, else NULL */
    void *done;        /* an event after the kernel, or NULL: see k.done */
    uint64_t ticket;   /* its place in the communicator's order */
    int launched;
    unsigned polls;
    /* a one-shot AllReduce from HCOMM_CUDA_IPC_DIRECT_MIN, one-shot not
     * forced: two-shot in place wherever every buffer can be reached */
    int twoshot_in_place;
    /* AllReduce: every rank's registered buffers, filled in by the
     * agreement round (this rank's own by hcomm_ipc_op_init). */
    hcomm_shm_devreg_t devreg[HCOMM_IPC_MAX_RANKS];
    /* and their cards (ipc_cards.h), last: hcomm_ipc_op_init clears the
     * rest of the call alone */
    hcomm_shm_devtail_t devtail[HCOMM_IPC_MAX_RANKS];
} hcomm_ipc_op_t;

/* Whether a call on device memory of coll, with bytes per rank's block (as
 * hcomm_shm_select counts them), takes this path on c. Depends only on
 * what every rank agrees on, so every rank decides alike. */
int hcomm_ipc_applies(const hcomm_comm_impl_t *c, hcomm_coll_t coll,
                      size_t bytes);

/* Makes the workspaces on the first call (collective: every rank is in the
 * same call, which the shared segment agreed on first). On failure on any
 * rank, every rank turns the path off for c and the call takes the plans:
 * returns 0 then, 1 when the path is ready. */
int hcomm_ipc_ready(hcomm_comm_impl_t *c, struct hcomm_gpu_ctx *ctx);

/* Prepares a call (launched by the first hcomm_ipc_op_progress, once the
 * agreement round has filled in op->devreg). */
hcomm_status_t hcomm_ipc_op_init(hcomm_ipc_op_t *op, hcomm_comm_impl_t *c,
                                 hcomm_coll_t coll, const void *in, void *out,
                                 size_t count, hcomm_dtype_t dtype,
                                 hcomm_op_t rop, int root, void *user_stream,
                                 int cpu_visible);
/* Launches the kernel, then tests for its end: HCOMM_ERR_IN_PROGRESS,
 * HCOMM_SUCCESS, or the failure the kernel reported. A stream-ordered call
 * is done once launched. */
hcomm_status_t hcomm_ipc_op_progress(hcomm_ipc_op_t *op);
/* What an unfinished call waits for, for the timeout message. */
void hcomm_ipc_op_describe(const hcomm_ipc_op_t *op, char *out, size_t len);

/* A failure an earlier stream-ordered kernel reported (SUCCESS if none). */
hcomm_status_t hcomm_ipc_check(hcomm_comm_impl_t *c);
/* Stops every wait of c's kernels (hcomm_comm_abort; any thread). */
void hcomm_ipc_abort(hcomm_comm_impl_t *c);
/* Waits for c's kernels, unmaps the peers, frees (hcomm_comm_free). */
void hcomm_ipc_free(hcomm_comm_impl_t *c);
/* Registered device memory (ipc_mem.c). alloc is collective, after the
 * ranks agreed on bytes; its memory is mapped by every peer where the path
 * can run. free returns 0 when ptr is not such an allocation. find gives
 * the region id (0: none) and offset of this rank's [p, p + len); peer, a
 * peer's address of [off, off + len) in a region (NULL if not shared or
 * outside it). */
hcomm_status_t hcomm_ipc_mem_alloc(hcomm_comm_impl_t *c, size_t bytes,
                                   void **ptr);
int hcomm_ipc_mem_free(hcomm_comm_impl_t *c, const void *ptr);
void hcomm_ipc_mem_free_all(hcomm_comm_impl_t *c);
void hcomm_ipc_mem_find(const hcomm_comm_impl_t *c, const void *p, size_t len,
                        uint32_t *id, uint64_t *off);
char *hcomm_ipc_mem_peer(const hcomm_comm_impl_t *c, uint32_t id, int peer,
                         uint64_t off, size_t len);

/* Bytes of device memory c's workspace holds (hcomm_info). */
size_t hcomm_ipc_bytes(const hcomm_comm_impl_t *c);

#endif
