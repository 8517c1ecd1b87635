/* Communicators created, duplicated, split and freed in a loop (1000 times
 * by default) with collectives on each, some freed while a non-blocking
 * call still runs on them. Checks every result, that the program's
 * attribute copy callbacks run only for its own duplications (libhcomm_mpi
 * must not duplicate behind its back), and that resident memory stops
 * growing: at most HCOMM_TEST_RSS_BOUND_KIB (default 1024) between the
 * 100th iteration and the last. */
#define PU_MAIN
#include "preload_util.h"

static long copies; /* calls of the program's copy callback */

static int count_copy(MPI_Comm comm, int keyval, void *extra, void *in,
                      void *out, int *flag) {
    (void)comm, (void)keyval, (void)extra;
    copies++;
    *(void **)out = in;
    *flag = 1;
    return MPI_SUCCESS;
}

static uint64_t digest;

static void sum_check(MPI_Comm comm, int salt, int count) {
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int *v = malloc(sizeof(int) * (size_t)count);
    for (int i = 0; i < count; i++)
        v[i] = rank + salt + i;
    PU_OK(MPI_Allreduce(MPI_IN_PLACE, v, count, MPI_INT, MPI_SUM, comm));
    for (int i = 0; i < count; i++)
        PU_CHECK(v[i] == size * (size - 1) / 2 + size * (salt + i),
                 "allreduce on a communicator of %d", size);
    digest = pu_hash(v, sizeof(int) * (size_t)count, digest);
    free(v);
}

int main(int argc, char **argv) {
    int iters = argc > 1 ? atoi(argv[1]) : 1000, keyval;
    const char *b = getenv("HCOMM_TEST_RSS_BOUND_KIB");
    long bound = b ? atol(b) : 1024, rss_warm = 0;
    MPI_Init(&argc, &argv);
    PMPI_Comm_rank(MPI_COMM_WORLD, &pu_rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &pu_size);
    PU_OK(MPI_Comm_create_keyval(count_copy, MPI_COMM_NULL_DELETE_FN, &keyval,
                                 NULL));
    PU_OK(MPI_Comm_set_attr(MPI_COMM_WORLD, keyval, &copies));
    for (int it = 0; it < iters; it++) {
        MPI_Comm dup, split, again;
        MPI_Request req;
        PU_OK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
        PU_OK(MPI_Comm_split(dup, pu_rank % 2, -pu_rank, &split));
        sum_check(dup, it, 3);
        sum_check(split, it, it % 7 == 0 ? 5000 : 1);
        int root_value = it;
        PU_OK(MPI_Bcast(&root_value, 1, MPI_INT, 0, split));
        PU_CHECK(root_value == it, "bcast");
        PU_OK(MPI_Barrier(dup));
        if (it % 10 == 0) { /* a duplicate has its own HCOMM communicator */
            PU_OK(MPI_Comm_dup(split, &again));
            sum_check(again, -it, 2);
            PU_OK(MPI_Comm_free(&again));
        }
        if (it % 50 == 0) {
            /* Freed while its call runs, which MPI allows; Open MPI 4.1.4
             * alone crashes on it (libnbc), so only under HCOMM. */
            int v = pu_rank, r = -1, early = pu_expect_hcomm();
            PU_OK(MPI_Iallreduce(&v, &r, 1, MPI_INT, MPI_SUM, dup, &req));
            if (early) PU_OK(MPI_Comm_free(&dup));
            PU_OK(MPI_Wait(&req, MPI_STATUS_IGNORE));
            if (!early) PU_OK(MPI_Comm_free(&dup));
            PU_CHECK(r == pu_size * (pu_size - 1) / 2, "iallreduce %d", r);
        } else {
            PU_OK(MPI_Comm_free(&dup));
        }
        PU_OK(MPI_Comm_free(&split));
        if (it == 99) rss_warm = pu_rss_kib();
    }
    long rss_end = pu_rss_kib();
    if (iters > 100) {
        fprintf(stderr,
                "# rank %d: resident memory %ld KiB after 100 iterations, "
                "%ld KiB after %d (growth %ld KiB, bound %ld)\n",
                pu_rank, rss_warm, rss_end, iters, rss_end - rss_warm, bound);
        /* AddressSanitizer's quarantine keeps freed memory on purpose:
         * there LeakSanitizer checks for leaks at exit instead. */
        int bounded = 1;
#ifdef __SANITIZE_ADDRESS__
        bounded = 0;
#endif
        PU_CHECK(!bounded || rss_end - rss_warm <= bound,
                 "resident memory grew by %ld KiB", rss_end - rss_warm);
    }
    PU_CHECK(copies == iters, "copy callback ran %ld times for %d dups", copies,
             iters);
    pu_report(digest, "comms %d iterations, %ld copies", iters, copies);
    PU_OK(MPI_Comm_delete_attr(MPI_COMM_WORLD, keyval));
    PU_OK(MPI_Comm_free_keyval(&keyval));
    int rc = pu_finish("test_preload_comms");
    MPI_Finalize();
    return rc;
}
