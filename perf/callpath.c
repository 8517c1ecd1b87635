/* hcomm_callpath: what a small call costs, by part, on the node's shared
 * segment. Times, per call, on every rank  (median of 31 trials of the
 * slowest rank; short trials, as a loaded machine preempts long ones):
 *   full     hcomm_allreduce of 8 bytes (float32 sum), the whole path;
 *   protocol the segment's one-shot protocol alone (hcomm_shm_op_start and
 *            hcomm_shm_op_progress until done), no entry point;
 *   lookup   the communicator handle's lookup;
 *   select   the direct algorithm's choice (hcomm_shm_select);
 *   driver   asking the CUDA driver what memory both buffers are, which
 *            a call skips for heap and stack buffers such as these (0
 *            where the process has no GPU or CUDA context);
 * and full - protocol - lookup - select: the argument checks, the request
 * and the flight recorder; the minimum trial too, which a loaded machine
 * disturbs least. HCOMM_SPIN_COUNT large makes the full call spin as the
 * protocol loop does. Usage: mpirun -np 2 hcomm_callpath [bytes]. */
#include "core/comm.h"
#include "core/gpu.h"
#include "hcomm.h"
#include "shm_tp/shm.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define ITERS 5000
#define TRIALS 31

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef enum { FULL, PROTOCOL, LOOKUP, SELECT, DRIVER, NPARTS } part_t;

static volatile int sink;

/* ns per call of one part, this rank. */
static double trial(part_t part, hcomm_comm_t comm, hcomm_comm_impl_t *c,
                    float *in, float *out, size_t n) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now_s();
    for (int i = 0; i < ITERS; i++) {
        switch (part) {
        case FULL:
            if (hcomm_allreduce(in, out, n, HCOMM_FLOAT32, HCOMM_SUM, comm)) {
                fprintf(stderr, "full: %s\n", hcomm_last_error());
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
            break;
        case PROTOCOL: {
            hcomm_shm_op_t op;
            hcomm_status_t st = hcomm_shm_op_start(
                &op, c->shm, HCOMM_SHM_ONESHOT, HCOMM_COLL_ALLREDUCE, in, out,
                n, HCOMM_FLOAT32, HCOMM_SUM, 0);
            if (st == HCOMM_SUCCESS) do
                    st = hcomm_shm_op_progress(&op);
                while (st == HCOMM_ERR_IN_PROGRESS);
            if (st != HCOMM_SUCCESS) {
                fprintf(stderr, "protocol: %d %s\n", (int)st,
                        hcomm_last_error());
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
            break;
        }
        case LOOKUP: {
            hcomm_comm_impl_t *x;
            sink += hcomm_comm_lookup(comm, &x) == HCOMM_SUCCESS;
            break;
        }
        case SELECT:
            sink += (int)hcomm_shm_select(c->shm, HCOMM_COLL_ALLREDUCE,
                                          n * sizeof(float));
            break;
        default: {
            int dev;
            sink += (int)hcomm_gpu_memtype(in, &dev) +
                    (int)hcomm_gpu_memtype(out, &dev);
            break;
        }
        }
    }
    return (now_s() - t0) / ITERS * 1e9;
}

int main(int argc, char **argv) {
    static const char *names[NPARTS] = {"full", "protocol", "lookup", "select",
                                        "driver"};
    int rank;
    hcomm_comm_t comm;
    hcomm_comm_impl_t *c;
    size_t n = argc > 1 ? (size_t)atol(argv[1]) / sizeof(float) : 2;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (hcomm_init(&argc, &argv) != HCOMM_SUCCESS ||
        hcomm_comm_create(MPI_COMM_WORLD, &comm) != HCOMM_SUCCESS ||
        hcomm_comm_lookup(comm, &c) != HCOMM_SUCCESS || !c->shm) {
        if (rank == 0)
            fprintf(stderr, "hcomm_callpath: needs 2+ ranks on one node "
                            "with a shared segment\n");
        MPI_Finalize();
        return 1;
    }
    float in[64] = {1}, out[64];
    double t[NPARTS][TRIALS];
    for (int k = 0; k < TRIALS; k++)
        for (int p = 0; p < NPARTS; p++) {
            double mine = trial((part_t)p, comm, c, in, out, n);
            MPI_Allreduce(&mine, &t[p][k], 1, MPI_DOUBLE, MPI_MAX,
                          MPI_COMM_WORLD);
        }
    double med[NPARTS], low[NPARTS];
    if (rank == 0) printf("%-9s %10s %10s\n", "part", "median ns", "min ns");
    for (int p = 0; p < NPARTS; p++) {
        qsort(t[p], TRIALS, sizeof(double), cmp);
        med[p] = t[p][TRIALS / 2];
        low[p] = t[p][0];
        if (rank == 0) printf("%-9s %10.1f %10.1f\n", names[p], med[p], low[p]);
    }
    /* On a loaded machine the medians swing with preemption; the fastest
     * trials are the calls' own cost. */
    if (rank == 0)
        printf("%-9s %10.1f %10.1f  (full - protocol - lookup - select: the "
               "checks, the request, the flight recorder)\n",
               "rest", med[FULL] - med[PROTOCOL] - med[LOOKUP] - med[SELECT],
               low[FULL] - low[PROTOCOL] - low[LOOKUP] - low[SELECT]);
    hcomm_comm_free(&comm);
    hcomm_finalize();
    MPI_Finalize();
    return 0;
}
