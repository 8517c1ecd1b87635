/* MPI_Gather and MPI_Scatter, and MPI_Igather and MPI_Iscatter, through
 * libhcomm_mpi.so: every root, counts 0, 1 and 7, in place at the root and
 * not, ranks describing the same ints with different datatypes (MPI_INT,
 * 4 x MPI_BYTE, every other int of a strided buffer). Every element is
 * checked, and what a rank does not receive must keep what it held; the
 * non-blocking calls stay in flight across a blocking ring exchange. */
#define PU_MAIN
#include "preload_util.h"

#define SENTINEL (-5555)

enum { AS_INT, AS_BYTES, AS_STRIDED, NKINDS };
static const char *kind_names[] = {"int", "bytes", "strided"};
static MPI_Datatype strided_t;

static int value(int r, int i) {
    return r * 1000 + i * 3 + 1;
}

/* n ints as a rank of kind k holds them (strided: every other slot). */
typedef struct {
    int kind, *mem;
    size_t n;
} ibuf_t;

static void ibuf_alloc(ibuf_t *b, int kind, size_t n) {
    size_t slots = kind == AS_STRIDED ? 2 * n + 1 : n + 1;
    b->kind = kind;
    b->n = n;
    b->mem = malloc(slots * sizeof(int));
    for (size_t i = 0; i < slots; i++)
        b->mem[i] = SENTINEL;
}
static int *at(ibuf_t *b, size_t i) {
    return b->kind == AS_STRIDED ? &b->mem[2 * i] : &b->mem[i];
}
static MPI_Datatype type_of(const ibuf_t *b) {
    return b->kind == AS_INT     ? MPI_INT
           : b->kind == AS_BYTES ? MPI_BYTE
                                 : strided_t;
}
static int units(const ibuf_t *b, int ints) {
    return b->kind == AS_BYTES ? ints * (int)sizeof(int) : ints;
}
static uint64_t hash_ints(ibuf_t *b) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < b->n; i++)
        h = pu_hash(at(b, i), sizeof(int), h);
    return h;
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
    ibuf_alloc(&s, kind, (size_t)c);
    ibuf_alloc(&r, kind, (size_t)(c * n));
    for (int i = 0; i < c; i++) {
        *at(&s, (size_t)i) = value(me, i);
        if (in_place && me == root)
            *at(&r, (size_t)(me * c + i)) = value(me, i);
    }
    const void *sb = in_place && me == root ? MPI_IN_PLACE : s.mem;
    MPI_Request req;
    if (nb) {
        PU_OK(MPI_Igather(sb, units(&s, c), type_of(&s), r.mem, units(&r, c),
                          type_of(&r), root, MPI_COMM_WORLD, &req));
        wait_with_ring(&req);
    } else {
        PU_OK(MPI_Gather(sb, units(&s, c), type_of(&s), r.mem, units(&r, c),
                         type_of(&r), root, MPI_COMM_WORLD));
    }
    size_t bad = 0;
    for (int q = 0; q < n; q++)
        for (int i = 0; i < c; i++)
            bad += *at(&r, (size_t)(q * c + i)) !=
                   (me == root ? value(q, i) : SENTINEL);
    bad +=
        r.mem[r.kind == AS_STRIDED ? 2 * (size_t)(c * n) : (size_t)(c * n)] !=
        SENTINEL;
    PU_CHECK(bad == 0, "%sgather root %d count %d %s%s: %zu wrong",
             nb ? "i" : "", root, c, kind_names[kind],
             in_place ? " in place" : "", bad);
    pu_report(hash_ints(&r), "%sgather root %d count %d%s", nb ? "i" : "", root,
              c, in_place ? " in place" : "");
    free(s.mem);
    free(r.mem);
}

static void scatter_case(int root, int c, int kind, int in_place, int nb) {
    int n = pu_size, me = pu_rank;
    ibuf_t s, r;
    ibuf_alloc(&s, kind, (size_t)(c * n));
    ibuf_alloc(&r, kind, (size_t)c);
    if (me == root)
        for (int i = 0; i < c * n; i++)
            *at(&s, (size_t)i) = value(me, i);
    void *rb = in_place && me == root ? MPI_IN_PLACE : r.mem;
    MPI_Request req;
    if (nb) {
        PU_OK(MPI_Iscatter(s.mem, units(&s, c), type_of(&s), rb, units(&r, c),
                           type_of(&r), root, MPI_COMM_WORLD, &req));
        wait_with_ring(&req);
    } else {
        PU_OK(MPI_Scatter(s.mem, units(&s, c), type_of(&s), rb, units(&r, c),
                          type_of(&r), root, MPI_COMM_WORLD));
    }
    size_t bad = 0;
    ibuf_t *got = in_place && me == root ? &s : &r;
    size_t first = in_place && me == root ? (size_t)(me * c) : 0;
    for (int i = 0; i < c; i++)
        bad += *at(got, first + (size_t)i) != value(root, me * c + i);
    if (me == root) /* the send buffer is read only */
        for (int i = 0; i < c * n; i++)
            bad += *at(&s, (size_t)i) != value(me, i);
    PU_CHECK(bad == 0, "%sscatter root %d count %d %s%s: %zu wrong",
             nb ? "i" : "", root, c, kind_names[kind],
             in_place ? " in place" : "", bad);
    pu_report(hash_ints(&r), "%sscatter root %d count %d%s", nb ? "i" : "",
              root, c, in_place ? " in place" : "");
    free(s.mem);
    free(r.mem);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &pu_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &pu_size);
    MPI_Datatype vec;
    MPI_Type_vector(1, 1, 2, MPI_INT, &vec);
    MPI_Type_create_resized(vec, 0, 2 * (MPI_Aint)sizeof(int), &strided_t);
    MPI_Type_commit(&strided_t);
    MPI_Type_free(&vec);
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
    MPI_Type_free(&strided_t);
    int rc = pu_finish("test_preload_gather");
    MPI_Finalize();
    return rc;
}
