/* The node's shared segment: created by rank 0, mapped by every rank, and
 * unlinked as soon as all have mapped it, so that no crash leaves a file in
 * /dev/shm. */
#include "shm_tp/shm_layout.h"
#include "core/config.h"
#include "core/log.h"

#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

size_t hcomm_shm_segment_bytes(int size, size_t slot_bytes) {
    return (size_t)size * hcomm_shm_area_bytes(size, slot_bytes);
}

hcomm_status_t hcomm_shm_attach(void *base, size_t bytes, int rank, int size,
                                size_t slot_bytes, int cma, hcomm_shm_t **out) {
    hcomm_shm_t *shm = calloc(1, sizeof(*shm));
    if (shm && (!(shm->known = calloc(3 * (size_t)size, sizeof(uint64_t))) ||
                !(shm->pids = calloc((size_t)size, sizeof(int32_t))))) {
        free(shm->known);
        free(shm);
        shm = NULL;
    }
    if (!shm) return hcomm_error(HCOMM_ERR_NO_MEMORY, "no memory for shm");
    shm->base = base;
    shm->bytes = bytes;
    shm->rank = rank;
    shm->size = size;
    shm->slot_bytes = slot_bytes;
    shm->area_bytes = hcomm_shm_area_bytes(size, slot_bytes);
    shm->cma = cma;
    shm->next_seq = 1;
    hcomm_shm_info_t *mine = hcomm_shm_info(shm, rank);
    mine->pid = (int32_t)getpid();
    mine->probe_addr = (uint64_t)(uintptr_t)&mine->pid;
    /* Ranks as threads of one process (unit tests): every pid is ours.
     * hcomm_shm_create replaces these with what MPI says. */
    for (int p = 0; p < size; p++)
        shm->pids[p] = mine->pid;
    *out = shm;
    return HCOMM_SUCCESS;
}

int hcomm_shm_peer_alive(const hcomm_shm_t *shm, int rank, int *pid) {
    *pid = shm->pids[rank];
    return *pid <= 0 || kill(*pid, 0) == 0 || errno != ESRCH;
}

void hcomm_shm_destroy(hcomm_shm_t *shm) {
    if (!shm) return;
    if (shm->owns_mapping) munmap(shm->base, shm->bytes);
    for (int i = 0; i < shm->nregions; i++)
        munmap(shm->regions[i].base,
               shm->regions[i].stride * (size_t)shm->size);
    free(shm->regions);
    free(shm->bounce);
    free(shm->a2av_bytes);
    free(shm->known);
    free(shm->pids);
    free(shm);
}

/* Rank 0: a new file, sized with its memory reserved now (a full /dev/shm
 * must fail here, not with SIGBUS in the middle of a collective). */
static int create_file(char *name, size_t len, size_t bytes) {
    static atomic_uint counter;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(name, len, "/hcomm-%d-%u-%lx", (int)getpid(),
             atomic_fetch_add(&counter, 1), (unsigned long)ts.tv_nsec);
    int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) {
        hcomm_info("shm: cannot create %s: %s", name, strerror(errno));
        return -1;
    }
    int err = ftruncate(fd, (off_t)bytes) ? errno : 0;
    if (!err) err = posix_fallocate(fd, 0, (off_t)bytes);
    if (err) {
        hcomm_info("shm: cannot reserve %zu bytes in %s: %s", bytes, name,
                   strerror(err));
        close(fd);
        shm_unlink(name);
        return -1;
    }
    return fd;
}

static void *map_file(int fd, size_t bytes) {
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    return p == MAP_FAILED ? NULL : p;
}

/* Whether this rank may read every peer's memory with process_vm_readv
 * (ptrace rules, seccomp and containers decide). Each rank's info line holds
 * its pid and the address of that pid in its own mapping. */
static int cma_reaches_all(hcomm_shm_t *shm) {
    for (int p = 0; p < shm->size; p++) {
        if (p == shm->rank) continue;
        const hcomm_shm_info_t *info = hcomm_shm_info(shm, p);
        int32_t got = 0;
        struct iovec local = {&got, sizeof(got)};
        struct iovec remote = {(void *)(uintptr_t)info->probe_addr,
                               sizeof(got)};
        if (process_vm_readv(shm->pids[p], &local, 1, &remote, 1, 0) !=
                (ssize_t)sizeof(got) ||
            got != shm->pids[p]) {
            hcomm_info("shm: cross-memory reads from rank %d not allowed "
                       "(%s); large messages go through the slots",
                       p, strerror(errno));
            return 0;
        }
    }
    return 1;
}

void *hcomm_shm_map_shared(MPI_Comm comm, size_t bytes) {
    int rank;
    PMPI_Comm_rank(comm, &rank);
    struct {
        char name[64];
        int ok;
    } msg = {{0}, 0};
    int fd = -1;
    if (rank == 0) {
        fd = create_file(msg.name, sizeof(msg.name), bytes);
        msg.ok = fd >= 0;
    }
    PMPI_Bcast(&msg, (int)sizeof(msg), MPI_BYTE, 0, comm);
    void *base = NULL;
    if (msg.ok) {
        if (rank != 0) fd = shm_open(msg.name, O_RDWR, 0);
        if (fd >= 0) base = map_file(fd, bytes);
        if (!base)
            hcomm_info("shm: cannot map %s: %s", msg.name, strerror(errno));
    }
    /* Every rank has mapped it (or failed): the name can go. */
    int ok = base != NULL, all_ok = 0;
    PMPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm);
    if (rank == 0 && msg.ok) shm_unlink(msg.name);
    if (!all_ok && base) {
        munmap(base, bytes);
        base = NULL;
    }
    return base;
}

hcomm_status_t hcomm_shm_create(MPI_Comm comm, hcomm_shm_t **out) {
    int rank, size;
    *out = NULL;
    PMPI_Comm_rank(comm, &rank);
    PMPI_Comm_size(comm, &size);
    size_t slot = (size_t)hcomm_cfg_int(HCOMM_CFG_SHM_SLOT_SIZE);
    if (size < 2 || slot == 0) return HCOMM_SUCCESS;
    slot = (slot + 63) & ~(size_t)63;
    size_t bytes = hcomm_shm_segment_bytes(size, slot);
    void *base = hcomm_shm_map_shared(comm, bytes);
    if (!base) return HCOMM_SUCCESS;
    hcomm_shm_t *shm = NULL;
    int ok = hcomm_shm_attach(base, bytes, rank, size, slot, 0, &shm) ==
             HCOMM_SUCCESS,
        all_ok = 0;
    PMPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm);
    if (shm) shm->owns_mapping = 1;
    if (!all_ok) {
        if (shm)
            hcomm_shm_destroy(shm);
        else
            munmap(base, bytes);
        return HCOMM_SUCCESS;
    }
    /* The pids as MPI's ranks report them, each checked against what that
     * rank wrote in the segment: a rank whose pid differs (another pid
     * namespace, a corrupted segment) turns cross-memory copies off. */
    int32_t pid = (int32_t)getpid();
    PMPI_Allgather(&pid, 1, MPI_INT32_T, shm->pids, 1, MPI_INT32_T, comm);
    int pids_ok = 1;
    for (int p = 0; p < size; p++)
        if (hcomm_shm_info(shm, p)->pid != shm->pids[p]) {
            hcomm_info("shm: rank %d's pid is %d in MPI but %d in the "
                       "segment; cross-memory copies off",
                       p, (int)shm->pids[p], (int)hcomm_shm_info(shm, p)->pid);
            pids_ok = 0;
        }
    int cma = pids_ok && cma_reaches_all(shm), all_cma = 0;
    PMPI_Allreduce(&cma, &all_cma, 1, MPI_INT, MPI_MIN, comm);
    shm->cma = all_cma;
    hcomm_debug("shm: %zu bytes for %d ranks, cross-memory reads %s", bytes,
                size, all_cma ? "on" : "off");
    *out = shm;
    return HCOMM_SUCCESS;
}

hcomm_status_t hcomm_shm_region_add(hcomm_shm_t *shm, char *base, size_t stride,
                                    uint32_t *id) {
    if (shm->nregions == shm->region_cap) {
        int cap = shm->region_cap ? 2 * shm->region_cap : 4;
        hcomm_shm_region_t *r = realloc(shm->regions, (size_t)cap * sizeof(*r));
        if (!r) return hcomm_error(HCOMM_ERR_NO_MEMORY, "no memory");
        shm->regions = r;
        shm->region_cap = cap;
    }
    *id = ++shm->last_region_id;
    shm->regions[shm->nregions++] = (hcomm_shm_region_t){*id, base, stride};
    return HCOMM_SUCCESS;
}

const hcomm_shm_region_t *hcomm_shm_region_find(const hcomm_shm_t *shm,
                                                const void *p, size_t len,
                                                size_t *off) {
    uintptr_t a = (uintptr_t)p;
    for (int i = 0; i < shm->nregions; i++) {
        const hcomm_shm_region_t *r = &shm->regions[i];
        uintptr_t lo = (uintptr_t)r->base + (uintptr_t)shm->rank * r->stride;
        if (a >= lo && len <= r->stride && a - lo <= r->stride - len) {
            *off = (size_t)(a - lo);
            return r;
        }
    }
    return NULL;
}

char *hcomm_shm_region_peer(const hcomm_shm_t *shm, uint32_t id, int rank,
                            size_t off) {
    for (int i = 0; i < shm->nregions; i++)
        if (shm->regions[i].id == id)
            return shm->regions[i].base +
                   (size_t)rank * shm->regions[i].stride + off;
    return NULL;
}

int hcomm_shm_region_remove(hcomm_shm_t *shm, const void *ptr) {
    for (int i = 0; i < shm->nregions; i++) {
        hcomm_shm_region_t *r = &shm->regions[i];
        if (r->base + (size_t)shm->rank * r->stride != (const char *)ptr)
            continue;
        munmap(r->base, r->stride * (size_t)shm->size);
        *r = shm->regions[--shm->nregions];
        return 1;
    }
    return 0;
}
