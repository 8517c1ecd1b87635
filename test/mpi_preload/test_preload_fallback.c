/* The calls libhcomm_mpi.so must leave to MPI, each checked for the right
 * result: user ops, MAXLOC, logical and bitwise ops, a predefined type
 * HCOMM cannot reduce, count 0, an intercommunicator. Also derived
 * datatypes and send and receive types that differ, which data movement
 * takes as bytes (test_preload_mixed.c has many more). Then integer
 * wrap-around, which only HCOMM promises (Open MPI's own 8-bit sums may
 * saturate). */
#include "preload_util.h"

void fallback_cases(void);

static void user_sum(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    for (int i = 0; i < *len; i++)
        ((int *)inout)[i] += ((int *)in)[i];
}

static int sum_ranks(void) {
    return pu_size * (pu_size - 1) / 2;
}

static void user_op(void) {
    MPI_Op op;
    int v[5], r[5];
    for (int i = 0; i < 5; i++)
        v[i] = pu_rank + i;
    PU_OK(MPI_Op_create(user_sum, 1, &op));
    PU_OK(MPI_Allreduce(v, r, 5, MPI_INT, op, MPI_COMM_WORLD));
    for (int i = 0; i < 5; i++)
        PU_CHECK(r[i] == sum_ranks() + pu_size * i, "user op: %d", r[i]);
    PU_OK(MPI_Reduce(v, r, 5, MPI_INT, op, 0, MPI_COMM_WORLD));
    if (pu_rank == 0) PU_CHECK(r[0] == sum_ranks(), "user op reduce");
    pu_report(pu_hash(r, sizeof(r), 0), "fallback user op");
    PU_OK(MPI_Op_free(&op));
}

static void derived(void) {
    MPI_Datatype pair;
    int b[6], g[64], rr[64];
    PU_OK(MPI_Type_contiguous(2, MPI_INT, &pair));
    PU_OK(MPI_Type_commit(&pair));
    for (int i = 0; i < 6; i++)
        b[i] = pu_rank == 0 ? 10 + i : -1;
    PU_OK(MPI_Bcast(b, 3, pair, 0, MPI_COMM_WORLD));
    for (int i = 0; i < 6; i++)
        PU_CHECK(b[i] == 10 + i, "derived bcast");
    int mine[2] = {pu_rank, -pu_rank};
    PU_OK(MPI_Allgather(mine, 1, pair, g, 1, pair, MPI_COMM_WORLD));
    for (int r = 0; r < pu_size && r < 32; r++)
        PU_CHECK(g[2 * r] == r && g[2 * r + 1] == -r, "derived allgather");
    /* Two MPI_INT one side, one pair the other: same signature. */
    PU_OK(MPI_Allgather(mine, 2, MPI_INT, g, 1, pair, MPI_COMM_WORLD));
    for (int r = 0; r < pu_size && r < 32; r++)
        PU_CHECK(g[2 * r] == r, "mixed allgather");
    PU_OK(MPI_Alltoall(g, 1, pair, rr, 1, pair, MPI_COMM_WORLD));
    for (int r = 0; r < pu_size && r < 32; r++)
        PU_CHECK(rr[2 * r] == pu_rank, "derived alltoall");
    pu_report(pu_hash(g, sizeof(int) * 2 * (size_t)pu_size, 0),
              "derived datatype");
    PU_OK(MPI_Type_free(&pair));
}

static void other_ops(void) {
    struct {
        int v, i;
    } in = {pu_rank % 3, pu_rank}, out;
    PU_OK(MPI_Allreduce(&in, &out, 1, MPI_2INT, MPI_MAXLOC, MPI_COMM_WORLD));
    PU_CHECK(out.v == (pu_size > 2 ? 2 : pu_size - 1), "maxloc value");
    int land = pu_rank + 1, lxor = 1, r1, r2;
    unsigned bits = 1u << (pu_rank % 16), r3;
    PU_OK(MPI_Allreduce(&land, &r1, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD));
    PU_OK(MPI_Allreduce(&lxor, &r2, 1, MPI_INT, MPI_LXOR, MPI_COMM_WORLD));
    PU_OK(MPI_Allreduce(&bits, &r3, 1, MPI_UNSIGNED, MPI_BOR, MPI_COMM_WORLD));
    PU_CHECK(r1 == 1, "land");
    PU_CHECK(r2 == (pu_size % 2), "lxor");
    PU_CHECK(r3 == (pu_size >= 16 ? 0xffffu : (1u << pu_size) - 1), "bor");
    short s = (short)(pu_rank + 1), rs = 0;
    PU_OK(MPI_Allreduce(&s, &rs, 1, MPI_SHORT, MPI_SUM, MPI_COMM_WORLD));
    PU_CHECK(rs == pu_size * (pu_size + 1) / 2, "short sum");
    int h[5] = {out.v, out.i, r1, r2, (int)r3 + rs};
    pu_report(pu_hash(h, sizeof(h), 0), "fallback maxloc land lxor bor short");
}

static void mismatch_and_empty(void) {
    int *s = malloc(sizeof(int) * (size_t)pu_size * 2);
    int *r = malloc(sizeof(int) * (size_t)pu_size * 2);
    for (int i = 0; i < pu_size * 2; i++)
        s[i] = pu_rank * 100 + i;
    /* Same size and signature, different handles. */
    PU_OK(MPI_Alltoall(s, 2, MPI_INT, r, 2, MPI_INT32_T, MPI_COMM_WORLD));
    for (int p = 0; p < pu_size; p++)
        PU_CHECK(r[2 * p] == p * 100 + 2 * pu_rank, "mismatch alltoall");
    int z = 7, z2 = 8;
    PU_OK(MPI_Allreduce(&z, &z2, 0, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    PU_OK(MPI_Bcast(&z, 0, MPI_INT, 0, MPI_COMM_WORLD));
    PU_CHECK(z == 7 && z2 == 8, "count 0");
    pu_report(pu_hash(r, sizeof(int) * 2 * (size_t)pu_size, 0),
              "send and receive types differ, count 0");
    free(s);
    free(r);
}

/* Even ranks and odd ranks, joined: each side sums the other side's. */
static void intercomm(void) {
    MPI_Comm half, inter;
    if (pu_size < 2) return;
    int color = pu_rank % 2, sum = 0, v = pu_rank;
    PU_OK(MPI_Comm_split(MPI_COMM_WORLD, color, pu_rank, &half));
    PU_OK(MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, color ? 0 : 1, 99,
                               &inter));
    PU_OK(MPI_Allreduce(&v, &sum, 1, MPI_INT, MPI_SUM, inter));
    int want = 0;
    for (int r = 0; r < pu_size; r++)
        if (r % 2 != color) want += r;
    PU_CHECK(sum == want, "intercomm allreduce %d != %d", sum, want);
    PU_OK(MPI_Barrier(inter));
    pu_report((uint64_t)sum, "fallback intercommunicator");
    PU_OK(MPI_Comm_free(&inter));
    PU_OK(MPI_Comm_free(&half));
}

/* 100 + 100 + ... in 8 bits: wraps under HCOMM. Nothing on stdout: Open
 * MPI alone may answer differently. */
static void wrap_around(void) {
    int8_t v = 100, r = 0;
    uint8_t u = 200, ru = 0;
    PU_OK(MPI_Allreduce(&v, &r, 1, MPI_INT8_T, MPI_SUM, MPI_COMM_WORLD));
    PU_OK(MPI_Allreduce(&u, &ru, 1, MPI_UINT8_T, MPI_SUM, MPI_COMM_WORLD));
    if (pu_expect_hcomm()) {
        PU_CHECK(r == (int8_t)(uint8_t)(100u * (unsigned)pu_size),
                 "int8 sum %d does not wrap", r);
        PU_CHECK(ru == (uint8_t)(200u * (unsigned)pu_size),
                 "uint8 sum %u does not wrap", ru);
    }
}

void fallback_cases(void) {
    user_op();
    derived();
    other_ops();
    mismatch_and_empty();
    intercomm();
    wrap_around();
}
