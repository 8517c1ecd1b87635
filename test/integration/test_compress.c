/* hcomm_allreduce_ex with compression, at any rank count, on both
 * transports: bf16/fp16 within their two roundings of the exact sum;
 * top-k and one-bit bit for bit against the same arithmetic done here for
 * every rank; error feedback that loses nothing (what the calls returned
 * plus what the residuals hold is every input, summed); refusals. On an
 * even number of ranks from 4, all of it again as two nodes
 * (HCOMM_OVERRIDE_TOPO), where only the rails compress: block i of every
 * node's sum along rail i. */
#include "core/comm.h"
#include "compress/compress.h"
#include "core/config.h"
#include "kernels/reduce.h"
#include "mpi_check.h"

#include <math.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int rank, nranks;
static hcomm_comm_t comm;
/* Two nodes (0 on one): ranks r of node r / L, local rank r % L. */
static int nodes, L;

static float positive(int r, size_t i) { /* exact in float, rounded in bf16 */
    return 1.0f + (float)((i * 7 + (size_t)r * 13) % 1000) / 64.0f;
}
static float signed_value(int r, size_t i) {
    uint32_t h = (uint32_t)(i * 2654435761u) ^ (uint32_t)(r * 40503u);
    return ((float)(h % 2001) - 1000.0f) / 8.0f;
}

static void fill(float *x, size_t n, int r, int sign) {
    for (size_t i = 0; i < n; i++)
        x[i] = sign ? signed_value(r, i) : positive(r, i);
}

/* How a compressed call of count splits: parts of len elements from lo,
 * each compressed among P participants (flat: one part, every rank; on
 * nodes: block i along rail i, the nodes), and the exact rest. */
static int by_node(size_t count) {
    return nodes && count / (size_t)L > 0;
}
static int participants(size_t count) {
    return by_node(count) ? nodes : nranks;
}
/* By node from 8 MiB, bf16 and fp16 run in pieces of S elements, each of
 * L blocks of S / L, one along each rail (compress_coll.c). */
static size_t pieces_of(hcomm_compress_t kind, size_t count, size_t *S) {
    return by_node(count) ? hcomm_compress_pieces(kind, 0, count, (size_t)L, S)
                          : 0;
}
static size_t part_len(hcomm_compress_t kind, size_t count) {
    size_t S;
    if (pieces_of(kind, count, &S)) return S / (size_t)L;
    return by_node(count) ? count / (size_t)L : count;
}
static int parts(hcomm_compress_t kind, size_t count) {
    size_t S, pieces = pieces_of(kind, count, &S);
    if (pieces) return (int)pieces * L;
    return by_node(count) ? L : 1;
}

/* Participant p's signed input over [lo, lo + len): rank p's (flat) or the
 * sum of node p's ranks' (exact: eighths of small integers). */
static void part_input(float *x, size_t count, size_t lo, size_t len, int p) {
    for (size_t i = 0; i < len; i++) {
        if (!by_node(count)) {
            x[i] = signed_value(p, lo + i);
            continue;
        }
        x[i] = 0;
        for (int r = p * L; r < (p + 1) * L; r++)
            x[i] += signed_value(r, lo + i);
    }
}

/* The elements past the parts, summed exactly. */
static void exact_rest(hcomm_compress_t kind, size_t count, float *want) {
    for (size_t i = (size_t)parts(kind, count) * part_len(kind, count);
         i < count; i++) {
        want[i] = 0;
        for (int r = 0; r < nranks; r++)
            want[i] += signed_value(r, i);
    }
}

static void test_half(hcomm_compress_t kind, size_t count, int inplace,
                      hcomm_op_t op) {
    float *in = malloc((count + 1) * sizeof(float)),
          *out = malloc((count + 1) * sizeof(float));
    fill(in, count, rank, 0);
    if (inplace) out = memcpy(out, in, count * sizeof(float));
    hcomm_allreduce_opts_t o = {.compress = kind};
    CHECK_OK(hcomm_allreduce_ex(inplace ? out : in, out, count, HCOMM_FLOAT32,
                                op, comm, &o));
    /* two roundings (each value out, each sum back) of at most half an ulp:
     * 2^-8 relative each in bf16, 2^-11 in fp16, whatever the rank count */
    double tol = kind == HCOMM_COMPRESS_BF16 ? 0x1p-7 : 0x1p-10;
    size_t bad = 0;
    for (size_t i = 0; i < count; i++) {
        double want = 0;
        for (int r = 0; r < nranks; r++)
            want += positive(r, i);
        if (op == HCOMM_AVG) want /= nranks;
        bad += !(fabs(out[i] - want) <= tol * want);
    }
    CHECK(bad == 0, "%s count %zu %s op %d: %zu beyond %g relative",
          kind == HCOMM_COMPRESS_BF16 ? "bf16" : "fp16", count,
          inplace ? "in place" : "", (int)op, bad, tol);
    free(in);
    free(out);
}

/* What the top-k allreduce returns, computed here for every rank. */
static void topk_expected(size_t count, double density, float *want) {
    size_t len = part_len(HCOMM_COMPRESS_TOPK, count);
    size_t k = (size_t)(density * (double)len + 0.999999);
    if (k < 1) k = 1;
    float *x = malloc(len * sizeof(float));
    uint32_t *idx = malloc(k * sizeof(uint32_t));
    memset(want, 0, count * sizeof(float));
    for (int b = 0; b < parts(HCOMM_COMPRESS_TOPK, count); b++)
        for (int p = 0; p < participants(count); p++) {
            size_t lo = (size_t)b * len;
            part_input(x, count, lo, len, p);
            hcomm_topk_select(x, len, k, idx);
            for (size_t i = 0; i < k; i++)
                want[lo + idx[i]] += x[idx[i]];
        }
    exact_rest(HCOMM_COMPRESS_TOPK, count, want);
    free(x);
    free(idx);
}

static void test_topk(size_t count, double density) {
    float *in = malloc(count * sizeof(float)),
          *out = malloc(count * sizeof(float));
    float *want = malloc(count * sizeof(float));
    fill(in, count, rank, 1);
    topk_expected(count, density, want);
    hcomm_allreduce_opts_t o = {.compress = HCOMM_COMPRESS_TOPK,
                                .density = density};
    CHECK_OK(
        hcomm_allreduce_ex(in, out, count, HCOMM_FLOAT32, HCOMM_SUM, comm, &o));
    CHECK(memcmp(out, want, count * sizeof(float)) == 0,
          "top-k %g of %zu differs from the sum of every part's top k", density,
          count);
    free(in);
    free(out);
    free(want);
}

/* The one-bit allreduce's arithmetic, done here for every rank. */
static void onebit_expected(size_t count, float *want) {
    size_t len = part_len(HCOMM_COMPRESS_ONEBIT, count);
    int np = participants(count);
    size_t m = (len + (size_t)np - 1) / (size_t)np;
    float *x = malloc(len * sizeof(float)), *y = calloc(m, sizeof(float));
    uint8_t *bits = malloc(hcomm_onebit_bytes(m));
    for (int b = 0; b < parts(HCOMM_COMPRESS_ONEBIT, count); b++) {
        size_t lo = (size_t)b * len;
        for (int q = 0; q < np && (size_t)q * m < len; q++) {
            size_t at = (size_t)q * m, real = len - at < m ? len - at : m;
            for (int p = 0; p < np; p++) {
                part_input(x, count, lo, len, p);
                float s = hcomm_onebit_pack(x + at, real, bits);
                hcomm_onebit_unpack(y, bits, s, real, p > 0);
            }
            float s = hcomm_onebit_pack(y, real, bits);
            hcomm_onebit_unpack(want + lo + at, bits, s, real, 0);
        }
    }
    exact_rest(HCOMM_COMPRESS_ONEBIT, count, want);
    free(x);
    free(y);
    free(bits);
}

static void test_onebit(size_t count) {
    float *in = malloc(count * sizeof(float)),
          *out = malloc(count * sizeof(float));
    float *want = malloc(count * sizeof(float));
    fill(in, count, rank, 1);
    onebit_expected(count, want);
    hcomm_allreduce_opts_t o = {.compress = HCOMM_COMPRESS_ONEBIT};
    CHECK_OK(
        hcomm_allreduce_ex(in, out, count, HCOMM_FLOAT32, HCOMM_SUM, comm, &o));
    CHECK(memcmp(out, want, count * sizeof(float)) == 0,
          "one-bit of %zu differs from its arithmetic done here", count);
    free(in);
    free(out);
    free(want);
}

/* T calls with error feedback: the outputs plus every residual sum to T
 * times the inputs' sum (up to float rounding). With autos, AUTO with kind
 * allowed: its first call, which measures, returns the exact sum and
 * leaves the residuals alone; the later ones take what it picked (within
 * bf16's bound where that is bf16). */
static void test_feedback(hcomm_compress_t kind, size_t count, int autos) {
    enum { T = 6 };
    float *in = malloc(count * sizeof(float)),
          *out = malloc(count * sizeof(float));
    double *got = calloc(count, sizeof(double));
    float *res = calloc(count, sizeof(float)),
          *all = malloc(count * sizeof(float));
    hcomm_compress_state_t st;
    CHECK_OK(hcomm_compress_state_create(comm, count, &st));
    fill(in, count, rank, 1);
    hcomm_allreduce_opts_t o = {.compress = autos ? HCOMM_COMPRESS_AUTO : kind,
                                .density = 0.05,
                                .state = st,
                                .lossy = autos ? kind : HCOMM_COMPRESS_NONE};
    for (int t = 0; t < T; t++) {
        CHECK_OK(hcomm_allreduce_ex(in, out, count, HCOMM_FLOAT32, HCOMM_SUM,
                                    comm, &o));
        for (size_t i = 0; i < count; i++)
            got[i] += out[i];
        size_t touched = 0;
        for (size_t i = 0; autos && t == 0 && i < count; i++)
            touched += st->worker[i] != 0;
        CHECK(touched == 0, "auto's measuring call left %zu residuals",
              touched);
    }
    hcomm_comm_impl_t *c;
    CHECK_OK(hcomm_comm_lookup(comm, &c));
    unsigned cls = 63 - (unsigned)__builtin_clzll(count * 4);
    /* bf16 rounds each input, each partial sum and the result (2^-9 each,
     * relative to magnitudes of at most the sum of the inputs' magnitudes):
     * where the signed inputs cancel, that sum, not the result, bounds the
     * error: 5 ranks once failed the bound relative to the result alone */
    int bf16 = autos && c->compress_pick[cls] == 1 + HCOMM_COMPRESS_BF16;
    /* this rank's worker residual, plus its server residual at its chunk
     * (of its part: on nodes, block (local rank) of the count) */
    for (size_t i = 0; i < count; i++)
        res[i] = st->worker[i];
    size_t len = part_len(HCOMM_COMPRESS_ONEBIT, count),
           np = (size_t)participants(count);
    size_t m = (len + np - 1) / np;
    size_t lo = by_node(count) ? (size_t)(rank % L) * len : 0;
    size_t q = by_node(count) ? (size_t)(rank / L) : (size_t)rank;
    for (size_t i = 0; st->server && i < m && q * m + i < len; i++)
        res[lo + q * m + i] += st->server[i];
    CHECK_OK(hcomm_allreduce(res, all, count, HCOMM_FLOAT32, HCOMM_SUM, comm));
    size_t bad = 0;
    for (size_t i = 0; i < count; i++) {
        double want = 0, mag = 0;
        for (int r = 0; r < nranks; r++) {
            want += signed_value(r, i);
            mag += fabs(signed_value(r, i));
        }
        want *= T;
        double bound = bf16 ? 0x1p-7 * T * (fabs(want) + mag + 100)
                            : 1e-3 * (fabs(want) + 100);
        bad += !(fabs(got[i] + all[i] - want) <= bound);
    }
    CHECK(bad == 0,
          "%s%s feedback over %d calls lost something at %zu of %zu (picked "
          "%d)",
          autos ? "auto, " : "",
          kind == HCOMM_COMPRESS_TOPK ? "top-k" : "one-bit", T, bad, count,
          c->compress_pick[cls] - 1);
    /* reset: the next call sees no residual */
    CHECK_OK(hcomm_compress_state_reset(st));
    size_t left = 0;
    for (size_t i = 0; i < count; i++)
        left += st->worker[i] != 0;
    CHECK(left == 0, "reset left %zu residuals", left);
    CHECK_OK(hcomm_compress_state_free(&st));
    CHECK(st == NULL, "freed state not cleared");
    free(in);
    free(out);
    free(got);
    free(res);
    free(all);
}

static void test_refusals(void) {
    int32_t i32[4] = {1, 2, 3, 4};
    float f[4] = {1, 2, 3, 4}, g[4];
    hcomm_allreduce_opts_t o = {.compress = HCOMM_COMPRESS_BF16};
    CHECK(hcomm_allreduce_ex(i32, i32, 4, HCOMM_INT32, HCOMM_SUM, comm, &o) ==
              HCOMM_ERR_UNSUPPORTED,
          "int32 with bf16 accepted");
    CHECK(hcomm_allreduce_ex(f, g, 4, HCOMM_FLOAT32, HCOMM_MAX, comm, &o) ==
              HCOMM_ERR_UNSUPPORTED,
          "max with bf16 accepted");
    o.compress = HCOMM_COMPRESS_TOPK;
    CHECK(hcomm_allreduce_ex(f, g, 4, HCOMM_FLOAT32, HCOMM_SUM, comm, &o) ==
              HCOMM_ERR_INVALID_ARG,
          "top-k with density 0 accepted");
    hcomm_compress_state_t st;
    CHECK_OK(hcomm_compress_state_create(comm, 5, &st));
    o.density = 0.5;
    o.state = st;
    CHECK(hcomm_allreduce_ex(f, g, 4, HCOMM_FLOAT32, HCOMM_SUM, comm, &o) ==
              HCOMM_ERR_INVALID_ARG,
          "a state of 5 values accepted for 4");
    hcomm_compress_state_free(&st);
    /* the communicator still works */
    CHECK_OK(hcomm_allreduce(f, g, 4, HCOMM_FLOAT32, HCOMM_SUM, comm));
    CHECK(g[3] == 4.0f * (float)nranks, "allreduce after refusals: %g", g[3]);
}

/* HCOMM_COMPRESS: the default of calls without options. */
static void test_default(void) {
    size_t n = 1000;
    float *in = malloc(n * sizeof(float)), *out = malloc(n * sizeof(float));
    fill(in, n, rank, 0);
    CHECK_OK(hcomm_config_set("HCOMM_COMPRESS", "bf16"));
    CHECK_OK(
        hcomm_allreduce_ex(in, out, n, HCOMM_FLOAT32, HCOMM_SUM, comm, NULL));
    /* (by node, the rest past L blocks is summed exactly, not rounded) */
    size_t rounded = 0, m = (size_t)parts(HCOMM_COMPRESS_BF16, n) *
                            part_len(HCOMM_COMPRESS_BF16, n);
    for (size_t i = 0; i < m; i++)
        rounded += hcomm_bf16_to_float(hcomm_float_to_bf16(out[i])) == out[i];
    CHECK(rounded == m, "HCOMM_COMPRESS=bf16: %zu of %zu results are bf16",
          rounded, m);
    CHECK_OK(hcomm_config_set("HCOMM_COMPRESS", "none"));
    free(in);
    free(out);
}

/* AUTO: the first call of a size measures and returns the uncompressed
 * result; every later one uses what was picked; all ranks alike. */
static void test_auto(void) {
    size_t n = 100003;
    float *in = malloc(n * sizeof(float)), *out = malloc(n * sizeof(float));
    fill(in, n, rank, 0);
    hcomm_allreduce_opts_t o = {.compress = HCOMM_COMPRESS_AUTO};
    for (int call = 0; call < 3; call++) {
        CHECK_OK(
            hcomm_allreduce_ex(in, out, n, HCOMM_FLOAT32, HCOMM_SUM, comm, &o));
        size_t exact = 0, close = 0;
        double sum = 0;
        for (size_t i = 0; i < n; i++) {
            double want = 0;
            for (int r = 0; r < nranks; r++)
                want += positive(r, i);
            exact += out[i] == (float)want;
            close += fabs(out[i] - want) <= 0x1p-7 * want;
            sum += out[i];
        }
        CHECK(close == n && (call > 0 || exact == n),
              "auto call %d: %zu exact, %zu within bf16's bound of %zu", call,
              exact, close, n);
        double lo, hi;
        MPI_Allreduce(&sum, &lo, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
        MPI_Allreduce(&sum, &hi, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        CHECK(lo == hi, "auto call %d: ranks got different results", call);
    }
    free(in);
    free(out);
}

static void test_all(void) {
    const size_t counts[] = {0, 1, 7, 1009, (size_t)nranks * 1000 + 1, 65537};
    for (size_t c = 0; c < sizeof(counts) / sizeof(*counts); c++)
        for (int ip = 0; ip < 2; ip++) {
            test_half(HCOMM_COMPRESS_BF16, counts[c], ip, HCOMM_SUM);
            test_half(HCOMM_COMPRESS_FP16, counts[c], ip, HCOMM_AVG);
        }
    /* by node, from 8 MiB: bf16 and fp16 run in pieces of at least 4 MiB
     * (2 and 5 of them), what the pieces leave over uncompressed; top-k
     * whole */
    const size_t pieces[] = {((size_t)2 << 20) + 12345, ((size_t)5 << 20) + 3};
    for (size_t c = 0; nodes && c < sizeof(pieces) / sizeof(*pieces); c++) {
        for (int ip = 0; ip < 2; ip++) {
            test_half(HCOMM_COMPRESS_BF16, pieces[c], ip, HCOMM_SUM);
            test_half(HCOMM_COMPRESS_FP16, pieces[c], ip, HCOMM_AVG);
        }
        test_topk(pieces[c], 0.01);
    }
    if (nodes) test_feedback(HCOMM_COMPRESS_TOPK, pieces[0], 0);
    const size_t lossy[] = {1, 7, 1009, (size_t)nranks * 1000 + 1};
    for (size_t c = 0; c < sizeof(lossy) / sizeof(*lossy); c++) {
        test_topk(lossy[c], 1.0);
        test_topk(lossy[c], 0.1);
        test_onebit(lossy[c]);
    }
    test_feedback(HCOMM_COMPRESS_TOPK, 4099, 0);
    test_feedback(HCOMM_COMPRESS_ONEBIT, 4099, 0);
    test_feedback(HCOMM_COMPRESS_TOPK, 4099, 1);
    test_feedback(HCOMM_COMPRESS_ONEBIT, 70001, 1);
    test_refusals();
    test_default();
    test_auto();
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    check_rank = rank;
    if (hcomm_init(&argc, &argv) != HCOMM_SUCCESS) {
        fprintf(stderr, "hcomm_init: %s\n", hcomm_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    CHECK_OK(hcomm_comm_create(MPI_COMM_WORLD, &comm));
    test_all();
    CHECK_OK(hcomm_comm_free(&comm));
    if (nranks >= 4 && nranks % 2 == 0) {
        /* two nodes: the node and rail stages */
        char path[64];
        snprintf(path, sizeof(path), "/tmp/hcomm_test_compress_%d.json",
                 (int)getpid());
        FILE *f = rank == 0 ? fopen(path, "w") : NULL;
        if (f) {
            fputs("{\"nodes\": [", f);
            for (int n = 0; n < 2; n++) {
                fputs(n ? "]}, {\"ranks\": [" : "{\"ranks\": [", f);
                for (int r = n * nranks / 2; r < (n + 1) * nranks / 2; r++)
                    fprintf(f, "%s%d", r == n * nranks / 2 ? "" : ", ", r);
            }
            fputs("]}]}\n", f);
            fclose(f);
        }
        MPI_Bcast(path, sizeof(path), MPI_CHAR, 0, MPI_COMM_WORLD);
        CHECK_OK(hcomm_config_set("HCOMM_OVERRIDE_TOPO", path));
        nodes = 2;
        L = nranks / 2;
        CHECK_OK(hcomm_comm_create(MPI_COMM_WORLD, &comm));
        test_all();
        hcomm_comm_impl_t *c = NULL;
        CHECK(hcomm_comm_lookup(comm, &c) == HCOMM_SUCCESS && c->node_comm,
              "two nodes: compression did not run by node");
        CHECK_OK(hcomm_comm_free(&comm));
        CHECK_OK(hcomm_config_set("HCOMM_OVERRIDE_TOPO", ""));
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0) remove(path);
    }
    int rc = check_summary("test_compress");
    hcomm_finalize();
    MPI_Finalize();
    return rc;
}
