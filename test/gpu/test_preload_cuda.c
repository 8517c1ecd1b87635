/* A CUDA-aware MPI program, unmodified: collectives on cudaMalloc memory
 * through plain MPI calls. Run under LD_PRELOAD=libhcomm_mpi.so with an MPI
 * built without CUDA support, every result must be exact: HCOMM takes the
 * calls (run_gpu.sh checks HCOMM_MPI_STATS says so) and MPI never sees a
 * device pointer. Counts 1, odd, prime and large; in place and not.
 * Without a GPU: exit 77 (skip). */
#include <cuda_runtime_api.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, nranks, passed, failed;

static void check(int ok, const char *what, size_t count) {
    if (ok) {
        passed++;
        return;
    }
    failed++;
    fprintf(stderr, "[rank %d] %s, count %zu: wrong\n", rank, what, count);
}

/* n ints of the device buffer d, copied back. */
static int *back(const int *d, size_t n) {
    int *h = malloc(n * sizeof(int) + 1);
    cudaMemcpy(h, d, n * sizeof(int), cudaMemcpyDeviceToHost);
    return h;
}

static int *device_ints(size_t n, int base) {
    int *h = malloc(n * sizeof(int) + 1), *d = NULL;
    for (size_t i = 0; i < n; i++)
        h[i] = base + (int)(i % 1000);
    cudaMalloc((void **)&d, n * sizeof(int) + 1);
    cudaMemcpy(d, h, n * sizeof(int), cudaMemcpyHostToDevice);
    free(h);
    return d;
}

static void run(size_t n) {
    int sum_r = nranks * (nranks - 1) / 2;
    /* allreduce, out of place and in place; max */
    for (int inplace = 0; inplace < 2; inplace++) {
        int *in = device_ints(n, rank), *out = device_ints(n, -1);
        MPI_Allreduce(inplace ? MPI_IN_PLACE : in, inplace ? in : out, (int)n,
                      MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        int *h = back(inplace ? in : out, n), ok = 1;
        for (size_t i = 0; i < n; i++)
            ok &= h[i] == nranks * (int)(i % 1000) + sum_r;
        check(ok, inplace ? "allreduce in place" : "allreduce", n);
        free(h);
        cudaFree(in);
        cudaFree(out);
    }
    int *in = device_ints(n, rank), *out = device_ints(n, 0);
    MPI_Allreduce(in, out, (int)n, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    int *h = back(out, n), ok = 1;
    for (size_t i = 0; i < n; i++)
        ok &= h[i] == nranks - 1 + (int)(i % 1000);
    check(ok, "allreduce max", n);
    free(h);
    /* broadcast from the last rank */
    int root = nranks - 1;
    MPI_Bcast(in, (int)n, MPI_INT, root, MPI_COMM_WORLD);
    h = back(in, n);
    ok = 1;
    for (size_t i = 0; i < n; i++)
        ok &= h[i] == root + (int)(i % 1000);
    check(ok, "bcast", n);
    free(h);
    cudaFree(in);
    cudaFree(out);
    /* allgather and reduce to rank 0 */
    in = device_ints(n, rank);
    out = device_ints(n * (size_t)nranks, 0);
    MPI_Allgather(in, (int)n, MPI_INT, out, (int)n, MPI_INT, MPI_COMM_WORLD);
    h = back(out, n * (size_t)nranks);
    ok = 1;
    for (int r = 0; r < nranks; r++)
        for (size_t i = 0; i < n; i++)
            ok &= h[(size_t)r * n + i] == r + (int)(i % 1000);
    check(ok, "allgather", n);
    free(h);
    MPI_Reduce(in, out, (int)n, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        h = back(out, n);
        ok = 1;
        for (size_t i = 0; i < n; i++)
            ok &= h[i] == nranks * (int)(i % 1000) + sum_r;
        check(ok, "reduce", n);
        free(h);
    }
    cudaFree(in);
    cudaFree(out);
}

int main(int argc, char **argv) {
    int ndev = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        if (rank == 0) printf("test_preload_cuda: no CUDA device: skipped\n");
        MPI_Finalize();
        return 77;
    }
    cudaSetDevice(rank % ndev);
    size_t counts[] = {1, 7, 1009, ((size_t)1 << 20) + 3};
    for (size_t k = 0; k < sizeof(counts) / sizeof(*counts); k++)
        run(counts[k]);
    int all_failed = 0;
    MPI_Allreduce(&failed, &all_failed, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("test_preload_cuda: %d passed, %d failed\n", passed, all_failed);
    MPI_Finalize();
    return all_failed ? 1 : 0;
}
