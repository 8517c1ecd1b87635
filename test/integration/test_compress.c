/* hcomm_allreduce_ex with compression, at any rank count, on both
 * transports: bf16/fp16 within their two roundings of the exact sum;
 * top-k and one-bit bit for bit against the same arithmetic done here for
 * every rank; error feedback that loses nothing (what the calls returned
 * plus what the residuals hold is every input, summed); refusals. */
#include "compress/compress.h"
#include "core/config.h"
#include "kernels/reduce.h"
#include "mpi_check.h"

#include <math.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

static int rank, nranks;
static hcomm_comm_t comm;

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

static void test_half(hcomm_compress_t kind, size_t count, int inplace,
                      hcomm_op_t op) {
    float *in = malloc((count + 1) * sizeof(float)),
          *out = malloc((count + 1) * sizeof(float));
    fill(in, count, rank, 0);
    if (inplace) out = memcpy(out, in, count * sizeof(float));
    hcomm_allreduce_opts_t o = {kind, 0, NULL};
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
static void topk_expected(size_t count, size_t k, float *want) {
    float *x = malloc(count * sizeof(float));
    uint32_t *idx = malloc(k * sizeof(uint32_t));
    memset(want, 0, count * sizeof(float));
    for (int r = 0; r < nranks; r++) {
        fill(x, count, r, 1);
        hcomm_topk_select(x, count, k, idx);
        for (size_t i = 0; i < k; i++)
            want[idx[i]] += x[idx[i]];
    }
    free(x);
    free(idx);
}

static void test_topk(size_t count, double density) {
    float *in = malloc(count * sizeof(float)),
          *out = malloc(count * sizeof(float));
    float *want = malloc(count * sizeof(float));
    fill(in, count, rank, 1);
    size_t k = (size_t)(density * (double)count + 0.999999);
    if (k < 1) k = 1;
    topk_expected(count, k, want);
    hcomm_allreduce_opts_t o = {HCOMM_COMPRESS_TOPK, density, NULL};
    CHECK_OK(
        hcomm_allreduce_ex(in, out, count, HCOMM_FLOAT32, HCOMM_SUM, comm, &o));
    CHECK(memcmp(out, want, count * sizeof(float)) == 0,
          "top-k %g of %zu differs from the sum of every rank's top %zu",
          density, count, k);
    free(in);
    free(out);
    free(want);
}

/* The one-bit allreduce's arithmetic, done here for every rank. */
static void onebit_expected(size_t count, float *want) {
    size_t m = (count + (size_t)nranks - 1) / (size_t)nranks;
    float *x = malloc(count * sizeof(float)), *y = calloc(m, sizeof(float));
    uint8_t *bits = malloc(hcomm_onebit_bytes(m));
    for (int p = 0; p < nranks && (size_t)p * m < count; p++) {
        size_t real = count - (size_t)p * m < m ? count - (size_t)p * m : m;
        for (int r = 0; r < nranks; r++) {
            fill(x, count, r, 1);
            float s = hcomm_onebit_pack(x + (size_t)p * m, real, bits);
            hcomm_onebit_unpack(y, bits, s, real, r > 0);
        }
        float s = hcomm_onebit_pack(y, real, bits);
        hcomm_onebit_unpack(want + (size_t)p * m, bits, s, real, 0);
    }
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
    hcomm_allreduce_opts_t o = {HCOMM_COMPRESS_ONEBIT, 0, NULL};
    CHECK_OK(
        hcomm_allreduce_ex(in, out, count, HCOMM_FLOAT32, HCOMM_SUM, comm, &o));
    CHECK(memcmp(out, want, count * sizeof(float)) == 0,
          "one-bit of %zu differs from its arithmetic done here", count);
    free(in);
    free(out);
    free(want);
}

/* T calls with error feedback: the outputs plus every residual sum to T
 * times the inputs' sum (up to float rounding). */
static void test_feedback(hcomm_compress_t kind, size_t count) {
    enum { T = 6 };
    float *in = malloc(count * sizeof(float)),
          *out = malloc(count * sizeof(float));
    double *got = calloc(count, sizeof(double));
    float *res = calloc(count, sizeof(float)),
          *all = malloc(count * sizeof(float));
    hcomm_compress_state_t st;
    CHECK_OK(hcomm_compress_state_create(comm, count, &st));
    fill(in, count, rank, 1);
    hcomm_allreduce_opts_t o = {kind, 0.05, st};
    for (int t = 0; t < T; t++) {
        CHECK_OK(hcomm_allreduce_ex(in, out, count, HCOMM_FLOAT32, HCOMM_SUM,
                                    comm, &o));
        for (size_t i = 0; i < count; i++)
            got[i] += out[i];
    }
    /* this rank's worker residual, plus its server residual at its chunk */
    for (size_t i = 0; i < count; i++)
        res[i] = st->worker[i];
    size_t m = (count + (size_t)nranks - 1) / (size_t)nranks;
    for (size_t i = 0; st->server && i < m && (size_t)rank * m + i < count; i++)
        res[(size_t)rank * m + i] += st->server[i];
    CHECK_OK(hcomm_allreduce(res, all, count, HCOMM_FLOAT32, HCOMM_SUM, comm));
    size_t bad = 0;
    for (size_t i = 0; i < count; i++) {
        double want = 0;
        for (int r = 0; r < nranks; r++)
            want += signed_value(r, i);
        want *= T;
        bad += !(fabs(got[i] + all[i] - want) <= 1e-3 * (fabs(want) + 100));
    }
    CHECK(bad == 0, "%s feedback over %d calls lost something at %zu of %zu",
          kind == HCOMM_COMPRESS_TOPK ? "top-k" : "one-bit", T, bad, count);
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
    hcomm_allreduce_opts_t o = {HCOMM_COMPRESS_BF16, 0, NULL};
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
    size_t rounded = 0;
    for (size_t i = 0; i < n; i++)
        rounded += hcomm_bf16_to_float(hcomm_float_to_bf16(out[i])) == out[i];
    CHECK(rounded == n, "HCOMM_COMPRESS=bf16: %zu of %zu results are bf16",
          rounded, n);
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
    hcomm_allreduce_opts_t o = {HCOMM_COMPRESS_AUTO, 0, NULL};
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
    const size_t counts[] = {0, 1, 7, 1009, (size_t)nranks * 1000 + 1, 65537};
    for (size_t c = 0; c < sizeof(counts) / sizeof(*counts); c++)
        for (int ip = 0; ip < 2; ip++) {
            test_half(HCOMM_COMPRESS_BF16, counts[c], ip, HCOMM_SUM);
            test_half(HCOMM_COMPRESS_FP16, counts[c], ip, HCOMM_AVG);
        }
    const size_t lossy[] = {1, 7, 1009, (size_t)nranks * 1000 + 1};
    for (size_t c = 0; c < sizeof(lossy) / sizeof(*lossy); c++) {
        test_topk(lossy[c], 1.0);
        test_topk(lossy[c], 0.1);
        test_onebit(lossy[c]);
    }
    test_feedback(HCOMM_COMPRESS_TOPK, 4099);
    test_feedback(HCOMM_COMPRESS_ONEBIT, 4099);
    test_refusals();
    test_default();
    test_auto();
    CHECK_OK(hcomm_comm_free(&comm));
    int rc = check_summary("test_compress");
    hcomm_finalize();
    MPI_Finalize();
    return rc;
}
