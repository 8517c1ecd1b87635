/* Bad input: each call returns a named error with a message, sends
 * nothing, prints nothing on stdout, and leaves the communicator usable. A
 * rank that stays away makes its peers time out with a message that names
 * what they waited for. */
#include "mpi_check.h"

#include <mpi.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXPECT_ERR(want, call)                                                 \
    do {                                                                       \
        hcomm_status_t st_ = (call);                                           \
        CHECK(st_ == (want), "%s -> %s, expected %s", #call,                   \
              hcomm_strerror(st_), hcomm_strerror(want));                      \
        CHECK(strlen(hcomm_last_error()) > 0, "%s left no message", #call);    \
    } while (0)

int main(int argc, char **argv) {
    int rank, n;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    check_rank = rank;
    float x[4] = {1, 2, 3, 4}, y[64];
    hcomm_comm_t comm = HCOMM_COMM_NULL, freed;
    hcomm_request_t req;

    /* stdout goes to a file while the library runs, to prove it stays
     * silent there. */
    fflush(stdout);
    int saved_stdout = dup(1);
    FILE *capture = tmpfile();
    dup2(fileno(capture), 1);

    EXPECT_ERR(HCOMM_ERR_NOT_INITIALIZED,
               hcomm_allreduce(x, y, 4, HCOMM_FLOAT32, HCOMM_SUM, comm));
    EXPECT_ERR(HCOMM_ERR_NOT_INITIALIZED,
               hcomm_comm_create(MPI_COMM_WORLD, &comm));
    EXPECT_ERR(HCOMM_ERR_NOT_INITIALIZED, hcomm_finalize());

    /* Short, so that the absent-rank case below ends quickly. */
    setenv("HCOMM_TIMEOUT", "2", 1);
    CHECK_OK(hcomm_init(&argc, &argv));
    CHECK_OK(hcomm_init(&argc, &argv)); /* reference counted */
    CHECK_OK(hcomm_comm_create(MPI_COMM_WORLD, &comm));
    CHECK_OK(hcomm_comm_dup(comm, &freed));
    CHECK_OK(hcomm_comm_free(&freed));
    /* A non-blocking call not yet waited for keeps its communicator from
     * being freed, even when it has finished already (on 1 rank it
     * finishes as it starts): its wait still reads the communicator, which
     * a heap-use-after-free (ASan) showed freed under it. */
    CHECK_OK(hcomm_comm_dup(comm, &freed));
    {
        int one = 1, all = 0;
        hcomm_request_t r;
        CHECK_OK(
            hcomm_iallreduce(&one, &all, 1, HCOMM_INT32, HCOMM_SUM, freed, &r));
        EXPECT_ERR(HCOMM_ERR_INVALID_ARG, hcomm_comm_free(&freed));
        CHECK(strstr(hcomm_last_error(), "requests in flight") != NULL,
              "freeing a communicator under a request: '%s'",
              hcomm_last_error());
        CHECK_OK(hcomm_wait(&r));
        CHECK(all == n, "iallreduce under a refused free: %d", all);
        CHECK_OK(hcomm_comm_free(&freed));
    }

    EXPECT_ERR(HCOMM_ERR_INVALID_ARG,
               hcomm_allreduce(NULL, y, 4, HCOMM_FLOAT32, HCOMM_SUM, comm));
    EXPECT_ERR(HCOMM_ERR_INVALID_ARG,
               hcomm_allreduce(x, NULL, 4, HCOMM_FLOAT32, HCOMM_SUM, comm));
    EXPECT_ERR(HCOMM_ERR_INVALID_DTYPE,
               hcomm_allreduce(x, y, 4, (hcomm_dtype_t)99, HCOMM_SUM, comm));
    EXPECT_ERR(HCOMM_ERR_INVALID_DTYPE,
               hcomm_allreduce(x, y, 4, (hcomm_dtype_t)-1, HCOMM_SUM, comm));
    EXPECT_ERR(HCOMM_ERR_INVALID_OP,
               hcomm_allreduce(x, y, 4, HCOMM_FLOAT32, (hcomm_op_t)99, comm));
    EXPECT_ERR(
        HCOMM_ERR_INVALID_COMM,
        hcomm_allreduce(x, y, 4, HCOMM_FLOAT32, HCOMM_SUM, HCOMM_COMM_NULL));
    /* freed was reset to NULL; a copy of the old handle must fail too. */
    CHECK(freed == HCOMM_COMM_NULL, "free resets the handle");
    hcomm_comm_t stale;
    CHECK_OK(hcomm_comm_dup(comm, &stale));
    hcomm_comm_t stale_copy = stale;
    CHECK_OK(hcomm_comm_free(&stale));
    EXPECT_ERR(HCOMM_ERR_INVALID_COMM,
               hcomm_allreduce(x, y, 4, HCOMM_FLOAT32, HCOMM_SUM, stale_copy));
    EXPECT_ERR(HCOMM_ERR_INVALID_COMM, hcomm_comm_free(&stale_copy));
    EXPECT_ERR(HCOMM_ERR_INVALID_COMM,
               hcomm_allreduce(x, y, 4, HCOMM_FLOAT32, HCOMM_SUM,
                               (hcomm_comm_t)(uintptr_t)0x12345678));
    EXPECT_ERR(
        HCOMM_ERR_OVERFLOW,
        hcomm_allreduce(x, y, SIZE_MAX / 2, HCOMM_FLOAT32, HCOMM_SUM, comm));
    EXPECT_ERR(HCOMM_ERR_OVERFLOW,
               hcomm_allreduce(x, y, SIZE_MAX, HCOMM_UINT8, HCOMM_SUM, comm));
    EXPECT_ERR(HCOMM_ERR_INVALID_ARG,
               hcomm_iallreduce(x, y, 4, HCOMM_FLOAT32, HCOMM_SUM, comm, NULL));
    EXPECT_ERR(HCOMM_ERR_INVALID_ARG, hcomm_comm_create(MPI_COMM_WORLD, NULL));
    EXPECT_ERR(HCOMM_ERR_INVALID_COMM,
               hcomm_comm_create(MPI_COMM_NULL, &stale));
    EXPECT_ERR(HCOMM_ERR_INVALID_ARG, hcomm_wait(NULL));
    req = HCOMM_REQUEST_NULL;
    CHECK_OK(hcomm_wait(&req)); /* waiting on nothing succeeds */
    CHECK(strcmp(hcomm_strerror(HCOMM_ERR_TIMEOUT), "timeout") == 0,
          "strerror names the status");

    /* Zero elements: a no-op for every collective, NULL buffers allowed. */
    CHECK_OK(hcomm_allreduce(NULL, NULL, 0, HCOMM_FLOAT32, HCOMM_SUM, comm));
    CHECK_OK(hcomm_allgather(NULL, NULL, 0, HCOMM_INT8, comm));
    CHECK_OK(hcomm_reduce_scatter(NULL, NULL, 0, HCOMM_INT8, HCOMM_MAX, comm));
    CHECK_OK(hcomm_broadcast(NULL, 0, HCOMM_INT8, n - 1, comm));
    CHECK_OK(hcomm_reduce(NULL, NULL, 0, HCOMM_INT8, HCOMM_SUM, 0, comm));
    CHECK_OK(hcomm_alltoall(NULL, NULL, 0, HCOMM_INT8, comm));
    CHECK_OK(hcomm_gather(NULL, NULL, 0, HCOMM_INT8, 0, comm));
    CHECK_OK(hcomm_scatter(NULL, NULL, 0, HCOMM_INT8, 0, comm));
    CHECK_OK(hcomm_send(NULL, 0, HCOMM_INT8, (rank + 1) % n, 0, comm));
    CHECK_OK(hcomm_recv(NULL, 0, HCOMM_INT8, (rank + n - 1) % n, 0, comm));

    /* Roots, peers and tags out of range. */
    EXPECT_ERR(HCOMM_ERR_INVALID_ARG,
               hcomm_broadcast(x, 4, HCOMM_FLOAT32, n, comm));
    EXPECT_ERR(HCOMM_ERR_INVALID_ARG,
               hcomm_broadcast(x, 4, HCOMM_FLOAT32, -1, comm));
    EXPECT_ERR(HCOMM_ERR_INVALID_ARG,
               hcomm_reduce(x, y, 4, HCOMM_FLOAT32, HCOMM_SUM, n, comm));
    EXPECT_ERR(HCOMM_ERR_INVALID_ARG,
               hcomm_gather(x, y, 1, HCOMM_FLOAT32, n + 5, comm));
    EXPECT_ERR(HCOMM_ERR_INVALID_ARG,
               hcomm_scatter(x, y, 1, HCOMM_FLOAT32, -2, comm));
    EXPECT_ERR(HCOMM_ERR_INVALID_ARG,
               hcomm_send(x, 4, HCOMM_FLOAT32, n, 0, comm));
    EXPECT_ERR(HCOMM_ERR_INVALID_ARG,
               hcomm_recv(y, 4, HCOMM_FLOAT32, 0, HCOMM_TAG_MAX + 1, comm));
    EXPECT_ERR(HCOMM_ERR_INVALID_ARG,
               hcomm_send(x, 4, HCOMM_FLOAT32, 0, -1, comm));
    /* Overlapping buffers that are not the in-place form. */
    {
        float big[64];
        EXPECT_ERR(
            HCOMM_ERR_INVALID_ARG,
            hcomm_allreduce(big, big + 1, 4, HCOMM_FLOAT32, HCOMM_SUM, comm));
        EXPECT_ERR(HCOMM_ERR_INVALID_ARG,
                   hcomm_alltoall(big, big + 1, 2, HCOMM_FLOAT32, comm));
        EXPECT_ERR(HCOMM_ERR_INVALID_ARG,
                   hcomm_reduce_scatter(big, big + 1, 2, HCOMM_FLOAT32,
                                        HCOMM_SUM, comm));
        EXPECT_ERR(HCOMM_ERR_INVALID_ARG,
                   hcomm_allgather(big + 1, big, 2, HCOMM_FLOAT32, comm));
        EXPECT_ERR(HCOMM_ERR_INVALID_ARG,
                   hcomm_ialltoall(big, big + 1, 2, HCOMM_FLOAT32, comm, &req));
        CHECK(req == HCOMM_REQUEST_NULL, "a refused call gives no request");
    }

    /* After all that, the communicator still works. */
    CHECK_OK(hcomm_allreduce(x, y, 4, HCOMM_FLOAT32, HCOMM_SUM, comm));
    CHECK(y[0] == n && y[3] == 4.0f * n, "allreduce after errors: %g %g", y[0],
          y[3]);

    /* A rank that does not come: the others time out and say for whom. */
    if (n > 1) {
        hcomm_comm_t victim;
        int one = 1, got = 0;
        CHECK_OK(hcomm_comm_dup(comm, &victim));
        if (rank != 0) {
            hcomm_status_t st =
                hcomm_allreduce(&one, &got, 1, HCOMM_INT32, HCOMM_SUM, victim);
            CHECK(st == HCOMM_ERR_TIMEOUT, "absent rank: %s",
                  hcomm_strerror(st));
            CHECK(strstr(hcomm_last_error(), "waiting for") != NULL,
                  "timeout message names the wait: %s", hcomm_last_error());
            st = hcomm_allreduce(&one, &got, 1, HCOMM_INT32, HCOMM_SUM, victim);
            CHECK(st == HCOMM_ERR_TIMEOUT, "a failed communicator fails fast");
        }
        MPI_Barrier(MPI_COMM_WORLD);
        CHECK_OK(hcomm_comm_free(&victim));
        /* The same, non-blocking, waited for by a loop of tests: the loop
         * ends with the timeout too (given 10x its time here). */
        CHECK_OK(hcomm_comm_dup(comm, &victim));
        if (rank != 0) {
            hcomm_request_t req;
            hcomm_status_t st = hcomm_iallreduce(&one, &got, 1, HCOMM_INT32,
                                                 HCOMM_SUM, victim, &req);
            double t0 = MPI_Wtime();
            while (st == HCOMM_SUCCESS && MPI_Wtime() - t0 < 20 &&
                   (st = hcomm_test(&req)) == HCOMM_ERR_IN_PROGRESS)
                st = HCOMM_SUCCESS;
            CHECK(st == HCOMM_ERR_TIMEOUT, "absent rank, tests: %s",
                  hcomm_strerror(st));
            CHECK(req == HCOMM_REQUEST_NULL, "a timed-out request is freed");
        }
        MPI_Barrier(MPI_COMM_WORLD);
        CHECK_OK(hcomm_comm_free(&victim));
    }

    CHECK_OK(hcomm_comm_free(&comm));
    CHECK_OK(hcomm_finalize());
    CHECK_OK(hcomm_finalize());
    EXPECT_ERR(HCOMM_ERR_NOT_INITIALIZED,
               hcomm_allreduce(x, y, 4, HCOMM_FLOAT32, HCOMM_SUM, comm));

    /* Not a timeout: a program that computes for longer than
     * HCOMM_TIMEOUT while a call is in flight, then tests it until done.
     * On the plans (no segment), so that it takes many tests. */
    if (n > 1) {
        const size_t big = 8u << 20;
        float *in = malloc(big * sizeof(float)), *out = malloc(big * 4);
        hcomm_request_t req;
        for (size_t i = 0; i < big; i++)
            in[i] = (float)(i % 1000);
        setenv("HCOMM_SHM_SLOT_SIZE", "0", 1);
        CHECK_OK(hcomm_init(&argc, &argv));
        CHECK_OK(hcomm_comm_create(MPI_COMM_WORLD, &comm));
        hcomm_status_t st = hcomm_iallreduce(in, out, big, HCOMM_FLOAT32,
                                             HCOMM_SUM, comm, &req);
        sleep(3); /* the timeout is 2 s here */
        double t0 = MPI_Wtime();
        while (st == HCOMM_SUCCESS && MPI_Wtime() - t0 < 60 &&
               (st = hcomm_test(&req)) == HCOMM_ERR_IN_PROGRESS)
            st = HCOMM_SUCCESS;
        CHECK(st == HCOMM_SUCCESS && req == HCOMM_REQUEST_NULL,
              "tests after a long computation: %s (%s)", hcomm_strerror(st),
              hcomm_last_error());
        size_t wrong = 0;
        for (size_t i = 0; st == HCOMM_SUCCESS && i < big; i++)
            wrong += out[i] != (float)(n * (int)(i % 1000));
        CHECK(wrong == 0, "tests after a long computation: %zu wrong", wrong);
        CHECK_OK(hcomm_comm_free(&comm));
        CHECK_OK(hcomm_finalize());
        free(in);
        free(out);
    }

    /* HCOMM_CHUNK_SIZE=1 is refused at init with the floor named (it made
     * a 300,000-float allreduce time out); at the floor, 4K, that call on
     * the plans is exact and quick. */
    setenv("HCOMM_CHUNK_SIZE", "1", 1);
    EXPECT_ERR(HCOMM_ERR_INVALID_ARG, hcomm_init(&argc, &argv));
    CHECK(strstr(hcomm_last_error(), "HCOMM_CHUNK_SIZE=1: below the smallest "
                                     "allowed, 4096 bytes") != NULL,
          "HCOMM_CHUNK_SIZE=1: message '%s'", hcomm_last_error());
    setenv("HCOMM_CHUNK_SIZE", "4K", 1);
    setenv("HCOMM_TIMEOUT", "30", 1);
    setenv("HCOMM_SHM_SLOT_SIZE", "0", 1);
    CHECK_OK(hcomm_init(&argc, &argv));
    CHECK_OK(hcomm_comm_create(MPI_COMM_WORLD, &comm));
    {
        const size_t cnt = 300000;
        float *v = malloc(cnt * sizeof(float));
        for (size_t i = 0; i < cnt; i++)
            v[i] = (float)(i % 512 + rank);
        double t0 = MPI_Wtime();
        CHECK_OK(hcomm_allreduce(v, v, cnt, HCOMM_FLOAT32, HCOMM_SUM, comm));
        double took = MPI_Wtime() - t0;
        size_t wrong = 0;
        for (size_t i = 0; i < cnt; i++)
            wrong += v[i] != (float)(n * (int)(i % 512) + n * (n - 1) / 2);
        CHECK(wrong == 0, "300,000 floats in 4K chunks: %zu wrong", wrong);
        CHECK(took < 20, "300,000 floats in 4K chunks took %.1f s", took);
        free(v);
    }
    CHECK_OK(hcomm_comm_free(&comm));
    CHECK_OK(hcomm_finalize());
    unsetenv("HCOMM_CHUNK_SIZE");

    fflush(stdout);
    long printed = ftell(capture);
    dup2(saved_stdout, 1);
    CHECK(printed == 0, "the library printed %ld bytes on stdout", printed);
    int rc = check_summary("test_bad_input");
    MPI_Finalize();
    return rc;
}
