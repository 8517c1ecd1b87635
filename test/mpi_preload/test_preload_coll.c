/* Every datatype HCOMM maps x every operation x every collective
 * libhcomm_mpi.so intercepts, in place and out of place, at several counts,
 * each result checked against a reference computed here; then the cases
 * that must go to MPI (user ops, derived datatypes, MAXLOC, logical and
 * bitwise ops, unmapped types, intercommunicators, count 0).
 *
 * Values are small integers (binary fractions for floats), so that every
 * sum and product is exact in any order: the output is the same whichever
 * library computed it, which run_preload.sh checks byte for byte. */
#define PU_MAIN
#include "preload_util.h"

#include <limits.h>

enum { KIND_SIGNED, KIND_UNSIGNED, KIND_FLOAT, KIND_BYTES };

typedef struct {
    const char *name;
    MPI_Datatype dt;
    int kind;
    int size; /* from MPI */
} type_t;

static type_t types[] = {
    /* Reduced as C's char, by Open MPI and MPICH alike (MPI-3 lists it for
     * no reduction). */
    {"MPI_CHAR", MPI_CHAR, CHAR_MIN < 0 ? KIND_SIGNED : KIND_UNSIGNED, 0},
    {"MPI_SIGNED_CHAR", MPI_SIGNED_CHAR, KIND_SIGNED, 0},
    {"MPI_UNSIGNED_CHAR", MPI_UNSIGNED_CHAR, KIND_UNSIGNED, 0},
    {"MPI_BYTE", MPI_BYTE, KIND_BYTES, 0},
    {"MPI_INT", MPI_INT, KIND_SIGNED, 0},
    {"MPI_UNSIGNED", MPI_UNSIGNED, KIND_UNSIGNED, 0},
    {"MPI_LONG", MPI_LONG, KIND_SIGNED, 0},
    {"MPI_UNSIGNED_LONG", MPI_UNSIGNED_LONG, KIND_UNSIGNED, 0},
    {"MPI_LONG_LONG", MPI_LONG_LONG, KIND_SIGNED, 0},
    {"MPI_UNSIGNED_LONG_LONG", MPI_UNSIGNED_LONG_LONG, KIND_UNSIGNED, 0},
    {"MPI_INT8_T", MPI_INT8_T, KIND_SIGNED, 0},
    {"MPI_UINT8_T", MPI_UINT8_T, KIND_UNSIGNED, 0},
    {"MPI_INT32_T", MPI_INT32_T, KIND_SIGNED, 0},
    {"MPI_UINT32_T", MPI_UINT32_T, KIND_UNSIGNED, 0},
    {"MPI_INT64_T", MPI_INT64_T, KIND_SIGNED, 0},
    {"MPI_UINT64_T", MPI_UINT64_T, KIND_UNSIGNED, 0},
    {"MPI_FLOAT", MPI_FLOAT, KIND_FLOAT, 0},
    {"MPI_DOUBLE", MPI_DOUBLE, KIND_FLOAT, 0},
    {"MPI_INTEGER", MPI_INTEGER, KIND_SIGNED, 0},
    {"MPI_REAL", MPI_REAL, KIND_FLOAT, 0},
    {"MPI_DOUBLE_PRECISION", MPI_DOUBLE_PRECISION, KIND_FLOAT, 0},
};
#define NTYPES (int)(sizeof(types) / sizeof(types[0]))

static const MPI_Op ops[] = {MPI_SUM, MPI_PROD, MPI_MAX, MPI_MIN};
static const char *op_names[] = {"sum", "prod", "max", "min"};
enum { OP_SUM, OP_PROD, OP_MAX, OP_MIN, OP_NONE };

/* Element i of rank r's contribution, for op (OP_NONE: data movement). */
static double value(const type_t *t, int op, int r, size_t i) {
    long k = (long)((size_t)r * 7 + i * 13);
    if (t->kind == KIND_BYTES)
        return (double)((r * 31 + (long)i * 7 + 1) & 0xff);
    if (op == OP_PROD) {
        long m = (long)((size_t)r + i);
        double v = m % 5 == 0 ? 2 : m % 2 ? -1 : 1; /* at most one 2 */
        if (t->kind == KIND_FLOAT && m % 3 == 0) v = 0.5;
        return t->kind == KIND_UNSIGNED ? (v < 0 ? 1 : v) : v;
    }
    if (t->kind == KIND_UNSIGNED) return (double)(k % 31);
    if (t->kind == KIND_FLOAT) return (double)(k % 19 - 9) / 4.0;
    return (double)(k % 19 - 9);
}

static void store(const type_t *t, void *buf, size_t i, double v) {
    char *p = (char *)buf + i * (size_t)t->size;
    if (t->kind == KIND_FLOAT && t->size == 4) {
        float f = (float)v;
        memcpy(p, &f, 4);
    } else if (t->kind == KIND_FLOAT) {
        memcpy(p, &v, 8);
    } else {
        int64_t x = (int64_t)v; /* little-endian: the low bytes */
        memcpy(p, &x, (size_t)t->size);
    }
}

static double fold(int op, double a, double b) {
    switch (op) {
    case OP_SUM:
        return a + b;
    case OP_PROD:
        return a * b;
    case OP_MAX:
        return a > b ? a : b;
    default:
        return a < b ? a : b;
    }
}

/* The reduction over every rank of element i (of the whole send buffer). */
static double reduced(const type_t *t, int op, size_t i) {
    double acc = value(t, op, 0, i);
    for (int r = 1; r < pu_size; r++)
        acc = fold(op, acc, value(t, op, r, i));
    return acc;
}

static void *alloc(const type_t *t, size_t n) {
    void *p = malloc(n * (size_t)t->size + 1);
    memset(p, 0xee, n * (size_t)t->size + 1);
    return p;
}

static void check(const char *what, const type_t *t, const void *got,
                  const void *want, size_t n) {
    PU_CHECK(memcmp(got, want, n * (size_t)t->size) == 0, "%s %s: wrong result",
             what, t->name);
}

static void t_allreduce(const type_t *t, int op, size_t n, int inplace) {
    void *s = alloc(t, n), *r = alloc(t, n), *want = alloc(t, n);
    for (size_t i = 0; i < n; i++) {
        store(t, inplace ? r : s, i, value(t, op, pu_rank, i));
        store(t, want, i, reduced(t, op, i));
    }
    PU_OK(MPI_Allreduce(inplace ? MPI_IN_PLACE : s, r, (int)n, t->dt, ops[op],
                        MPI_COMM_WORLD));
    check("allreduce", t, r, want, n);
    pu_report(pu_hash(r, n * (size_t)t->size, 0), "allreduce %s %s n=%zu %s",
              t->name, op_names[op], n, inplace ? "in-place" : "out");
    free(s), free(r), free(want);
}

/* Two requests in flight at once, one in place, completed by Waitall. */
static void t_iallreduce(const type_t *t, int op, size_t n) {
    void *s = alloc(t, n), *r1 = alloc(t, n), *r2 = alloc(t, n);
    void *want = alloc(t, n);
    MPI_Request req[2];
    MPI_Status st[2]; /* MPICH's MPI_STATUSES_IGNORE upsets gcc 12 */
    for (size_t i = 0; i < n; i++) {
        store(t, s, i, value(t, op, pu_rank, i));
        store(t, r2, i, value(t, op, pu_rank, i));
        store(t, want, i, reduced(t, op, i));
    }
    PU_OK(
        MPI_Iallreduce(s, r1, (int)n, t->dt, ops[op], MPI_COMM_WORLD, &req[0]));
    PU_OK(MPI_Iallreduce(MPI_IN_PLACE, r2, (int)n, t->dt, ops[op],
                         MPI_COMM_WORLD, &req[1]));
    PU_OK(MPI_Waitall(2, req, st));
    check("iallreduce", t, r1, want, n);
    check("iallreduce in place", t, r2, want, n);
    pu_report(pu_hash(r2, n * (size_t)t->size, 0), "iallreduce %s %s n=%zu",
              t->name, op_names[op], n);
    free(s), free(r1), free(r2), free(want);
}

static void t_reduce(const type_t *t, int op, size_t n, int inplace) {
    int root = (int)(n + (size_t)op) % pu_size;
#ifdef MPICH
    /* MPICH 4.0.2 alone crashes on an in-place reduce past 2 KiB at a root
     * other than 0 (it reads MPI_IN_PLACE as a buffer). */
    if (inplace && n * (size_t)t->size > 2048) root = 0;
#endif
    int me = pu_rank == root;
    void *s = alloc(t, n), *r = alloc(t, n), *want = alloc(t, n);
    for (size_t i = 0; i < n; i++) {
        store(t, inplace && me ? r : s, i, value(t, op, pu_rank, i));
        store(t, want, i, reduced(t, op, i));
    }
    PU_OK(MPI_Reduce(inplace && me ? MPI_IN_PLACE : s, r, (int)n, t->dt,
                     ops[op], root, MPI_COMM_WORLD));
    if (me) check("reduce", t, r, want, n);
    pu_report(me ? pu_hash(r, n * (size_t)t->size, 0) : 0,
              "reduce %s %s n=%zu root=%d %s", t->name, op_names[op], n, root,
              inplace ? "in-place" : "out");
    free(s), free(r), free(want);
}

static void t_reduce_scatter_block(const type_t *t, int op, size_t n,
                                   int inplace) {
    size_t all = n * (size_t)pu_size;
    void *s = alloc(t, all), *r = alloc(t, all), *want = alloc(t, n);
    for (size_t i = 0; i < all; i++)
        store(t, inplace ? r : s, i, value(t, op, pu_rank, i));
    for (size_t i = 0; i < n; i++)
        store(t, want, i, reduced(t, op, (size_t)pu_rank * n + i));
    PU_OK(MPI_Reduce_scatter_block(inplace ? MPI_IN_PLACE : s, r, (int)n, t->dt,
                                   ops[op], MPI_COMM_WORLD));
    check("reduce_scatter_block", t, r, want, n);
    pu_report(pu_hash(r, n * (size_t)t->size, 0),
              "reduce_scatter_block %s %s n=%zu %s", t->name, op_names[op], n,
              inplace ? "in-place" : "out");
    free(s), free(r), free(want);
}

static void t_allgather(const type_t *t, size_t n, int inplace) {
    size_t all = n * (size_t)pu_size;
    void *s = alloc(t, n), *r = alloc(t, all), *want = alloc(t, all);
    for (size_t i = 0; i < n; i++)
        store(t, inplace ? r : s, (inplace ? (size_t)pu_rank * n : 0) + i,
              value(t, OP_NONE, pu_rank, i));
    for (size_t i = 0; i < all; i++)
        store(t, want, i, value(t, OP_NONE, (int)(i / n), i % n));
    PU_OK(MPI_Allgather(inplace ? MPI_IN_PLACE : s, (int)n, t->dt, r, (int)n,
                        t->dt, MPI_COMM_WORLD));
    check("allgather", t, r, want, all);
    pu_report(pu_hash(r, all * (size_t)t->size, 0), "allgather %s n=%zu %s",
              t->name, n, inplace ? "in-place" : "out");
    free(s), free(r), free(want);
}

static void t_bcast(const type_t *t, size_t n) {
    int root = (int)n % pu_size;
    void *b = alloc(t, n), *want = alloc(t, n);
    for (size_t i = 0; i < n; i++) {
        if (pu_rank == root) store(t, b, i, value(t, OP_NONE, root, i));
        store(t, want, i, value(t, OP_NONE, root, i));
    }
    PU_OK(MPI_Bcast(b, (int)n, t->dt, root, MPI_COMM_WORLD));
    check("bcast", t, b, want, n);
    pu_report(pu_hash(b, n * (size_t)t->size, 0), "bcast %s n=%zu root=%d",
              t->name, n, root);
    free(b), free(want);
}

static void t_alltoall(const type_t *t, size_t n, int inplace) {
    size_t all = n * (size_t)pu_size;
    void *s = alloc(t, all), *r = alloc(t, all), *want = alloc(t, all);
    for (size_t i = 0; i < all; i++) {
        store(t, inplace ? r : s, i, value(t, OP_NONE, pu_rank, i));
        store(t, want, i,
              value(t, OP_NONE, (int)(i / n), (size_t)pu_rank * n + i % n));
    }
    PU_OK(MPI_Alltoall(inplace ? MPI_IN_PLACE : s, (int)n, t->dt, r, (int)n,
                       t->dt, MPI_COMM_WORLD));
    check("alltoall", t, r, want, all);
    pu_report(pu_hash(r, all * (size_t)t->size, 0), "alltoall %s n=%zu %s",
              t->name, n, inplace ? "in-place" : "out");
    free(s), free(r), free(want);
}

/* Declared in test_preload_fallback.c: the calls that must go to MPI. */
void fallback_cases(void);

int main(int argc, char **argv) {
    static const size_t counts[] = {1, 5, 1000};
    MPI_Init(&argc, &argv);
    PMPI_Comm_rank(MPI_COMM_WORLD, &pu_rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &pu_size);
    for (int ti = 0; ti < NTYPES; ti++) {
        type_t *t = &types[ti];
        PMPI_Type_size(t->dt, &t->size);
        if (t->size == 0) continue; /* an MPI without Fortran */
        for (size_t ci = 0; ci < 3; ci++) {
            size_t n = counts[ci];
            for (int ip = 0; ip < 2; ip++) {
                t_allgather(t, n, ip);
                t_alltoall(t, n, ip);
            }
            t_bcast(t, n);
            if (t->kind == KIND_BYTES) continue; /* not reducible */
            for (int op = 0; op < 4; op++) {
                for (int ip = 0; ip < 2; ip++) {
                    t_allreduce(t, op, n, ip);
                    t_reduce(t, op, n, ip);
                    t_reduce_scatter_block(t, op, n, ip);
                }
                t_iallreduce(t, op, n);
            }
        }
    }
    /* Past HCOMM's pipelining chunk, in place and not. */
    for (int ip = 0; ip < 2; ip++) {
        t_allreduce(&types[17], OP_SUM, 300007, ip); /* MPI_DOUBLE */
        t_allreduce(&types[4], OP_MAX, 300007, ip);  /* MPI_INT */
    }
    PU_OK(MPI_Barrier(MPI_COMM_WORLD));
    fallback_cases();
    int rc = pu_finish("test_preload_coll");
    MPI_Finalize();
    return rc;
}
