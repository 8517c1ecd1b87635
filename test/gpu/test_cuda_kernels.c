/* The CUDA reduction kernels against the CPU kernels: every dtype x op,
 * counts from 0 to 256 MiB, aligned, equally misaligned and differently
 * misaligned buffers, in place, a second output, several inputs, and the
 * average's scaling; bit for bit (NaNs aside: none are generated). Then
 * the kernels' bandwidth on 256 MiB, against a device-to-device copy in
 * the same run (printed, not asserted; --bandwidth: those alone).
 * --latency: the floor a small call on device memory stands on here (a
 * one-element kernel waited for, an 8-byte copy to the host, kernels back
 * to back), printed alone. Without a GPU: exit 77 (skip). */
#include "kernels/reduce.h"
#include "kernels/reduce_cuda.h"

#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static long passed, failed;

#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (cond) {                                                            \
            passed++;                                                          \
        } else if (++failed <= 20) {                                           \
            fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                    \
            fprintf(stderr, __VA_ARGS__);                                      \
            fputc('\n', stderr);                                               \
        }                                                                      \
    } while (0)

static const char *dtype_names[HCOMM_DTYPE_COUNT] = {
    "int8",   "uint8",   "int32",    "uint32",  "int64",
    "uint64", "float16", "bfloat16", "float32", "float64"};
static const char *op_names[HCOMM_OP_COUNT] = {"sum", "prod", "max", "min",
                                               "avg"};

static uint64_t rng = 88172645463325252ull;
static uint64_t next_random(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* Finite values of every type: random bits for integers, small-range
 * values for floats (products of several stay finite and exact enough to
 * compare bit for bit anyway: both sides round the same way). */
static void fill(hcomm_dtype_t t, void *buf, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint64_t r = next_random();
        float f = (float)((int)(r % 2001) - 1000) / 64.0f;
        switch (t) {
        case HCOMM_FLOAT16:
            ((uint16_t *)buf)[i] = hcomm_float_to_half(f);
            break;
        case HCOMM_BFLOAT16:
            ((uint16_t *)buf)[i] = hcomm_float_to_bf16(f);
            break;
        case HCOMM_FLOAT32:
            ((float *)buf)[i] = f;
            break;
        case HCOMM_FLOAT64:
            ((double *)buf)[i] = (double)f * 1.000001;
            break;
        default:
            memcpy((char *)buf + i * hcomm_dtype_size(t), &r,
                   hcomm_dtype_size(t));
        }
    }
}

static int ok(cudaError_t e, const char *what) {
    CHECK(e == cudaSuccess, "%s: %s", what, cudaGetErrorString(e));
    return e == cudaSuccess;
}

/* Device buffers big enough for every case, plus host mirrors. */
#define MAX_BYTES ((size_t)256 << 20)
#define PAD 64
static char *dev[3], *host[3], *want;

/* dst = a op b on the GPU (offsets in bytes into each buffer), against
 * the CPU kernel; with avg, then the scaling kernel against the CPU's. */
static void check_pair(hcomm_dtype_t t, hcomm_op_t op, size_t n, size_t offa,
                       size_t offb, size_t offd, int inplace) {
    size_t es = hcomm_dtype_size(t), bytes = n * es;
    char *a = dev[0] + offa, *b = dev[1] + offb;
    char *d = inplace ? a : dev[2] + offd;
    fill(t, host[0] + offa, n);
    fill(t, host[1] + offb, n);
    if (!ok(cudaMemcpy(a, host[0] + offa, bytes, cudaMemcpyHostToDevice),
            "copy a") ||
        !ok(cudaMemcpy(b, host[1] + offb, bytes, cudaMemcpyHostToDevice),
            "copy b"))
        return;
    hcomm_kernel_reduce(t, op)(want, host[0] + offa, host[1] + offb, n);
    const void *srcs[2] = {a, b};
    int e = hcomm_cuda_reduce(d, NULL, srcs, 2, n, t, op, 0, NULL);
    if (op == HCOMM_AVG) {
        hcomm_kernel_scale(t)(want, n, 3);
        const void *one[1] = {d};
        if (!e) e = hcomm_cuda_reduce(d, NULL, one, 1, n, t, op, 3, NULL);
    }
    if (!ok((cudaError_t)e, "launch") ||
        !ok(cudaMemcpy(host[2], d, bytes, cudaMemcpyDeviceToHost), "copy back"))
        return;
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++)
        if (memcmp(host[2] + i * es, want + i * es, es) != 0 && bad++ == 0)
            first = i;
    CHECK(bad == 0,
          "%s %s n=%zu offsets %zu/%zu/%zu%s: %zu wrong, first at %zu",
          dtype_names[t], op_names[op], n, offa, offb, offd,
          inplace ? " in place" : "", bad, first);
}

/* k inputs into two outputs at once, against the CPU kernel applied in
 * the same order (integers and fp32/fp64: the same roundings). */
static void check_many(hcomm_dtype_t t, hcomm_op_t op, size_t n, int k) {
    size_t es = hcomm_dtype_size(t), bytes = n * es;
    const void *srcs[HCOMM_CUDA_MAX_SRCS];
    char *scratch = dev[0];
    fill(t, host[0], n * (size_t)k);
    if (!ok(cudaMemcpy(scratch, host[0], bytes * (size_t)k,
                       cudaMemcpyHostToDevice),
            "copy inputs"))
        return;
    memcpy(want, host[0], bytes);
    for (int s = 0; s < k; s++)
        srcs[s] = scratch + (size_t)s * bytes;
    for (int s = 1; s < k; s++)
        hcomm_kernel_reduce(t, op)(want, want, host[0] + (size_t)s * bytes, n);
    int e = hcomm_cuda_reduce(dev[1], dev[2], srcs, k, n, t, op, 0, NULL);
    if (!ok((cudaError_t)e, "launch")) return;
    for (int out = 1; out <= 2; out++) {
        if (!ok(cudaMemcpy(host[2], dev[out], bytes, cudaMemcpyDeviceToHost),
                "copy back"))
            return;
        CHECK(memcmp(host[2], want, bytes) == 0,
              "%s %s n=%zu, %d inputs: "
              "output %d differs",
              dtype_names[t], op_names[op], n, k, out);
    }
}

static void test_correctness(void) {
    static const size_t counts[] = {0,    1,    2,     3,      7,   15,
                                    16,   17,   31,    33,     255, 1000,
                                    1009, 4099, 65537, 1048583};
    for (int t = 0; t < HCOMM_DTYPE_COUNT; t++)
        for (int op = 0; op < HCOMM_OP_COUNT; op++)
            for (size_t k = 0; k < sizeof(counts) / sizeof(*counts); k++) {
                size_t n = counts[k], es = hcomm_dtype_size((hcomm_dtype_t)t);
                check_pair(t, op, n, 0, 0, 0, 0);
                check_pair(t, op, n, es, es, es, 0);    /* same misalignment */
                check_pair(t, op, n, es, 0, 3 * es, 0); /* different */
                check_pair(t, op, n, 0, 0, 0, 1);
            }
    /* byte offsets of int8 across a vector, and 256 MiB */
    for (size_t off = 1; off < 16; off++)
        check_pair(HCOMM_INT8, HCOMM_SUM, 100003, off, off, off, 0);
    check_pair(HCOMM_FLOAT32, HCOMM_SUM, MAX_BYTES / 4 - PAD, 0, 0, 0, 0);
    check_pair(HCOMM_BFLOAT16, HCOMM_SUM, MAX_BYTES / 2 - PAD, 0, 0, 0, 0);
    for (int t = 0; t < HCOMM_DTYPE_COUNT; t++) {
        if (t == HCOMM_FLOAT16 || t == HCOMM_BFLOAT16) continue;
        for (int op = 0; op < 4; op++) {
            check_many(t, op, 100001, 5);
            check_many(t, op, 3, HCOMM_CUDA_MAX_SRCS);
        }
    }
}

/* GB/s of bytes read + written by c = a op b over 256 MiB per buffer,
 * the best of 20 launches; beside a device-to-device copy. */
static void measure(void) {
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    size_t bytes = MAX_BYTES;
    float best = 1e30f, ms;
    for (int i = 0; i < 20; i++) {
        cudaEventRecord(e0, NULL);
        cudaMemcpyAsync(dev[2], dev[0], bytes, cudaMemcpyDeviceToDevice, NULL);
        cudaEventRecord(e1, NULL);
        cudaEventSynchronize(e1);
        cudaEventElapsedTime(&ms, e0, e1);
        if (ms < best) best = ms;
    }
    printf("bandwidth: cudaMemcpy D2D 256 MiB: %.0f GB/s (read + written)\n",
           2.0 * (double)bytes / (best * 1e6));
    best = 1e30f;
    for (int i = 0; i < 20; i++) {
        cudaEventRecord(e0, NULL);
        hcomm_cuda_copy(dev[2], dev[0], bytes, NULL);
        cudaEventRecord(e1, NULL);
        cudaEventSynchronize(e1);
        cudaEventElapsedTime(&ms, e0, e1);
        if (ms < best) best = ms;
    }
    printf("bandwidth: hcomm_cuda_copy 256 MiB: %.0f GB/s (read + written)\n",
           2.0 * (double)bytes / (best * 1e6));
    static const hcomm_dtype_t types[] = {HCOMM_FLOAT32, HCOMM_BFLOAT16,
                                          HCOMM_FLOAT16, HCOMM_INT8,
                                          HCOMM_FLOAT64};
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        hcomm_dtype_t t = types[k];
        size_t n = bytes / hcomm_dtype_size(t);
        const void *srcs[2] = {dev[0], dev[1]};
        best = 1e30f;
        for (int i = 0; i < 20; i++) {
            cudaEventRecord(e0, NULL);
            hcomm_cuda_reduce(dev[2], NULL, srcs, 2, n, t, HCOMM_SUM, 0, NULL);
            cudaEventRecord(e1, NULL);
            cudaEventSynchronize(e1);
            cudaEventElapsedTime(&ms, e0, e1);
            if (ms < best) best = ms;
        }
        printf("bandwidth: c = a + b %s 256 MiB: %.0f GB/s (read + written; "
               "%.1f%% of 4170)\n",
               dtype_names[t], 3.0 * (double)bytes / (best * 1e6),
               100.0 * 3.0 * (double)bytes / (best * 1e6) / 4170.0);
    }
}

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Medians of 2000 of each, on a stream of its own: what a blocking call
 * pays at least (a launch and the wait for its end), a small copy to
 * (pageable) host memory, and the pace of stream-ordered calls (one kernel
 * each). */
static void latency(void) {
    enum { N = 2000 };
    static double t[N];
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    const void *srcs[1] = {dev[0]};
    char byte8[8];
    for (int round = 0; round < 2; round++) { /* the first warms up */
        for (int i = 0; i < N; i++) {
            double t0 = now_us();
            hcomm_cuda_reduce(dev[2], NULL, srcs, 1, 2, HCOMM_FLOAT32,
                              HCOMM_SUM, 0, s);
            cudaStreamSynchronize(s);
            t[i] = now_us() - t0;
        }
        qsort(t, N, sizeof(*t), by_value);
        double kernel = t[N / 2];
        for (int i = 0; i < N; i++) {
            double t0 = now_us();
            cudaMemcpyAsync(byte8, dev[0], 8, cudaMemcpyDeviceToHost, s);
            cudaStreamSynchronize(s);
            t[i] = now_us() - t0;
        }
        qsort(t, N, sizeof(*t), by_value);
        double copy = t[N / 2];
        double t0 = now_us();
        for (int i = 0; i < N; i++)
            hcomm_cuda_reduce(dev[2], NULL, srcs, 1, 2, HCOMM_FLOAT32,
                              HCOMM_SUM, 0, s);
        cudaStreamSynchronize(s);
        double paced = (now_us() - t0) / N;
        if (round)
            printf("latency: one-element kernel + wait %.2f us, 8 B to the "
                   "host + wait %.2f us, back-to-back kernels %.2f us each\n",
                   kernel, copy, paced);
    }
    cudaStreamDestroy(s);
}

int main(int argc, char **argv) {
    int ndev = 0;
    /* --bandwidth: the timings alone (comparing two builds of a kernel) */
    int timings_only = argc > 1 && strcmp(argv[1], "--bandwidth") == 0;
    int latency_only = argc > 1 && strcmp(argv[1], "--latency") == 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("test_cuda_kernels: no CUDA device: skipped\n");
        return 77;
    }
    for (int i = 0; i < 3; i++) {
        if (!ok(cudaMalloc((void **)&dev[i], MAX_BYTES + PAD), "cudaMalloc") ||
            !(host[i] = malloc(MAX_BYTES + PAD)))
            return 1;
    }
    if (!(want = malloc(MAX_BYTES + PAD))) return 1;
    if (latency_only) {
        latency();
        return 0;
    }
    if (!timings_only) test_correctness();
    measure();
    printf("test_cuda_kernels: %ld passed, %ld failed\n", passed, failed);
    return failed ? 1 : 0;
}
