/* The CUDA IPC path's workspaces: made on a communicator's first call that
 * takes the path, mapped by every peer once, freed with the communicator. */
#include "cuda_ipc/ipc_shape.h"
#include "cuda_ipc/ipc_state.h"
#include "core/config.h"
#include "core/log.h"
#include "topo/topo.h"

#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

int hcomm_ipc_applies(const hcomm_comm_impl_t *c, hcomm_coll_t coll,
                      size_t bytes) {
    if (!c->shm || c->size > HCOMM_IPC_MAX_RANKS || bytes == 0 ||
        c->ipc_state < 0 || strcmp(hcomm_cfg_str(HCOMM_CFG_CUDA_IPC), "0") == 0)
        return 0;
    return coll == HCOMM_COLL_ALLREDUCE || coll == HCOMM_COLL_REDUCE_SCATTER ||
           coll == HCOMM_COLL_ALLGATHER || coll == HCOMM_COLL_BCAST;
}

/* What each rank tells the others at setup. */
typedef struct {
    int ok;
    cudaIpcMemHandle_t handle;
    cudaUUID_t gpu;               /* which GPU the workspace is on */
    char pci[HCOMM_TOPO_PCI_LEN]; /* its PCI bus id; "" unknown */
    int sms;                      /* that GPU's multiprocessors */
} ipc_card_t;

/* How the tables of ordinary buffers (ipc_cards.h) reach CUDA. */
static int card_range(void *ctx, const void *p, uint64_t *id, uintptr_t *base,
                      size_t *bytes) {
    (void)ctx;
    return hcomm_gpu_alloc_range(p, id, base, bytes);
}

static int card_export(void *ctx, uintptr_t base, unsigned char handle[64]) {
    (void)ctx;
    cudaIpcMemHandle_t h;
    _Static_assert(sizeof(h) == 64, "a CUDA IPC handle is 64 bytes");
    if (cudaIpcGetMemHandle(&h, (void *)base) != cudaSuccess) {
        /* memory CUDA will not export (a stream-ordered pool's, say): the
         * error is taken here, not left for the next launch to report */
        cudaGetLastError();
        return -1;
    }
    memcpy(handle, &h, sizeof(h));
    return 0;
}

static int card_map(void *ctx, const unsigned char handle[64], char **mapped) {
    (void)ctx;
    cudaIpcMemHandle_t h;
    memcpy(&h, handle, sizeof(h));
    cudaError_t e = cudaIpcOpenMemHandle((void **)mapped, h,
                                         cudaIpcMemLazyEnablePeerAccess);
    if (e == cudaSuccess) return 0;
    cudaGetLastError();
    HCOMM_LOG(HCOMM_LOG_INFO, "cuda ipc: cannot map a peer's buffer: %s",
              cudaGetErrorString(e));
    return -1;
}

static void card_unmap(void *ctx, char *mapped) {
    (void)ctx;
    cudaIpcCloseMemHandle(mapped);
}

static const hcomm_ipc_card_ops_t card_ops = {card_range, card_export, card_map,
                                              card_unmap, NULL};

static void release(hcomm_ipc_t *ipc, int rank, int nranks) {
    hcomm_ipc_cards_free(ipc->cards);
    for (int p = 0; p < nranks; p++) {
        if (!ipc->ws[p]) continue;
        if (p == rank)
            cudaFree(ipc->ws[p]);
        else
            cudaIpcCloseMemHandle(ipc->ws[p]);
    }
    if (ipc->words) cudaFreeHost(ipc->words);
    free(ipc);
}

/* The device's PCI bus id (links are looked up by it in any case); ""
 * when CUDA will not say: its links are then unknown. */
static void own_pci(int device, char pci[HCOMM_TOPO_PCI_LEN]) {
    if (cudaDeviceGetPCIBusId(pci, HCOMM_TOPO_PCI_LEN, device) != cudaSuccess) {
        cudaGetLastError();
        pci[0] = '\0';
    }
}

/* Whether this rank's GPU reaches every peer's: 0 where a pair has no peer
 * access, named in the log. Ranks may see links differently (detection is
 * per process): the caller's Allreduce makes them all decline together. */
static int peers_reachable(const hcomm_comm_impl_t *c, const ipc_card_t *all) {
    const ipc_card_t *mine = &all[c->rank];
    hcomm_gpu_link_t *links = calloc((size_t)c->size, sizeof(*links));
    if (!links) return 0;
    for (int p = 0; p < c->size; p++)
        links[p] =
            memcmp(&all[p].gpu, &mine->gpu, sizeof(mine->gpu)) == 0
                ? HCOMM_GPU_LINK_SAME
                : hcomm_topo_gpu_link_pci(c->topo, mine->pci, all[p].pci);
    int bad = hcomm_gpu_links_first_blocked(c->size, links);
    if (bad >= 0)
        HCOMM_LOG(HCOMM_LOG_INFO,
                  "cuda ipc: declined on communicator %u: rank %d's GPU %s "
                  "has no peer access to rank %d's GPU %s",
                  (unsigned)c->id, c->rank, mine->pci, bad, all[bad].pci);
    free(links);
    return bad < 0;
}

/* This rank's workspace and host words; 0 on failure (logged). */
static int make_own(hcomm_ipc_t *ipc, int rank, ipc_card_t *card) {
    size_t bytes = HCOMM_IPC_FLAG_BYTES + 2 * ipc->area_bytes;
    /* On the communicator's stream: the caller's streams may hold work
     * that waits for this very call (a device-wide sync would wait too). */
    cudaStream_t own = hcomm_gpu_ctx_stream(ipc->ctx, HCOMM_GPU_STREAM_IPC);
    cudaError_t e = cudaMalloc((void **)&ipc->ws[rank], bytes);
    if (e == cudaSuccess)
        e = cudaMemsetAsync(ipc->ws[rank], 0, HCOMM_IPC_FLAG_BYTES, own);
    if (e == cudaSuccess) e = cudaStreamSynchronize(own);
    if (e == cudaSuccess) e = cudaIpcGetMemHandle(&card->handle, ipc->ws[rank]);
    struct cudaDeviceProp prop;
    if (e == cudaSuccess)
        e = cudaGetDeviceProperties(&prop, hcomm_gpu_ctx_device(ipc->ctx));
    if (e == cudaSuccess) {
        card->gpu = prop.uuid;
        card->sms = prop.multiProcessorCount;
        ipc->early_launch =
            prop.major >= 9 && hcomm_ipc_kernels_start_early() &&
            strcmp(hcomm_cfg_str(HCOMM_CFG_CUDA_IPC_EARLY), "0") != 0;
    }
    if (e == cudaSuccess) own_pci(hcomm_gpu_ctx_device(ipc->ctx), card->pci);
    if (e == cudaSuccess)
        e = cudaHostAlloc(&ipc->words, 4096, cudaHostAllocMapped);
    if (e == cudaSuccess) {
        memset(ipc->words, 0, 4096);
        ipc->abort_host = (volatile uint32_t *)ipc->words;
        ipc->status_host = (unsigned long long *)((char *)ipc->words + 64);
        void *dev = NULL;
        e = cudaHostGetDevicePointer(&dev, ipc->words, 0);
        ipc->abort_dev = (volatile uint32_t *)dev;
        ipc->status_dev = (unsigned long long *)((char *)dev + 64);
        ipc->done_host = (unsigned long long *)((char *)ipc->words + 512);
        ipc->done_dev = (unsigned long long *)((char *)dev + 512);
    }
    if (e != cudaSuccess)
        HCOMM_LOG(HCOMM_LOG_INFO, "cuda ipc: no workspace of %zu bytes: %s",
                  bytes, cudaGetErrorString(e));
    return e == cudaSuccess;
}

/* The ranks by GPU, from every rank's card (at most HCOMM_IPC_MAX_RANKS
 * of them: hcomm_ipc_applies): gpu_of[p], the lowest rank whose GPU is
 * rank p's. */
static void group_by_gpu(const ipc_card_t *all, int n, int *gpu_of) {
    for (int p = 0; p < n; p++) {
        gpu_of[p] = p;
        for (int q = 0; q < p && gpu_of[p] == p; q++)
            if (memcmp(&all[q].gpu, &all[p].gpu, sizeof(all[p].gpu)) == 0)
                gpu_of[p] = q;
    }
}

int hcomm_ipc_ready(hcomm_comm_impl_t *c, struct hcomm_gpu_ctx *ctx) {
    if (c->ipc_state) return c->ipc_state > 0;
    int prev = hcomm_gpu_use_device(hcomm_gpu_ctx_device(ctx));
    hcomm_ipc_t *ipc = calloc(1, sizeof(*ipc));
    ipc_card_t mine = {0}, *all = calloc((size_t)c->size, sizeof(*all));
    if (ipc && all) {
        ipc->ctx = ctx;
        ipc->area_bytes =
            ((size_t)hcomm_cfg_int(HCOMM_CFG_CUDA_IPC_BUFFER) + 4095) &
            ~(size_t)4095;
        if (ipc->area_bytes < 65536) ipc->area_bytes = 65536;
        ipc->epoch = 1; /* the flags start at 0 */
        mine.ok = make_own(ipc, c->rank, &mine);
    }
    /* Every rank takes part even after a failure, so none waits. */
    PMPI_Allgather(&mine, sizeof(mine), MPI_BYTE, all ? all : &mine,
                   all ? sizeof(mine) : 0, MPI_BYTE, c->mpi_comm);
    int ok = ipc && all;
    for (int p = 0; ok && p < c->size; p++)
        ok = all[p].ok;
    if (ok) { /* the blocks' cap (ipc_shape.h); the flags' scope */
        int sms[HCOMM_IPC_MAX_RANKS], gpu_of[HCOMM_IPC_MAX_RANKS];
        group_by_gpu(all, c->size, gpu_of);
        ipc->one_gpu = 1;
        for (int p = 0; p < c->size; p++) {
            sms[p] = all[p].sms;
            if (gpu_of[p] != gpu_of[c->rank]) ipc->one_gpu = 0;
        }
        ipc->resident_blocks = hcomm_ipc_resident_blocks(c->size, sms, gpu_of);
        /* one GPU: nothing to detect, the path runs as it always has */
        if (!ipc->one_gpu) ok = peers_reachable(c, all);
    }
    for (int p = 0; ok && p < c->size; p++) {
        if (p == c->rank) continue;
        cudaError_t e =
            cudaIpcOpenMemHandle((void **)&ipc->ws[p], all[p].handle,
                                 cudaIpcMemLazyEnablePeerAccess);
        if (e != cudaSuccess) {
            cudaGetLastError(); /* not left for the next launch to report */
            HCOMM_LOG(HCOMM_LOG_INFO,
                      "cuda ipc: cannot map rank %d's memory: %s", p,
                      cudaGetErrorString(e));
            ipc->ws[p] = NULL;
            ok = 0;
        }
    }
    int all_ok = 0;
    PMPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, c->mpi_comm);
    free(all);
    if (all_ok) {
        c->ipc = ipc;
        c->ipc_state = 1;
        /* NULL (no memory): ordinary buffers then take the workspaces */
        ipc->cards = hcomm_ipc_cards_new(c->rank, c->size, &card_ops);
        HCOMM_LOG(HCOMM_LOG_INFO,
                  "cuda ipc: communicator %u maps %d workspaces of %zu bytes",
                  (unsigned)c->id, c->size,
                  HCOMM_IPC_FLAG_BYTES + 2 * ipc->area_bytes);
    } else {
        if (ipc) release(ipc, c->rank, c->size);
        c->ipc_state = -1;
        HCOMM_LOG(HCOMM_LOG_INFO,
                  "cuda ipc: off on communicator %u (a rank could not set it "
                  "up); device calls take the plans",
                  (unsigned)c->id);
    }
    if (prev >= 0) hcomm_gpu_use_device(prev);
    return all_ok;
}

void hcomm_ipc_abort(hcomm_comm_impl_t *c) {
    hcomm_ipc_t *ipc = c->ipc;
    if (ipc) *ipc->abort_host = 1;
}

hcomm_status_t hcomm_ipc_check(hcomm_comm_impl_t *c) {
    hcomm_ipc_t *ipc = c->ipc;
    if (!ipc || !((volatile unsigned long long *)ipc->status_host)[0])
        return HCOMM_SUCCESS;
    return hcomm_ipc_failure(c, "an earlier stream-ordered call");
}

void hcomm_ipc_free(hcomm_comm_impl_t *c) {
    hcomm_ipc_t *ipc = c->ipc;
    if (!ipc) return;
    /* A broken communicator's kernels may be waiting for a peer that is
     * gone: they stop now rather than at the timeout. */
    if (c->broken) *ipc->abort_host = 1;
    int prev = hcomm_gpu_use_device(hcomm_gpu_ctx_device(ipc->ctx));
    cudaStreamSynchronize(
        (cudaStream_t)hcomm_gpu_ctx_stream(ipc->ctx, HCOMM_GPU_STREAM_IPC));
    if (ipc->last) {
        cudaEventSynchronize((cudaEvent_t)ipc->last);
        hcomm_gpu_event_put(ipc->ctx, ipc->last);
    }
    /* A peer may still read this rank's workspace in its last kernel: no
     * one frees before every rank's kernels are done. */
    if (!c->broken) PMPI_Barrier(c->mpi_comm);
    release(ipc, c->rank, c->size);
    c->ipc = NULL;
    if (prev >= 0) hcomm_gpu_use_device(prev);
}

size_t hcomm_ipc_bytes(const hcomm_comm_impl_t *c) {
    const hcomm_ipc_t *ipc = c->ipc;
    return ipc ? HCOMM_IPC_FLAG_BYTES + 2 * ipc->area_bytes : 0;
}
