/* Compression on GPU memory (compress_cuda.h), against the CPU kernels
 * (compress.h), bit for bit:
 * - each kernel on every rank: 16-bit conversion both ways, the 16-bit
 *   sum of 1 to 5 chunks (plain and averaged), top-k pairs and residual
 *   (many ties, to check which index wins), the sparse sum, the 1-bit
 *   record and residual; counts 0 to 2^20 + 3 including ones that are not
 *   a multiple of 32;
 * - hcomm_allreduce_ex with each scheme, sum and avg, in place and not,
 *   on device memory against the same call on host memory, twice with the
 *   same error-feedback state (the second call adds the first's
 *   residuals; the state moves to the GPU and back);
 * - a call with one buffer on the GPU and the other in ordinary host
 *   memory is refused.
 * The inputs are multiples of 2^-6 below 16, so the 1-bit scale (a sum in
 * double, in another order on the GPU) is exact on both. Without a GPU:
 * exit 77 (skip). */
#include "compress/compress.h"
#include "compress/compress_cuda.h"
#include "mpi_check.h"

#include <cuda_runtime_api.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

static int rank, nranks;

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint64_t next_random(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* spread values, or (ties) only a few distinct magnitudes */
static void fill(float *x, size_t n, int ties) {
    for (size_t i = 0; i < n; i++) {
        uint64_t r = next_random();
        int v = ties ? (int)(r % 7) - 3 : (int)(r % 2001) - 1000;
        x[i] = (float)v / 64.0f;
    }
}

static void *dev_copy(const void *host, size_t bytes) {
    void *d = NULL;
    CHECK(cudaMalloc(&d, bytes ? bytes : 1) == cudaSuccess, "cudaMalloc %zu",
          bytes);
    if (d && bytes) cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice);
    return d;
}

/* The device buffer d equals host buffer want (bytes), after the stream. */
static int same(const void *d, const void *want, size_t bytes) {
    void *h = malloc(bytes ? bytes : 1);
    cudaDeviceSynchronize();
    cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost);
    int ok = memcmp(h, want, bytes) == 0;
    free(h);
    return ok;
}

static void test_half(size_t n, int bf16) {
    float *x = malloc(n * 4 + 4), *acc = malloc(n * 4 + 4);
    uint16_t *h16 = malloc(n * 2 + 2), *sum = malloc(n * 2 + 2);
    fill(x, n, 0);
    hcomm_cmp_to16(h16, x, n, bf16);
    float *dx = dev_copy(x, n * 4), *dacc = dev_copy(x, n * 4);
    uint16_t *d16 = dev_copy(h16, n * 2);
    CHECK(hcomm_cuda_cmp_to16(d16, dx, n, bf16, NULL) == 0, "to16 launch");
    CHECK(same(d16, h16, n * 2), "to16 %s, n %zu", bf16 ? "bf16" : "fp16", n);
    memcpy(acc, x, n * 4);
    hcomm_cmp_from16(acc, h16, n, bf16, 1);
    CHECK(hcomm_cuda_cmp_from16(dacc, d16, n, bf16, 1, NULL) == 0, "launch");
    CHECK(same(dacc, acc, n * 4), "from16 add, n %zu", n);
    /* the chunks of nin ranks: n values split into nin chunks of m */
    for (size_t nin = 1; nin <= 5; nin += 2)
        for (int divisor = 0; divisor <= 3; divisor += 3) {
            size_t m = n / nin;
            hcomm_cmp_sum16(sum, h16, nin, m, bf16, divisor);
            uint16_t *dsum = dev_copy(sum, m * 2);
            cudaMemset(dsum, 0xff, m * 2);
            CHECK(hcomm_cuda_cmp_sum16(dsum, d16, nin, m, bf16, divisor,
                                       NULL) == 0,
                  "launch");
            CHECK(same(dsum, sum, m * 2), "sum16 of %zu x %zu, divisor %d", nin,
                  m, divisor);
            cudaFree(dsum);
        }
    cudaFree(dx);
    cudaFree(dacc);
    cudaFree(d16);
    free(x);
    free(acc);
    free(h16);
    free(sum);
}

static void test_topk(size_t n, size_t k, int ties) {
    float *x = malloc(n * 4), *res = malloc(n * 4), *out = calloc(n, 4);
    uint32_t *pairs = malloc(k * 8);
    fill(x, n, ties);
    CHECK(hcomm_topk_pairs(x, n, k, pairs, res) == HCOMM_SUCCESS, "cpu");
    hcomm_topk_add(out, pairs, k, n);
    float *dx = dev_copy(x, n * 4), *dres = dev_copy(x, n * 4),
          *dout = dev_copy(out, n * 4);
    uint32_t *dpairs = dev_copy(pairs, k * 8);
    cudaMemset(dpairs, 0, k * 8);
    cudaMemset(dout, 0, n * 4);
    size_t sb = hcomm_cuda_topk_scratch(n);
    void *scratch = NULL;
    cudaMalloc(&scratch, sb);
    CHECK(hcomm_cuda_topk_pairs(dx, n, k, dpairs, dres, scratch, sb, NULL) == 0,
          "top-k launch");
    CHECK(same(dpairs, pairs, k * 8), "top-k pairs, n %zu, k %zu%s", n, k,
          ties ? ", ties" : "");
    CHECK(same(dres, res, n * 4), "top-k residual, n %zu, k %zu", n, k);
    CHECK(hcomm_cuda_topk_add(dout, dpairs, k, n, NULL) == 0, "launch");
    CHECK(same(dout, out, n * 4), "top-k sum, n %zu, k %zu", n, k);
    cudaFree(scratch);
    cudaFree(dx);
    cudaFree(dres);
    cudaFree(dout);
    cudaFree(dpairs);
    free(x);
    free(res);
    free(out);
    free(pairs);
}

static void test_onebit(size_t m) {
    size_t rb = hcomm_onebit_record_bytes(m);
    float *x = malloc(m * 4 + 4), *res = malloc(m * 4 + 4),
          *acc = malloc(m * 4 + 4);
    uint8_t *rec = calloc(1, rb);
    fill(x, m, 0);
    hcomm_onebit_encode(x, m, rec, res);
    memcpy(acc, x, m * 4);
    hcomm_onebit_decode(acc, rec, m, 1);
    float *dx = dev_copy(x, m * 4), *dres = dev_copy(res, m * 4),
          *dacc = dev_copy(x, m * 4);
    uint8_t *drec = dev_copy(rec, rb);
    cudaMemset(drec, 0, rb);
    void *scratch = NULL;
    cudaMalloc(&scratch, hcomm_cuda_onebit_scratch());
    CHECK(hcomm_cuda_onebit_encode(dx, m, drec, dres, scratch, NULL) == 0,
          "1-bit launch");
    CHECK(same(drec, rec, rb), "1-bit record, m %zu", m);
    CHECK(same(dres, res, m * 4), "1-bit residual, m %zu", m);
    CHECK(hcomm_cuda_onebit_decode(dacc, drec, m, 1, NULL) == 0, "launch");
    CHECK(same(dacc, acc, m * 4), "1-bit decode, m %zu", m);
    cudaFree(scratch);
    cudaFree(dx);
    cudaFree(dres);
    cudaFree(dacc);
    cudaFree(drec);
    free(x);
    free(res);
    free(acc);
    free(rec);
}

static void test_kernels(void) {
    size_t sizes[] = {0, 1, 7, 31, 32, 33, 1000, 65537, (1u << 20) + 3};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(*sizes); i++) {
        size_t n = sizes[i];
        test_half(n, 1);
        test_half(n, 0);
        test_onebit(n);
        if (n == 0) continue;
        test_topk(n, 1, 0);
        test_topk(n, n / 100 + 1, 0);
        test_topk(n, n / 100 + 1, 1);
        test_topk(n, n, 1);
    }
}

static const char *scheme_names[] = {"none", "bf16", "fp16", "topk", "onebit"};

/* The call on device memory gives what it gives on host memory, twice
 * with one state (the second call adds the first's residuals). */
static void test_call(hcomm_comm_t comm, hcomm_compress_t scheme, size_t n,
                      hcomm_op_t op, int inplace) {
    size_t bytes = n * 4;
    float *in = malloc(bytes + 4), *host = malloc(bytes + 4),
          *got = malloc(bytes + 4);
    hcomm_allreduce_opts_t o = {.compress = scheme, .density = 0.05};
    hcomm_compress_state_t hs = NULL, ds = NULL;
    CHECK_OK(hcomm_compress_state_create(comm, n, &hs));
    CHECK_OK(hcomm_compress_state_create(comm, n, &ds));
    float *dsend = NULL, *drecv = NULL;
    cudaMalloc((void **)&dsend, bytes + 4);
    cudaMalloc((void **)&drecv, bytes + 4);
    for (int round = 0; round < 2; round++) {
        fill(in, n, 0);
        memcpy(host, in, bytes);
        cudaMemcpy(dsend, in, bytes, cudaMemcpyHostToDevice);
        o.state = hs;
        hcomm_status_t hst = hcomm_allreduce_ex(inplace ? host : in, host, n,
                                                HCOMM_FLOAT32, op, comm, &o);
        o.state = ds;
        hcomm_status_t dst = hcomm_allreduce_ex(dsend, inplace ? dsend : drecv,
                                                n, HCOMM_FLOAT32, op, comm, &o);
        CHECK(hst == HCOMM_SUCCESS && dst == HCOMM_SUCCESS,
              "%s %s n %zu: host %s, device %s (%s)", scheme_names[scheme],
              op == HCOMM_AVG ? "avg" : "sum", n, hcomm_strerror(hst),
              hcomm_strerror(dst), hcomm_last_error());
        cudaMemcpy(got, inplace ? dsend : drecv, bytes, cudaMemcpyDeviceToHost);
        size_t bad = 0, first = 0;
        for (size_t i = 0; i < n; i++)
            if (memcmp(&got[i], &host[i], 4) && bad++ == 0) first = i;
        CHECK(bad == 0,
              "%s %s n %zu %s, call %d: %zu of the GPU's values differ from "
              "the CPU's, first at %zu (%g, not %g)",
              scheme_names[scheme], op == HCOMM_AVG ? "avg" : "sum", n,
              inplace ? "in place" : "out of place", round + 1, bad, first,
              bad ? (double)got[first] : 0.0, bad ? (double)host[first] : 0.0);
    }
    /* the state back on the host: the next host call still works */
    if (scheme == HCOMM_COMPRESS_TOPK || scheme == HCOMM_COMPRESS_ONEBIT) {
        o.state = ds;
        CHECK_OK(hcomm_allreduce_ex(in, host, n, HCOMM_FLOAT32, op, comm, &o));
    }
    CHECK_OK(hcomm_compress_state_free(&hs));
    CHECK_OK(hcomm_compress_state_free(&ds));
    cudaFree(dsend);
    cudaFree(drecv);
    free(in);
    free(host);
    free(got);
}

static void test_calls(hcomm_comm_t comm) {
    size_t counts[] = {0, 1, 7, 1009, (size_t)nranks * 1000 + 1, 1048583};
    for (int s = HCOMM_COMPRESS_BF16; s <= HCOMM_COMPRESS_ONEBIT; s++)
        for (size_t i = 0; i < sizeof(counts) / sizeof(*counts); i++)
            for (int inplace = 0; inplace < 2; inplace++) {
                test_call(comm, (hcomm_compress_t)s, counts[i], HCOMM_SUM,
                          inplace);
                test_call(comm, (hcomm_compress_t)s, counts[i], HCOMM_AVG,
                          inplace);
            }
    /* one buffer on the GPU, the other in ordinary host memory */
    float h[4] = {0}, *d = NULL;
    cudaMalloc((void **)&d, sizeof(h));
    hcomm_allreduce_opts_t o = {.compress = HCOMM_COMPRESS_BF16};
    hcomm_status_t st =
        hcomm_allreduce_ex(d, h, 4, HCOMM_FLOAT32, HCOMM_SUM, comm, &o);
    CHECK(st == HCOMM_ERR_UNSUPPORTED &&
              strstr(hcomm_last_error(), "host memory"),
          "device send, host receive: %s (%s)", hcomm_strerror(st),
          hcomm_last_error());
    cudaFree(d);
}

int main(int argc, char **argv) {
    int ndev = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    check_rank = rank;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        if (rank == 0) printf("test_cuda_compress: no CUDA device: skipped\n");
        MPI_Finalize();
        return 77;
    }
    cudaSetDevice(rank % ndev);
    rng += (uint64_t)rank * 0x9e3779b97f4a7c15ull; /* each rank its values */
    test_kernels();
    hcomm_comm_t comm;
    CHECK_OK(hcomm_init(&argc, &argv));
    CHECK_OK(hcomm_comm_create(MPI_COMM_WORLD, &comm));
    test_calls(comm);
    CHECK_OK(hcomm_comm_free(&comm));
    int rc = check_summary("test_cuda_compress");
    hcomm_finalize();
    MPI_Finalize();
    return rc;
}
