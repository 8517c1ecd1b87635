/* Helpers for the plain MPI programs that test libhcomm_mpi.so. They know
 * nothing of HCOMM: run_preload.sh runs each with and without the preload
 * and compares what they print on stdout.
 *
 * What the helpers themselves need from MPI goes through PMPI_*, so that a
 * broken interposer cannot hide its own mistakes. Only rank 0 prints on
 * stdout, and only what is the same whoever computed it; failures go to
 * stderr, and lines that differ run to run (timings, memory) go to stderr
 * starting with "# ". The file with main defines PU_MAIN before including
 * this header. */
#ifndef HCOMM_TEST_PRELOAD_UTIL_H
#define HCOMM_TEST_PRELOAD_UTIL_H

#include <mpi.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern long pu_failed;
extern int pu_rank, pu_size;

#define PU_CHECK(cond, ...)                                                    \
    do {                                                                       \
        if (!(cond)) {                                                         \
            if (++pu_failed <= 20) {                                           \
                fprintf(stderr, "[rank %d] %s:%d: ", pu_rank, __FILE__,        \
                        __LINE__);                                             \
                fprintf(stderr, __VA_ARGS__);                                  \
                fputc('\n', stderr);                                           \
            }                                                                  \
        }                                                                      \
    } while (0)

#define PU_OK(call) PU_CHECK((call) == MPI_SUCCESS, "%s failed", #call)

static inline uint64_t pu_hash(const void *p, size_t n, uint64_t h) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* Records one case: this rank's hash of its result. Every rank records the
 * same cases in the same order; pu_finish prints, on rank 0, one line per
 * case with the hash of all ranks' hashes. */
void pu_report(uint64_t mine, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Prints the cases and the verdict (rank 0, stdout) and returns the exit
 * code: every rank's failures count. */
int pu_finish(const char *name);

/* Whether the run is under the preload with every call enabled (the
 * runner says so): only then does HCOMM's own semantics apply. */
static inline int pu_expect_hcomm(void) {
    const char *e = getenv("HCOMM_TEST_EXPECT_HCOMM");
    return e && atoi(e) > 0;
}

/* Resident memory of this process, in KiB (0 if unknown). */
static inline long pu_rss_kib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = 0;
    if (!f) return 0;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "VmRSS: %ld kB", &kib) == 1) break;
    fclose(f);
    return kib;
}

/* A committed datatype of one int with the extent of two: n of it are
 * every other int of a buffer (for tests where ranks describe the same ints
 * with different datatypes). */
static inline MPI_Datatype pu_every_other_int(void) {
    MPI_Datatype vec, t;
    MPI_Type_vector(1, 1, 2, MPI_INT, &vec);
    MPI_Type_create_resized(vec, 0, 2 * (MPI_Aint)sizeof(int), &t);
    MPI_Type_commit(&t);
    MPI_Type_free(&vec);
    return t;
}

#ifdef PU_MAIN
long pu_failed;
int pu_rank, pu_size;

typedef struct {
    char label[96];
    uint64_t hash;
} pu_case_t;
static pu_case_t *pu_cases;
static size_t pu_ncases, pu_cap;

void pu_report(uint64_t mine, const char *fmt, ...) {
    if (pu_ncases == pu_cap) {
        pu_cap = pu_cap ? 2 * pu_cap : 256;
        pu_cases = realloc(pu_cases, pu_cap * sizeof(*pu_cases));
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pu_cases[pu_ncases].label, sizeof(pu_cases->label), fmt, ap);
    va_end(ap);
    pu_cases[pu_ncases++].hash = mine;
}

/* One gather for all cases: the tests' own traffic stays small. */
int pu_finish(const char *name) {
    long all = 0;
    size_t n = pu_ncases;
    uint64_t *mine = calloc(n + 1, sizeof(uint64_t));
    uint64_t *every = malloc(sizeof(uint64_t) * (n + 1) * (size_t)pu_size);
    for (size_t i = 0; i < n; i++)
        mine[i] = pu_cases[i].hash;
    PMPI_Gather(mine, (int)n, MPI_UINT64_T, every, (int)n, MPI_UINT64_T, 0,
                MPI_COMM_WORLD);
    PMPI_Allreduce(&pu_failed, &all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (pu_rank == 0) {
        for (size_t i = 0; i < n; i++) {
            uint64_t h = 0xcbf29ce484222325ull;
            for (int r = 0; r < pu_size; r++)
                h = pu_hash(&every[(size_t)r * n + i], sizeof(uint64_t), h);
            printf("%s: %016llx\n", pu_cases[i].label, (unsigned long long)h);
        }
        printf("%s: %s\n", name, all ? "FAILED" : "ok");
        if (all) fprintf(stderr, "%s: %ld failed checks\n", name, all);
    }
    fflush(stdout);
    free(mine);
    free(every);
    free(pu_cases);
    return all ? 1 : 0;
}
#endif

#endif
