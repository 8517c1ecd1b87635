/* Compression and error feedback on a real descent: distributed gradient
 * descent on a least-squares problem (each rank holds its own rows), the
 * gradients averaged by hcomm_allreduce_ex. After the same number of steps,
 * bf16, top-k 1% and one-bit, each with error feedback, reach the final
 * loss of uncompressed averaging within 1%; top-k and one-bit without
 * error feedback stall measurably above it (each rank's gradient stays
 * large at the optimum, and what they drop is lost for good). */
#include "mpi_check.h"

#include <math.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

enum { D = 200, ROWS = 100, STEPS = 6000 };

/* The step size, cut tenfold at 70% and 90% of the steps: error feedback
 * carries what each rank's gradient did not send, and the iterates wander
 * around the optimum in proportion to the step, because each rank's own
 * gradient stays large there. */
static double step_size(int t) {
    return t < STEPS * 7 / 10 ? 0.2 : t < STEPS * 9 / 10 ? 0.02 : 0.002;
}

static int rank, nranks;
static hcomm_comm_t comm;
static float A[ROWS][D], b[ROWS];

static double uniform(uint64_t *s) { /* in [-1, 1) */
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(*s >> 11) / 4503599627370496.0 - 1.0;
}

/* Rows of this rank; the true weights and the noise are the same on all. */
static void make_problem(void) {
    uint64_t s = 12345, mine = 777 + (uint64_t)rank * 1000003;
    double w[D];
    for (int j = 0; j < D; j++)
        w[j] = uniform(&s);
    for (int i = 0; i < ROWS; i++) {
        double y = 0;
        for (int j = 0; j < D; j++) {
            A[i][j] = (float)uniform(&mine);
            y += A[i][j] * w[j];
        }
        b[i] = (float)(y + 0.1 * uniform(&mine));
    }
}

/* The global loss, (1 / 2N) |A w - b|^2, uncompressed. */
static double loss(const float *w) {
    double local = 0, total = 0;
    for (int i = 0; i < ROWS; i++) {
        double r = -b[i];
        for (int j = 0; j < D; j++)
            r += A[i][j] * w[j];
        local += r * r;
    }
    MPI_Allreduce(&local, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return total / (2.0 * ROWS * nranks);
}

static double train(hcomm_compress_t kind, int feedback, const char *name) {
    float w[D] = {0}, g[D], avg[D];
    hcomm_compress_state_t st = NULL;
    if (feedback) CHECK_OK(hcomm_compress_state_create(comm, D, &st));
    hcomm_allreduce_opts_t o = {.compress = kind, .density = 0.01, .state = st};
    for (int t = 0; t < STEPS; t++) {
        memset(g, 0, sizeof(g));
        for (int i = 0; i < ROWS; i++) {
            double r = -b[i];
            for (int j = 0; j < D; j++)
                r += A[i][j] * w[j];
            for (int j = 0; j < D; j++)
                g[j] += (float)(r * A[i][j] / ROWS);
        }
        hcomm_status_t s =
            hcomm_allreduce_ex(g, avg, D, HCOMM_FLOAT32, HCOMM_AVG, comm, &o);
        if (s != HCOMM_SUCCESS) {
            CHECK_OK(s);
            break;
        }
        for (int j = 0; j < D; j++)
            w[j] -= (float)(step_size(t) * avg[j]);
    }
    hcomm_compress_state_free(&st);
    double l = loss(w);
    if (rank == 0) printf("  %-26s final loss %.6f\n", name, l);
    return l;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    check_rank = rank;
    if (hcomm_init(&argc, &argv) != HCOMM_SUCCESS) {
        fprintf(stderr, "hcomm_init: %s\n", hcomm_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    CHECK_OK(hcomm_comm_create(MPI_COMM_WORLD, &comm));
    make_problem();
    double base = train(HCOMM_COMPRESS_NONE, 0, "none");
    double start = loss((float[D]){0});
    CHECK(base < 0.05 * start,
          "uncompressed descent did not converge: %g of %g", base, start);
    struct {
        hcomm_compress_t kind;
        const char *name;
    } with[] = {{HCOMM_COMPRESS_BF16, "bf16"},
                {HCOMM_COMPRESS_TOPK, "top-k 1%, error feedback"},
                {HCOMM_COMPRESS_ONEBIT, "one-bit, error feedback"}};
    for (int i = 0; i < 3; i++) {
        double l = train(with[i].kind, 1, with[i].name);
        CHECK(fabs(l - base) <= 0.01 * base,
              "%s: final loss %g, not within 1%% of %g", with[i].name, l, base);
    }
    double topk = train(HCOMM_COMPRESS_TOPK, 0, "top-k 1%, no feedback");
    double onebit = train(HCOMM_COMPRESS_ONEBIT, 0, "one-bit, no feedback");
    CHECK(topk > 1.2 * base, "top-k without feedback as good as with: %g vs %g",
          topk, base);
    CHECK(onebit > 1.2 * base,
          "one-bit without feedback as good as with: %g vs %g", onebit, base);
    CHECK_OK(hcomm_comm_free(&comm));
    int rc = check_summary("test_converge");
    hcomm_finalize();
    MPI_Finalize();
    return rc;
}
