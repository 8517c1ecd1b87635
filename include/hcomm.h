/*
 * HCOMM: collective communication for distributed training and HPC.
 *
 * The only header users include. Every call returns hcomm_status_t;
 * HCOMM_SUCCESS is 0. A failing call leaves a message for
 * hcomm_last_error() (per thread) and never prints on stdout or exits.
 *
 * Conventions (those of NCCL and MPI):
 *  - counts are in elements of the given data type, never bytes;
 *  - allreduce, broadcast, reduce: count is the whole buffer;
 *  - allgather: count is what each rank contributes, the receive buffer holds
 *    size * count elements, rank r's block at offset r * count;
 *  - reduce_scatter: count is each rank's block of the result; the send
 *    buffer holds size * count elements;
 *  - alltoall: count is the block each rank sends to each peer; both buffers
 *    hold size * count elements;
 *  - in place (NCCL's forms): allreduce, reduce (at the root) and alltoall:
 *    sendbuf == recvbuf; allgather: sendbuf == recvbuf + rank * count;
 *    reduce_scatter: recvbuf == sendbuf + rank * count; gather at the root:
 *    sendbuf == recvbuf + root * count; scatter at the root:
 *    recvbuf == sendbuf + root * count (offsets in elements). Buffers that
 *    overlap in any other way are refused with HCOMM_ERR_INVALID_ARG.
 *
 * Buffers may be host memory or, built with CUDA, GPU memory (device,
 * managed or pinned; found per call). The blocking and hcomm_i* forms read
 * device buffers when called: work that writes them must have completed
 * (the *_stream forms wait for their stream's earlier work instead).
 *
 * Collectives on one communicator must be called in the same order on every
 * rank. Calls on different communicators may come from different threads.
 */
#ifndef HCOMM_H
#define HCOMM_H

#include "hcomm_types.h"

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The library is built with hidden visibility; these are its exports. */
#if defined(__GNUC__)
#define HCOMM_API __attribute__((visibility("default")))
#else
#define HCOMM_API
#endif

#define HCOMM_VERSION_MAJOR 0
#define HCOMM_VERSION_MINOR 1
#define HCOMM_VERSION_PATCH 0

typedef struct hcomm_comm *hcomm_comm_t;       /* opaque handle */
typedef struct hcomm_request *hcomm_request_t; /* opaque handle */

#define HCOMM_COMM_NULL ((hcomm_comm_t)0)
#define HCOMM_REQUEST_NULL ((hcomm_request_t)0)

/* --- setup ------------------------------------------------------------ */

/* Calls MPI_Init_thread itself when the program has not initialised MPI,
 * and then finalises MPI in hcomm_finalize. Reference counted; the first
 * call is collective over MPI_COMM_WORLD, like MPI_Init. */
HCOMM_API hcomm_status_t hcomm_init(int *argc, char ***argv);
HCOMM_API hcomm_status_t hcomm_finalize(void);
HCOMM_API int hcomm_initialized(void);

HCOMM_API const char *hcomm_strerror(hcomm_status_t status);
/* The message of the calling thread's last failed call ("" if none). */
HCOMM_API const char *hcomm_last_error(void);
HCOMM_API const char *hcomm_version(void);
HCOMM_API size_t
hcomm_dtype_size(hcomm_dtype_t dtype); /* 0 for an unknown type */

/* --- communicators (collective over the ranks involved) --------------- */

HCOMM_API hcomm_status_t hcomm_comm_create(MPI_Comm mpi_comm,
                                           hcomm_comm_t *comm);
/* Ranks with the same color form a communicator, ordered by key then rank.
 * color < 0 (HCOMM_UNDEFINED) yields HCOMM_COMM_NULL. */
#define HCOMM_UNDEFINED (-1)
HCOMM_API hcomm_status_t hcomm_comm_split(hcomm_comm_t comm, int color, int key,
                                          hcomm_comm_t *newcomm);
HCOMM_API hcomm_status_t hcomm_comm_dup(hcomm_comm_t comm,
                                        hcomm_comm_t *newcomm);
/* Sets *comm to HCOMM_COMM_NULL. Not collective. */
HCOMM_API hcomm_status_t hcomm_comm_free(hcomm_comm_t *comm);
/* Seconds this communicator's calls may wait for their peers (0: back to
 * HCOMM_TIMEOUT). */
HCOMM_API hcomm_status_t hcomm_comm_set_timeout(hcomm_comm_t comm,
                                                double seconds);
/* Makes the calls in flight on comm, from any thread, fail with
 * HCOMM_ERR_ABORTED, and every later call too: the communicator is
 * broken (free it). Not collective; safe from another thread. */
HCOMM_API hcomm_status_t hcomm_comm_abort(hcomm_comm_t comm);
HCOMM_API hcomm_status_t hcomm_comm_rank(hcomm_comm_t comm, int *rank);
HCOMM_API hcomm_status_t hcomm_comm_size(hcomm_comm_t comm, int *size);

/* --- registered memory ------------------------------------------------- */

/* bytes of memory that peers on the node can read in place (the analogue
 * of NCCL's symmetric memory): collective over comm, every rank passing the
 * same bytes (else HCOMM_ERR_INVALID_ARG on all). Large collectives whose
 * buffers lie in it read peers' data directly, with no copy through the
 * kernel. On a communicator without a shared segment (several nodes, one
 * rank, HCOMM_SHM_SLOT_SIZE=0) it is ordinary memory. Any buffer works with
 * every collective; registration only makes them faster. bytes 0: *ptr is
 * NULL. */
HCOMM_API hcomm_status_t hcomm_mem_alloc(hcomm_comm_t comm, size_t bytes,
                                         void **ptr);
/* bytes of device memory (on the calling thread's current CUDA device)
 * that peers on the node map when it is allocated: collective, the same
 * bytes on every rank, as hcomm_mem_alloc. An AllReduce whose buffers lie
 * in it on every rank then runs on the CUDA IPC path with no copy and no
 * workspace: each rank reduces its share of every rank's input and writes
 * it into every rank's output. Where that path cannot run (several nodes,
 * HCOMM_CUDA_IPC=0) it is plain device memory. HCOMM_ERR_UNSUPPORTED when
 * built without CUDA. Freed with hcomm_mem_free. */
HCOMM_API hcomm_status_t hcomm_mem_alloc_device(hcomm_comm_t comm, size_t bytes,
                                                void **ptr);
/* Frees what hcomm_mem_alloc or hcomm_mem_alloc_device returned on comm
 * (NULL is fine). Not
 * collective; no call using the memory may be in flight on any rank. */
HCOMM_API hcomm_status_t hcomm_mem_free(hcomm_comm_t comm, void *ptr);

/* --- collectives ------------------------------------------------------ */

HCOMM_API hcomm_status_t hcomm_allreduce(const void *sendbuf, void *recvbuf,
                                         size_t count, hcomm_dtype_t dtype,
                                         hcomm_op_t op, hcomm_comm_t comm);
HCOMM_API hcomm_status_t hcomm_iallreduce(const void *sendbuf, void *recvbuf,
                                          size_t count, hcomm_dtype_t dtype,
                                          hcomm_op_t op, hcomm_comm_t comm,
                                          hcomm_request_t *request);

HCOMM_API hcomm_status_t hcomm_allgather(const void *sendbuf, void *recvbuf,
                                         size_t count, hcomm_dtype_t dtype,
                                         hcomm_comm_t comm);
HCOMM_API hcomm_status_t hcomm_iallgather(const void *sendbuf, void *recvbuf,
                                          size_t count, hcomm_dtype_t dtype,
                                          hcomm_comm_t comm,
                                          hcomm_request_t *request);

HCOMM_API hcomm_status_t hcomm_reduce_scatter(const void *sendbuf,
                                              void *recvbuf, size_t count,
                                              hcomm_dtype_t dtype,
                                              hcomm_op_t op, hcomm_comm_t comm);
HCOMM_API hcomm_status_t hcomm_ireduce_scatter(const void *sendbuf,
                                               void *recvbuf, size_t count,
                                               hcomm_dtype_t dtype,
                                               hcomm_op_t op, hcomm_comm_t comm,
                                               hcomm_request_t *request);

HCOMM_API hcomm_status_t hcomm_broadcast(void *buf, size_t count,
                                         hcomm_dtype_t dtype, int root,
                                         hcomm_comm_t comm);
HCOMM_API hcomm_status_t hcomm_ibroadcast(void *buf, size_t count,
                                          hcomm_dtype_t dtype, int root,
                                          hcomm_comm_t comm,
                                          hcomm_request_t *request);

/* recvbuf matters on the root only. */
HCOMM_API hcomm_status_t hcomm_reduce(const void *sendbuf, void *recvbuf,
                                      size_t count, hcomm_dtype_t dtype,
                                      hcomm_op_t op, int root,
                                      hcomm_comm_t comm);
HCOMM_API hcomm_status_t hcomm_ireduce(const void *sendbuf, void *recvbuf,
                                       size_t count, hcomm_dtype_t dtype,
                                       hcomm_op_t op, int root,
                                       hcomm_comm_t comm,
                                       hcomm_request_t *request);

HCOMM_API hcomm_status_t hcomm_alltoall(const void *sendbuf, void *recvbuf,
                                        size_t count, hcomm_dtype_t dtype,
                                        hcomm_comm_t comm);
HCOMM_API hcomm_status_t hcomm_ialltoall(const void *sendbuf, void *recvbuf,
                                         size_t count, hcomm_dtype_t dtype,
                                         hcomm_comm_t comm,
                                         hcomm_request_t *request);

/* count per rank; recvbuf (size * count) matters on the root only. */
HCOMM_API hcomm_status_t hcomm_gather(const void *sendbuf, void *recvbuf,
                                      size_t count, hcomm_dtype_t dtype,
                                      int root, hcomm_comm_t comm);
HCOMM_API hcomm_status_t hcomm_igather(const void *sendbuf, void *recvbuf,
                                       size_t count, hcomm_dtype_t dtype,
                                       int root, hcomm_comm_t comm,
                                       hcomm_request_t *request);
/* count per rank; sendbuf (size * count) matters on the root only. */
HCOMM_API hcomm_status_t hcomm_scatter(const void *sendbuf, void *recvbuf,
                                       size_t count, hcomm_dtype_t dtype,
                                       int root, hcomm_comm_t comm);
HCOMM_API hcomm_status_t hcomm_iscatter(const void *sendbuf, void *recvbuf,
                                        size_t count, hcomm_dtype_t dtype,
                                        int root, hcomm_comm_t comm,
                                        hcomm_request_t *request);

/* Variable counts (MPI's v-forms), counts and displacements in elements,
 * arrays of the communicator's size, read before the call returns (the
 * non-blocking forms too). Every rank passes the same recvcounts to
 * allgatherv and reduce_scatterv; alltoallv's sendcounts[j] on rank i
 * equals recvcounts[i] on rank j (else HCOMM_ERR_MISMATCH).
 *  - allgatherv: rank i's recvcounts[i] elements land at displs[i] of
 *    every rank's receive buffer; the send buffer holds recvcounts[rank].
 *    In place: sendbuf == recvbuf + displs[rank].
 *  - alltoallv: sendcounts[j] elements at sdispls[j] go to rank j, which
 *    puts them at its rdispls[i]. In place: sendbuf == recvbuf (the blocks
 *    sent are the receive buffer's, recvcounts[j] at rdispls[j]; sendcounts
 *    and sdispls are not read).
 *  - reduce_scatterv: the send buffer holds sum(recvcounts) elements, rank
 *    i's block of the reduction (recvcounts[i]) follows the blocks of ranks
 *    below i; it lands in rank i's receive buffer. In place: recvbuf ==
 *    sendbuf + (the sum of recvcounts below rank). */
HCOMM_API hcomm_status_t hcomm_allgatherv(const void *sendbuf, void *recvbuf,
                                          const size_t *recvcounts,
                                          const size_t *displs,
                                          hcomm_dtype_t dtype,
                                          hcomm_comm_t comm);
HCOMM_API hcomm_status_t hcomm_iallgatherv(const void *sendbuf, void *recvbuf,
                                           const size_t *recvcounts,
                                           const size_t *displs,
                                           hcomm_dtype_t dtype,
                                           hcomm_comm_t comm,
                                           hcomm_request_t *request);
HCOMM_API hcomm_status_t
hcomm_alltoallv(const void *sendbuf, const size_t *sendcounts,
                const size_t *sdispls, void *recvbuf, const size_t *recvcounts,
                const size_t *rdispls, hcomm_dtype_t dtype, hcomm_comm_t comm);
HCOMM_API hcomm_status_t hcomm_ialltoallv(
    const void *sendbuf, const size_t *sendcounts, const size_t *sdispls,
    void *recvbuf, const size_t *recvcounts, const size_t *rdispls,
    hcomm_dtype_t dtype, hcomm_comm_t comm, hcomm_request_t *request);
HCOMM_API hcomm_status_t hcomm_reduce_scatterv(
    const void *sendbuf, void *recvbuf, const size_t *recvcounts,
    hcomm_dtype_t dtype, hcomm_op_t op, hcomm_comm_t comm);
HCOMM_API hcomm_status_t hcomm_ireduce_scatterv(
    const void *sendbuf, void *recvbuf, const size_t *recvcounts,
    hcomm_dtype_t dtype, hcomm_op_t op, hcomm_comm_t comm,
    hcomm_request_t *request);

HCOMM_API hcomm_status_t hcomm_barrier(hcomm_comm_t comm);
HCOMM_API hcomm_status_t hcomm_ibarrier(hcomm_comm_t comm,
                                        hcomm_request_t *request);

/* Point-to-point. Messages with the same (peer, tag) arrive in order.
 * tag is 0 .. HCOMM_TAG_MAX. */
#define HCOMM_TAG_MAX 0xffff
HCOMM_API hcomm_status_t hcomm_send(const void *buf, size_t count,
                                    hcomm_dtype_t dtype, int peer, int tag,
                                    hcomm_comm_t comm);
HCOMM_API hcomm_status_t hcomm_recv(void *buf, size_t count,
                                    hcomm_dtype_t dtype, int peer, int tag,
                                    hcomm_comm_t comm);
HCOMM_API hcomm_status_t hcomm_isend(const void *buf, size_t count,
                                     hcomm_dtype_t dtype, int peer, int tag,
                                     hcomm_comm_t comm,
                                     hcomm_request_t *request);
HCOMM_API hcomm_status_t hcomm_irecv(void *buf, size_t count,
                                     hcomm_dtype_t dtype, int peer, int tag,
                                     hcomm_comm_t comm,
                                     hcomm_request_t *request);

/* --- compression inside AllReduce ------------------------------------- */

/* What AllReduce sends: float32 sum and avg only (any other type or op
 * with compression on fails with HCOMM_ERR_UNSUPPORTED), host memory.
 *  - BF16, FP16: each rank's values go out as 16-bit numbers once, are
 *    summed in fp32 by the rank that owns their chunk, and the sums go out
 *    as 16-bit numbers once: two roundings, whatever the rank count, half
 *    the bytes of float32.
 *  - TOPK: each rank sends the density * count values of largest magnitude
 *    (with their indices); the others count as zero.
 *  - ONEBIT: each rank sends the signs of its values and one scale (their
 *    mean magnitude) per chunk; the chunk's owner sums, compresses the sum
 *    the same way and sends it back: 1/32 of the bytes.
 * TOPK and ONEBIT are lossy: with a state (error feedback) what a call did
 * not send is added to the next call's input, and the result converges as
 * if nothing had been dropped.
 *  - AUTO: the first call of each size (to the power of two) on a
 *    communicator times BF16, and the lossy scheme in the options' lossy
 *    field if any, against no compression, every rank taking the slowest
 *    rank's times, and returns the uncompressed result; later calls of that
 *    size take the fastest, a lossier one only where it is 20% faster than
 *    the best less lossy one (BF16 against none, the lossy scheme against
 *    both). The log (HCOMM_DEBUG=info) says what it measured and picked. */
typedef enum {
    HCOMM_COMPRESS_NONE = 0,
    HCOMM_COMPRESS_BF16,
    HCOMM_COMPRESS_FP16,
    HCOMM_COMPRESS_TOPK,
    HCOMM_COMPRESS_ONEBIT,
    HCOMM_COMPRESS_AUTO,
    HCOMM_COMPRESS_COUNT
} hcomm_compress_t;

/* Error-feedback state of one tensor (count float32 values) on one
 * communicator: residuals that its next calls add back. */
typedef struct hcomm_compress_state *hcomm_compress_state_t;

typedef struct {
    hcomm_compress_t compress;
    double density;               /* TOPK: the fraction kept, in (0, 1] */
    hcomm_compress_state_t state; /* TOPK, ONEBIT: NULL for none */
    /* AUTO: the lossy scheme it may also pick (TOPK at density, or ONEBIT,
     * each with state), or NONE: BF16 at most */
    hcomm_compress_t lossy;
} hcomm_allreduce_opts_t;

/* hcomm_allreduce with options; opts NULL takes the communicator's
 * default, HCOMM_COMPRESS. Every rank must pass the same options. */
HCOMM_API hcomm_status_t hcomm_allreduce_ex(const void *sendbuf, void *recvbuf,
                                            size_t count, hcomm_dtype_t dtype,
                                            hcomm_op_t op, hcomm_comm_t comm,
                                            const hcomm_allreduce_opts_t *opts);
/* Not collective. reset zeroes the residuals (a restart). */
HCOMM_API hcomm_status_t hcomm_compress_state_create(
    hcomm_comm_t comm, size_t count, hcomm_compress_state_t *state);
HCOMM_API hcomm_status_t
hcomm_compress_state_reset(hcomm_compress_state_t state);
HCOMM_API hcomm_status_t
hcomm_compress_state_free(hcomm_compress_state_t *state);

/* --- stream-ordered calls (GPU) --------------------------------------- */

/* The same collectives ordered on a CUDA stream (stream: a cudaStream_t,
 * NULL for the legacy default stream): the call starts once the work
 * enqueued on stream before it has run, and work enqueued after it sees its
 * result. Buffers may be device, managed or host memory. On device memory
 * the call returns without waiting (the README's "GPU memory" says where it
 * waits instead); a failure found after it returned makes the
 * communicator's next call fail. HCOMM built without CUDA returns
 * HCOMM_ERR_UNSUPPORTED. */
HCOMM_API hcomm_status_t hcomm_allreduce_stream(
    const void *sendbuf, void *recvbuf, size_t count, hcomm_dtype_t dtype,
    hcomm_op_t op, hcomm_comm_t comm, void *stream);
HCOMM_API hcomm_status_t hcomm_allgather_stream(const void *sendbuf,
                                                void *recvbuf, size_t count,
                                                hcomm_dtype_t dtype,
                                                hcomm_comm_t comm,
                                                void *stream);
HCOMM_API hcomm_status_t hcomm_reduce_scatter_stream(
    const void *sendbuf, void *recvbuf, size_t count, hcomm_dtype_t dtype,
    hcomm_op_t op, hcomm_comm_t comm, void *stream);
HCOMM_API hcomm_status_t hcomm_broadcast_stream(void *buf, size_t count,
                                                hcomm_dtype_t dtype, int root,
                                                hcomm_comm_t comm,
                                                void *stream);
HCOMM_API hcomm_status_t hcomm_reduce_stream(const void *sendbuf, void *recvbuf,
                                             size_t count, hcomm_dtype_t dtype,
                                             hcomm_op_t op, int root,
                                             hcomm_comm_t comm, void *stream);
HCOMM_API hcomm_status_t hcomm_alltoall_stream(const void *sendbuf,
                                               void *recvbuf, size_t count,
                                               hcomm_dtype_t dtype,
                                               hcomm_comm_t comm, void *stream);
HCOMM_API hcomm_status_t hcomm_gather_stream(const void *sendbuf, void *recvbuf,
                                             size_t count, hcomm_dtype_t dtype,
                                             int root, hcomm_comm_t comm,
                                             void *stream);
HCOMM_API hcomm_status_t hcomm_scatter_stream(const void *sendbuf,
                                              void *recvbuf, size_t count,
                                              hcomm_dtype_t dtype, int root,
                                              hcomm_comm_t comm, void *stream);
HCOMM_API hcomm_status_t hcomm_send_stream(const void *buf, size_t count,
                                           hcomm_dtype_t dtype, int peer,
                                           int tag, hcomm_comm_t comm,
                                           void *stream);
HCOMM_API hcomm_status_t hcomm_recv_stream(void *buf, size_t count,
                                           hcomm_dtype_t dtype, int peer,
                                           int tag, hcomm_comm_t comm,
                                           void *stream);

/* --- requests --------------------------------------------------------- */

/* Completes the request, frees it and sets *request to HCOMM_REQUEST_NULL.
 * Returns the status of the operation. Waiting on HCOMM_REQUEST_NULL is a
 * no-op that succeeds. */
HCOMM_API hcomm_status_t hcomm_wait(hcomm_request_t *request);
/* HCOMM_SUCCESS (and frees, like hcomm_wait) when complete,
 * HCOMM_ERR_IN_PROGRESS while running, or the operation's error. */
HCOMM_API hcomm_status_t hcomm_test(hcomm_request_t *request);
/* Waits for all; returns the first error met, after waiting for the rest. */
HCOMM_API hcomm_status_t hcomm_waitall(size_t n, hcomm_request_t *requests);

#ifdef __cplusplus
}
#endif
#endif /* HCOMM_H */
