/* Stream-ordered calls that the plans run: HCOMM's own thread runs them, so
 * that the call returns at once, as NCCL's do.
 *
 * The calling thread enqueues on the caller's stream the copies of the
 * call's device buffers into pinned host staging, an event (the inputs are
 * there once it has passed), a kernel that holds the stream until the call
 * has run (kernels/stream_wait.h), and the copy of the result back. The
 * worker takes calls in the order they were made, waits for each one's
 * event, runs it as a blocking call on the staging (host memory), then
 * releases the stream.
 *
 * While a stream is held, nothing the worker does may wait for the whole
 * device, or the held stream would never end. Hence host memory only: UCX's
 * CUDA transports may wait so (their IPC cache calls cuIpcCloseMemHandle),
 * and so may allocating pinned or device memory (CUDA's implicit
 * synchronisation), which the calling thread does instead; the pools keep
 * what the worker frees (core/gpu.h).
 *
 * Every other call on a communicator with queued calls first waits for them
 * (hcomm_stream_drain): with MPI_THREAD_MULTIPLE, where the transports take
 * calls from several threads, those on the same communicator; otherwise
 * every queued call, so that only one thread uses the transports. */
#ifndef HCOMM_CORE_STREAM_WORKER_H
#define HCOMM_CORE_STREAM_WORKER_H

#include "core/comm.h"

/* This thread is the worker, running a queued call. */
int hcomm_stream_in_worker(void);

/* Whether a stream-ordered call on c may be queued now: the transport
 * takes calls from the worker (UCX; MPI only with MPI_THREAD_MULTIPLE), and
 * no non-blocking call is in flight (the worker's waits would move it, on
 * device memory through UCX's CUDA transports). */
int hcomm_stream_queue_ok(const hcomm_comm_impl_t *c);

/* Queues run(arg) on the worker behind the work enqueued on stream (of GPU
 * device, the calling thread's current one) so far, and holds stream until it
 * has run; then enqueues the copy of result_bytes from result_src (the staging)
 * to result_dst. done(arg) follows once that copy has ended, whatever run
 * returned. A failure of run makes c fail its later calls. */
hcomm_status_t hcomm_stream_queue(hcomm_comm_impl_t *c, void *stream,
                                  int device, hcomm_status_t (*run)(void *),
                                  void (*done)(void *), void *arg,
                                  void *result_dst, const void *result_src,
                                  size_t result_bytes);

/* Waits until the calls queued on c (or on any communicator; see above)
 * have run. c NULL: every queued call. The worker itself never waits. */
void hcomm_stream_drain(const hcomm_comm_impl_t *c);

/* Runs what is queued and ends the worker (hcomm_finalize). */
void hcomm_stream_worker_stop(void);

#endif
