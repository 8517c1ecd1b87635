/* MPI_THREAD_MULTIPLE: three threads, each with its own communicator,
 * calling collectives at the same time (the first call of each also makes
 * its HCOMM communicator, concurrently with the others). */
#define PU_MAIN
#include "preload_util.h"

#include <pthread.h>

#define NTHREADS 3
#define ITERS 200

static MPI_Comm comms[NTHREADS];
static long failed[NTHREADS];
static uint64_t digests[NTHREADS];

static void *worker(void *arg) {
    int t = (int)(intptr_t)arg, n;
    MPI_Comm comm = comms[t];
    static _Thread_local int v[1000];
    for (int it = 0; it < ITERS; it++) {
        n = it % 3 == 0 ? 1000 : 7;
        for (int i = 0; i < n; i++)
            v[i] = (t + 1) * pu_rank + it + i;
        if (it % 4 == 1) {
            MPI_Request req;
            if (MPI_Iallreduce(MPI_IN_PLACE, v, n, MPI_INT, MPI_SUM, comm,
                               &req) != MPI_SUCCESS ||
                MPI_Wait(&req, MPI_STATUS_IGNORE) != MPI_SUCCESS)
                failed[t]++;
        } else if (MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_INT, MPI_SUM, comm) !=
                   MPI_SUCCESS) {
            failed[t]++;
        }
        for (int i = 0; i < n; i++)
            if (v[i] !=
                (t + 1) * pu_size * (pu_size - 1) / 2 + pu_size * (it + i))
                failed[t]++;
        digests[t] = pu_hash(v, sizeof(int) * (size_t)n, digests[t]);
        int x = pu_rank == 0 ? it * (t + 1) : -1;
        if (MPI_Bcast(&x, 1, MPI_INT, 0, comm) != MPI_SUCCESS ||
            x != it * (t + 1))
            failed[t]++;
    }
    return NULL;
}

int main(int argc, char **argv) {
    int provided = 0;
    pthread_t th[NTHREADS];
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    PMPI_Comm_rank(MPI_COMM_WORLD, &pu_rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &pu_size);
    if (provided < MPI_THREAD_MULTIPLE) {
        if (pu_rank == 0) printf("MPI_THREAD_MULTIPLE not provided: skipped\n");
        MPI_Finalize();
        return 0;
    }
    for (int t = 0; t < NTHREADS; t++)
        PU_OK(MPI_Comm_dup(MPI_COMM_WORLD, &comms[t]));
    for (int t = 0; t < NTHREADS; t++)
        pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t);
    for (int t = 0; t < NTHREADS; t++) {
        pthread_join(th[t], NULL);
        PU_CHECK(failed[t] == 0, "thread %d: %ld wrong", t, failed[t]);
        pu_report(digests[t], "thread %d", t);
        PU_OK(MPI_Comm_free(&comms[t]));
    }
    int rc = pu_finish("test_preload_threads");
    MPI_Finalize();
    return rc;
}
