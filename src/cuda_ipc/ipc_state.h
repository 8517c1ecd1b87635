/* What a communicator's CUDA IPC path holds (ipc.c and ipc_call.c). */
#ifndef HCOMM_CUDA_IPC_STATE_H
#define HCOMM_CUDA_IPC_STATE_H

#include "core/gpu.h"
#include "cuda_ipc/ipc.h"
#include "cuda_ipc/ipc_cards.h"

#include <stdint.h>

struct hcomm_ipc {
    struct hcomm_gpu_ctx *ctx;
    size_t area_bytes; /* each of the two data areas */
    /* Every rank's workspace as mapped here (this rank's own at rank). */
    char *ws[HCOMM_IPC_MAX_RANKS];
    /* Host memory the kernels see: the abort word, the status words and
     * the blocks' done words (HCOMM_IPC_MAX_BLOCKS of them). */
    void *words;
    volatile uint32_t *abort_host, *abort_dev;
    unsigned long long *status_host, *status_dev, *done_host, *done_dev;
    uint64_t epoch;      /* the next round's */
    int one_gpu;         /* every rank's workspace is on this rank's GPU */
    int resident_blocks; /* the most blocks a kernel may have (ipc.c) */
    int early_launch;    /* kernels may start early (ipc_kernels.cuh) here */
    hcomm_ipc_cards_t *cards; /* the peers' ordinary buffers mapped here */
    /* After a stream-ordered kernel, an event after it on the caller's
     * stream (which the caller may destroy: no handle to it is kept);
     * NULL when the last kernel ran on the communicator's own stream. */
    void *last;
    /* The id of the stream last was recorded on (hcomm_gpu_stream_uid; 0
     * unknown): a call on that same stream is ordered after it already. */
    unsigned long long last_stream;
    uint64_t ticket;   /* calls initialised so far */
    uint64_t launched; /* and launched: in that order, always */
};

/* The failure a kernel left in the status words, as a status with its
 * message; the communicator is broken from then on. */
hcomm_status_t hcomm_ipc_failure(hcomm_comm_impl_t *c, const char *what);

#endif
