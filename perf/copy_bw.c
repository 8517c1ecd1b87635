/* The machine's copy bandwidth with T threads (default 2), the bound the
 * README's registered-buffer figures are measured against: each thread
 * copies its own 64 MiB buffer to another, repeatedly; the result counts
 * bytes read plus bytes written per second, the median of 7 trials.
 * Usage: hcomm_copy_bw [threads] [MiB per thread]. */

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { REPS = 8, TRIALS = 7 };

typedef struct {
    char *src, *dst;
    size_t bytes;
    pthread_barrier_t *start;
} job_t;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *copy_loop(void *arg) {
    job_t *j = arg;
    pthread_barrier_wait(j->start);
    for (int r = 0; r < REPS; r++)
        memcpy(j->dst, j->src, j->bytes);
    return NULL;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 2;
    size_t mib = argc > 2 ? (size_t)atol(argv[2]) : 64;
    if (threads < 1 || threads > 256 || mib < 1) {
        fprintf(stderr, "usage: hcomm_copy_bw [threads] [MiB per thread]\n");
        return 2;
    }
    size_t bytes = mib << 20;
    job_t *jobs = calloc((size_t)threads, sizeof(*jobs));
    pthread_t *tid = calloc((size_t)threads, sizeof(*tid));
    pthread_barrier_t start;
    if (!jobs || !tid) return 1;
    for (int t = 0; t < threads; t++) {
        jobs[t] = (job_t){malloc(bytes), malloc(bytes), bytes, &start};
        if (!jobs[t].src || !jobs[t].dst) return 1;
        memset(jobs[t].src, 1, bytes); /* fault the pages in */
        memset(jobs[t].dst, 2, bytes);
    }
    double gbs[TRIALS];
    for (int k = 0; k < TRIALS; k++) {
        pthread_barrier_init(&start, NULL, (unsigned)threads + 1);
        for (int t = 0; t < threads; t++)
            pthread_create(&tid[t], NULL, copy_loop, &jobs[t]);
        pthread_barrier_wait(&start);
        double t0 = now();
        for (int t = 0; t < threads; t++)
            pthread_join(tid[t], NULL);
        double s = now() - t0;
        pthread_barrier_destroy(&start);
        gbs[k] = 2.0 * (double)bytes * REPS * threads / s / 1e9;
    }
    qsort(gbs, TRIALS, sizeof(double), cmp);
    printf("copy bandwidth, %d threads x %zu MiB: %.2f GB/s (read + "
           "written; median of %d)\n",
           threads, mib, gbs[TRIALS / 2], TRIALS);
    for (int t = 0; t < threads; t++) {
        free(jobs[t].src);
        free(jobs[t].dst);
    }
    free(jobs);
    free(tid);
    return 0;
}
