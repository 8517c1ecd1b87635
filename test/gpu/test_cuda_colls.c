/* Every collective on GPU memory, as the host tests run them (the cases of
 * coll_cases.c), with the buffers copied to the GPU: device, managed and
 * pinned host memory, registered device memory (hcomm_mem_alloc_device:
 * AllReduce, every type; ReduceScatter, AllGather, Broadcast); blocking,
 * non-blocking and stream-ordered; in place and not; every dtype x op for
 * AllReduce, several types for the rest; counts 0, 1, 7, a prime and large
 * ones; results compared bit for bit. HCOMM_TEST_GPU_QUICK=1 runs fewer types
 * (the runs without MPS). HCOMM_TEST_GPU_NODES=2 (4 or more ranks) splits the
 * ranks into two nodes through HCOMM_OVERRIDE_TOPO: the world then has no
 * segment and no IPC path, and device buffers take the plans across the
 * nodes (hierarchical from their sizes), the large counts even when quick.
 * Without a GPU: exit 77 (skip). */
#include "coll_cases.h"
#include "core/comm.h"
#include "core/config.h"
#include "hold_stream.h"
#include "mpi_check.h"

#include <cuda_runtime_api.h>
#include <mpi.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Registered: hcomm_mem_alloc_device on every rank; registered on rank 0:
 * every rank allocates it (the call is collective), only rank 0 uses it. */
typedef enum {
    MEM_DEVICE = 0,
    MEM_MANAGED,
    MEM_PINNED_SEND,
    MEM_REGISTERED,
    MEM_REGISTERED_RANK0
} mem_kind_t;
typedef enum { MODE_BLOCKING = 0, MODE_NONBLOCKING, MODE_STREAM } call_mode_t;

static const char *mem_names[] = {"device", "managed", "pinned send",
                                  "registered device",
                                  "registered (rank 0) device"};
static const char *mode_names[] = {"blocking", "non-blocking", "stream"};
static cudaStream_t stream;
static cudaEvent_t inputs_copied;
static int rank, nranks;
static int two_nodes; /* HCOMM_TEST_GPU_NODES=2 */

static hcomm_status_t call_blocking(const shape_t *s, const char *send,
                                    char *recv, hcomm_comm_t comm) {
    size_t c = s->count;
    switch (s->coll) {
    case HCOMM_COLL_ALLREDUCE:
        return hcomm_allreduce(send, recv, c, s->t, s->op, comm);
    case HCOMM_COLL_ALLGATHER:
        return hcomm_allgather(send, recv, c, s->t, comm);
    case HCOMM_COLL_REDUCE_SCATTER:
        return hcomm_reduce_scatter(send, recv, c, s->t, s->op, comm);
    case HCOMM_COLL_BCAST:
        return hcomm_broadcast(recv, c, s->t, s->root, comm);
    case HCOMM_COLL_REDUCE:
        return hcomm_reduce(send, recv, c, s->t, s->op, s->root, comm);
    case HCOMM_COLL_ALLTOALL:
        return hcomm_alltoall(send, recv, c, s->t, comm);
    case HCOMM_COLL_GATHER:
        return hcomm_gather(send, recv, c, s->t, s->root, comm);
    default:
        return hcomm_scatter(send, recv, c, s->t, s->root, comm);
    }
}

static hcomm_status_t call_stream(const shape_t *s, const char *send,
                                  char *recv, hcomm_comm_t comm) {
    size_t c = s->count;
    switch (s->coll) {
    case HCOMM_COLL_ALLREDUCE:
        return hcomm_allreduce_stream(send, recv, c, s->t, s->op, comm, stream);
    case HCOMM_COLL_ALLGATHER:
        return hcomm_allgather_stream(send, recv, c, s->t, comm, stream);
    case HCOMM_COLL_REDUCE_SCATTER:
        return hcomm_reduce_scatter_stream(send, recv, c, s->t, s->op, comm,
                                           stream);
    case HCOMM_COLL_BCAST:
        return hcomm_broadcast_stream(recv, c, s->t, s->root, comm, stream);
    case HCOMM_COLL_REDUCE:
        return hcomm_reduce_stream(send, recv, c, s->t, s->op, s->root, comm,
                                   stream);
    case HCOMM_COLL_ALLTOALL:
        return hcomm_alltoall_stream(send, recv, c, s->t, comm, stream);
    case HCOMM_COLL_GATHER:
        return hcomm_gather_stream(send, recv, c, s->t, s->root, comm, stream);
    default:
        return hcomm_scatter_stream(send, recv, c, s->t, s->root, comm, stream);
    }
}

/* Waits for the stream, within HCOMM_TIMEOUT and 10 s: a stream-ordered
 * call that never ends must fail the test, not hang it. */
static int stream_done(void) {
    const char *t = getenv("HCOMM_TIMEOUT");
    double limit = (t ? atof(t) : 60) + 10;
    double t0 = MPI_Wtime();
    cudaError_t e;
    while ((e = cudaStreamQuery(stream)) == cudaErrorNotReady)
        if (MPI_Wtime() - t0 > limit) {
            fprintf(stderr,
                    "[rank %d] stream-ordered call still running "
                    "after %.0f s: giving up\n",
                    rank, limit);
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
    return e == cudaSuccess;
}

/* *reg: the registered allocation, which may not be the one used. */
static void *gpu_alloc(size_t bytes, mem_kind_t kind, int is_send,
                       hcomm_comm_t comm, void **reg) {
    void *p = NULL;
    cudaError_t e;
    *reg = NULL;
    if (kind >= MEM_REGISTERED) {
        /* bytes + 64: a call of nothing still gets memory */
        hcomm_status_t st = hcomm_mem_alloc_device(comm, bytes + 64, reg);
        CHECK(st == HCOMM_SUCCESS, "hcomm_mem_alloc_device: %s",
              hcomm_last_error());
        if (kind == MEM_REGISTERED || rank == 0) return *reg;
    }
    if (kind == MEM_MANAGED)
        e = cudaMallocManaged(&p, bytes, cudaMemAttachGlobal);
    else if (kind == MEM_PINNED_SEND && is_send)
        e = cudaMallocHost(&p, bytes);
    else
        e = cudaMalloc(&p, bytes);
    CHECK(e == cudaSuccess, "allocating %zu bytes of %s memory: %s", bytes,
          mem_names[kind], cudaGetErrorString(e));
    return e == cudaSuccess ? p : NULL;
}

static void gpu_free(void *p, mem_kind_t kind, int is_send, hcomm_comm_t comm,
                     void *reg) {
    if (reg) CHECK_OK(hcomm_mem_free(comm, reg));
    if (p == reg) return;
    if (kind == MEM_PINNED_SEND && is_send)
        cudaFreeHost(p);
    else
        cudaFree(p);
}

/* Where host pointer p (inside one of b's host buffers) is on the GPU. */
static char *mirror(const bufs_t *b, char *dsend, char *drecv, char *p) {
    if (!p) return NULL;
    if (p >= b->mem_recv && p <= b->mem_recv + b->bytes)
        return drecv + (p - b->mem_recv);
    return dsend + (p - b->mem_send);
}

static void run_case(const shape_t *s, hcomm_comm_t comm, mem_kind_t kind,
                     call_mode_t mode) {
    bufs_t b;
    case_prepare(s, nranks, rank, &b);
    void *rs, *rr;
    char *ds = gpu_alloc(b.bytes, kind, 1, comm, &rs),
         *dr = gpu_alloc(b.bytes, kind, 0, comm, &rr);
    hcomm_status_t st = HCOMM_ERR_NO_MEMORY;
    if (ds && dr &&
        cudaMemcpy(ds, b.mem_send, b.bytes, cudaMemcpyDefault) == cudaSuccess &&
        cudaMemcpy(dr, b.mem_recv, b.bytes, cudaMemcpyDefault) == cudaSuccess) {
        char *send = mirror(&b, ds, dr, b.send),
             *recv = mirror(&b, ds, dr, b.recv);
        if (mode == MODE_BLOCKING) {
            st = call_blocking(s, send, recv, comm);
        } else if (mode == MODE_STREAM) {
            /* The copies ran on the default stream, which this non-blocking
             * stream does not follow (a pageable cudaMemcpy may return
             * before it lands): ordered after them, as a program must. */
            cudaEventRecord(inputs_copied, 0);
            cudaStreamWaitEvent(stream, inputs_copied, 0);
            st = call_stream(s, send, recv, comm);
            if (!stream_done()) st = HCOMM_ERR_TIMEOUT;
        } else {
            bufs_t dev = b;
            dev.send = send;
            dev.recv = recv;
            hcomm_request_t req = HCOMM_REQUEST_NULL;
            st = case_start(s, &dev, comm, &req);
            if (st == HCOMM_SUCCESS) st = hcomm_wait(&req);
        }
        cudaMemcpy(b.mem_send, ds, b.bytes, cudaMemcpyDefault);
        cudaMemcpy(b.mem_recv, dr, b.bytes, cudaMemcpyDefault);
    }
    char where[80];
    snprintf(where, sizeof(where), " on %s memory, %s", mem_names[kind],
             mode_names[mode]);
    case_finish_at(s, &b, st, where);
    /* after every rank's call: a peer's kernel may still use them */
    if (kind >= MEM_REGISTERED) MPI_Barrier(MPI_COMM_WORLD);
    if (ds) gpu_free(ds, kind, 1, comm, rs);
    if (dr) gpu_free(dr, kind, 0, comm, rr);
}

static const hcomm_coll_t colls[] = {
    HCOMM_COLL_ALLREDUCE, HCOMM_COLL_ALLGATHER, HCOMM_COLL_REDUCE_SCATTER,
    HCOMM_COLL_BCAST,     HCOMM_COLL_REDUCE,    HCOMM_COLL_ALLTOALL,
    HCOMM_COLL_GATHER,    HCOMM_COLL_SCATTER};

static void test_all(hcomm_comm_t comm, int quick) {
    size_t counts[] = {0, 1, 7, 1009, (size_t)nranks * 1000 + 1, 1048583};
    static const hcomm_dtype_t some[] = {HCOMM_INT8, HCOMM_BFLOAT16,
                                         HCOMM_FLOAT32, HCOMM_UINT64};
    for (size_t ci = 0; ci < sizeof(colls) / sizeof(*colls); ci++) {
        hcomm_coll_t coll = colls[ci];
        int all_types = coll == HCOMM_COLL_ALLREDUCE && !quick;
        int ntypes = all_types ? HCOMM_DTYPE_COUNT : quick ? 1 : 4;
        int nops = case_reduces(coll) && all_types ? HCOMM_OP_COUNT : 1;
        for (int ti = 0; ti < ntypes; ti++)
            for (int op = 0; op < nops; op++)
                for (int ip = 0; ip < 2; ip++)
                    for (size_t k = 0; k < sizeof(counts) / sizeof(*counts);
                         k++)
                        for (int mode = 0; mode < 3; mode++) {
                            shape_t s = {.coll = coll,
                                         .t = all_types ? (hcomm_dtype_t)ti
                                                        : some[ti + quick * 2],
                                         .op = (hcomm_op_t)op,
                                         .count = counts[k],
                                         .root = (int)(k % (size_t)nranks),
                                         .inplace = ip,
                                         .algo = "auto"};
                            if (quick && k == 5 && !two_nodes) continue;
                            run_case(&s, comm, MEM_DEVICE, (call_mode_t)mode);
                        }
    }
    /* managed memory, and a pinned host send buffer beside a device one */
    for (int kind = MEM_MANAGED; kind <= MEM_PINNED_SEND; kind++)
        for (size_t ci = 0; ci < sizeof(colls) / sizeof(*colls); ci++) {
            shape_t s = {.coll = colls[ci],
                         .t = HCOMM_FLOAT32,
                         .op = HCOMM_SUM,
                         .count = 4099,
                         .root = nranks - 1,
                         .algo = "auto"};
            run_case(&s, comm, (mem_kind_t)kind, MODE_BLOCKING);
        }
    /* AllReduce on registered buffers: direct two-shot where every rank's
     * are (HCOMM_CUDA_IPC_ALGO=twoshot, or past the one-shot limit), the
     * workspaces where only rank 0's are */
    static const hcomm_op_t reg_ops[] = {HCOMM_SUM, HCOMM_MAX, HCOMM_AVG};
    for (int kind = MEM_REGISTERED; kind <= MEM_REGISTERED_RANK0; kind++)
        for (int ti = 0; ti < HCOMM_DTYPE_COUNT; ti++)
            for (int op = 0; op < 3; op++)
                for (int ip = 0; ip < 2; ip++)
                    for (size_t k = 0; k < sizeof(counts) / sizeof(*counts);
                         k++)
                        for (int mode = 0; mode < 3; mode++) {
                            shape_t s = {.coll = HCOMM_COLL_ALLREDUCE,
                                         .t = (hcomm_dtype_t)ti,
                                         .op = reg_ops[op],
                                         .count = counts[k],
                                         .inplace = ip,
                                         .algo = "auto"};
                            if (quick && (ti % 3 || op || k == 5 ||
                                          kind == MEM_REGISTERED_RANK0))
                                continue;
                            run_case(&s, comm, (mem_kind_t)kind,
                                     (call_mode_t)mode);
                        } /* ReduceScatter, AllGather and Broadcast on
                           * registered buffers: direct where every rank's input
                           * is (a broadcast: the root's) */
    static const hcomm_coll_t reg_colls[] = {
        HCOMM_COLL_REDUCE_SCATTER, HCOMM_COLL_ALLGATHER, HCOMM_COLL_BCAST};
    for (int kind = MEM_REGISTERED; kind <= MEM_REGISTERED_RANK0; kind++)
        for (int ci = 0; ci < 3; ci++)
            for (int ti = quick ? 2 : 0; ti < (quick ? 3 : 4); ti++)
                for (int op = 0; op < (ci == 0 ? 3 : 1); op++)
                    for (int ip = 0; ip < 2; ip++)
                        for (size_t k = 0; k < sizeof(counts) / sizeof(*counts);
                             k++)
                            for (int mode = 0; mode < 3; mode++) {
                                shape_t s = {.coll = reg_colls[ci],
                                             .t = some[ti],
                                             .op = reg_ops[op],
                                             .count = counts[k],
                                             .root = (int)(k % (size_t)nranks),
                                             .inplace = ip,
                                             .algo = "auto"};
                                if (quick && k == 5 && !two_nodes) continue;
                                run_case(&s, comm, (mem_kind_t)kind,
                                         (call_mode_t)mode);
                            }
}

/* Device buffers on a split communicator, and point-to-point between
 * neighbours, in every mode. */
static void test_split_and_p2p(hcomm_comm_t world) {
    hcomm_comm_t half;
    CHECK_OK(hcomm_comm_split(world, rank % 2, nranks - rank, &half));
    int hn, hr;
    hcomm_comm_size(half, &hn);
    hcomm_comm_rank(half, &hr);
    int saved_n = nranks, saved_r = rank;
    nranks = hn;
    rank = hr;
    shape_t s = {.coll = HCOMM_COLL_ALLREDUCE,
                 .t = HCOMM_INT32,
                 .op = HCOMM_SUM,
                 .count = 100003,
                 .algo = "auto"};
    for (int mode = 0; mode < 3; mode++)
        run_case(&s, half, MEM_DEVICE, (call_mode_t)mode);
    nranks = saved_n;
    rank = saved_r;
    CHECK_OK(hcomm_comm_free(&half));

    size_t n = 65539;
    int *h = malloc(n * sizeof(int)), *d = NULL;
    cudaMalloc((void **)&d, n * sizeof(int));
    int to = (rank + 1) % nranks, from = (rank + nranks - 1) % nranks;
    for (int mode = 0; mode < 3 && nranks > 1; mode++) {
        for (size_t i = 0; i < n; i++)
            h[i] = rank * 1000 + (int)i;
        cudaMemcpy(d, h, n * sizeof(int), cudaMemcpyHostToDevice);
        int *in = NULL;
        cudaMalloc((void **)&in, n * sizeof(int));
        if (mode == MODE_STREAM) {
            cudaEventRecord(inputs_copied, 0); /* as in run_case */
            cudaStreamWaitEvent(stream, inputs_copied, 0);
            if (rank % 2 == 0) {
                CHECK_OK(
                    hcomm_send_stream(d, n, HCOMM_INT32, to, 7, world, stream));
                CHECK_OK(hcomm_recv_stream(in, n, HCOMM_INT32, from, 7, world,
                                           stream));
            } else {
                CHECK_OK(hcomm_recv_stream(in, n, HCOMM_INT32, from, 7, world,
                                           stream));
                CHECK_OK(
                    hcomm_send_stream(d, n, HCOMM_INT32, to, 7, world, stream));
            }
            stream_done();
        } else {
            hcomm_request_t rq, sq;
            CHECK_OK(hcomm_irecv(in, n, HCOMM_INT32, from, 7, world, &rq));
            if (mode == MODE_BLOCKING) {
                CHECK_OK(hcomm_send(d, n, HCOMM_INT32, to, 7, world));
            } else {
                CHECK_OK(hcomm_isend(d, n, HCOMM_INT32, to, 7, world, &sq));
                CHECK_OK(hcomm_wait(&sq));
            }
            CHECK_OK(hcomm_wait(&rq));
        }
        cudaMemcpy(h, in, n * sizeof(int), cudaMemcpyDeviceToHost);
        size_t bad = 0;
        for (size_t i = 0; i < n; i++)
            bad += h[i] != from * 1000 + (int)i;
        CHECK(bad == 0, "send/recv %s: %zu wrong", mode_names[mode], bad);
        cudaFree(in);
    }
    cudaFree(d);
    free(h);
}

static double hold_limit = 10;

/* Two nodes: a blocking allreduce of device memory past the latency sizes
 * runs as node stages (CUDA IPC inside a node, rails across them), here up
 * to 64 MiB: every type and operation (AVG divides on the GPU), in place
 * and not, counts whose last elements do not fill a block per local rank.
 * On a duplicate, whose node communicator says the stages ran. */
static void test_node_stages(hcomm_comm_t world) {
    if (!two_nodes) return;
    hcomm_comm_t comm;
    CHECK_OK(hcomm_comm_dup(world, &comm));
    char limit[32]; /* the run's own limit, put back after */
    snprintf(limit, sizeof(limit), "%s",
             hcomm_cfg_str(HCOMM_CFG_CUDA_NODE_STAGES_MAX));
    CHECK_OK(hcomm_config_set("HCOMM_CUDA_NODE_STAGES_MAX", "64M"));
    static const size_t counts[] = {4099, 1048583};
    for (int ti = 0; ti < HCOMM_DTYPE_COUNT; ti++)
        for (int op = 0; op < HCOMM_OP_COUNT; op++)
            for (int ip = 0; ip < 2; ip++)
                for (int k = 0; k < 2; k++) {
                    shape_t s = {.coll = HCOMM_COLL_ALLREDUCE,
                                 .t = (hcomm_dtype_t)ti,
                                 .op = (hcomm_op_t)op,
                                 .count = counts[k],
                                 .inplace = ip,
                                 .algo = "auto"};
                    run_case(&s, comm, MEM_DEVICE, MODE_BLOCKING);
                }
    CHECK_OK(hcomm_config_set("HCOMM_CUDA_NODE_STAGES_MAX", limit));
    hcomm_comm_impl_t *c = NULL;
    CHECK(hcomm_comm_lookup(comm, &c) == HCOMM_SUCCESS && c->node_comm,
          "two nodes: no blocking allreduce on device memory took the node "
          "stages");
    CHECK_OK(hcomm_comm_free(&comm));
}

/* A stream-ordered allreduce returns while the work enqueued before it on
 * its stream is held (its input, written behind the hold, not there yet):
 * on the CUDA IPC path and on the plans (HCOMM's worker) alike, small and
 * large. A blocking call made right after it, on another buffer, runs
 * after it; both results are exact. may_queue: the plans' worker may run
 * it (not MPI's transport below MPI_THREAD_MULTIPLE), else the call waits
 * for the hold and only the results are checked. */
static void test_stream_returns(hcomm_comm_t comm, int may_queue) {
    static const size_t counts[] = {1001, (1u << 20) + 3};
    for (int i = 0; i < 2; i++) {
        size_t n = counts[i], bytes = n * sizeof(int), bad = 0, bad2 = 0;
        int *d = NULL, *d2 = NULL, *h = malloc(bytes);
        cudaMalloc((void **)&d, bytes);
        cudaMalloc((void **)&d2, bytes);
        for (size_t j = 0; j < n; j++)
            h[j] = rank + 1;
        cudaMemcpy(d2, h, bytes, cudaMemcpyHostToDevice);
        cudaMemset(d, 0, bytes);
        cudaDeviceSynchronize();
        atomic_store(&hold_released, may_queue ? 0 : 1);
        cudaLaunchHostFunc(stream, hold_stream, &hold_limit);
        cudaMemsetAsync(d, 1, bytes, stream); /* every int 0x01010101 */
        double t0 = MPI_Wtime();
        CHECK_OK(hcomm_allreduce_stream(d, d, n, HCOMM_INT32, HCOMM_SUM, comm,
                                        stream));
        double took = MPI_Wtime() - t0;
        atomic_store(&hold_released, 1);
        CHECK(took < 2.0,
              "hcomm_allreduce_stream of %zu ints waited %.1f s for its "
              "stream's earlier work",
              n, took);
        CHECK_OK(hcomm_allreduce(d2, d2, n, HCOMM_INT32, HCOMM_SUM, comm));
        CHECK(stream_done(), "the stream-ordered allreduce failed");
        cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost);
        for (size_t j = 0; j < n; j++)
            bad += h[j] != 0x01010101 * nranks;
        cudaMemcpy(h, d2, bytes, cudaMemcpyDeviceToHost);
        for (size_t j = 0; j < n; j++)
            bad2 += h[j] != nranks * (nranks + 1) / 2;
        CHECK(bad == 0 && bad2 == 0,
              "%zu ints: %zu wrong after the held stream, %zu after the "
              "blocking call behind it",
              n, bad, bad2);
        cudaFree(d);
        cudaFree(d2);
        free(h);
    }
}

/* A blocking call on the plans follows the legacy default stream: its input,
 * copied there behind 0.3 s of held work, is read only once it has landed.
 * An in-place alltoall (transfers of device memory, direct or staged) and a
 * reduce (reduction kernels), 256 KiB a rank: no IPC path, no staging
 * through the shared segment. */
static void test_default_stream_inputs(hcomm_comm_t comm) {
    static double held = 0.3;
    size_t n = 65537, total = n * (size_t)nranks, bytes = total * sizeof(int);
    int *h = malloc(bytes), *src = NULL, *d = NULL, *r = NULL;
    cudaMalloc((void **)&src, bytes);
    cudaMalloc((void **)&d, bytes);
    cudaMalloc((void **)&r, bytes);
    for (size_t j = 0; j < total; j++)
        h[j] = (int)((size_t)rank * total + j);
    cudaMemcpy(src, h, bytes, cudaMemcpyHostToDevice);
    for (int call = 0; call < 2; call++) {
        cudaMemset(d, 0, bytes);
        cudaDeviceSynchronize();
        atomic_store(&hold_released, 0);
        cudaLaunchHostFunc(0, hold_stream, &held);
        cudaMemcpyAsync(d, src, bytes, cudaMemcpyDeviceToDevice, 0);
        if (call == 0)
            CHECK_OK(hcomm_alltoall(d, d, n, HCOMM_INT32, comm));
        else
            CHECK_OK(
                hcomm_reduce(d, r, total, HCOMM_INT32, HCOMM_SUM, 0, comm));
        size_t bad = 0, first = 0;
        if (call == 1 && rank != 0) continue;
        cudaMemcpy(h, call == 0 ? d : r, bytes, cudaMemcpyDeviceToHost);
        for (size_t j = 0; j < total; j++) {
            /* alltoall: block i from rank i, its block `rank`; reduce: the
             * sum over ranks of rank * total + j */
            size_t i = j / n,
                   want = call == 0
                              ? i * total + (size_t)rank * n + j % n
                              : total * (size_t)nranks * (nranks - 1) / 2 +
                                    j * (size_t)nranks;
            if ((size_t)h[j] != want && !bad++) first = j;
        }
        CHECK(bad == 0,
              "%s of %zu ints written on the default stream behind held "
              "work: %zu wrong, first at %zu",
              call == 0 ? "in-place alltoall" : "reduce", total, bad, first);
    }
    cudaFree(src);
    cudaFree(d);
    cudaFree(r);
    free(h);
}

/* A stream-ordered gather whose ranks pass different counts fails on every
 * rank, and its stream still goes on: where HCOMM's worker runs it, after
 * the call returned, so the communicator's next call reports it; elsewhere
 * at once. On a duplicate, which it leaves broken and frees. (Not across
 * two nodes: without a segment the plans find a mismatch only as a
 * timeout.) */
static void test_stream_failure(hcomm_comm_t world) {
    if (two_nodes || nranks < 2) return; /* one rank's counts always agree */
    hcomm_comm_t comm;
    CHECK_OK(hcomm_comm_dup(world, &comm));
    size_t n = rank == 0 ? 1001 : 1000, bytes = 1001 * sizeof(int);
    int *send = NULL, *recv = NULL;
    cudaMalloc((void **)&send, bytes);
    cudaMalloc((void **)&recv, bytes * (size_t)nranks);
    cudaMemset(send, 0, bytes);
    cudaDeviceSynchronize();
    hcomm_status_t st =
        hcomm_gather_stream(send, recv, n, HCOMM_INT32, 0, comm, stream);
    int went_on = stream_done();
    hcomm_status_t then = st == HCOMM_SUCCESS ? hcomm_barrier(comm) : st;
    CHECK(went_on, "the stream of a failed stream-ordered gather stopped");
    CHECK(then == HCOMM_ERR_MISMATCH,
          "gather_stream of %zu ints (1001 on rank 0): %s, then %s (%s)", n,
          hcomm_strerror(st), hcomm_strerror(then), hcomm_last_error());
    /* The worker's call failed ("a stream-ordered call failed (gather:
     * ...)"), or it passed unchecked on the shared segment, as a gather's
     * leaf does, and the barrier found the difference ("gather (an earlier
     * call, found now): count differs"): either way it names the gather. */
    CHECK(st != HCOMM_SUCCESS || strstr(hcomm_last_error(), "gather"),
          "the next call's message does not say why: %s", hcomm_last_error());
    CHECK_OK(hcomm_comm_free(&comm));
    cudaFree(send);
    cudaFree(recv);
}

int main(int argc, char **argv) {
    int ndev = 0, provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    check_rank = rank;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        if (rank == 0) printf("test_cuda_colls: no CUDA device: skipped\n");
        MPI_Finalize();
        return 77;
    }
    cudaSetDevice(rank % ndev);
    cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    cudaEventCreateWithFlags(&inputs_copied, cudaEventDisableTiming);
    if (hcomm_init(&argc, &argv) != HCOMM_SUCCESS) {
        fprintf(stderr, "hcomm_init: %s\n", hcomm_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    const char *nodes = getenv("HCOMM_TEST_GPU_NODES");
    char topo[64] = "";
    if (nodes && strcmp(nodes, "2") == 0 && nranks >= 4) {
        two_nodes = 1;
        snprintf(topo, sizeof(topo), "/tmp/hcomm_cuda_colls_%d.json",
                 (int)getpid());
        FILE *f = fopen(topo, "w");
        CHECK(f != NULL, "cannot write %s", topo);
        if (f) {
            fputs("{\"nodes\": [{\"ranks\": [", f);
            for (int r = 0; r < nranks; r++)
                fprintf(f, "%s%d%s", r == nranks / 2 ? "]}, {\"ranks\": [" : "",
                        r, r + 1 == nranks || r + 1 == nranks / 2 ? "" : ", ");
            fputs("]}]}\n", f);
            fclose(f);
        }
        CHECK_OK(hcomm_config_set("HCOMM_OVERRIDE_TOPO", topo));
    }
    hcomm_comm_t comm;
    CHECK_OK(hcomm_comm_create(MPI_COMM_WORLD, &comm));
    const char *q = getenv("HCOMM_TEST_GPU_QUICK");
    test_all(comm, q && strcmp(q, "1") == 0);
    const char *tp = getenv("HCOMM_TRANSPORT");
    test_stream_returns(comm, provided == MPI_THREAD_MULTIPLE || !tp ||
                                  strcmp(tp, "mpi") != 0);
    test_default_stream_inputs(comm);
    test_node_stages(comm);
    test_stream_failure(comm);
    if (two_nodes) {
        hcomm_comm_impl_t *c = NULL;
        CHECK(hcomm_comm_lookup(comm, &c) == HCOMM_SUCCESS && !c->shm,
              "two nodes: the world has a shared segment");
        /* later communicators (the splits below) read it no more */
        CHECK_OK(hcomm_config_set("HCOMM_OVERRIDE_TOPO", ""));
        remove(topo);
    }
    test_split_and_p2p(comm);
    CHECK_OK(hcomm_comm_free(&comm));
    int rc = check_summary("test_cuda_colls");
    hcomm_finalize();
    MPI_Finalize();
    return rc;
}
