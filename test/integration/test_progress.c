/* HCOMM collectives in a program that also sends with MPI: each even rank
 * starts a large MPI send to the next odd rank, then calls a collective,
 * then waits for the send; the odd rank receives first. Without
 * single-copy reads (turned off here for Open MPI) the send moves only
 * while its sender's MPI progresses, so a collective must let MPI run while
 * it waits (or is tested), or both ranks wait for each other until the
 * timeout. */
#include "mpi_check.h"

#include <mpi.h>
#include <stdlib.h>
#include <string.h>

enum { ALLREDUCE, TESTED_ALLREDUCE, BCAST, ALLGATHER, BARRIER, NCOLLS };
static const char *names[] = {"allreduce", "iallreduce tested in a loop",
                              "bcast", "allgather", "barrier"};

static hcomm_status_t collective(int which, int64_t *v, int64_t *all, int n,
                                 hcomm_comm_t comm) {
    switch (which) {
    case ALLREDUCE:
        return hcomm_allreduce(v, v, (size_t)n, HCOMM_INT64, HCOMM_SUM, comm);
    case TESTED_ALLREDUCE: {
        hcomm_request_t req;
        hcomm_status_t st = hcomm_iallreduce(v, v, (size_t)n, HCOMM_INT64,
                                             HCOMM_SUM, comm, &req);
        while (st == HCOMM_SUCCESS &&
               (st = hcomm_test(&req)) == HCOMM_ERR_IN_PROGRESS)
            st = HCOMM_SUCCESS;
        return st;
    }
    case BCAST:
        return hcomm_broadcast(v, (size_t)n, HCOMM_INT64, 0, comm);
    case ALLGATHER:
        return hcomm_allgather(v, all, (size_t)n, HCOMM_INT64, comm);
    default:
        return hcomm_barrier(comm);
    }
}

/* What rank r holds after collective which, element i (allgather: of the
 * gathered buffer), when rank q started with q * 100 + i. */
static int64_t expected(int which, int size, int r, int i, int n) {
    switch (which) {
    case ALLREDUCE:
    case TESTED_ALLREDUCE:
        return (int64_t)100 * size * (size - 1) / 2 + (int64_t)size * i;
    case BCAST:
        return i;
    case ALLGATHER:
        return (int64_t)(i / n) * 100 + i % n;
    default:
        return (int64_t)r * 100 + i;
    }
}

static void cases(hcomm_comm_t comm, const char *label, char *msg) {
    static const int sizes[] = {64 << 10, 1 << 20, 4 << 20}; /* bytes */
    enum { N = 5 };
    int rank, size;
    hcomm_comm_rank(comm, &rank);
    hcomm_comm_size(comm, &size);
    int64_t v[N], *all = malloc(sizeof(int64_t) * N * (size_t)size);
    int peer = rank % 2 ? rank - 1 : rank + 1;
    if (peer >= size) peer = MPI_PROC_NULL; /* an odd count's last rank */
    for (int c = 0; c < NCOLLS; c++) {
        for (size_t s = 0; s < sizeof(sizes) / sizeof(*sizes); s++) {
            int bytes = sizes[s], tag = c * 10 + (int)s;
            for (int i = 0; i < N; i++)
                v[i] = (int64_t)rank * 100 + i;
            if (rank % 2 == 0) {
                MPI_Request req;
                memset(msg, tag + rank, (size_t)bytes);
                MPI_Isend(msg, bytes, MPI_CHAR, peer, tag, MPI_COMM_WORLD,
                          &req);
                CHECK_OK(collective(c, v, all, N, comm));
                CHECK(MPI_Wait(&req, MPI_STATUS_IGNORE) == MPI_SUCCESS,
                      "%s: MPI_Wait failed", label);
            } else {
                memset(msg, 0, (size_t)bytes);
                MPI_Recv(msg, bytes, MPI_CHAR, peer, tag, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE);
                int wrong = 0;
                for (int i = 0; i < bytes; i++)
                    wrong += msg[i] != (char)(tag + peer);
                CHECK(wrong == 0, "%s, %s, %d B: %d bytes of the message wrong",
                      label, names[c], bytes, wrong);
                CHECK_OK(collective(c, v, all, N, comm));
            }
            int count = c == ALLGATHER ? N * size : N, wrong = 0;
            for (int i = 0; i < count; i++)
                wrong += (c == ALLGATHER ? all[i] : v[i]) !=
                         expected(c, size, rank, i, N);
            CHECK(wrong == 0, "%s, %s while a %d B send waits: %d wrong", label,
                  names[c], bytes, wrong);
        }
    }
    free(all);
}

int main(int argc, char **argv) {
    setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 1);
    setenv("HCOMM_TIMEOUT", "20", 1); /* a stall fails well before CI's */
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &check_rank);
    char *msg = malloc(4 << 20);
    /* First on the node's shared memory, then, with no segment
     * (HCOMM_SHM_SLOT_SIZE=0, read at hcomm_init), on the plans over the
     * transport: both wait in the same loop, which must let MPI run. */
    for (int pass = 0; pass < 2; pass++) {
        hcomm_comm_t comm;
        if (pass) setenv("HCOMM_SHM_SLOT_SIZE", "0", 1);
        CHECK_OK(hcomm_init(&argc, &argv));
        CHECK_OK(hcomm_comm_create(MPI_COMM_WORLD, &comm));
        cases(comm, pass ? "plans" : "shared memory", msg);
        CHECK_OK(hcomm_comm_free(&comm));
        CHECK_OK(hcomm_finalize());
    }
    free(msg);
    int rc = check_summary("progress");
    MPI_Finalize();
    return rc;
}
