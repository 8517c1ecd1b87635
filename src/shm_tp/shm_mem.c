/* Registered memory: a shared mapping per allocation, each rank's slice
 * page aligned, which the direct algorithms read in place (shm_coll.c);
 * device memory's twin is in cuda_ipc/ipc_mem.c. */
#include "core/comm.h"
#include "core/context.h"
#include "core/log.h"
#include "core/stream_worker.h"
#include "shm_tp/shm.h"
#ifdef HAVE_CUDA
#include "cuda_ipc/ipc.h"
#endif

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

static hcomm_status_t plain_alloc(hcomm_comm_impl_t *c, size_t bytes,
                                  void **ptr) {
    void **list =
        realloc(c->plain_mem, (size_t)(c->nplain_mem + 1) * sizeof(*list));
    if (!list) return hcomm_error(HCOMM_ERR_NO_MEMORY, "no memory");
    c->plain_mem = list;
    if (!(*ptr = aligned_alloc(4096, (bytes + 4095) & ~(size_t)4095)))
        return hcomm_error(HCOMM_ERR_NO_MEMORY,
                           "hcomm_mem_alloc: no memory for %zu bytes", bytes);
    list[c->nplain_mem++] = *ptr;
    return HCOMM_SUCCESS;
}

/* What both allocators check first, every rank together: the same bytes
 * everywhere (the slices are symmetric) and a pointer to fill. A rank with
 * a bad argument still takes part, so none waits. */
static hcomm_status_t agree_alloc(hcomm_comm_t comm, size_t bytes, void **ptr,
                                  const char *what, hcomm_comm_impl_t **c) {
    if (!hcomm_is_initialized())
        return hcomm_error(HCOMM_ERR_NOT_INITIALIZED, "%s before hcomm_init",
                           what);
    hcomm_status_t st = hcomm_comm_lookup(comm, c);
    if (st != HCOMM_SUCCESS) return st;
    hcomm_stream_drain(*c);
    if (ptr) *ptr = NULL;
    unsigned long long mine = bytes, agreed[3];
    unsigned long long local[3] = {mine, ~mine, ptr == NULL};
    PMPI_Allreduce(local, agreed, 3, MPI_UNSIGNED_LONG_LONG, MPI_MAX,
                   (*c)->mpi_comm);
    if (agreed[2])
        return hcomm_error(HCOMM_ERR_INVALID_ARG,
                           "%s: the output pointer is NULL on %s", what,
                           ptr ? "another rank" : "this rank");
    if (agreed[0] != ~agreed[1])
        return hcomm_error(HCOMM_ERR_INVALID_ARG,
                           "%s: ranks asked for different sizes (%llu to "
                           "%llu bytes); every rank must pass the same",
                           what, ~agreed[1], agreed[0]);
    return HCOMM_SUCCESS;
}

hcomm_status_t hcomm_mem_alloc(hcomm_comm_t comm, size_t bytes, void **ptr) {
    hcomm_comm_impl_t *c;
    hcomm_status_t st = agree_alloc(comm, bytes, ptr, "hcomm_mem_alloc", &c);
    if (st != HCOMM_SUCCESS || bytes == 0) return st;
    if (!c->shm) return plain_alloc(c, bytes, ptr);
    size_t stride = (bytes + 4095) & ~(size_t)4095;
    if (stride > SIZE_MAX / (size_t)c->size)
        return hcomm_error(HCOMM_ERR_OVERFLOW,
                           "hcomm_mem_alloc: %zu bytes per rank overflow",
                           bytes);
    char *base = hcomm_shm_map_shared(c->mpi_comm, stride * (size_t)c->size);
    if (!base)
        return hcomm_error(HCOMM_ERR_NO_MEMORY,
                           "hcomm_mem_alloc: cannot share %zu bytes per rank "
                           "in /dev/shm (HCOMM_DEBUG=info says why)",
                           bytes);
    uint32_t id;
    if ((st = hcomm_shm_region_add(c->shm, base, stride, &id)) !=
        HCOMM_SUCCESS) {
        munmap(base, stride * (size_t)c->size);
        return st;
    }
    *ptr = base + (size_t)c->rank * stride;
    return HCOMM_SUCCESS;
}

hcomm_status_t hcomm_mem_alloc_device(hcomm_comm_t comm, size_t bytes,
                                      void **ptr) {
#ifdef HAVE_CUDA
    hcomm_comm_impl_t *c;
    hcomm_status_t st =
        agree_alloc(comm, bytes, ptr, "hcomm_mem_alloc_device", &c);
    if (st != HCOMM_SUCCESS || bytes == 0) return st;
    return hcomm_ipc_mem_alloc(c, bytes, ptr);
#else
    (void)comm;
    (void)bytes;
    if (ptr) *ptr = NULL;
    return hcomm_error(HCOMM_ERR_UNSUPPORTED,
                       "hcomm_mem_alloc_device: this HCOMM was built without "
                       "CUDA");
#endif
}

hcomm_status_t hcomm_mem_free(hcomm_comm_t comm, void *ptr) {
    hcomm_comm_impl_t *c;
    if (!hcomm_is_initialized())
        return hcomm_error(HCOMM_ERR_NOT_INITIALIZED,
                           "hcomm_mem_free before hcomm_init");
    hcomm_status_t st = hcomm_comm_lookup(comm, &c);
    if (st != HCOMM_SUCCESS || !ptr) return st;
    hcomm_stream_drain(c);
    if (c->shm && hcomm_shm_region_remove(c->shm, ptr)) return HCOMM_SUCCESS;
#ifdef HAVE_CUDA
    if (hcomm_ipc_mem_free(c, ptr)) return HCOMM_SUCCESS;
#endif
    for (int i = 0; i < c->nplain_mem; i++)
        if (c->plain_mem[i] == ptr) {
            free(ptr);
            c->plain_mem[i] = c->plain_mem[--c->nplain_mem];
            return HCOMM_SUCCESS;
        }
    return hcomm_error(HCOMM_ERR_INVALID_ARG,
                       "hcomm_mem_free: %p did not come from hcomm_mem_alloc "
                       "on this communicator",
                       ptr);
}
