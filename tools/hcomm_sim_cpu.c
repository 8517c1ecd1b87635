/* hcomm_sim --measure-cpu: the CPU figures of the model on this machine,
 * the float32 sum kernel and memcpy, median of 7 passes over 64 MiB in
 * pieces of 1 MiB (HCOMM_CHUNK_SIZE): plans reduce and copy chunk by
 * chunk, each piece just received, so partly from the caches. */
#define _POSIX_C_SOURCE 200809L

#include "hcomm_sim.h"
#include "kernels/reduce.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int hcomm_sim_measure_cpu(double *reduce_bw, double *copy_bw) {
    const size_t n = (size_t)16 << 20; /* floats: 64 MiB a buffer */
    float *a = malloc(n * 4), *b = malloc(n * 4), *d = malloc(n * 4);
    hcomm_reduce_fn_t sum = hcomm_kernel_reduce(HCOMM_FLOAT32, HCOMM_SUM);
    if (!a || !b || !d || !sum) {
        free(a);
        free(b);
        free(d);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        a[i] = b[i] = d[i] = (float)(i % 7);
    double tr[7], tc[7];
    const size_t piece = (size_t)1 << 18; /* floats: 1 MiB */
    for (int k = 0; k < 7; k++) {
        tr[k] = tc[k] = 0;
        for (size_t o = 0; o < n; o += piece) {
            double t0 = now();
            memcpy(b + o, a + o, piece * 4); /* as a receive would */
            double t1 = now();
            sum(d + o, a + o, b + o, piece);
            tr[k] += now() - t1;
            tc[k] += t1 - t0;
        }
    }
    qsort(tr, 7, sizeof(double), by_value);
    qsort(tc, 7, sizeof(double), by_value);
    /* Bytes of result per second, as the model counts them. */
    *reduce_bw = (double)n * 4 / tr[3];
    *copy_bw = (double)n * 4 / tc[3];
    free(a);
    free(b);
    free(d);
    return 0;
}
