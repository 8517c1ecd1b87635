/* What a non-contiguous datatype costs under libhcomm_mpi.so, which packs
 * it into scratch and moves the bytes with HCOMM: per size, in alternating
 * trials of one run, MPI_Bcast / MPI_Allgather / MPI_Alltoall with a strided
 * vector of ints (every other int) through the preload, the same calls to
 * PMPI (MPI itself, what the program runs without the preload), and the
 * preload with the same bytes as contiguous MPI_INT. Prints the median
 * trial of the slowest rank, in microseconds, on stdout from rank 0 (run
 * it by hand; make check runs it small, as a smoke test).
 * Usage: bench_derived [-b MIN] [-e MAX] [-n TRIALS]
 * [bcast|allgather|alltoall]... */
#define PU_MAIN
#include "preload_util.h"

#include <time.h>

enum { BCAST, ALLGATHER, ALLTOALL, NCOLLS };
static const char *names[NCOLLS] = {"bcast", "allgather", "alltoall"};
enum { VIA_PRELOAD, VIA_PMPI, CONTIGUOUS, NSIDES };

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct {
    int coll;
    int n; /* ints a block */
    MPI_Datatype vec;
    int *strided_s, *strided_r, *flat_s, *flat_r;
} bench_t;

static int call(const bench_t *b, int side) {
    int n = b->n;
    void *s = side == CONTIGUOUS ? b->flat_s : b->strided_s;
    void *r = side == CONTIGUOUS ? b->flat_r : b->strided_r;
    MPI_Datatype t = side == CONTIGUOUS ? MPI_INT : b->vec;
    int count = side == CONTIGUOUS ? n : 1;
    switch (b->coll) {
    case BCAST:
        return side == VIA_PMPI ? PMPI_Bcast(r, count, t, 0, MPI_COMM_WORLD)
                                : MPI_Bcast(r, count, t, 0, MPI_COMM_WORLD);
    case ALLGATHER:
        return side == VIA_PMPI
                   ? PMPI_Allgather(s, count, t, r, count, t, MPI_COMM_WORLD)
                   : MPI_Allgather(s, count, t, r, count, t, MPI_COMM_WORLD);
    default:
        return side == VIA_PMPI
                   ? PMPI_Alltoall(s, count, t, r, count, t, MPI_COMM_WORLD)
                   : MPI_Alltoall(s, count, t, r, count, t, MPI_COMM_WORLD);
    }
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The results of a strided call: ints at even places, odd ones untouched. */
static void check(const bench_t *b) {
    int blocks = b->coll == BCAST ? 1 : pu_size;
    for (int k = 0; k < blocks; k++) {
        for (int i = 0; i < b->n; i++) {
            int want = b->coll == BCAST       ? i
                       : b->coll == ALLGATHER ? k * 1000 + i
                                              : k * 1000 + pu_rank * 7 + i;
            size_t at = 2 * ((size_t)k * (size_t)b->n + (size_t)i);
            PU_CHECK(b->strided_r[at] == want && b->strided_r[at + 1] == -7,
                     "%s: wrong result", names[b->coll]);
            if (pu_failed) return;
        }
    }
}

/* Sends and receives as check() expects, every odd place -7. */
static void fill(bench_t *b) {
    size_t all = (size_t)b->n * (size_t)pu_size;
    for (size_t i = 0; i < 2 * all; i++)
        b->strided_r[i] = -7;
    for (int k = 0; k < pu_size; k++) {
        for (int i = 0; i < b->n; i++) {
            size_t at = 2 * ((size_t)k * (size_t)b->n + (size_t)i);
            int v = b->coll == ALLGATHER ? pu_rank * 1000 + i
                                         : pu_rank * 1000 + k * 7 + i;
            b->strided_s[at] = v;
            b->strided_s[at + 1] = -7;
            if (b->coll == BCAST && pu_rank == 0) b->strided_r[at] = i;
        }
    }
    memcpy(b->flat_s, b->strided_s, sizeof(int) * all); /* any values */
}

static void run(int coll, size_t bytes, int trials) {
    bench_t b = {coll, (int)(bytes / sizeof(int)), MPI_DATATYPE_NULL, 0, 0, 0,
                 0};
    size_t all = (size_t)b.n * (size_t)pu_size;
    int iters = bytes <= 65536 ? 200 : bytes <= (1u << 22) ? 20 : 3;
    double *t[NSIDES], med[NSIDES], slowest[NSIDES];
    MPI_Datatype v;
    /* n ints every other int, the next block 2n ints on. */
    PMPI_Type_vector(b.n, 1, 2, MPI_INT, &v);
    PMPI_Type_create_resized(v, 0, (MPI_Aint)(2 * bytes), &b.vec);
    PMPI_Type_free(&v);
    PMPI_Type_commit(&b.vec);
    b.strided_s = malloc(2 * sizeof(int) * all);
    b.strided_r = malloc(2 * sizeof(int) * all);
    b.flat_s = malloc(sizeof(int) * all);
    b.flat_r = malloc(sizeof(int) * all);
    fill(&b);
    PU_OK(call(&b, VIA_PRELOAD));
    check(&b);
    fill(&b);
    PU_OK(call(&b, VIA_PMPI));
    check(&b);
    for (int side = 0; side < NSIDES; side++)
        t[side] = malloc(sizeof(double) * (size_t)trials);
    for (int k = 0; k < trials; k++) {
        for (int side = 0; side < NSIDES; side++) {
            PMPI_Barrier(MPI_COMM_WORLD);
            double t0 = now();
            for (int i = 0; i < iters; i++)
                call(&b, side);
            t[side][k] = (now() - t0) * 1e6 / iters;
        }
    }
    for (int side = 0; side < NSIDES; side++) {
        qsort(t[side], (size_t)trials, sizeof(double), cmp_double);
        med[side] = t[side][trials / 2];
        free(t[side]);
    }
    PMPI_Reduce(med, slowest, NSIDES, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (pu_rank == 0)
        printf("%-9s %10zu %12.2f %12.2f %8.2fx %12.2f\n", names[coll], bytes,
               slowest[VIA_PMPI], slowest[VIA_PRELOAD],
               slowest[VIA_PMPI] / slowest[VIA_PRELOAD], slowest[CONTIGUOUS]);
    PMPI_Type_free(&b.vec);
    free(b.strided_s), free(b.strided_r), free(b.flat_s), free(b.flat_r);
}

int main(int argc, char **argv) {
    size_t lo = 8, hi = 16u << 20;
    int trials = 7, want[NCOLLS] = {0}, any = 0;
    MPI_Init(&argc, &argv);
    PMPI_Comm_rank(MPI_COMM_WORLD, &pu_rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &pu_size);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-b") == 0 && i + 1 < argc)
            lo = strtoull(argv[++i], NULL, 0);
        else if (strcmp(argv[i], "-e") == 0 && i + 1 < argc)
            hi = strtoull(argv[++i], NULL, 0);
        else if (strcmp(argv[i], "-n") == 0 && i + 1 < argc)
            trials = atoi(argv[++i]);
        for (int c = 0; c < NCOLLS; c++)
            if (strcmp(argv[i], names[c]) == 0) want[c] = any = 1;
    }
    if (trials < 1) trials = 1;
    if (lo < sizeof(int)) lo = sizeof(int);
    if (pu_rank == 0)
        printf("# %d ranks; us a call, median of %d trials, slowest rank; a "
               "block of ints every other int (vector) or contiguous\n"
               "# %-7s %10s %12s %12s %9s %12s\n",
               pu_size, trials, "call", "bytes", "MPI vector", "preload vec",
               "ratio", "preload int");
    for (int c = 0; c < NCOLLS; c++) {
        if (any && !want[c]) continue;
        for (size_t bytes = lo; bytes <= hi; bytes *= 4)
            run(c, bytes, trials);
    }
    int rc = pu_failed ? 1 : 0;
    MPI_Finalize();
    return rc;
}
