/* The transport interface: what the executor needs to move bytes between the
 * ranks of one communicator. Implemented by UCX (src/ucx_tp), MPI
 * (src/compat_mpi/mpi_tp.c) and, for unit tests, an in-process loopback. */
#ifndef HCOMM_CORE_TP_H
#define HCOMM_CORE_TP_H

#include "hcomm.h"

#include <stddef.h>
#include <stdint.h>

/* What a message is, independent of how a transport encodes it. Every
 * transport must keep messages of one (peer, tag) in posting order. */
typedef enum { HCOMM_TAG_COLL = 0, HCOMM_TAG_P2P = 1 } hcomm_tag_kind_t;

typedef struct {
    uint8_t kind;  /* hcomm_tag_kind_t */
    uint32_t seq;  /* collective sequence number on the communicator */
    uint32_t step; /* message number inside one plan, or the user's tag */
} hcomm_tag_t;

/* One outstanding send or receive. The transport sets done (and status on
 * failure) when it completes; the owner keeps it at a fixed address until
 * then. */
typedef struct hcomm_tp_req {
    volatile int done;
    hcomm_status_t status;
    /* Set by the owner before isend/irecv: what the buffer is, when known
     * (hcomm_tp_mem_t), so the transport need not find out. */
    uint8_t mem;
    void *handle;          /* transport-private */
    uint64_t handle_store; /* transport-private (an MPI_Request, UCX state) */
    /* transport-private (MPI: a receive's length, peer, tag and part) */
    size_t posted;
    int peer, tag, part;
    /* A receive whose message had another length than posted completes
     * with HCOMM_ERR_MISMATCH and this length (HCOMM_TP_LONGER: longer, by
     * how much unknown); the executor names it. */
    size_t arrived;
} hcomm_tp_req_t;
#define HCOMM_TP_LONGER SIZE_MAX

/* HCOMM_TP_MEM_HOST matters with UCX built with CUDA: memory it would
 * otherwise take for CUDA memory (pinned staging) then never goes through
 * its CUDA paths, some of which wait for the whole GPU (cuIpcCloseMemHandle
 * in its IPC cache), while a program's stream may wait for the call. */
typedef enum {
    HCOMM_TP_MEM_UNKNOWN = 0, /* the transport finds out */
    HCOMM_TP_MEM_HOST,        /* CPU-accessible memory */
    HCOMM_TP_MEM_CUDA         /* device memory (transports with device_ok) */
} hcomm_tp_mem_t;

struct hcomm_tp;

typedef struct hcomm_tp_ops {
    const char *name;
    hcomm_status_t (*isend)(struct hcomm_tp *tp, int peer, const void *buf,
                            size_t bytes, hcomm_tag_t tag, hcomm_tp_req_t *req);
    hcomm_status_t (*irecv)(struct hcomm_tp *tp, int peer, void *buf,
                            size_t bytes, hcomm_tag_t tag, hcomm_tp_req_t *req);
    /* Brings req up to date (after progress); then req->done tells whether
     * it has completed. */
    void (*test)(struct hcomm_tp *tp, hcomm_tp_req_t *req);
    /* Drives the transport; the executor calls it once per pass. */
    void (*progress)(struct hcomm_tp *tp);
    /* Gives up on a request that will not complete (timeout, error). */
    /* On return req->done is 1 and the transport never touches *req again
     * (UCX may still read or write the buffer of a transfer it could not
     * stop). */
    void (*cancel)(struct hcomm_tp *tp, hcomm_tp_req_t *req);
    void (*destroy)(struct hcomm_tp *tp);
} hcomm_tp_ops_t;

/* One transport instance serves one communicator. */
typedef struct hcomm_tp {
    const hcomm_tp_ops_t *ops;
    void *priv;
    int rank, size;
    int device_ok; /* carries CUDA device memory (UCX with CUDA support) */
    /* The plans' chunk on host memory, unless HCOMM_CHUNK_SIZE is set:
     * at most this many bytes (0: no bound). */
    size_t chunk_max;
} hcomm_tp_t;

#endif
