/* HCOMM_CHECK=1: ranks that pass one collective different counts, types,
 * operations, roots or collectives all get HCOMM_ERR_MISMATCH naming the
 * field and ranks, before anything moves (receive buffers untouched), and
 * the communicator goes on working; a rank that refuses its arguments makes
 * every rank fail; on the shared segment and on the plans. Prints what the
 * check costs an 8-byte allreduce (not asserted). */
#include "mpi_check.h"

#include <mpi.h>
#include <stdlib.h>
#include <string.h>

static int rank, nranks;

#define SENTINEL 0x5a5a5a5a

static void expect_mismatch(hcomm_status_t st, const int *recv, size_t n,
                            const char *what, const char *field) {
    size_t touched = 0;
    for (size_t i = 0; i < n; i++)
        touched += recv[i] != SENTINEL;
    CHECK(st == HCOMM_ERR_MISMATCH, "%s: %s", what, hcomm_strerror(st));
    CHECK(strstr(hcomm_last_error(), field) &&
              strstr(hcomm_last_error(), "rank 0") &&
              strstr(hcomm_last_error(), "rank "),
          "%s: the message names '%s' and the ranks: %s", what, field,
          hcomm_last_error());
    CHECK(touched == 0, "%s: %zu elements of the receive buffer written", what,
          touched);
}

static void mismatches(hcomm_comm_t c, const char *path) {
    int send[200], recv[200];
    for (int i = 0; i < 200; i++)
        send[i] = rank, recv[i] = SENTINEL;
    char what[96];
    size_t count = rank == nranks - 1 ? 50 : 100;
    snprintf(what, sizeof(what), "%s: counts", path);
    expect_mismatch(
        hcomm_allreduce(send, recv, count, HCOMM_INT32, HCOMM_SUM, c), recv,
        200, what, "count differs");
    snprintf(what, sizeof(what), "%s: types", path);
    expect_mismatch(
        hcomm_allreduce(send, recv, 8,
                        rank == nranks - 1 ? HCOMM_FLOAT32 : HCOMM_INT32,
                        HCOMM_SUM, c),
        recv, 200, what, "data type differs");
    snprintf(what, sizeof(what), "%s: operations", path);
    expect_mismatch(hcomm_allreduce(send, recv, 8, HCOMM_INT32,
                                    rank == nranks - 1 ? HCOMM_MAX : HCOMM_SUM,
                                    c),
                    recv, 200, what, "operation differs");
    snprintf(what, sizeof(what), "%s: roots", path);
    expect_mismatch(
        hcomm_broadcast(recv, 8, HCOMM_INT32, rank == nranks - 1 ? 1 : 0, c),
        recv, 200, what, "root differs");
    snprintf(what, sizeof(what), "%s: collectives", path);
    expect_mismatch(
        rank == nranks - 1
            ? hcomm_broadcast(recv, 8, HCOMM_INT32, 0, c)
            : hcomm_allreduce(send, recv, 8, HCOMM_INT32, HCOMM_SUM, c),
        recv, 200, what, "collective differs");
    /* one rank's bad argument stops every rank */
    hcomm_status_t st = hcomm_allreduce(send, rank == 0 ? NULL : recv, 8,
                                        HCOMM_INT32, HCOMM_SUM, c);
    CHECK(st == HCOMM_ERR_INVALID_ARG &&
              (rank == 0 || strstr(hcomm_last_error(), "rank 0 refused")),
          "%s: a refused rank: %s (%s)", path, hcomm_strerror(st),
          hcomm_last_error());
    /* and the communicator still works */
    CHECK_OK(hcomm_allreduce(send, recv, 100, HCOMM_INT32, HCOMM_SUM, c));
    CHECK(recv[99] == nranks * (nranks - 1) / 2, "%s: allreduce after: %d",
          path, recv[99]);
}

static double time_allreduce(hcomm_comm_t c) {
    float x = 1, y;
    const int n = 20000;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < n; i++)
        hcomm_allreduce(&x, &y, 1, HCOMM_FLOAT32, HCOMM_SUM, c);
    return (MPI_Wtime() - t0) / n * 1e6;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    check_rank = rank;
    double us[2][2];
    for (int pass = 0; pass < 2; pass++) { /* shared segment, plans */
        setenv("HCOMM_SHM_SLOT_SIZE", pass ? "0" : "256K", 1);
        for (int on = 0; on < 2; on++) {
            setenv("HCOMM_CHECK", on ? "1" : "0", 1);
            CHECK_OK(hcomm_init(&argc, &argv));
            hcomm_comm_t c;
            CHECK_OK(hcomm_comm_create(MPI_COMM_WORLD, &c));
            if (on && nranks > 1) mismatches(c, pass ? "plans" : "shm");
            us[pass][on] = time_allreduce(c);
            CHECK_OK(hcomm_comm_free(&c));
            CHECK_OK(hcomm_finalize());
        }
    }
    if (rank == 0)
        printf("8-byte allreduce, %d ranks: shared memory %.2f us, with "
               "HCOMM_CHECK %.2f us; plans %.2f us, with HCOMM_CHECK %.2f us\n",
               nranks, us[0][0], us[0][1], us[1][0], us[1][1]);
    int rc = check_summary("test_check");
    MPI_Finalize();
    return rc;
}
