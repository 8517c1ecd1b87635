/* The CUDA IPC path's safety, on 2 or more ranks sharing a node's GPUs:
 *  - mismatched counts fail on every rank with HCOMM_ERR_MISMATCH and no
 *    byte around any rank's buffers changes;
 *  - a rank whose kernel never runs (its stream held by a host function)
 *    makes every other rank's call fail with HCOMM_ERR_TIMEOUT within the
 *    timeout (plus 10%), naming that rank; hcomm_comm_abort then ends the
 *    held rank's kernel and its communicator is broken;
 *  - many rounds through small buffers (HCOMM_CUDA_IPC_BUFFER) give exact
 *    results, one-shot and two-shot, in order on two streams;
 *  - with "kill" (under mpirun --enable-recovery): the last rank dies by
 *    SIGKILL between calls on device memory whose workspaces its peers
 *    have mapped; every survivor's call fails within the timeout naming
 *    it, its GPU work ends (no kernel left spinning) and the communicator
 *    is broken;
 *  - ordinary buffers mapped by the peers give exact results (test_mapped).
 * Without a GPU: exit 77 (skip). */
#include "core/config.h"
#include "hold_stream.h"
#include "mpi_check.h"

#include <cuda_runtime_api.h>
#include <mpi.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static int rank, nranks;
static double hold_limit = 20;

/* Counts of 1000 on rank 0 and 1001 elsewhere, guards of 64 floats. */
static void test_mismatch(hcomm_comm_t comm) {
    enum { GUARD = 64 };
    size_t count = rank == 0 ? 1000 : 1001, total = 1001 + 2 * GUARD;
    float *h = malloc(total * sizeof(float)), *d = NULL;
    for (size_t i = 0; i < total; i++)
        h[i] = (float)i;
    cudaMalloc((void **)&d, total * sizeof(float));
    cudaMemcpy(d, h, total * sizeof(float), cudaMemcpyHostToDevice);
    hcomm_status_t st = hcomm_allreduce(d + GUARD, d + GUARD, count,
                                        HCOMM_FLOAT32, HCOMM_SUM, comm);
    CHECK(st == HCOMM_ERR_MISMATCH, "mismatched allreduce: %s (%s)",
          hcomm_strerror(st), hcomm_last_error());
    float *back = malloc(total * sizeof(float));
    cudaMemcpy(back, d, total * sizeof(float), cudaMemcpyDeviceToHost);
    CHECK(memcmp(back, h, total * sizeof(float)) == 0,
          "a mismatched call changed device memory");
    cudaFree(d);
    free(h);
    free(back);
}

/* Rank 1's stream is held; every other rank's call times out naming it. */
static void test_absent_peer(hcomm_comm_t comm) {
    const double timeout = 3;
    CHECK_OK(hcomm_comm_set_timeout(comm, timeout));
    size_t n = 4096;
    float *d = NULL;
    cudaMalloc((void **)&d, n * sizeof(float));
    cudaMemset(d, 0, n * sizeof(float));
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    /* the communicator's first call maps the workspaces */
    CHECK_OK(hcomm_allreduce(d, d, n, HCOMM_FLOAT32, HCOMM_SUM, comm));
    if (rank == 1) {
        atomic_store(&hold_released, 0); /* an earlier test released it */
        cudaLaunchHostFunc(s, hold_stream, &hold_limit);
        /* agreed with the others on the host, enqueued behind the hold */
        CHECK_OK(
            hcomm_allreduce_stream(d, d, n, HCOMM_FLOAT32, HCOMM_SUM, comm, s));
        MPI_Barrier(MPI_COMM_WORLD); /* the others have failed */
        CHECK_OK(hcomm_comm_abort(comm));
        atomic_store(&hold_released, 1);
        double t0 = MPI_Wtime();
        CHECK(cudaStreamSynchronize(s) == cudaSuccess,
              "the held stream failed");
        CHECK(MPI_Wtime() - t0 < timeout, "the aborted kernel ran %.1f s",
              MPI_Wtime() - t0);
        hcomm_status_t st =
            hcomm_allreduce(d, d, n, HCOMM_FLOAT32, HCOMM_SUM, comm);
        CHECK(st != HCOMM_SUCCESS, "a call after the abort succeeded");
    } else {
        double t0 = MPI_Wtime();
        hcomm_status_t st =
            hcomm_allreduce(d, d, n, HCOMM_FLOAT32, HCOMM_SUM, comm);
        double took = MPI_Wtime() - t0;
        CHECK(st == HCOMM_ERR_TIMEOUT, "absent peer: %s (%s)",
              hcomm_strerror(st), hcomm_last_error());
        CHECK(strstr(hcomm_last_error(), "rank(s) 1") != NULL,
              "the message does not name rank 1: %s", hcomm_last_error());
        CHECK(took < 1.1 * timeout, "the call failed after %.1f s", took);
        MPI_Barrier(MPI_COMM_WORLD);
    }
    cudaStreamDestroy(s);
    cudaFree(d);
}

/* Rounds: the buffers hold 64 KiB, so 1 Mi floats take dozens of them;
 * calls alternate between two streams. Values are small integers: every
 * order of summing gives the same floats. */
static void test_rounds(hcomm_comm_t comm, const char *algo) {
    size_t n = (1u << 20) + 7;
    float *h = malloc(n * sizeof(float)), *d = NULL;
    cudaMalloc((void **)&d, n * sizeof(float));
    cudaStream_t s[2];
    for (int i = 0; i < 2; i++)
        cudaStreamCreateWithFlags(&s[i], cudaStreamNonBlocking);
    for (size_t i = 0; i < n; i++)
        h[i] = (float)((i + (size_t)rank) % 7);
    cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice);
    /* a copy from pageable memory may still run when cudaMemcpy returns,
     * and the streams below do not follow the default stream */
    cudaDeviceSynchronize();
    for (int it = 0; it < 4; it++)
        CHECK_OK(hcomm_allreduce_stream(d, d, n, HCOMM_FLOAT32, HCOMM_SUM, comm,
                                        s[it % 2]));
    cudaStreamSynchronize(s[0]);
    cudaStreamSynchronize(s[1]);
    cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        double v = 0;
        for (int r = 0; r < nranks; r++)
            v += (double)((i + (size_t)r) % 7);
        for (int it = 1; it < 4; it++)
            v *= nranks;
        bad += h[i] != (float)v;
    }
    CHECK(bad == 0, "%s rounds on two streams: %zu of %zu wrong", algo, bad, n);
    for (int i = 0; i < 2; i++)
        cudaStreamDestroy(s[i]);
    cudaFree(d);
    free(h);
}

/* Calls on one stream, that stream destroyed with them still held in
 * it, then a call on a new stream (whose handle may be the old one's): it
 * must still run after them. The ops differ so that another order gives
 * other values: rank r's r + 1 summed twice is nranks * T (T the sum of
 * 1..nranks), which the max then keeps; the max first would give
 * nranks^3. */
static void test_stream_reborn(hcomm_comm_t comm) {
    size_t n = 4099;
    float *h = malloc(n * sizeof(float)), *d = NULL;
    cudaMalloc((void **)&d, n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        h[i] = (float)(rank + 1);
    cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice);
    cudaDeviceSynchronize();
    double limit = 5;
    atomic_store(&hold_released, 0);
    cudaStream_t s, again;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    cudaLaunchHostFunc(s, hold_stream, &limit);
    for (int i = 0; i < 2; i++)
        CHECK_OK(
            hcomm_allreduce_stream(d, d, n, HCOMM_FLOAT32, HCOMM_SUM, comm, s));
    cudaStreamDestroy(s);
    cudaStreamCreateWithFlags(&again, cudaStreamNonBlocking);
    CHECK_OK(
        hcomm_allreduce_stream(d, d, n, HCOMM_FLOAT32, HCOMM_MAX, comm, again));
    /* time for a call not ordered after the held ones to run first */
    for (double t0 = MPI_Wtime(); MPI_Wtime() - t0 < 0.05;)
        ;
    atomic_store(&hold_released, 1);
    CHECK(cudaStreamSynchronize(again) == cudaSuccess, "the stream failed");
    cudaDeviceSynchronize();
    cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost);
    double want = (double)nranks * nranks * (nranks + 1) / 2;
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += h[i] != (float)want;
    CHECK(bad == 0,
          "a call on a new stream after a destroyed one's: %zu of "
          "%zu wrong (%g, want %g)",
          bad, n, (double)h[0], want);
    cudaStreamDestroy(again);
    cudaFree(d);
    free(h);
}

/* Back-to-back out-of-place calls of 32 Mi floats through the default
 * 8 MiB buffers (dozens of rounds each), then one checked: as hcomm_perf's
 * timed loop runs them. */
static void test_back_to_back(hcomm_comm_t comm) {
    size_t n = (size_t)32 << 20;
    float *h = malloc(n * sizeof(float)), *in = NULL, *out = NULL;
    cudaMalloc((void **)&in, n * sizeof(float));
    cudaMalloc((void **)&out, n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        h[i] = (float)((i * 7 + (size_t)rank) % 1000);
    cudaMemcpy(in, h, n * sizeof(float), cudaMemcpyHostToDevice);
    for (int it = 0; it < 8; it++)
        CHECK_OK(hcomm_allreduce(in, out, n, HCOMM_FLOAT32, HCOMM_SUM, comm));
    cudaMemcpy(h, out, n * sizeof(float), cudaMemcpyDeviceToHost);
    size_t bad = 0, first = n;
    for (size_t i = 0; i < n; i++) {
        double v = 0;
        for (int r = 0; r < nranks; r++)
            v += (double)((i * 7 + (size_t)r) % 1000);
        if (h[i] != (float)v && bad++ == 0) first = i;
    }
    CHECK(bad == 0, "back to back: %zu of %zu wrong, the first at %zu", bad, n,
          first);
    cudaFree(in);
    cudaFree(out);
    free(h);
}

/* Ordinary buffers mapped by the peers (src/cuda_ipc/ipc_cards.h): with
 * HCOMM_CUDA_IPC_DIRECT_MIN at 64K, calls on them go direct from the
 * second call after their first. Exact results, every call, for each
 * collective the path takes: allreduce in place and not (blocking,
 * non-blocking and stream-ordered), reduce-scatter, allgather, broadcast
 * from every root; after one buffer is freed and allocated anew (its
 * mappings retired); and with rank 0's buffers registered, the others'
 * ordinary. run_gpu.sh checks in the profile that calls went direct. */
enum { MAPPED_N = (1 << 18) - 5 }; /* floats; 1 MiB holds one rank's */

static float mapped_value(size_t i, int r, int it) {
    return (float)((i * 3 + (size_t)r + (size_t)it) % 11);
}

static void mapped_fill(float *d, size_t n, int r, int it, float *h) {
    for (size_t i = 0; i < n; i++)
        h[i] = mapped_value(i, r, it);
    cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice);
    cudaDeviceSynchronize();
}

/* coll 0: allreduce (mode 0 blocking, 1 non-blocking, 2 stream-ordered),
 * 1: reduce-scatter, 2: allgather, 3: broadcast from it % nranks. */
static size_t mapped_call(hcomm_comm_t comm, int coll, int mode, float *in,
                          float *out, int it, float *h) {
    const size_t n = MAPPED_N;
    int root = it % nranks;
    size_t in_n = coll == 1 ? n * (size_t)nranks : n;
    size_t out_n = coll == 2 ? n * (size_t)nranks : n;
    mapped_fill(in, in_n, rank, it, h);
    if (coll == 0 && mode == 1) {
        hcomm_request_t req;
        CHECK_OK(
            hcomm_iallreduce(in, out, n, HCOMM_FLOAT32, HCOMM_SUM, comm, &req));
        CHECK_OK(hcomm_wait(&req));
    } else if (coll == 0 && mode == 2) {
        CHECK_OK(hcomm_allreduce_stream(in, out, n, HCOMM_FLOAT32, HCOMM_SUM,
                                        comm, 0));
    } else if (coll == 0) {
        CHECK_OK(hcomm_allreduce(in, out, n, HCOMM_FLOAT32, HCOMM_SUM, comm));
    } else if (coll == 1) {
        CHECK_OK(
            hcomm_reduce_scatter(in, out, n, HCOMM_FLOAT32, HCOMM_SUM, comm));
    } else if (coll == 2) {
        CHECK_OK(hcomm_allgather(in, out, n, HCOMM_FLOAT32, comm));
    } else {
        CHECK_OK(hcomm_broadcast(in, n, HCOMM_FLOAT32, root, comm));
        out = in;
    }
    cudaDeviceSynchronize();
    cudaMemcpy(h, out, out_n * sizeof(float), cudaMemcpyDeviceToHost);
    size_t bad = 0;
    for (size_t i = 0; i < out_n; i++) {
        float v = 0;
        if (coll == 0 || coll == 1) {
            size_t at = coll == 1 ? (size_t)rank * n + i : i;
            for (int r = 0; r < nranks; r++)
                v += mapped_value(at, r, it);
        } else if (coll == 2) {
            v = mapped_value(i % n, (int)(i / n), it);
        } else {
            v = mapped_value(i, root, it);
        }
        bad += h[i] != v;
    }
    return bad;
}

static void test_mapped(hcomm_comm_t comm) {
    /* MAPPED_N floats a rank: 4 MiB holds 4 ranks' */
    const size_t bytes = (size_t)(nranks > 4 ? nranks : 4) << 20;
    static const char *names[] = {"allreduce", "reduce_scatter", "allgather",
                                  "broadcast"};
    float *a = NULL, *b = NULL, *reg = NULL;
    float *h = malloc(bytes);
    cudaMalloc((void **)&a, bytes);
    cudaMalloc((void **)&b, bytes);
    CHECK_OK(hcomm_config_set("HCOMM_CUDA_IPC_DIRECT_MIN", "64K"));
    for (int coll = 0; coll < 4; coll++)
        for (int it = 0; it < 6; it++) {
            int in_place = coll == 0 && it % 2;
            size_t bad = mapped_call(comm, coll, coll == 0 ? it % 3 : 0, a,
                                     in_place ? a : b, it, h);
            CHECK(bad == 0, "mapped %s%s, call %d: %zu wrong", names[coll],
                  in_place ? " in place" : "", it, bad);
        }
    /* b freed and allocated anew: its old mappings are retired */
    cudaFree(b);
    cudaMalloc((void **)&b, bytes);
    for (int it = 0; it < 4; it++)
        CHECK(mapped_call(comm, 0, 0, a, b, it, h) == 0,
              "mapped allreduce into a new buffer, call %d", it);
    /* registered on rank 0, ordinary elsewhere */
    CHECK_OK(hcomm_mem_alloc_device(comm, bytes, (void **)&reg));
    for (int it = 0; it < 4; it++)
        CHECK(mapped_call(comm, 0, 0, rank == 0 ? reg : a, rank == 0 ? reg : b,
                          it, h) == 0,
              "registered and mapped allreduce, call %d", it);
    CHECK_OK(hcomm_mem_free(comm, reg));
    CHECK_OK(hcomm_config_set("HCOMM_CUDA_IPC_DIRECT_MIN", "4M"));
    cudaFree(a);
    cudaFree(b);
    free(h);
}

/* The last rank dies; blocking and stream-ordered calls of the others. */
static void test_killed(hcomm_comm_t comm) {
    const double timeout = 5;
    CHECK_OK(hcomm_comm_set_timeout(comm, timeout));
    size_t n = 1 << 20;
    float *d = NULL;
    cudaMalloc((void **)&d, n * sizeof(float));
    cudaMemset(d, 0, n * sizeof(float));
    CHECK_OK(hcomm_allreduce(d, d, n, HCOMM_FLOAT32, HCOMM_SUM, comm));
    if (rank == nranks - 1) raise(SIGKILL);
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    double t0 = MPI_Wtime();
    hcomm_status_t st = HCOMM_SUCCESS;
    for (int i = 0; i < 1000 && st == HCOMM_SUCCESS; i++)
        st = i % 2 ? hcomm_allreduce(d, d, n, HCOMM_FLOAT32, HCOMM_SUM, comm)
                   : hcomm_allreduce_stream(d, d, n, HCOMM_FLOAT32, HCOMM_SUM,
                                            comm, s);
    double took = MPI_Wtime() - t0;
    /* the segment's agreement names it as "rank N (pid P) has died", the
     * kernel's flags as "rank(s) N" */
    char died[32], absent[32];
    snprintf(died, sizeof(died), "rank %d ", nranks - 1);
    snprintf(absent, sizeof(absent), "rank(s) %d", nranks - 1);
    CHECK(st != HCOMM_SUCCESS && took < 1.1 * timeout,
          "a dead peer ends the call within the timeout: %s after %.1f s",
          hcomm_strerror(st), took);
    CHECK(strstr(hcomm_last_error(), died) ||
              strstr(hcomm_last_error(), absent),
          "the message names the dead rank %d: %s", nranks - 1,
          hcomm_last_error());
    t0 = MPI_Wtime();
    cudaError_t e = cudaStreamSynchronize(s);
    CHECK(MPI_Wtime() - t0 < timeout,
          "the stream's work ended %.1f s after the error (%s)",
          MPI_Wtime() - t0, cudaGetErrorString(e));
    CHECK(hcomm_allreduce(d, d, n, HCOMM_FLOAT32, HCOMM_SUM, comm) !=
              HCOMM_SUCCESS,
          "the communicator is broken");
    cudaStreamDestroy(s);
    cudaFree(d);
}

int main(int argc, char **argv) {
    int ndev = 0, provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    check_rank = rank;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0 || nranks < 2) {
        if (rank == 0)
            printf("test_cuda_ipc: needs a GPU and 2 ranks: skipped\n");
        MPI_Finalize();
        return 77;
    }
    cudaSetDevice(rank % ndev);
    if (hcomm_init(&argc, &argv) != HCOMM_SUCCESS) {
        fprintf(stderr, "hcomm_init: %s\n", hcomm_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    hcomm_comm_t comm;
    CHECK_OK(hcomm_comm_create(MPI_COMM_WORLD, &comm));
    if (argc > 1 && strcmp(argv[1], "kill") == 0) {
        /* no MPI after a death: the survivors report on their own */
        test_killed(comm);
        hcomm_comm_free(&comm);
        hcomm_finalize();
        printf("test_cuda_ipc kill: rank %d: %ld passed, %ld failed\n", rank,
               check_passed, check_failed);
        return check_failed != 0;
    }
    test_back_to_back(comm);
    test_mapped(comm);
    CHECK_OK(hcomm_comm_free(&comm));
    /* small buffers from here on: many rounds per call */
    CHECK_OK(hcomm_config_set("HCOMM_CUDA_IPC_BUFFER", "64K"));
    CHECK_OK(hcomm_comm_create(MPI_COMM_WORLD, &comm));
    test_stream_reborn(comm);
    test_rounds(comm, getenv("HCOMM_CUDA_IPC_ALGO")
                          ? getenv("HCOMM_CUDA_IPC_ALGO")
                          : "auto");
    test_mismatch(comm);
    CHECK_OK(hcomm_comm_free(&comm));
    CHECK_OK(hcomm_comm_create(MPI_COMM_WORLD, &comm));
    test_absent_peer(comm);
    hcomm_comm_free(&comm);
    int rc = check_summary("test_cuda_ipc");
    hcomm_finalize();
    MPI_Finalize();
    return rc;
}
