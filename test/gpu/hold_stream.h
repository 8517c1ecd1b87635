/* A host function that holds the stream it is enqueued on, as a program's
 * long kernel would: until hold_released is set, or for at most
 * *(double *)arg seconds. */
#ifndef HCOMM_TEST_GPU_HOLD_STREAM_H
#define HCOMM_TEST_GPU_HOLD_STREAM_H

#include <cuda_runtime_api.h>
#include <mpi.h>
#include <stdatomic.h>

static atomic_int hold_released;

static void CUDART_CB hold_stream(void *arg) {
    double limit = *(const double *)arg, t0 = MPI_Wtime();
    while (!atomic_load(&hold_released) && MPI_Wtime() - t0 < limit)
        ;
}

#endif
