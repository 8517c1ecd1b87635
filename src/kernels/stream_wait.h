/* A stream made to wait for the host (stream_wait.cu): the stream-ordered
 * calls that HCOMM's own thread runs (core/stream_worker.c) hold the
 * caller's stream until their result is in place. */
#ifndef HCOMM_KERNELS_STREAM_WAIT_H
#define HCOMM_KERNELS_STREAM_WAIT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Enqueues on stream a kernel of one thread that returns once the 64-bit
 * word at flag (mapped pinned host memory, written by the host) is at
 * least value. Returns a cudaError_t (0: enqueued). */
int hcomm_cuda_wait_flag(const volatile uint64_t *flag, uint64_t value,
                         void *stream);

#ifdef __cplusplus
}
#endif
#endif
