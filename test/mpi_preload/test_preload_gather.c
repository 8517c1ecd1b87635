/* MPI_Gather and MPI_Scatter, and MPI_Igather and MPI_Iscatter, through
 * libhcomm_mpi.so: every root, counts 0, 1 and 7, in place at the root and
 * not, ranks describing the same ints with different datatypes (MPI_INT,
 * 4 x MPI_BYTE, every other int of a strided buffer). Every element is
 * checked, and what a rank does not receive must keep what it held; the
 * non-blocking calls stay in flight across a blocking ring exchange. */
#define PU_MAIN
#include "preload_ints.h"

#define SENTINEL (-5555)

static int value(int r, int i) {
    return r * 1000 + i * 3 + 1;
}

static void wait_with_ring(MPI_Request *req) {
    int out = pu_rank, in = -1, right = (pu_rank + 1) % pu_size,
        left = (pu_rank - 1 + pu_size) % pu_size;
    PU_OK(MPI_Sendrecv(&out, 1, MPI_INT, right, 9, &in, 1, MPI_INT, left, 9,
                       MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    PU_OK(MPI_Wait(req, MPI_STATUS_IGNORE));
}

static void gather_case(int root, int c, int kind, int in_place, int nb) {
    int n = pu_size, me = pu_rank;
    ibuf_t s, r;
    ibuf_alloc(&s, kind, (size_t)c, SENTINEL);
    ibuf_alloc(&r, kind, (size_t)(c * n), SENTINEL);
    for (int i = 0; i < c; i++) {
        *ibuf_at(&s, (size_t)i) = value(me, i);
        if (in_place && me == root)
            *ibuf_at(&r, (size_t)(me * c + i)) = value(me, i);
    }
    const void *sb = in_place && me == root ? MPI_IN_PLACE : s.mem;
    MPI_Request req;
    if (nb) {
        PU_OK(MPI_Igather(sb, c * ibuf_unit(&s), ibuf_type(&s), r.mem,
                          c * ibuf_unit(&r), ibuf_type(&r), root,
                          MPI_COMM_WORLD, &req));
        wait_with_ring(&req);
    } else {
        PU_OK(MPI_Gather(sb, c * ibuf_unit(&s), ibuf_type(&s), r.mem,
                         c * ibuf_unit(&r), ibuf_type(&r), root,
                         MPI_COMM_WORLD));
    }
    size_t bad = 0;
    for (int q = 0; q < n; q++)
        for (int i = 0; i < c; i++)
            bad += *ibuf_at(&r, (size_t)(q * c + i)) !=
                   (me == root ? value(q, i) : SENTINEL);
    bad +=
        r.mem[r.kind == AS_STRIDED ? 2 * (size_t)(c * n) : (size_t)(c * n)] !=
        SENTINEL;
    PU_CHECK(bad == 0, "%sgather root %d count %d %s%s: %zu wrong",
             nb ? "i" : "", root, c, kind_names[kind],
             in_place ? " in place" : "", bad);
    pu_report(ibuf_hash(&r), "%sgather root %d count %d%s", nb ? "i" : "", root,
              c, in_place ? " in place" : "");
    free(s.mem);
    free(r.mem);
}

static void scatter_case(int root, int c, int kind, int in_place, int nb) {
    int n = pu_size, me = pu_rank;
    ibuf_t s, r;
    ibuf_alloc(&s, kind, (size_t)(c * n), SENTINEL);
    ibuf_alloc(&r, kind, (size_t)c, SENTINEL);
    if (me == root)
        for (int i = 0; i < c * n; i++)
            *ibuf_at(&s, (size_t)i) = value(me, i);
    void *rb = in_place && me == root ? MPI_IN_PLACE : r.mem;
    MPI_Request req;
    if (nb) {
        PU_OK(MPI_Iscatter(s.mem, c * ibuf_unit(&s), ibuf_type(&s), rb,
                           c * ibuf_unit(&r), ibuf_type(&r), root,
                           MPI_COMM_WORLD, &req));
        wait_with_ring(&req);
    } else {
        PU_OK(MPI_Scatter(s.mem, c * ibuf_unit(&s), ibuf_type(&s), rb,
                          c * ibuf_unit(&r), ibuf_type(&r), root,
                          MPI_COMM_WORLD));
    }
    size_t bad = 0;
    ibuf_t *got = in_place && me == root ? &s : &r;
    size_t first = in_place && me == root ? (size_t)(me * c) : 0;
    for (int i = 0; i < c; i++)
        bad += *ibuf_at(got, first + (size_t)i) != value(root, me * c + i);
    if (me == root) /* the send buffer is read only */
        for (int i = 0; i < c * n; i++)
            bad += *ibuf_at(&s, (size_t)i) != value(me, i);
    PU_CHECK(bad == 0, "%sscatter root %d count %d %s%s: %zu wrong",
             nb ? "i" : "", root, c, kind_names[kind],
             in_place ? " in place" : "", bad);
    pu_report(ibuf_hash(&r), "%sscatter root %d count %d%s", nb ? "i" : "",
              root, c, in_place ? " in place" : "");
    free(s.mem);
    free(r.mem);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &pu_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &pu_size);
    pu_strided_t = pu_every_other_int();
    static const int counts[] = {0, 1, 7};
    for (int nb = 0; nb < 2; nb++)
        for (int root = 0; root < pu_size; root++)
            for (int k = 0; k < 3; k++)
                for (int ip = 0; ip < 2; ip++)
                    for (int j = 0; j < NKINDS; j++) {
                        int kind = (j + pu_rank) % NKINDS;
                        gather_case(root, counts[k], kind, ip, nb);
                        scatter_case(root, counts[k], kind, ip, nb);
                    }
    MPI_Type_free(&pu_strided_t);
    int rc = pu_finish("test_preload_gather");
    MPI_Finalize();
    return rc;
}
