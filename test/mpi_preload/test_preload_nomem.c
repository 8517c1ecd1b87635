/* One rank short of memory for a call its peers take: under the preload it
 * must report MPI_ERR_NO_MEM itself, not hand the call to MPI, where it
 * would wait forever for peers that are in HCOMM; the peers then fail
 * within HCOMM's timeout. Rank 1 limits its address space just before
 * each such call, so that the scratch for packing its derived datatype
 * cannot be had. Each case runs on a communicator of its own (with
 * MPI_ERRORS_RETURN), which a small call first sets up, and which the
 * failure leaves broken. Without the preload (or with it passing calls
 * through) MPI needs no such scratch: the cases are skipped, and stdout is
 * the same either way. */
#define PU_MAIN
#include "preload_util.h"

#include <sys/resource.h>

enum { ALLGATHERV, ALLTOALLV, GATHER, NCASES };
static const char *names[] = {"MPI_Allgatherv", "MPI_Alltoallv", "MPI_Gather"};
/* HCOMM_TIMEOUT, seconds: the peers wait it out in each case (3 s made
 * this test take 21 s of CI's) */
static const double timeout = 1;

/* Every other int of its buffers: a datatype the preload packs. n of them
 * per rank. */
static int call(int which, MPI_Datatype t, const int *send, int *recv, int n,
                MPI_Comm comm) {
    int *counts = malloc(sizeof(int) * (size_t)pu_size);
    int *displs = malloc(sizeof(int) * (size_t)pu_size);
    for (int r = 0; r < pu_size; r++) {
        counts[r] = n;
        displs[r] = r * n;
    }
    int rc;
    switch (which) {
    case ALLGATHERV:
        rc = MPI_Allgatherv(send, n, t, recv, counts, displs, t, comm);
        break;
    case ALLTOALLV:
        rc = MPI_Alltoallv(send, counts, displs, t, recv, counts, displs, t,
                           comm);
        break;
    default: /* rooted at rank 1, whose receive side needs the scratch */
        rc = MPI_Gather(send, n, t, recv, n, t, 1, comm);
    }
    free(counts);
    free(displs);
    return rc;
}

/* The soft limit on this process's address space: its size now plus a
 * little, or back where it was (limit NULL). */
static void limit_memory(struct rlimit *saved) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = 0;
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "VmSize: %ld kB", &kib) == 1) break;
    if (f) fclose(f);
    getrlimit(RLIMIT_AS, saved);
    struct rlimit tight = *saved;
    tight.rlim_cur = (rlim_t)(kib + 4096) * 1024;
    PU_CHECK(kib > 0 && setrlimit(RLIMIT_AS, &tight) == 0,
             "could not limit the address space (VmSize %ld kB)", kib);
}

static void short_of_memory(int which, MPI_Datatype t) {
    const int small = 1000, large = 4 << 20; /* large: 16 MiB a block */
    size_t slots = 2 * (size_t)large * (size_t)pu_size;
    int *send = calloc(slots, sizeof(int)), *recv = calloc(slots, sizeof(int));
    MPI_Comm comm;
    PMPI_Comm_dup(MPI_COMM_WORLD, &comm);
    PMPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    for (size_t i = 0; i < slots; i++)
        send[i] = pu_rank * 1000 + (int)(i % 1000);
    PU_OK(call(which, t, send, recv, small, comm)); /* sets comm up */
    struct rlimit saved;
    if (pu_rank == 1) limit_memory(&saved);
    double t0 = MPI_Wtime();
    int rc = call(which, t, send, recv, large, comm);
    double took = MPI_Wtime() - t0;
    if (pu_rank == 1) setrlimit(RLIMIT_AS, &saved);
    int cls = MPI_SUCCESS;
    if (rc != MPI_SUCCESS) PMPI_Error_class(rc, &cls);
    if (pu_rank == 1)
        PU_CHECK(cls == MPI_ERR_NO_MEM,
                 "%s: the rank short of memory returned error class %d, not "
                 "MPI_ERR_NO_MEM (%d)",
                 names[which], cls, MPI_ERR_NO_MEM);
    else
        PU_CHECK(rc != MPI_SUCCESS && took < 3 * timeout,
                 "%s: a peer of the rank short of memory returned %d after "
                 "%.1f s",
                 names[which], rc, took);
    fprintf(stderr, "# rank %d: %s returned class %d after %.2f s\n", pu_rank,
            names[which], cls, took);
    PMPI_Comm_free(&comm);
    free(send);
    free(recv);
}

int main(int argc, char **argv) {
    char seconds[16];
    snprintf(seconds, sizeof(seconds), "%g", timeout);
    setenv("HCOMM_TIMEOUT", seconds, 1);
    /* the timeouts' warnings (the flight recorder's file, abandoned
     * requests) are not this program's output */
    setenv("HCOMM_DEBUG", "error", 1);
    MPI_Init(&argc, &argv);
    PMPI_Comm_rank(MPI_COMM_WORLD, &pu_rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &pu_size);
    MPI_Datatype t = pu_every_other_int();
    /* AddressSanitizer's allocator (CI's sanitizer pass) aborts on memory
     * it cannot map instead of returning NULL: no case to test there */
    const char *sanitizer = getenv("HCOMM_TEST_SANITIZER");
    int checked = !sanitizer || atoi(sanitizer) == 0;
    if (checked && pu_expect_hcomm() && pu_size >= 2)
        for (int which = 0; which < NCASES; which++)
            short_of_memory(which, t);
    PMPI_Barrier(MPI_COMM_WORLD);
    MPI_Type_free(&t);
    int rc = pu_finish("test_preload_nomem");
    MPI_Finalize();
    return rc;
}
