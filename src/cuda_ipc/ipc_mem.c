/* Registered device memory (hcomm_mem_alloc_device): each rank's
 * allocation mapped by every peer once, at allocation, so that a CUDA IPC
 * call on it reads and writes the peers' buffers in place, with no copy
 * through the workspaces and no handle exchange per call. */
#include "core/config.h"
#include "core/log.h"
#include "cuda_ipc/ipc_state.h"

#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

struct hcomm_ipc_region {
    uint32_t id;
    size_t bytes;
    int shared; /* peers' allocations mapped (all ranks agreed) */
    /* Every rank's allocation as mapped here; this rank's own at rank. */
    char *base[HCOMM_IPC_MAX_RANKS];
};

typedef struct {
    int ok;
    cudaIpcMemHandle_t handle;
} region_card_t;

static void region_release(struct hcomm_ipc_region *r, int rank, int n) {
    for (int p = 0; p < n; p++)
        if (r->base[p] && p != rank) cudaIpcCloseMemHandle(r->base[p]);
    cudaFree(r->base[rank]);
}

/* Maps every peer's allocation of r; 1 if every rank mapped all. */
static int region_share(hcomm_comm_impl_t *c, struct hcomm_ipc_region *r) {
    region_card_t mine = {0}, *all = calloc((size_t)c->size, sizeof(*all));
    mine.ok = all && cudaIpcGetMemHandle(&mine.handle, r->base[c->rank]) ==
                         cudaSuccess;
    /* Every rank takes part even after a failure, so none waits. */
    PMPI_Allgather(&mine, sizeof(mine), MPI_BYTE, all ? all : &mine,
                   all ? sizeof(mine) : 0, MPI_BYTE, c->mpi_comm);
    int ok = mine.ok;
    for (int p = 0; ok && p < c->size; p++) {
        if (p == c->rank) continue;
        ok = all[p].ok && cudaIpcOpenMemHandle(
                              (void **)&r->base[p], all[p].handle,
                              cudaIpcMemLazyEnablePeerAccess) == cudaSuccess;
    }
    if (!ok) {
        /* "already mapped" on the GPU machine, where UCX's IPC cache in
         * this process held a mapping of the same block. The memory stays
         * each rank's own, not shared; the error is taken here (HCOMM_LOG
         * evaluates nothing below its level), not left for the next
         * kernel launch to report as its own. */
        cudaError_t e = cudaGetLastError();
        HCOMM_LOG(HCOMM_LOG_INFO, "cuda ipc: cannot map a peer's region: %s",
                  cudaGetErrorString(e));
    }
    int all_ok = 0;
    PMPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, c->mpi_comm);
    if (!all_ok)
        for (int p = 0; p < c->size; p++)
            if (p != c->rank && r->base[p]) {
                cudaIpcCloseMemHandle(r->base[p]);
                r->base[p] = NULL;
            }
    free(all);
    return all_ok;
}

hcomm_status_t hcomm_ipc_mem_alloc(hcomm_comm_impl_t *c, size_t bytes,
                                   void **ptr) {
    struct hcomm_ipc_region *r = calloc(1, sizeof(*r)),
                            **list =
                                realloc(c->dev_mem, (size_t)(c->ndev_mem + 1) *
                                                        sizeof(*list));
    if (list) c->dev_mem = list;
    /* Whole 2 MiB pages: an allocation of its own, whose IPC handle names
     * it alone (a smaller one may share its block with others). */
    size_t whole = (bytes + ((size_t)2 << 20) - 1) & ~(((size_t)2 << 20) - 1);
    int ok = r && list && whole >= bytes &&
             cudaMalloc((void **)&r->base[c->rank], whole) == cudaSuccess;
    /* Allocations are collective: all fail if one does, and ids agree. */
    int all_ok = 0;
    PMPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, c->mpi_comm);
    if (!all_ok) {
        if (!ok) cudaGetLastError(); /* reported here, not at a launch */
        if (r) cudaFree(r->base[c->rank]);
        free(r);
        return hcomm_error(HCOMM_ERR_NO_MEMORY,
                           "hcomm_mem_alloc_device: %s could not allocate "
                           "%zu bytes of device memory",
                           ok ? "another rank" : "this rank", bytes);
    }
    r->id = ++c->dev_mem_ids;
    r->bytes = bytes;
    /* Shared where the CUDA IPC path could run: one node, HCOMM_CUDA_IPC
     * not 0; a communicator where it cannot gets plain device memory. */
    if (c->shm && c->size <= HCOMM_IPC_MAX_RANKS && c->ipc_state >= 0 &&
        strcmp(hcomm_cfg_str(HCOMM_CFG_CUDA_IPC), "0") != 0)
        r->shared = region_share(c, r);
    HCOMM_LOG(HCOMM_LOG_INFO,
              "cuda ipc: registered %zu bytes of device memory (region %u)%s",
              bytes, (unsigned)r->id,
              r->shared ? ", mapped by every peer" : ", not shared");
    c->dev_mem[c->ndev_mem++] = r;
    *ptr = r->base[c->rank];
    return HCOMM_SUCCESS;
}

int hcomm_ipc_mem_free(hcomm_comm_impl_t *c, const void *ptr) {
    for (int i = 0; i < c->ndev_mem; i++) {
        struct hcomm_ipc_region *r = c->dev_mem[i];
        if (r->base[c->rank] != ptr) continue;
        region_release(r, c->rank, c->size);
        free(r);
        c->dev_mem[i] = c->dev_mem[--c->ndev_mem];
        return 1;
    }
    return 0;
}

void hcomm_ipc_mem_free_all(hcomm_comm_impl_t *c) {
    while (c->ndev_mem > 0)
        hcomm_ipc_mem_free(c, c->dev_mem[0]->base[c->rank]);
    free(c->dev_mem);
    c->dev_mem = NULL;
}

void hcomm_ipc_mem_find(const hcomm_comm_impl_t *c, const void *p, size_t len,
                        uint32_t *id, uint64_t *off) {
    *id = 0;
    *off = 0;
    for (int i = 0; i < c->ndev_mem; i++) {
        const struct hcomm_ipc_region *r = c->dev_mem[i];
        const char *b = r->base[c->rank], *q = p;
        if (r->shared && q >= b && (size_t)(q - b) <= r->bytes &&
            len <= r->bytes - (size_t)(q - b)) {
            *id = r->id;
            *off = (uint64_t)(q - b);
            return;
        }
    }
}

char *hcomm_ipc_mem_peer(const hcomm_comm_impl_t *c, uint32_t id, int peer,
                         uint64_t off, size_t len) {
    for (int i = 0; i < c->ndev_mem; i++) {
        const struct hcomm_ipc_region *r = c->dev_mem[i];
        /* what a peer published in shared memory, checked against the
         * region every rank allocated alike */
        if (r->id == id && r->shared && off <= r->bytes &&
            len <= r->bytes - off)
            return r->base[peer] + off;
    }
    return NULL;
}
