/* Allreduce end to end: every dtype x op x algorithm, in place and out of
 * place, counts around the rank count and large, odd addresses, a 64 MiB
 * buffer, split and dup communicators used concurrently, and non-blocking
 * calls overlapped with computation. Inputs are integer-valued, so every
 * result is exact and compared bit for bit with a reference computed here. */
#include "coll/select.h"
#include "core/config.h"
#include "kernels/reduce.h"
#include "mpi_check.h"
#include "reference.h"

#include <mpi.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int rank, nranks;

/* One allreduce on comm, checked element by element. misalign shifts both
 * buffers by one byte. */
static void run_one(hcomm_comm_t comm, int n, hcomm_dtype_t t, hcomm_op_t op,
                    size_t count, int inplace, int misalign, const char *algo) {
    size_t es = hcomm_dtype_size(t), bytes = count * es;
    int r;
    hcomm_comm_rank(comm, &r);
    char *sraw = malloc(bytes + 2), *rraw = malloc(bytes + 2);
    char *want = malloc(bytes + 1);
    char *sbuf = sraw + misalign, *rbuf = rraw + misalign;
    ref_fill(t, op, r, sbuf, count);
    for (size_t i = 0; i < count; i++)
        ref_expect(t, op, n, 0, i, want);
    if (inplace)
        memcpy(rbuf, sbuf, bytes);
    else
        memset(rbuf, 0x5a, bytes);
    hcomm_status_t st =
        hcomm_allreduce(inplace ? rbuf : sbuf, rbuf, count, t, op, comm);
    CHECK(st == HCOMM_SUCCESS, "%s %s %s count %zu: %s (%s)", algo,
          ref_dtype_names[t], ref_op_names[op], count, hcomm_strerror(st),
          hcomm_last_error());
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < count; i++)
        if (memcmp(rbuf + i * es, want + i * es, es) != 0 && bad++ == 0)
            first = i;
    CHECK(bad == 0, "%s %s %s count %zu %s%s: %zu wrong elements, first at %zu",
          algo, ref_dtype_names[t], ref_op_names[op], count,
          inplace ? "in place" : "out of place", misalign ? " misaligned" : "",
          bad, first);
    free(sraw);
    free(rraw);
    free(want);
}

static void test_matrix(hcomm_comm_t world) {
    static const char *algos[] = {"", "ring", "recursive_doubling",
                                  "rabenseifner", "hierarchical_rhd"};
    size_t counts[] = {
        0,   1, 2, 3, 7, (size_t)nranks - 1, (size_t)nranks, (size_t)nranks + 1,
        1031};
    for (int a = 0; a < 5; a++) {
        char spec[64];
        snprintf(spec, sizeof(spec), "%s%s", algos[a][0] ? "allreduce=" : "",
                 algos[a]);
        CHECK_OK(hcomm_select_configure(spec));
        for (int t = 0; t < HCOMM_DTYPE_COUNT; t++)
            for (int op = 0; op < HCOMM_OP_COUNT; op++)
                for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
                    for (int inplace = 0; inplace < 2; inplace++)
                        run_one(world, nranks, (hcomm_dtype_t)t, (hcomm_op_t)op,
                                counts[c], inplace, counts[c] == 1031 && t % 2,
                                a ? algos[a] : "auto");
        /* Many chunks per block: a small chunk exercises pipelining. */
        CHECK_OK(hcomm_config_set("HCOMM_CHUNK_SIZE", "4K"));
        run_one(world, nranks, HCOMM_INT32, HCOMM_SUM, 100003, 0, 0, algos[a]);
        run_one(world, nranks, HCOMM_FLOAT32, HCOMM_AVG, 65537, 1, 1, algos[a]);
        CHECK_OK(hcomm_config_set("HCOMM_CHUNK_SIZE", "1M"));
    }
    CHECK_OK(hcomm_select_configure(""));
}

/* The shared-memory algorithms on a communicator made with a small slot
 * (calls of many rounds): one-shot, two-shot (with the small-message path
 * off) and cross-memory reads, by size, every dtype x op. */
static void test_shm_paths(hcomm_comm_t world) {
    static const size_t counts[] = {1, 3, 1031, 4099, 70001};
    hcomm_comm_t comm;
    CHECK_OK(hcomm_config_set("HCOMM_SHM_SLOT_SIZE", "4K"));
    CHECK_OK(hcomm_comm_dup(world, &comm));
    CHECK_OK(hcomm_config_set("HCOMM_SHM_SLOT_SIZE", "256K"));
    for (int fast = 0; fast < 2; fast++) {
        CHECK_OK(
            hcomm_config_set("HCOMM_FAST_PATH_SMALL_MSG", fast ? "64K" : "0"));
        for (int t = 0; t < HCOMM_DTYPE_COUNT; t++)
            for (int op = 0; op < HCOMM_OP_COUNT; op++)
                for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
                    run_one(comm, nranks, (hcomm_dtype_t)t, (hcomm_op_t)op,
                            counts[c], (int)(c + (size_t)t) % 2, 0,
                            fast ? "shm 4K slots" : "shm two-shot");
    }
    CHECK_OK(hcomm_config_set("HCOMM_FAST_PATH_SMALL_MSG", "16K"));
    CHECK_OK(hcomm_comm_free(&comm));
}

static void test_large(hcomm_comm_t world) {
    /* 64 MiB of float32, the default algorithm choice. */
    run_one(world, nranks, HCOMM_FLOAT32, HCOMM_SUM, (64u << 20) / 4, 0, 0,
            "auto 64MiB");
}

/* Split and dup communicators, with calls in flight on all of them at once,
 * waited for in another order than they were started. */
static void test_concurrent_comms(hcomm_comm_t world) {
    hcomm_comm_t half, dup;
    CHECK_OK(hcomm_comm_split(world, rank % 2, nranks - rank, &half));
    CHECK_OK(hcomm_comm_dup(world, &dup));
    int hsize = 0, hrank = -1;
    CHECK_OK(hcomm_comm_size(half, &hsize));
    CHECK_OK(hcomm_comm_rank(half, &hrank));
    CHECK(hsize == (nranks + (rank % 2 ? 0 : 1)) / 2, "split size %d", hsize);
    CHECK(hrank == hsize - 1 - rank / 2, "split rank %d (key reversed)", hrank);
    enum { N = 4099 };
    static int64_t a[N], b[N], c[N];
    for (int i = 0; i < N; i++)
        a[i] = b[i] = c[i] = rank + i;
    hcomm_request_t req[3];
    CHECK_OK(hcomm_iallreduce(a, a, N, HCOMM_INT64, HCOMM_SUM, half, &req[0]));
    CHECK_OK(hcomm_iallreduce(b, b, N, HCOMM_INT64, HCOMM_MAX, dup, &req[1]));
    CHECK_OK(hcomm_iallreduce(c, c, N, HCOMM_INT64, HCOMM_MIN, world, &req[2]));
    CHECK_OK(hcomm_wait(&req[2]));
    CHECK_OK(hcomm_wait(&req[0]));
    CHECK_OK(hcomm_wait(&req[1]));
    CHECK(req[0] == HCOMM_REQUEST_NULL, "wait resets the request");
    int64_t half_sum = 0;
    for (int r = rank % 2; r < nranks; r += 2)
        half_sum += r;
    int bad = 0;
    for (int i = 0; i < N; i++)
        bad += a[i] != half_sum + (int64_t)hsize * i ||
               b[i] != nranks - 1 + i || c[i] != i;
    CHECK(bad == 0, "concurrent split/dup/world: %d wrong", bad);
    CHECK_OK(hcomm_comm_free(&half));
    CHECK_OK(hcomm_comm_free(&dup));
    CHECK(half == HCOMM_COMM_NULL, "free resets the handle");
}

/* A non-blocking call makes progress while the caller computes and polls. */
static void test_overlap(hcomm_comm_t world) {
    size_t n = 1 << 20;
    float *x = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(i % 13);
    hcomm_request_t req;
    CHECK_OK(hcomm_iallreduce(x, x, n, HCOMM_FLOAT32, HCOMM_SUM, world, &req));
    volatile double work = 0;
    hcomm_status_t st = HCOMM_ERR_IN_PROGRESS;
    for (long step = 0; st == HCOMM_ERR_IN_PROGRESS; step++) {
        for (int k = 0; k < 1000; k++)
            work += k * 0.5;
        st = hcomm_test(&req);
    }
    CHECK(st == HCOMM_SUCCESS, "test: %s", hcomm_strerror(st));
    CHECK(req == HCOMM_REQUEST_NULL, "test resets a completed request");
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += x[i] != (float)(i % 13) * nranks;
    CHECK(bad == 0, "overlapped iallreduce: %zu wrong", bad);
    free(x);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    check_rank = rank;
    hcomm_comm_t world;
    CHECK_OK(hcomm_init(&argc, &argv));
    CHECK_OK(hcomm_comm_create(MPI_COMM_WORLD, &world));
    test_matrix(world);
    test_shm_paths(world);
    test_large(world);
    test_concurrent_comms(world);
    test_overlap(world);
    CHECK_OK(hcomm_comm_free(&world));
    CHECK_OK(hcomm_finalize());
    int rc = check_summary("test_allreduce");
    MPI_Finalize();
    return rc;
}
