/* The variable-count collectives through libhcomm_mpi.so: MPI_Allgatherv,
 * MPI_Alltoallv and MPI_Reduce_scatter and their MPI_I* forms, counts that
 * differ per rank (and per pair) with zeros, blocks out of rank order with
 * gaps that must stay untouched, in place and not, and ranks describing
 * the same bytes with different datatypes (MPI_INT, 4 x MPI_BYTE, a
 * strided vector). Every result is checked against values computed here;
 * the non-blocking calls stay in flight across a blocking ring exchange. */
#define PU_MAIN
#include "preload_ints.h"

#define SENTINEL (-7777)

static int value(int r, int i) {
    return r * 1000 + i * 7 + 1;
}

/* Ints i of rank r's pattern p block for peer j (or its own, j == r). */
static int count_of(int p, int i, int j) {
    int a = i < j ? i : j, b = i < j ? j : i;
    switch (p) {
    case 0:
        return (a * 3 + b * 5 + 1) % 4; /* 0..3 */
    case 1:
        return a == b ? 0 : 5;
    default:
        return (a + b) % 3 ? 1 : 13;
    }
}
#define NPATTERNS 3

/* Blocks in reverse rank order, a gap of two ints before each. Alone,
 * no gap: MPICH 4.0's MPI_Allgatherv on one rank puts the block at the
 * buffer's start whatever its displacement. */
static size_t place(const int *counts, int *displs, int n) {
    size_t at = 0, gap = n > 1 ? 2 : 0;
    for (int b = n - 1; b >= 0; b--) {
        displs[b] = (int)(at + gap);
        at += (size_t)counts[b] + gap;
    }
    return at;
}

static void wait_with_ring(MPI_Request *req) {
    /* a blocking exchange while the call is in flight */
    int out = pu_rank, in = -1;
    int right = (pu_rank + 1) % pu_size,
        left = (pu_rank - 1 + pu_size) % pu_size;
    PU_OK(MPI_Sendrecv(&out, 1, MPI_INT, right, 5, &in, 1, MPI_INT, left, 5,
                       MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    PU_CHECK(in == left, "ring exchange got %d", in);
    PU_OK(MPI_Wait(req, MPI_STATUS_IGNORE));
}

static void allgatherv_case(int p, int kind, int in_place, int nb) {
    int n = pu_size, me = pu_rank, counts[64], displs[64], rc[64], rd[64];
    for (int b = 0; b < n; b++)
        counts[b] = count_of(p, b, b);
    size_t ext = place(counts, displs, n);
    ibuf_t r, s;
    ibuf_alloc(&r, kind, ext, SENTINEL);
    ibuf_alloc(&s, kind, (size_t)counts[me], SENTINEL);
    int u = ibuf_unit(&r);
    for (int b = 0; b < n; b++) {
        rc[b] = counts[b] * u;
        rd[b] = displs[b] * u;
    }
    for (int i = 0; i < counts[me]; i++) {
        *ibuf_at(&s, (size_t)i) = value(me, i);
        if (in_place) *ibuf_at(&r, (size_t)(displs[me] + i)) = value(me, i);
    }
    const void *sb = in_place ? MPI_IN_PLACE : s.mem;
    MPI_Request req;
    if (nb) {
        PU_OK(MPI_Iallgatherv(sb, rc[me], ibuf_type(&s), r.mem, rc, rd,
                              ibuf_type(&r), MPI_COMM_WORLD, &req));
        wait_with_ring(&req);
    } else {
        PU_OK(MPI_Allgatherv(sb, rc[me], ibuf_type(&s), r.mem, rc, rd,
                             ibuf_type(&r), MPI_COMM_WORLD));
    }
    size_t bad = 0;
    for (size_t i = 0; i < ext; i++) {
        int want = SENTINEL;
        for (int b = 0; b < n; b++)
            if (i >= (size_t)displs[b] && i < (size_t)(displs[b] + counts[b]))
                want = value(b, (int)i - displs[b]);
        bad += *ibuf_at(&r, i) != want;
    }
    PU_CHECK(bad == 0, "allgatherv pattern %d %s %s%s: %zu wrong", p,
             kind_names[kind], in_place ? "in place" : "",
             nb ? " non-blocking" : "", bad);
    pu_report(ibuf_hash(&r), "%sallgatherv pattern %d as %s%s", nb ? "i" : "",
              p, kind_names[kind], in_place ? " in place" : "");
    free(r.mem);
    free(s.mem);
}

static void alltoallv_case(int p, int kind, int in_place, int nb) {
    int n = pu_size, me = pu_rank;
    int sc[64] = {0}, sd[64] = {0}, rc[64] = {0}, rd[64] = {0};
    int scu[64], sdu[64], rcu[64], rdu[64];
    for (int j = 0; j < n; j++) {
        sc[j] = count_of(p, me, j);
        rc[j] = count_of(p, j, me);
    }
    size_t sext = place(sc, sd, n), rext = place(rc, rd, n);
    ibuf_t r, s;
    ibuf_alloc(&r, kind, rext, SENTINEL);
    ibuf_alloc(&s, kind, sext, SENTINEL);
    int u = ibuf_unit(&r);
    for (int j = 0; j < n; j++) {
        scu[j] = sc[j] * u;
        sdu[j] = sd[j] * u;
        rcu[j] = rc[j] * u;
        rdu[j] = rd[j] * u;
    }
    /* what rank q sends rank t: value(q, t * 100 + i) */
    for (int j = 0; j < n; j++)
        for (int i = 0; i < sc[j]; i++) {
            *ibuf_at(&s, (size_t)(sd[j] + i)) = value(me, j * 100 + i);
            if (in_place)
                *ibuf_at(&r, (size_t)(rd[j] + i)) = value(me, j * 100 + i);
        }
    const void *sb = in_place ? MPI_IN_PLACE : s.mem;
    MPI_Request req;
    if (nb) {
        PU_OK(MPI_Ialltoallv(sb, scu, sdu, ibuf_type(&s), r.mem, rcu, rdu,
                             ibuf_type(&r), MPI_COMM_WORLD, &req));
        wait_with_ring(&req);
    } else {
        PU_OK(MPI_Alltoallv(sb, scu, sdu, ibuf_type(&s), r.mem, rcu, rdu,
                            ibuf_type(&r), MPI_COMM_WORLD));
    }
    size_t bad = 0;
    for (size_t i = 0; i < rext; i++) {
        int want = SENTINEL;
        for (int j = 0; j < n; j++)
            if (i >= (size_t)rd[j] && i < (size_t)(rd[j] + rc[j]))
                want = value(j, me * 100 + (int)i - rd[j]);
        bad += *ibuf_at(&r, i) != want;
    }
    PU_CHECK(bad == 0, "alltoallv pattern %d %s %s%s: %zu wrong", p,
             kind_names[kind], in_place ? "in place" : "",
             nb ? " non-blocking" : "", bad);
    pu_report(ibuf_hash(&r), "%salltoallv pattern %d as %s%s", nb ? "i" : "", p,
              kind_names[kind], in_place ? " in place" : "");
    free(r.mem);
    free(s.mem);
}

/* Integers in doubles, so every order of the reduction is exact. */
static void reduce_scatter_case(int p, MPI_Datatype dt, int op_i, int in_place,
                                int nb) {
    static const MPI_Op ops[] = {MPI_SUM, MPI_PROD, MPI_MAX, MPI_MIN};
    static const char *op_names[] = {"sum", "prod", "max", "min"};
    int n = pu_size, me = pu_rank, counts[64], total = 0, before = 0;
    for (int b = 0; b < n; b++) {
        counts[b] = count_of(p, b, b);
        if (b < me) before += counts[b];
        total += counts[b];
    }
    int dbl = dt == MPI_DOUBLE;
    size_t es = dbl ? sizeof(double) : sizeof(int);
    char *s = malloc((size_t)total * es + 8),
         *r = malloc((size_t)total * es + 8);
    for (int i = 0; i < total; i++) {
        int v = op_i == 1 ? (me + i) % 3 + 1 : value(me, i) % 97 - 40;
        if (dbl)
            ((double *)s)[i] = v;
        else
            ((int *)s)[i] = v;
    }
    memset(r, 0x11, (size_t)total * es + 8);
    if (in_place) memcpy(r, s, (size_t)total * es);
    const void *sb = in_place ? MPI_IN_PLACE : s;
    MPI_Request req;
    if (nb) {
        PU_OK(MPI_Ireduce_scatter(sb, r, counts, dt, ops[op_i], MPI_COMM_WORLD,
                                  &req));
        wait_with_ring(&req);
    } else {
        PU_OK(MPI_Reduce_scatter(sb, r, counts, dt, ops[op_i], MPI_COMM_WORLD));
    }
    size_t bad = 0;
    for (int i = 0; i < counts[me]; i++) {
        double want = op_i == 1 ? 1 : op_i == 2 ? -1e9 : op_i == 3 ? 1e9 : 0;
        for (int q = 0; q < n; q++) {
            int g = before + i;
            double v = op_i == 1 ? (q + g) % 3 + 1 : value(q, g) % 97 - 40;
            want = op_i == 0   ? want + v
                   : op_i == 1 ? want * v
                   : op_i == 2 ? (v > want ? v : want)
                               : (v < want ? v : want);
        }
        double got = dbl ? ((double *)r)[i] : ((int *)r)[i];
        bad += got != want;
    }
    PU_CHECK(bad == 0, "reduce_scatter pattern %d %s %s%s%s: %zu wrong", p,
             dbl ? "double" : "int", op_names[op_i],
             in_place ? " in place" : "", nb ? " non-blocking" : "", bad);
    pu_report(pu_hash(r, (size_t)counts[me] * es, 0xcbf29ce484222325ull),
              "%sreduce_scatter pattern %d %s %s%s", nb ? "i" : "", p,
              dbl ? "double" : "int", op_names[op_i],
              in_place ? " in place" : "");
    free(s);
    free(r);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &pu_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &pu_size);
    pu_strided_t = pu_every_other_int();
    for (int nb = 0; nb < 2; nb++)
        for (int p = 0; p < NPATTERNS; p++)
            for (int ip = 0; ip < 2; ip++) {
                /* ranks describe their ints each their own way */
                for (int k = 0; k < NKINDS; k++) {
                    int kind = (k + pu_rank) % NKINDS;
                    allgatherv_case(p, kind, ip, nb);
                    alltoallv_case(p, kind, ip, nb);
                }
                for (int op = 0; op < 4; op++) {
                    reduce_scatter_case(p, MPI_INT, op, ip, nb);
                    reduce_scatter_case(p, MPI_DOUBLE, op, ip, nb);
                }
            }
    MPI_Type_free(&pu_strided_t);
    int rc = pu_finish("test_preload_v");
    MPI_Finalize();
    return rc;
}
