/* The variable-count collectives end to end: allgatherv, alltoallv and
 * reduce_scatterv, every dtype (and every op for reduce_scatterv), in place
 * and not, blocking and non-blocking (the count arrays overwritten as soon
 * as the call returns), counts that differ per rank (and per pair) with
 * zeros, ones, odd counts and large ones (an allgatherv past the shared
 * segment's 2 MiB), blocks placed out of rank order with gaps; results
 * compared bit for bit with reference.h, and the gaps must keep what they
 * held; on the world, on copies of it with 4 KiB slots (many rounds)
 * and with no segment (the plans), and on a split communicator. Then bad
 * arguments: refused with a message, nothing sent. Built with HCOMM_TEST_ON_GPU
 * (test/gpu/test_cuda_vcolls), the same cases run on device copies of the
 * buffers; without a GPU that one skips (exit 77). */
#include "core/config.h"
#include "mpi_check.h"
#include "reference.h"

#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#ifdef HCOMM_TEST_ON_GPU
#include <cuda_runtime_api.h>
#endif

#define NPATTERNS 5
#define POISON 0x5a

static int nranks, rank;

/* What rank i sends rank j (alltoallv), or rank i's block (j == i).
 * Symmetric, so that in-place alltoallv is legal. */
static size_t pattern_count(int p, int i, int j) {
    int a = i < j ? i : j, b = i < j ? j : i;
    switch (p) {
    case 0:
        return 0;
    case 1:
        return (size_t)((a * 3 + b * 5) % 4); /* 0, 1, 2, 3 */
    case 2:
        return (a + b) % 2 ? 7 : 0;
    case 3:
        return a == b && a == nranks - 1 ? 1031 : (size_t)(a + b) % 3;
    default: /* one block between the first and last rank larger than a
              * shared-memory slot, the others small */
        return a == 0 && b == nranks - 1 ? (1u << 19) + 3 : (size_t)(a + b) % 2;
    }
}

/* Blocks in reverse rank order, a gap of three elements before each. */
static size_t place(const size_t *counts, size_t *displs) {
    size_t at = 0;
    for (int b = nranks - 1; b >= 0; b--) {
        displs[b] = at + 3;
        at += counts[b] + 3;
    }
    return at;
}

typedef struct {
    int coll; /* 0 allgatherv, 1 alltoallv, 2 reduce_scatterv */
    hcomm_dtype_t t;
    hcomm_op_t op;
    int pattern, inplace, nonblocking;
} vcase_t;

static const char *coll_names[] = {"allgatherv", "alltoallv",
                                   "reduce_scatterv"};

/* A copy of an array that the call may read only before it returns. */
static size_t *dup_counts(const size_t *a) {
    size_t *c = malloc((size_t)nranks * sizeof(size_t));
    memcpy(c, a, (size_t)nranks * sizeof(size_t));
    return c;
}

/* The calls get copies of the arrays, overwritten with garbage as soon as
 * the call returns (hcomm.h: the arrays are read before, also by the
 * non-blocking forms). */
static hcomm_status_t call(const vcase_t *k, const void *s, void *r,
                           const size_t *sc0, const size_t *sd0,
                           const size_t *rc0, const size_t *rd0,
                           hcomm_comm_t comm) {
    hcomm_request_t req = HCOMM_REQUEST_NULL;
    hcomm_status_t st;
    size_t *sc = dup_counts(sc0), *sd = dup_counts(sd0);
    size_t *rc = dup_counts(rc0), *rd = dup_counts(rd0);
    switch (k->coll) {
    case 0:
        st = k->nonblocking ? hcomm_iallgatherv(s, r, rc, rd, k->t, comm, &req)
                            : hcomm_allgatherv(s, r, rc, rd, k->t, comm);
        break;
    case 1:
        st = k->nonblocking
                 ? hcomm_ialltoallv(s, sc, sd, r, rc, rd, k->t, comm, &req)
                 : hcomm_alltoallv(s, sc, sd, r, rc, rd, k->t, comm);
        break;
    default:
        st = k->nonblocking
                 ? hcomm_ireduce_scatterv(s, r, rc, k->t, k->op, comm, &req)
                 : hcomm_reduce_scatterv(s, r, rc, k->t, k->op, comm);
    }
    size_t bytes = (size_t)nranks * sizeof(size_t);
    memset(sc, 0xff, bytes);
    memset(sd, 0xff, bytes);
    memset(rc, 0xff, bytes);
    memset(rd, 0xff, bytes);
    if (st == HCOMM_SUCCESS && k->nonblocking) st = hcomm_wait(&req);
    free(sc);
    free(sd);
    free(rc);
    free(rd);
    return st;
}

#ifdef HCOMM_TEST_ON_GPU
/* Where host pointer p (in sbuf or rbuf) lies in their device copies. */
static char *on_device(const char *p, const char *sbuf, size_t sbytes,
                       const char *rbuf, char *ds, char *dr) {
    return p >= sbuf && p <= sbuf + sbytes ? ds + (p - sbuf) : dr + (p - rbuf);
}

/* The call on device copies of both buffers, which then come back. */
static hcomm_status_t call_on_gpu(const vcase_t *k, char *sbuf, size_t sbytes,
                                  char *rbuf, size_t rbytes, const char *send,
                                  char *recv, const size_t *sc,
                                  const size_t *sd, const size_t *rc,
                                  const size_t *rd, hcomm_comm_t comm) {
    char *ds = NULL, *dr = NULL;
    hcomm_status_t st = HCOMM_ERR_NO_MEMORY;
    if (cudaMalloc((void **)&ds, sbytes) == cudaSuccess &&
        cudaMalloc((void **)&dr, rbytes) == cudaSuccess &&
        cudaMemcpy(ds, sbuf, sbytes, cudaMemcpyHostToDevice) == cudaSuccess &&
        cudaMemcpy(dr, rbuf, rbytes, cudaMemcpyHostToDevice) == cudaSuccess) {
        st = call(k, on_device(send, sbuf, sbytes, rbuf, ds, dr),
                  on_device(recv, sbuf, sbytes, rbuf, ds, dr), sc, sd, rc, rd,
                  comm);
        cudaMemcpy(sbuf, ds, sbytes, cudaMemcpyDeviceToHost);
        cudaMemcpy(rbuf, dr, rbytes, cudaMemcpyDeviceToHost);
    }
    cudaFree(ds);
    cudaFree(dr);
    return st;
}
#endif

static void store_input(const vcase_t *k, int r, size_t gi, char *buf,
                        size_t j) {
    int64_t v = ref_input(k->t, k->coll == 2 ? k->op : HCOMM_SUM, r, gi);
    ref_store(k->t, buf, j, (double)v, v);
}

/* Rank j's block of an allgatherv or reduce_scatterv: the count of the
 * pair (j, j), which holds the 1031-element block, plus, but in the last
 * pattern, that of (j, j + 1), so that no rank's block is always empty:
 * blocks differ in size and start at different places, ranks 0 and 1
 * included. In allgatherv's last pattern the last rank's is large (past
 * the segment's 2 MiB in all from 4-byte types: the direct reads at 2
 * ranks). */
static size_t own_count(const vcase_t *k, int j) {
    if (k->coll == 0 && k->pattern == NPATTERNS - 1 && j == nranks - 1)
        return (1u << 19) + 3;
    size_t n = pattern_count(k->pattern, j, j);
    if (nranks > 1 && k->pattern < NPATTERNS - 1)
        n += pattern_count(k->pattern, j, (j + 1) % nranks);
    return n;
}

static void run_case(const vcase_t *k, hcomm_comm_t comm) {
    int n = nranks;
    size_t es = hcomm_dtype_size(k->t);
    size_t *sc = calloc((size_t)n, sizeof(size_t));
    size_t *sd = calloc((size_t)n, sizeof(size_t));
    size_t *rc = calloc((size_t)n, sizeof(size_t));
    size_t *rd = calloc((size_t)n, sizeof(size_t));
    size_t *off = calloc((size_t)n, sizeof(size_t));
    size_t sext = 0, rext = 0, total = 0;
    for (int j = 0; j < n; j++) {
        sc[j] = pattern_count(k->pattern, rank, j);
        rc[j] =
            k->coll == 1 ? pattern_count(k->pattern, j, rank) : own_count(k, j);
        off[j] = total;
        total += rc[j];
    }
    if (k->coll == 2) {
        sext = total;
        rext = rc[rank];
    } else {
        rext = place(rc, rd);
        sext = k->coll == 0 ? rc[rank] : place(sc, sd);
    }
    char *sbuf = malloc(sext * es + 1), *rbuf = malloc(rext * es + 1);
    char *want = malloc(rext * es + 1);
    memset(rbuf, POISON, rext * es + 1);
    memset(want, POISON, rext * es + 1);
    const char *send = sbuf;
    char *recv = rbuf, *got = rbuf;
    switch (k->coll) {
    case 0:
        for (size_t i = 0; i < rc[rank]; i++)
            store_input(k, rank, i, sbuf, i);
        for (int b = 0; b < n; b++)
            for (size_t i = 0; i < rc[b]; i++)
                store_input(k, b, i, want, rd[b] + i);
        if (k->inplace) {
            memcpy(rbuf + rd[rank] * es, sbuf, rc[rank] * es);
            send = rbuf + rd[rank] * es;
        }
        break;
    case 1:
        /* rank q's send buffer holds its global indices, placed like its
         * receive buffer in place (place() is the same on every rank) */
        for (size_t i = 0; i < sext; i++)
            store_input(k, rank, i, sbuf, i);
        for (int q = 0; q < n; q++) {
            size_t qsd[64], qsc[64];
            for (int j = 0; j < n; j++)
                qsc[j] = k->inplace ? pattern_count(k->pattern, j, q)
                                    : pattern_count(k->pattern, q, j);
            place(qsc, qsd);
            for (size_t i = 0; i < rc[q]; i++)
                store_input(k, q, qsd[rank] + i, want, rd[q] + i);
        }
        if (k->inplace) {
            for (int j = 0; j < n; j++)
                for (size_t i = 0; i < rc[j]; i++)
                    store_input(k, rank, rd[j] + i, rbuf, rd[j] + i);
            send = rbuf;
        }
        break;
    default:
        for (size_t i = 0; i < total; i++)
            store_input(k, rank, i, sbuf, i);
        for (size_t i = 0; i < rc[rank]; i++)
            ref_expect(k->t, k->op, n, off[rank], i, want);
        if (k->inplace) got = recv = sbuf + off[rank] * es;
        break;
    }
#ifdef HCOMM_TEST_ON_GPU
    hcomm_status_t st = call_on_gpu(k, sbuf, sext * es + 1, rbuf, rext * es + 1,
                                    send, recv, sc, sd, rc, rd, comm);
#else
    hcomm_status_t st = call(k, send, recv, sc, sd, rc, rd, comm);
#endif
    char what[160];
    snprintf(what, sizeof(what), "%s %s %s pattern %d %s %s",
             coll_names[k->coll], ref_dtype_names[k->t],
             k->coll == 2 ? ref_op_names[k->op] : "-", k->pattern,
             k->inplace ? "in place" : "out of place",
             k->nonblocking ? "non-blocking" : "blocking");
    CHECK(st == HCOMM_SUCCESS, "%s: %s (%s)", what, hcomm_strerror(st),
          hcomm_last_error());
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < rext; i++)
        if (memcmp(got + i * es, want + i * es, es) != 0 && bad++ == 0)
            first = i;
    CHECK(bad == 0, "%s: %zu wrong elements (gaps included), first at %zu",
          what, bad, first);
    free(sbuf);
    free(rbuf);
    free(want);
    free(sc);
    free(sd);
    free(rc);
    free(rd);
    free(off);
}

/* Refused on every rank alike, before anything moves: the communicator
 * stays usable. */
static void test_bad_input(hcomm_comm_t comm) {
    size_t *c = calloc((size_t)nranks, sizeof(size_t));
    size_t *d = calloc((size_t)nranks, sizeof(size_t));
    int x[4] = {0, 0, 0, 0};
    hcomm_request_t req;
    CHECK(hcomm_allgatherv(x, x + 1, NULL, d, HCOMM_INT32, comm) ==
              HCOMM_ERR_INVALID_ARG,
          "allgatherv with NULL counts");
    CHECK(strstr(hcomm_last_error(), "NULL") != NULL, "message: %s",
          hcomm_last_error());
    CHECK(hcomm_alltoallv(x, c, NULL, x + 1, c, d, HCOMM_INT32, comm) ==
              HCOMM_ERR_INVALID_ARG,
          "alltoallv with NULL sdispls");
    CHECK(hcomm_ireduce_scatterv(x, x, c, (hcomm_dtype_t)99, HCOMM_SUM, comm,
                                 &req) == HCOMM_ERR_INVALID_DTYPE,
          "reduce_scatterv with a bad type");
    CHECK(hcomm_reduce_scatterv(x, x + 1, c, HCOMM_INT32, (hcomm_op_t)42,
                                comm) == HCOMM_ERR_INVALID_OP,
          "reduce_scatterv with a bad op");
    CHECK(hcomm_iallgatherv(x, x, c, d, HCOMM_INT32, comm, NULL) ==
              HCOMM_ERR_INVALID_ARG,
          "iallgatherv without a request");
    c[rank] = 1;
    CHECK(hcomm_allgatherv(x, NULL, c, d, HCOMM_INT32, comm) ==
              HCOMM_ERR_INVALID_ARG,
          "allgatherv into NULL");
    d[0] = SIZE_MAX;
    c[0] = 2;
    CHECK(hcomm_allgatherv(x, x + 2, c, d, HCOMM_INT32, comm) ==
              HCOMM_ERR_OVERFLOW,
          "allgatherv with an overflowing displacement");
    /* rank sends itself 1 but receives 2 */
    size_t *s1 = calloc((size_t)nranks, sizeof(size_t));
    size_t *r2 = calloc((size_t)nranks, sizeof(size_t));
    size_t *z = calloc((size_t)nranks, sizeof(size_t));
    s1[rank] = 1;
    r2[rank] = 2;
    int y[4] = {0, 0, 0, 0};
    CHECK(hcomm_alltoallv(x, s1, z, y, r2, z, HCOMM_INT32, comm) ==
              HCOMM_ERR_INVALID_ARG,
          "alltoallv with a self block of two sizes");
    /* overlapping buffers, not in place */
    size_t one[64] = {0}, zero[64] = {0};
    one[rank] = 2;
    CHECK(hcomm_alltoallv(x, one, zero, x + 1, one, zero, HCOMM_INT32, comm) ==
              HCOMM_ERR_INVALID_ARG,
          "alltoallv with overlapping buffers");
    free(s1);
    free(r2);
    free(z);
    free(c);
    free(d);
    CHECK_OK(hcomm_barrier(comm)); /* still usable */
}

/* Every case on comm; few: a type of each size and two operations, for
 * the other communicators (what they add, rounds and ranks, does not
 * depend on the rest). */
static void run_cases(hcomm_comm_t comm, int few) {
    static const hcomm_dtype_t some[] = {HCOMM_INT8, HCOMM_FLOAT16, HCOMM_INT32,
                                         HCOMM_FLOAT64};
    static const hcomm_op_t two[] = {HCOMM_SUM, HCOMM_MAX};
    int ntypes = few ? 4 : HCOMM_DTYPE_COUNT, nops = few ? 2 : HCOMM_OP_COUNT;
    for (int coll = 0; coll < 3; coll++)
        for (int ti = 0; ti < ntypes; ti++)
            for (int oi = 0; oi < (coll == 2 ? nops : 1); oi++)
                for (int p = 0; p < NPATTERNS; p++)
                    for (int ip = 0; ip < 2; ip++) {
                        hcomm_dtype_t t = few ? some[ti] : (hcomm_dtype_t)ti;
                        hcomm_op_t op = few ? two[oi] : (hcomm_op_t)oi;
                        vcase_t k = {coll, t, op, p, ip, (p + ip + ti) % 2};
                        run_case(&k, comm);
                    }
}

/* The cases (few) on a copy of comm whose segment has slots of slot
 * bytes ("0": no segment). */
static void run_on_copy(hcomm_comm_t comm, const char *slot) {
    CHECK_OK(hcomm_config_set("HCOMM_SHM_SLOT_SIZE", slot));
    hcomm_comm_t copy = HCOMM_COMM_NULL;
    CHECK_OK(hcomm_comm_dup(comm, &copy));
    CHECK_OK(hcomm_config_set("HCOMM_SHM_SLOT_SIZE", "256K"));
    run_cases(copy, 1);
    CHECK_OK(hcomm_comm_free(&copy));
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    check_rank = rank;
    hcomm_comm_t world;
#ifdef HCOMM_TEST_ON_GPU
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        if (rank == 0) printf("test_cuda_vcolls: no CUDA device: skipped\n");
        MPI_Finalize();
        return 77;
    }
#endif
    CHECK_OK(hcomm_init(&argc, &argv));
    CHECK_OK(hcomm_comm_create(MPI_COMM_WORLD, &world));
    run_cases(world, 0);
    /* 4 KiB slots: many rounds (from 3 ranks, allgatherv's large block
     * takes 128 of them in int8 and 256 in float16) */
    run_on_copy(world, "4K");
    /* no segment: every case on the plans, as between nodes */
    run_on_copy(world, "0");
    /* a split communicator, its ranks in reverse order: the cases read
     * rank and nranks, the communicator's while it runs */
    MPI_Comm half_mpi;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, nranks - rank, &half_mpi);
    hcomm_comm_t half = HCOMM_COMM_NULL;
    CHECK_OK(hcomm_comm_create(half_mpi, &half));
    int world_rank = rank, world_size = nranks;
    MPI_Comm_rank(half_mpi, &rank);
    MPI_Comm_size(half_mpi, &nranks);
    run_cases(half, 1);
    rank = world_rank;
    nranks = world_size;
    CHECK_OK(hcomm_comm_free(&half));
    MPI_Comm_free(&half_mpi);
    test_bad_input(world);
    CHECK_OK(hcomm_comm_free(&world));
    CHECK_OK(hcomm_finalize());
#ifdef HCOMM_TEST_ON_GPU
    int rc = check_summary("test_cuda_vcolls");
#else
    int rc = check_summary("test_vcolls");
#endif
    MPI_Finalize();
    return rc;
}
