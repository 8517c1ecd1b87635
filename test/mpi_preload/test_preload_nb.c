/* The non-blocking forms of the collectives libhcomm_mpi.so takes:
 * MPI_Ibcast, MPI_Iallgather, MPI_Ialltoall (MPI_INT, and every other int
 * of a strided buffer), MPI_Ireduce (every root), MPI_Ireduce_scatter_block
 * (in place and not) and MPI_Ibarrier, all in flight at once across a
 * blocking ring exchange, then waited for in reverse order; every element
 * checked. */
#define PU_MAIN
#include "preload_util.h"

#define N 7 /* ints per block: odd */
#define SENTINEL (-3333)

static MPI_Datatype strided_t;

static int value(int r, int i) {
    return r * 100 + i + 1;
}

/* A buffer of n ints, every other slot when strided. */
static int *ints(int strided, size_t n) {
    size_t slots = (strided ? 2 : 1) * n + 1;
    int *p = malloc(slots * sizeof(int));
    for (size_t i = 0; i < slots; i++)
        p[i] = SENTINEL;
    return p;
}
static int *at(int *p, int strided, size_t i) {
    return strided ? &p[2 * i] : &p[i];
}

static void round_of_calls(int strided, int in_place) {
    int n = pu_size, me = pu_rank, root = (n - 1 + strided) % n;
    MPI_Datatype t = strided ? strided_t : MPI_INT;
    MPI_Request req[7];
    int nreq = 0;
    /* bcast from root */
    int *bc = ints(strided, N);
    for (int i = 0; me == root && i < N; i++)
        *at(bc, strided, (size_t)i) = value(root, i);
    PU_OK(MPI_Ibcast(bc, N, t, root, MPI_COMM_WORLD, &req[nreq++]));
    /* allgather */
    int *ags = ints(strided, N), *agr = ints(strided, (size_t)(N * n));
    for (int i = 0; i < N; i++) {
        *at(ags, strided, (size_t)i) = value(me, i);
        if (in_place) *at(agr, strided, (size_t)(me * N + i)) = value(me, i);
    }
    PU_OK(MPI_Iallgather(in_place ? MPI_IN_PLACE : ags, N, t, agr, N, t,
                         MPI_COMM_WORLD, &req[nreq++]));
    /* alltoall: block j of rank q is value(q, j * N + i) */
    int *a2s = ints(strided, (size_t)(N * n)),
        *a2r = ints(strided, (size_t)(N * n));
    for (int i = 0; i < N * n; i++) {
        *at(a2s, strided, (size_t)i) = value(me, i);
        if (in_place) *at(a2r, strided, (size_t)i) = value(me, i);
    }
    PU_OK(MPI_Ialltoall(in_place ? MPI_IN_PLACE : a2s, N, t, a2r, N, t,
                        MPI_COMM_WORLD, &req[nreq++]));
    /* reduce of doubles to root, and reduce_scatter_block of ints */
    double rs[N], rr[N];
    for (int i = 0; i < N; i++) {
        rs[i] = value(me, i);
        rr[i] = in_place && me == root ? rs[i] : -1;
    }
    PU_OK(MPI_Ireduce(in_place && me == root ? MPI_IN_PLACE : rs, rr, N,
                      MPI_DOUBLE, MPI_SUM, root, MPI_COMM_WORLD, &req[nreq++]));
    int *rss = ints(0, (size_t)(N * n));
    int *rsr = ints(0, in_place ? (size_t)(N * n) : N);
    for (int i = 0; i < N * n; i++)
        rss[i] = value(me, i) % 50 - 20;
    if (in_place) memcpy(rsr, rss, (size_t)(N * n) * sizeof(int));
    PU_OK(MPI_Ireduce_scatter_block(in_place ? MPI_IN_PLACE : rss, rsr, N,
                                    MPI_INT, MPI_MAX, MPI_COMM_WORLD,
                                    &req[nreq++]));
    PU_OK(MPI_Ibarrier(MPI_COMM_WORLD, &req[nreq++]));
    /* a blocking exchange while everything is in flight */
    int out = me, in = -1, right = (me + 1) % n, left = (me - 1 + n) % n;
    PU_OK(MPI_Sendrecv(&out, 1, MPI_INT, right, 3, &in, 1, MPI_INT, left, 3,
                       MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    for (int k = nreq - 1; k >= 0; k--)
        PU_OK(MPI_Wait(&req[k], MPI_STATUS_IGNORE));
    size_t bad[5] = {0};
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < N; i++)
        bad[0] += *at(bc, strided, (size_t)i) != value(root, i);
    for (int q = 0; q < n; q++)
        for (int i = 0; i < N; i++) {
            int g = *at(agr, strided, (size_t)(q * N + i));
            int a = *at(a2r, strided, (size_t)(q * N + i));
            bad[1] += g != value(q, i);
            bad[2] += a != value(q, me * N + i);
            h = pu_hash(&g, sizeof(g), pu_hash(&a, sizeof(a), h));
        }
    for (int i = 0; i < N && me == root; i++) {
        double want = 0;
        for (int q = 0; q < n; q++)
            want += value(q, i);
        bad[3] += rr[i] != want;
    }
    for (int i = 0; i < N; i++) {
        int want = -1000;
        for (int q = 0; q < n; q++) {
            int v = value(q, me * N + i) % 50 - 20;
            want = v > want ? v : want;
        }
        bad[4] += rsr[i] != want;
        h = pu_hash(&rsr[i], sizeof(int), h);
    }
    static const char *what[] = {"ibcast", "iallgather", "ialltoall", "ireduce",
                                 "ireduce_scatter_block"};
    for (int k = 0; k < 5; k++)
        PU_CHECK(bad[k] == 0, "%s %s%s: %zu wrong", what[k],
                 strided ? "strided" : "int", in_place ? " in place" : "",
                 bad[k]);
    pu_report(h, "non-blocking round %s%s", strided ? "strided" : "int",
              in_place ? " in place" : "");
    free(bc);
    free(ags);
    free(agr);
    free(a2s);
    free(a2r);
    free(rss);
    free(rsr);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &pu_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &pu_size);
    strided_t = pu_every_other_int();
    for (int strided = 0; strided < 2; strided++)
        for (int ip = 0; ip < 2; ip++)
            round_of_calls(strided, ip);
    MPI_Type_free(&strided_t);
    int rc = pu_finish("test_preload_nb");
    MPI_Finalize();
    return rc;
}
