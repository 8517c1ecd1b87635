/* What a call that libhcomm_mpi.so hands to MPI costs on top of MPI: the
 * same MPI_Allreduce through the interposer and straight to PMPI, on
 * MPI_COMM_SELF (where MPI's own work is a copy), best of several trials.
 * Prints on stderr (timings differ run to run); fails only past
 * HCOMM_TEST_FALLBACK_MAX_NS (default 1000 ns: a shared, noisy machine
 * cannot hold the 50 ns target as a test). */
#define PU_MAIN
#include "preload_util.h"

#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void user_sum(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    for (int i = 0; i < *len; i++)
        ((int *)inout)[i] += ((int *)in)[i];
}

enum { CALLS = 20000, TRIALS = 15 };

/* ns per call of MPI_Allreduce minus ns per call of PMPI_Allreduce. */
static double overhead(const void *s, void *r, MPI_Datatype dt, MPI_Op op) {
    double best[2] = {1e9, 1e9};
    for (int t = 0; t < TRIALS; t++) {
        for (int side = 0; side < 2; side++) {
            double t0 = now();
            for (int i = 0; i < CALLS; i++) {
                if (side == 0)
                    MPI_Allreduce(s, r, 1, dt, op, MPI_COMM_SELF);
                else
                    PMPI_Allreduce(s, r, 1, dt, op, MPI_COMM_SELF);
            }
            double ns = (now() - t0) * 1e9 / CALLS;
            if (ns < best[side]) best[side] = ns;
        }
    }
    return best[0] - best[1];
}

int main(int argc, char **argv) {
    MPI_Op op;
    int a[2] = {1, 2}, b[2];
    const char *m = getenv("HCOMM_TEST_FALLBACK_MAX_NS");
    double max_ns = m ? atof(m) : 1000;
    MPI_Init(&argc, &argv);
    PMPI_Comm_rank(MPI_COMM_WORLD, &pu_rank);
    PMPI_Op_create(user_sum, 1, &op);
    double user = overhead(a, b, MPI_INT, op);
    double maxloc = overhead(a, b, MPI_2INT, MPI_MAXLOC);
    double land = overhead(a, b, MPI_INT, MPI_LAND);
    fprintf(stderr,
            "# rank %d: cost of a call handed to MPI: user op %.1f ns, "
            "MPI_2INT/MAXLOC %.1f ns, MPI_LAND %.1f ns (best of %d x %d)\n",
            pu_rank, user, maxloc, land, TRIALS, CALLS);
    PU_CHECK(user < max_ns && maxloc < max_ns && land < max_ns,
             "fallback costs more than %.0f ns", max_ns);
    PMPI_Op_free(&op);
    int rc = pu_finish("bench_fallback");
    MPI_Finalize();
    return rc;
}
