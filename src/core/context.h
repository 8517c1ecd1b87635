/* Process-wide state: set up by hcomm_init, torn down by hcomm_finalize. */
#ifndef HCOMM_CORE_CONTEXT_H
#define HCOMM_CORE_CONTEXT_H

#include "core/pool.h"

#include <mpi.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#define HCOMM_MAX_COMM_IDS 65536 /* ids fill 16 bits of the UCX tag */

typedef struct {
    atomic_int initialized; /* hcomm_init calls not yet finalized */
    int own_mpi;            /* we called MPI_Init, so we finalize it */
    int thread_multiple;
    int mpi_funneled;        /* only MPI's main thread may call it */
    MPI_Comm probe_comm;     /* see hcomm_mpi_progress */
    int ucx_ok;              /* the UCX transport initialised */
    int cuda_staging_forced; /* HCOMM_CUDA_STAGING=1 */
    long spin_count;
    hcomm_pool_t pool;
    pthread_mutex_t lock; /* comm ids, handle table, init/finalize */
    uint8_t id_used[HCOMM_MAX_COMM_IDS / 8];
} hcomm_context_t;

extern hcomm_context_t hcomm_ctx;

/* Lets MPI's progress engine run while a call waits (where the calling
 * thread may call MPI): a peer may need this rank's pending MPI sends to
 * move before it can join the collective this rank waits in. */
void hcomm_mpi_progress(void);
/* Set while this thread is inside MPI's progress engine already (our probe,
 * the preload's progress callback): hcomm_mpi_progress does nothing then,
 * as MPI's engine must not be entered again from within itself. */
extern _Thread_local int hcomm_in_mpi_progress;

static inline int hcomm_is_initialized(void) {
    return atomic_load_explicit(&hcomm_ctx.initialized, memory_order_acquire) >
           0;
}

#endif
