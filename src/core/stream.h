/* Stream-ordered calls (hcomm_*_stream): the call starts once the work the
 * program enqueued on its stream before it has run, and the stream waits
 * for the call before running what comes after, without the host blocking.
 *
 *   input   an event recorded on the program's stream at the call; the
 *           request is not advanced before it has completed;
 *   output  the stream waits (cuStreamWaitValue32, or a one-thread kernel
 *           where the driver lacks stream memory operations) until a word of
 *           pinned host memory reaches the call's value, which HCOMM writes
 *           when the request ends (with an error too: the communicator is
 *           then broken and hcomm_comm_get_async_error says why).
 * A progress thread, started by the first such call, drives these requests
 * (the program may never call HCOMM again before synchronising its stream).
 */
#ifndef HCOMM_CORE_STREAM_H
#define HCOMM_CORE_STREAM_H

#include "hcomm.h"

#include <stdint.h>

struct hcomm_gpu_ctx;

typedef struct hcomm_stream_op {
    void *user_stream;
    void *in_event;
    int in_ready;
    struct hcomm_gpu_ctx *ctx;
    uint32_t slot;  /* index of the pinned word */
    uint32_t value; /* the stream passes once the word reaches it */
} hcomm_stream_op_t;

#ifdef HAVE_CUDA
/* Records the input event on stream (NULL: the legacy default stream). */
hcomm_status_t hcomm_stream_op_begin(hcomm_stream_op_t *op,
                                     struct hcomm_gpu_ctx *ctx, void *stream);
/* Enqueues the stream's wait for the op's end. */
hcomm_status_t hcomm_stream_op_enqueue_wait(hcomm_stream_op_t *op);
/* Whether the input is there (polls the event once). */
int hcomm_stream_op_input_ready(hcomm_stream_op_t *op);
/* Lets the program's stream go on; the op is then over. */
void hcomm_stream_op_end(hcomm_stream_op_t *op);
/* Starts the progress thread if needed and returns once it has made
 * device's context current (which may wait for the GPU: before any stream
 * waits for it). */
hcomm_status_t hcomm_stream_thread_ready(int device);
/* Wakes the progress thread. */
hcomm_status_t hcomm_stream_kick(void);
/* Stops the thread (hcomm_finalize, after every request has ended). */
void hcomm_stream_shutdown(void);
#else
static inline void hcomm_stream_shutdown(void) {}
#endif

#endif
