/* A correct MPI program that needs its collectives to let MPI progress:
 * each even rank starts a large send to the next odd rank, enters a
 * collective and only then waits for the send; the odd rank receives
 * first and joins the collective after. Without single-copy reads (turned
 * off here for Open MPI, as containers without ptrace rights have it) the
 * send moves only while its sender's MPI progresses, so a collective that
 * spins without letting MPI run would wait for a peer that waits for it.
 * Then the converse: a taken MPI_Iallreduce must move while its rank
 * blocks in an MPI call that is not HCOMM's. */
#define PU_MAIN
#include "preload_util.h"

enum { ALLREDUCE, IALLREDUCE, BCAST, ALLGATHER, NCOLLS };
static const char *names[] = {"allreduce", "iallreduce", "bcast", "allgather"};

static int collective(int which, double *v, double *all, int n) {
    switch (which) {
    case ALLREDUCE:
        return MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_SUM,
                             MPI_COMM_WORLD);
    case IALLREDUCE: {
        MPI_Request req;
        int rc = MPI_Iallreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_SUM,
                                MPI_COMM_WORLD, &req);
        return rc == MPI_SUCCESS ? MPI_Wait(&req, MPI_STATUS_IGNORE) : rc;
    }
    case BCAST:
        return MPI_Bcast(v, n, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    default:
        return MPI_Allgather(v, n, MPI_DOUBLE, all, n, MPI_DOUBLE,
                             MPI_COMM_WORLD);
    }
}

int main(int argc, char **argv) {
    setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 1);
    setenv("HCOMM_TIMEOUT", "20", 1); /* a stall fails well before CI's */
    MPI_Init(&argc, &argv);
    PMPI_Comm_rank(MPI_COMM_WORLD, &pu_rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &pu_size);
    static const int sizes[] = {64 << 10, 1 << 20, 4 << 20}; /* bytes */
    const int n = 8; /* elements of the collective */
    double v[8], *all = malloc(sizeof(double) * (size_t)n * (size_t)pu_size);
    char *msg = malloc(4 << 20);
    int peer = pu_rank % 2 ? pu_rank - 1 : pu_rank + 1;
    if (peer >= pu_size) peer = MPI_PROC_NULL; /* an odd count's last rank */
    /* The first taken call makes HCOMM's communicator through MPI, which
     * would let MPI progress: make it before the cases. */
    v[0] = 1;
    PU_OK(
        MPI_Allreduce(MPI_IN_PLACE, v, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    for (int c = 0; c < NCOLLS; c++) {
        for (size_t s = 0; s < sizeof(sizes) / sizeof(*sizes); s++) {
            int bytes = sizes[s], tag = c * 10 + (int)s;
            for (int i = 0; i < n; i++)
                v[i] = pu_rank * 100 + i;
            if (pu_rank % 2 == 0) {
                MPI_Request req;
                memset(msg, tag + pu_rank, (size_t)bytes);
                PU_OK(MPI_Isend(msg, bytes, MPI_CHAR, peer, tag, MPI_COMM_WORLD,
                                &req));
                PU_OK(collective(c, v, all, n));
                PU_OK(MPI_Wait(&req, MPI_STATUS_IGNORE));
            } else {
                memset(msg, 0, (size_t)bytes);
                PU_OK(MPI_Recv(msg, bytes, MPI_CHAR, peer, tag, MPI_COMM_WORLD,
                               MPI_STATUS_IGNORE));
                for (int i = 0; i < bytes; i++)
                    if (msg[i] != (char)(tag + peer)) {
                        PU_CHECK(0, "%s, %d B: byte %d of the message wrong",
                                 names[c], bytes, i);
                        break;
                    }
                PU_OK(collective(c, v, all, n));
            }
            int count = c == ALLGATHER ? n * pu_size : n;
            pu_report(pu_hash(c == ALLGATHER ? all : v,
                              sizeof(double) * (size_t)count, 0),
                      "%s while a %d B send waits", names[c], bytes);
        }
    }
    /* The other way round: a reduction in flight must move while its rank
     * blocks in a receive whose message the peer sends only once the
     * reduction is over on its side (8 MiB: many rounds, not one). */
    const int big = 1 << 20;
    double *w = malloc(sizeof(double) * (size_t)big);
    for (int i = 0; i < big; i++)
        w[i] = pu_rank + i;
    MPI_Request req;
    int token = 0, wrong = 0;
    PU_OK(MPI_Iallreduce(MPI_IN_PLACE, w, big, MPI_DOUBLE, MPI_SUM,
                         MPI_COMM_WORLD, &req));
    if (pu_rank % 2 == 0 && peer != MPI_PROC_NULL)
        PU_OK(MPI_Recv(&token, 1, MPI_INT, peer, 99, MPI_COMM_WORLD,
                       MPI_STATUS_IGNORE));
    PU_OK(MPI_Wait(&req, MPI_STATUS_IGNORE));
    if (pu_rank % 2)
        PU_OK(MPI_Send(&token, 1, MPI_INT, peer, 99, MPI_COMM_WORLD));
    for (int i = 0; i < big; i++)
        wrong += w[i] != pu_size * (pu_size - 1) / 2.0 + (double)pu_size * i;
    PU_CHECK(wrong == 0, "iallreduce across a receive: %d wrong", wrong);
    pu_report(pu_hash(w, sizeof(double) * (size_t)big, 0),
              "iallreduce while its rank waits in a receive");
    free(w);
    free(msg);
    free(all);
    int rc = pu_finish("progress");
    MPI_Finalize();
    return rc;
}
