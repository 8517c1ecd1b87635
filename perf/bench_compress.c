/* AllReduce of float32 sums with each compression of hcomm_allreduce_ex,
 * against uncompressed HCOMM and MPI_Allreduce in the same run: median time
 * per call, the bytes each rank sends, and the ratio to MPI.
 *   mpirun -np N perf/bench_compress [-e max_bytes] [-n iterations]
 *                                    [-D cuda]
 * (max_bytes as 67108864 or 64M; from 64 KiB up by 4x). With -D cuda the
 * buffers are GPU memory and the baseline is what a program without HCOMM
 * does: copy to the host, MPI_Allreduce, copy back. */
#include "core/size_parse.h"
#include "hcomm.h"
#include "perf.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of n timed calls (us), every rank timing the slowest rank. */
typedef hcomm_status_t (*call_fn)(void *arg);
static double median_us(call_fn fn, void *arg, int iters) {
    double *t = malloc((size_t)iters * sizeof(double));
    for (int i = -2; i < iters; i++) { /* two warm-up calls */
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        if (fn(arg) != HCOMM_SUCCESS) {
            fprintf(stderr, "bench_compress: %s\n", hcomm_last_error());
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        double dt = MPI_Wtime() - t0, max;
        MPI_Allreduce(&dt, &max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (i >= 0) t[i] = max * 1e6;
    }
    qsort(t, (size_t)iters, sizeof(double), cmp_double);
    double m = t[iters / 2];
    free(t);
    return m;
}

typedef struct {
    float *in, *out;
    float *host_in, *host_out; /* -D cuda: the baseline's copies */
    size_t count;
    hcomm_comm_t comm;
    hcomm_allreduce_opts_t opts;
} job_t;

static hcomm_status_t run_ex(void *arg) {
    job_t *j = arg;
    return hcomm_allreduce_ex(j->in, j->out, j->count, HCOMM_FLOAT32, HCOMM_SUM,
                              j->comm, &j->opts);
}
static hcomm_status_t run_mpi(void *arg) {
    job_t *j = arg;
    size_t bytes = j->count * 4;
    const float *in = j->host_in ? j->host_in : j->in;
    float *out = j->host_out ? j->host_out : j->out;
    if (j->host_in && perf_dev_copy(j->host_in, j->in, bytes))
        return HCOMM_ERR_INTERNAL;
    if (MPI_Allreduce(in, out, (int)j->count, MPI_FLOAT, MPI_SUM,
                      MPI_COMM_WORLD) != MPI_SUCCESS)
        return HCOMM_ERR_TRANSPORT;
    if (j->host_out && perf_dev_copy(j->out, j->host_out, bytes))
        return HCOMM_ERR_INTERNAL;
    return HCOMM_SUCCESS;
}

int main(int argc, char **argv) {
    size_t max_bytes = 64u << 20;
    int iters = 20, opt, rank, n, gpu = 0;
    setvbuf(stdout, NULL, _IOLBF, 0); /* rows as they come, into a pipe too */
    MPI_Init(&argc, &argv);
    while ((opt = getopt(argc, argv, "e:n:D:")) != -1) {
        if (opt == 'e' && hcomm_parse_size(optarg, &max_bytes)) {
            fprintf(stderr, "hcomm_bench_compress: -e %s is not a size\n",
                    optarg);
            MPI_Finalize();
            return 2;
        }
        if (opt == 'n') iters = atoi(optarg);
        if (opt == 'D') gpu = strcmp(optarg, "cuda") == 0;
    }
    char why[128];
    if (gpu && perf_dev_init(MPI_COMM_WORLD, why, sizeof(why))) {
        fprintf(stderr, "hcomm_bench_compress: %s\n", why);
        MPI_Finalize();
        return 2;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    if (hcomm_init(&argc, &argv) != HCOMM_SUCCESS) MPI_Abort(MPI_COMM_WORLD, 1);
    job_t j = {0};
    hcomm_comm_create(MPI_COMM_WORLD, &j.comm);
    size_t maxc = max_bytes / 4;
    float *values = malloc(maxc * 4);
    for (size_t i = 0; i < maxc; i++)
        values[i] = (float)((i * 7 + (size_t)rank) % 1000) / 64.0f;
    if (gpu) {
        j.in = perf_dev_alloc(maxc * 4);
        j.out = perf_dev_alloc(maxc * 4);
        j.host_in = values;
        j.host_out = malloc(maxc * 4);
        if (!j.in || !j.out || perf_dev_copy(j.in, values, maxc * 4))
            MPI_Abort(MPI_COMM_WORLD, 1);
    } else {
        j.in = values;
        j.out = malloc(maxc * 4);
    }
    static const char *names[] = {"none", "bf16", "fp16", "topk 1%", "onebit"};
    if (rank == 0)
        printf("# %d ranks, float32 sum, %s memory; time: median of %d "
               "(us); sent: bytes each rank sends; ratio: MPI time / this "
               "time\n%10s %-8s %10s %12s %10s %7s\n",
               n, gpu ? "GPU (MPI: with copies to the host)" : "host", iters,
               "bytes", "scheme", "time", "sent", "MPI", "ratio");
    for (size_t bytes = 64u << 10; bytes <= max_bytes; bytes *= 4) {
        j.count = bytes / 4;
        double mpi = median_us(run_mpi, &j, iters);
        size_t m = (j.count + (size_t)n - 1) / (size_t)n;
        for (int k = 0; k < HCOMM_COMPRESS_AUTO; k++) {
            hcomm_compress_state_t st = NULL;
            if (k >= HCOMM_COMPRESS_TOPK)
                hcomm_compress_state_create(j.comm, j.count, &st);
            j.opts = (hcomm_allreduce_opts_t){
                .compress = (hcomm_compress_t)k, .density = 0.01, .state = st};
            double t = median_us(run_ex, &j, iters);
            hcomm_compress_state_free(&st);
            /* what each rank puts on the wire, by the schemes' definition */
            size_t peers = (size_t)n - 1, sent;
            size_t kk = (size_t)(0.01 * (double)j.count + 0.999999);
            switch (k) {
            case HCOMM_COMPRESS_NONE: /* reduce-scatter + allgather */
                sent = 2 * peers * m * 4;
                break;
            case HCOMM_COMPRESS_TOPK: /* (index, value) to every peer */
                sent = peers * kk * 8;
                break;
            case HCOMM_COMPRESS_ONEBIT:
                sent = 2 * peers * ((4 + (m + 7) / 8 + 3) / 4 * 4);
                break;
            default:
                sent = 2 * peers * m * 2;
            }
            if (rank == 0)
                printf("%10zu %-8s %10.1f %12zu %10.1f %7.2f\n", bytes,
                       names[k], t, sent, mpi, mpi / t);
        }
    }
    hcomm_comm_free(&j.comm);
    if (gpu) {
        perf_dev_free(j.in);
        perf_dev_free(j.out);
        free(j.host_out);
    } else {
        free(j.out);
    }
    free(values);
    hcomm_finalize();
    MPI_Finalize();
    return 0;
}
