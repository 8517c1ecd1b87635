/* Soak: 100,000 mixed collectives (allreduce blocking and not, allgather,
 * reduce_scatter, broadcast, reduce, alltoall, barrier) of random sizes
 * (1 to 65,536 elements, log-uniform) and types, alternating at random
 * between a communicator on the shared segment and one on plans (the
 * segment turned off, HCOMM_SHM_SLOT_SIZE=0). Every result must be exact,
 * and resident memory (/proc/self/statm) flat: after the first tenth of
 * the calls (pools and plan caches warm) it may grow by at most 4 MiB in
 * all; a leak of one 64-byte block per call would grow it by 5.4 MiB.
 * HCOMM_TEST_SOAK_CALLS sets the count (the sanitizer job runs fewer: the
 * sanitizers make each call several times slower). Under AddressSanitizer
 * the bound is not asserted: its quarantine keeps freed memory (up to
 * 256 MiB) on purpose, and LeakSanitizer checks for leaks at exit instead. */
#include "core/config.h"
#include "mpi_check.h"

#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { MAX_COUNT = 1 << 16, GROWTH_LIMIT = 4 << 20 };
enum {
    ALLREDUCE,
    IALLREDUCE,
    ALLGATHER,
    REDUCE_SCATTER,
    BCAST,
    REDUCE,
    ALLTOALL,
    BARRIER,
    NKINDS
};
static const char *kind_names[NKINDS] = {
    "allreduce", "iallreduce", "allgather", "reduce_scatter",
    "broadcast", "reduce",     "alltoall",  "barrier"};

static int rank, nranks;

/* Every rank draws the same sequence: the calls must match. */
static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static long resident_bytes(void) {
    long pages = 0, res = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return -1;
    if (fscanf(f, "%ld %ld", &pages, &res) != 2) res = -1;
    fclose(f);
    return res < 0 ? -1 : res * sysconf(_SC_PAGESIZE);
}

/* Element i of rank r's input (small: exact in float32 sums). */
static int32_t in(int r, size_t i, uint64_t call) {
    return (int32_t)((i * 7 + (size_t)r * 3 + call) % 101);
}

static int32_t sum(size_t i, uint64_t call) {
    int32_t s = 0;
    for (int r = 0; r < nranks; r++)
        s += in(r, i, call);
    return s;
}

typedef struct {
    int32_t *s, *r;
    float *fs, *fr;
} bufs_t;

/* One call; returns the number of wrong elements (or -1 on a failure). */
static long one(hcomm_comm_t comm, int kind, size_t n, uint64_t call,
                bufs_t *b) {
    size_t blk = n / (size_t)nranks ? n / (size_t)nranks : 1;
    size_t all = blk * (size_t)nranks;
    int root = (int)(call % (uint64_t)nranks);
    int fl = kind == ALLREDUCE && (call & 1); /* float32 half the time */
    for (size_t i = 0;
         i < (kind == ALLTOALL || kind == REDUCE_SCATTER ? all : n); i++) {
        if (fl)
            b->fs[i] = (float)in(rank, i, call);
        else
            b->s[i] = in(rank, i, call);
    }
    hcomm_status_t st;
    hcomm_request_t req;
    switch (kind) {
    case ALLREDUCE:
        st = fl ? hcomm_allreduce(b->fs, b->fr, n, HCOMM_FLOAT32, HCOMM_SUM,
                                  comm)
                : hcomm_allreduce(b->s, b->r, n, HCOMM_INT32, HCOMM_SUM, comm);
        break;
    case IALLREDUCE:
        st = hcomm_iallreduce(b->s, b->s, n, HCOMM_INT32, HCOMM_SUM, comm,
                              &req); /* in place */
        if (st == HCOMM_SUCCESS) st = hcomm_wait(&req);
        break;
    case ALLGATHER:
        st = hcomm_allgather(b->s, b->r, blk, HCOMM_INT32, comm);
        break;
    case REDUCE_SCATTER:
        st =
            hcomm_reduce_scatter(b->s, b->r, blk, HCOMM_INT32, HCOMM_SUM, comm);
        break;
    case BCAST:
        if (rank != root) memset(b->s, 0xff, n * sizeof(int32_t));
        st = hcomm_broadcast(b->s, n, HCOMM_INT32, root, comm);
        break;
    case REDUCE:
        st = hcomm_reduce(b->s, b->r, n, HCOMM_INT32, HCOMM_SUM, root, comm);
        break;
    case ALLTOALL:
        st = hcomm_alltoall(b->s, b->r, blk, HCOMM_INT32, comm);
        break;
    default:
        st = hcomm_barrier(comm);
        break;
    }
    if (st != HCOMM_SUCCESS) {
        fprintf(stderr, "[rank %d] call %llu, %s of %zu: %s\n", rank,
                (unsigned long long)call, kind_names[kind], n,
                hcomm_last_error());
        return -1;
    }
    long bad = 0;
    switch (kind) {
    case ALLREDUCE:
        for (size_t i = 0; i < n; i++)
            bad +=
                fl ? b->fr[i] != (float)sum(i, call) : b->r[i] != sum(i, call);
        break;
    case IALLREDUCE:
        for (size_t i = 0; i < n; i++)
            bad += b->s[i] != sum(i, call);
        break;
    case ALLGATHER:
        for (size_t i = 0; i < all; i++)
            bad += b->r[i] != in((int)(i / blk), i % blk, call);
        break;
    case REDUCE_SCATTER:
        for (size_t i = 0; i < blk; i++)
            bad += b->r[i] != sum((size_t)rank * blk + i, call);
        break;
    case BCAST:
        for (size_t i = 0; i < n; i++)
            bad += b->s[i] != in(root, i, call);
        break;
    case REDUCE:
        for (size_t i = 0; rank == root && i < n; i++)
            bad += b->r[i] != sum(i, call);
        break;
    case ALLTOALL:
        for (size_t i = 0; i < all; i++)
            bad += b->r[i] !=
                   in((int)(i / blk), (size_t)rank * blk + i % blk, call);
        break;
    default:
        break;
    }
    return bad;
}

int main(int argc, char **argv) {
    CHECK_OK(hcomm_init(&argc, &argv));
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    check_rank = rank;
    const char *env = getenv("HCOMM_TEST_SOAK_CALLS");
    long calls = env ? atol(env) : 100000;
    if (calls < 100) calls = 100;
    hcomm_comm_t shm = HCOMM_COMM_NULL, plans = HCOMM_COMM_NULL;
    CHECK_OK(hcomm_comm_create(MPI_COMM_WORLD, &shm));
    CHECK_OK(hcomm_config_set("HCOMM_SHM_SLOT_SIZE", "0"));
    CHECK_OK(hcomm_comm_create(MPI_COMM_WORLD, &plans));
    CHECK_OK(hcomm_config_set("HCOMM_SHM_SLOT_SIZE", "256K"));
    /* Every buffer up front: the test's own allocations stay flat. */
    size_t cap = (size_t)MAX_COUNT + (size_t)nranks;
    bufs_t b = {calloc(cap, 4), calloc(cap, 4), calloc(cap, 4), calloc(cap, 4)};
    CHECK(b.s && b.r && b.fs && b.fr, "no memory");
    long wrong = 0, failed = 0, base = 0, peak = 0, rss = 0;
    long per_kind[NKINDS] = {0};
    double t0 = MPI_Wtime();
    for (long c = 0; c < calls && !failed; c++) {
        uint64_t x = next();
        int kind = (int)(x % NKINDS);
        size_t n = (size_t)1 << ((x >> 8) % 17); /* 1 .. 65536 */
        n = 1 + (size_t)((x >> 16) % n);
        hcomm_comm_t comm = (x >> 40) & 1 ? shm : plans;
        long bad = one(comm, kind, n, (uint64_t)c, &b);
        if (bad < 0)
            failed++;
        else
            wrong += bad;
        per_kind[kind]++;
        if (c + 1 == calls / 10) base = peak = resident_bytes();
        if (c + 1 > calls / 10 && (c + 1) % 1000 == 0) {
            rss = resident_bytes();
            if (rss > peak) peak = rss;
        }
    }
    double took = MPI_Wtime() - t0;
    CHECK(failed == 0, "a call failed (above)");
    CHECK(wrong == 0, "%ld wrong elements", wrong);
    CHECK(base > 0, "cannot read /proc/self/statm");
    int bounded = 1;
#ifdef __SANITIZE_ADDRESS__
    if (rank == 0)
        printf("test_soak: AddressSanitizer: resident memory not bounded "
               "(its quarantine); LeakSanitizer checks leaks at exit\n");
    bounded = 0;
#endif
    CHECK(!bounded || peak - base <= GROWTH_LIMIT,
          "resident memory grew by %ld bytes after the first %ld calls "
          "(from %ld to %ld, limit %d)",
          peak - base, calls / 10, base, peak, GROWTH_LIMIT);
    if (rank == 0)
        printf("test_soak: %ld calls (%ld allreduce, %ld iallreduce, %ld "
               "allgather, %ld reduce_scatter, %ld broadcast, %ld reduce, "
               "%ld alltoall, %ld barrier) in %.1f s; resident %ld KiB after "
               "%ld calls, at most %ld KiB after\n",
               calls, per_kind[0], per_kind[1], per_kind[2], per_kind[3],
               per_kind[4], per_kind[5], per_kind[6], per_kind[7], took,
               base >> 10, calls / 10, peak >> 10);
    CHECK_OK(hcomm_comm_free(&shm));
    CHECK_OK(hcomm_comm_free(&plans));
    free(b.s);
    free(b.r);
    free(b.fs);
    free(b.fr);
    int rc = check_summary("test_soak");
    hcomm_finalize();
    return rc;
}
