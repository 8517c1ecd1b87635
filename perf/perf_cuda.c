/*
 * hcomm_perf on GPUs (-D cuda): device buffers, the copies that fill and
 * check them, one stream, and NCCL as a baseline (--nccl), loaded with
 * dlopen so hcomm_perf runs where NCCL is not installed. NCCL's ABI values
 * below are those of its public nccl.h (stable since NCCL 2.0; bfloat16
 * since 2.10, avg since 2.10).
 */
#include "perf.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#ifdef HAVE_CUDA
#include <cuda_runtime_api.h>

static cudaStream_t stream;

int perf_dev_init(MPI_Comm world, char *err, size_t len) {
    int ndev = 0, local = 0;
    MPI_Comm node;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        snprintf(err, len, "-D cuda: no CUDA device");
        return -1;
    }
    MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local);
    MPI_Comm_free(&node);
    /* one GPU per rank where there are enough; else ranks share them */
    if (cudaSetDevice(local % ndev) != cudaSuccess ||
        cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) !=
            cudaSuccess) {
        snprintf(err, len, "-D cuda: cannot use GPU %d", local % ndev);
        return -1;
    }
    return 0;
}

void *perf_dev_stream(void) {
    return stream;
}

void *perf_dev_alloc(size_t bytes) {
    void *p = NULL;
    if (bytes && cudaMalloc(&p, bytes) != cudaSuccess) return NULL;
    return p;
}

void perf_dev_free(void *p) {
    if (p) cudaFree(p);
}

int perf_dev_copy(void *dst, const void *src, size_t bytes) {
    if (!bytes) return 0;
    return cudaMemcpy(dst, src, bytes, cudaMemcpyDefault) == cudaSuccess ? 0
                                                                         : -1;
}

int perf_dev_sync(void) {
    return cudaStreamSynchronize(stream) == cudaSuccess ? 0 : -1;
}

/* --- NCCL ----------------------------------------------------------------- */

typedef struct {
    char internal[128];
} nccl_id_t;
typedef void *nccl_comm_t;

static struct {
    void *lib;
    nccl_comm_t comm;
    int (*get_version)(int *);
    int (*get_unique_id)(nccl_id_t *);
    int (*comm_init_rank)(nccl_comm_t *, int, nccl_id_t, int);
    int (*comm_destroy)(nccl_comm_t);
    const char *(*error_string)(int);
    int (*allreduce)(const void *, void *, size_t, int, int, nccl_comm_t,
                     cudaStream_t);
    int (*allgather)(const void *, void *, size_t, int, nccl_comm_t,
                     cudaStream_t);
    int (*reduce_scatter)(const void *, void *, size_t, int, int, nccl_comm_t,
                          cudaStream_t);
    int (*broadcast)(const void *, void *, size_t, int, int, nccl_comm_t,
                     cudaStream_t);
    int (*reduce)(const void *, void *, size_t, int, int, int, nccl_comm_t,
                  cudaStream_t);
    int (*send)(const void *, size_t, int, int, nccl_comm_t, cudaStream_t);
    int (*recv)(void *, size_t, int, int, nccl_comm_t, cudaStream_t);
    int (*group_start)(void);
    int (*group_end)(void);
} nccl;

static int nccl_dtype(hcomm_dtype_t t) {
    static const int map[HCOMM_DTYPE_COUNT] = {
        [HCOMM_INT8] = 0,    [HCOMM_UINT8] = 1,   [HCOMM_INT32] = 2,
        [HCOMM_UINT32] = 3,  [HCOMM_INT64] = 4,   [HCOMM_UINT64] = 5,
        [HCOMM_FLOAT16] = 6, [HCOMM_FLOAT32] = 7, [HCOMM_FLOAT64] = 8,
        [HCOMM_BFLOAT16] = 9};
    return map[t];
}

static int nccl_op(hcomm_op_t op) {
    static const int map[HCOMM_OP_COUNT] = {[HCOMM_SUM] = 0,
                                            [HCOMM_PROD] = 1,
                                            [HCOMM_MAX] = 2,
                                            [HCOMM_MIN] = 3,
                                            [HCOMM_AVG] = 4};
    return map[op];
}

#define NCCL_SYM(field, name)                                                  \
    ((*(void **)&nccl.field = dlsym(nccl.lib, name)) != NULL)

/* Every rank agrees: NCCL runs on all or on none (why says why not). */
int perf_nccl_init(MPI_Comm world, int rank, int nranks, char *why,
                   size_t len) {
    int ok = 1, all = 0, version = 0;
    nccl.lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!nccl.lib || !NCCL_SYM(get_version, "ncclGetVersion") ||
        !NCCL_SYM(get_unique_id, "ncclGetUniqueId") ||
        !NCCL_SYM(comm_init_rank, "ncclCommInitRank") ||
        !NCCL_SYM(comm_destroy, "ncclCommDestroy") ||
        !NCCL_SYM(error_string, "ncclGetErrorString") ||
        !NCCL_SYM(allreduce, "ncclAllReduce") ||
        !NCCL_SYM(allgather, "ncclAllGather") ||
        !NCCL_SYM(reduce_scatter, "ncclReduceScatter") ||
        !NCCL_SYM(broadcast, "ncclBroadcast") ||
        !NCCL_SYM(reduce, "ncclReduce") || !NCCL_SYM(send, "ncclSend") ||
        !NCCL_SYM(recv, "ncclRecv") ||
        !NCCL_SYM(group_start, "ncclGroupStart") ||
        !NCCL_SYM(group_end, "ncclGroupEnd")) {
        snprintf(why, len, "libnccl.so.2 not found or incomplete");
        ok = 0;
    }
    /* NCCL refuses two ranks on one GPU */
    int ndev = 0;
    cudaGetDeviceCount(&ndev);
    if (ok && nranks > 1) {
        MPI_Comm node;
        int lsize;
        MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL,
                            &node);
        MPI_Comm_size(node, &lsize);
        MPI_Comm_free(&node);
        if (lsize > ndev) {
            snprintf(why, len,
                     "NCCL needs a GPU per rank (%d ranks on this node, %d "
                     "GPUs)",
                     lsize, ndev);
            ok = 0;
        }
    }
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, world);
    if (!all) {
        if (ok) snprintf(why, len, "NCCL is not usable on another rank");
        return -1;
    }
    nccl_id_t id;
    if (rank == 0) nccl.get_unique_id(&id);
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, world);
    int st = nccl.comm_init_rank(&nccl.comm, nranks, id, rank);
    ok = st == 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, world);
    if (!all) {
        snprintf(why, len, "ncclCommInitRank: %s",
                 ok ? "failed on another rank" : nccl.error_string(st));
        return -1;
    }
    nccl.get_version(&version);
    return version;
}

void perf_nccl_finalize(void) {
    if (nccl.comm) nccl.comm_destroy(nccl.comm);
    nccl.comm = NULL;
}

/* One call on the stream (not waited for), as nccl-tests makes it. */
int perf_nccl_call(const perf_layout_t *l, const void *send, void *recv) {
    const int dt = nccl_dtype(l->dtype), op = nccl_op(l->op);
    const size_t n = l->count, esize = perf_dtypes[l->dtype].size;
    switch (l->coll) {
    case PERF_ALLREDUCE:
        return nccl.allreduce(send, recv, n, dt, op, nccl.comm, stream);
    case PERF_ALLGATHER:
        return nccl.allgather(send, recv, n, dt, nccl.comm, stream);
    case PERF_REDUCE_SCATTER:
        return nccl.reduce_scatter(send, recv, n, dt, op, nccl.comm, stream);
    case PERF_BROADCAST:
        return nccl.broadcast(recv, recv, n, dt, l->root, nccl.comm, stream);
    case PERF_REDUCE:
        return nccl.reduce(send, recv, n, dt, op, l->root, nccl.comm, stream);
    case PERF_ALLTOALL: {
        int st = nccl.group_start();
        for (int p = 0; p < l->nranks && st == 0; p++) {
            st = nccl.send((const char *)send + (size_t)p * n * esize, n, dt, p,
                           nccl.comm, stream);
            if (st == 0)
                st = nccl.recv((char *)recv + (size_t)p * n * esize, n, dt, p,
                               nccl.comm, stream);
        }
        int end = nccl.group_end();
        return st ? st : end;
    }
    default:
        return -1; /* barrier: NCCL has none */
    }
}

#else /* without CUDA, -D cuda is refused before any of these runs */
int perf_dev_init(MPI_Comm world, char *err, size_t len) {
    (void)world;
    snprintf(err, len, "built without CUDA");
    return -1;
}
void *perf_dev_stream(void) {
    return NULL;
}
void *perf_dev_alloc(size_t bytes) {
    (void)bytes;
    return NULL;
}
void perf_dev_free(void *p) {
    (void)p;
}
int perf_dev_copy(void *dst, const void *src, size_t bytes) {
    (void)dst, (void)src, (void)bytes;
    return -1;
}
int perf_dev_sync(void) {
    return 0;
}
int perf_nccl_init(MPI_Comm world, int rank, int nranks, char *why,
                   size_t len) {
    (void)world, (void)rank, (void)nranks;
    snprintf(why, len, "built without CUDA");
    return -1;
}
void perf_nccl_finalize(void) {}
int perf_nccl_call(const perf_layout_t *l, const void *send, void *recv) {
    (void)l, (void)send, (void)recv;
    return -1;
}
#endif
