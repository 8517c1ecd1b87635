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
 * Collectives on one communicator must be called in the same order on every
 * rank. Calls on different communicators may come from different threads.
 */
#ifndef HCOMM_H
#define HCOMM_H

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

typedef enum {
    HCOMM_SUCCESS = 0,
    HCOMM_ERR_INVALID_ARG,     /* a NULL buffer, a bad count, root, ... */
    HCOMM_ERR_INVALID_DTYPE,   /* not a hcomm_dtype_t */
    HCOMM_ERR_INVALID_OP,      /* not a hcomm_op_t, or not valid for the type */
    HCOMM_ERR_INVALID_COMM,    /* NULL, freed or never created */
    HCOMM_ERR_OVERFLOW,        /* count * element size does not fit */
    HCOMM_ERR_NOT_INITIALIZED, /* called before hcomm_init or after finalize */
    HCOMM_ERR_NO_MEMORY,
    HCOMM_ERR_TRANSPORT, /* UCX or MPI reported a failure */
    HCOMM_ERR_TIMEOUT,   /* a peer did not answer within HCOMM_TIMEOUT */
    HCOMM_ERR_UNSUPPORTED,
    HCOMM_ERR_INTERNAL,
    HCOMM_ERR_IN_PROGRESS, /* hcomm_test: the request is not complete yet */
    HCOMM_ERR_MISMATCH     /* ranks passed different counts, types, operations,
                            * roots or collectives to one call; the communicator
                            * is broken (free it) */
} hcomm_status_t;

typedef enum {
    HCOMM_INT8 = 0,
    HCOMM_UINT8,
    HCOMM_INT32,
    HCOMM_UINT32,
    HCOMM_INT64,
    HCOMM_UINT64,
    HCOMM_FLOAT16, /* IEEE binary16, reduced in fp32, rounded to nearest even */
    HCOMM_BFLOAT16,
    HCOMM_FLOAT32,
    HCOMM_FLOAT64,
    HCOMM_DTYPE_COUNT
} hcomm_dtype_t;

/* Integer sums and products wrap around like C unsigned arithmetic.
 * avg is the sum divided by the rank count (integers: truncated). */
typedef enum {
    HCOMM_SUM = 0,
    HCOMM_PROD,
    HCOMM_MAX,
    HCOMM_MIN,
    HCOMM_AVG,
    HCOMM_OP_COUNT
} hcomm_op_t;

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
/* Frees what hcomm_mem_alloc returned on comm (NULL is fine). Not
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
