/* Communicators: handles, creation (with a unique id agreed by all ranks),
 * the plan cache and the collective sequence number. */
#ifndef HCOMM_CORE_COMM_H
#define HCOMM_CORE_COMM_H

#include "coll/plan.h"
#include "core/flight.h"
#include "core/tp.h"

#include <mpi.h>
#include <stdatomic.h>

#define HCOMM_PLAN_CACHE_SIZE 16

typedef struct {
    const hcomm_algo_t *algo;
    hcomm_plan_args_t args;
    hcomm_plan_t plan;
    atomic_int refs; /* requests running the plan (any thread ends them) */
    uint64_t last_use;
    int valid;
} hcomm_plan_slot_t;

struct hcomm_topo;
struct hcomm_shm;
struct hcomm_gpu_ctx;
struct hcomm_ipc;
struct hcomm_ipc_region;

typedef struct hcomm_comm_impl {
    MPI_Comm mpi_comm; /* private duplicate: bootstrap and splits */
    int rank, size;
    /* MPI_COMM_WORLD's rank of each rank, for messages; NULL on the world
     * itself (or a copy of it). */
    int *world;
    uint16_t id;
    uint32_t seq; /* next collective's sequence number */
    hcomm_tp_t *tp;
    /* Nodes, NUMA, devices: found at creation (src/topo/topo.h). */
    struct hcomm_topo *topo;
    /* The shared segment when every rank is on one node, else NULL. */
    struct hcomm_shm *shm;
    /* Several nodes: this rank's node and its rail (local rank i of every
     * node), made on the first call that needs them (coll/hier_node.c). */
    hcomm_comm_t node_comm, rail_comm;
    /* hcomm_mem_alloc's ordinary memory when there is no segment. */
    void **plain_mem;
    int nplain_mem;
    /* Set after a failure: later calls fail fast. Atomic: the stream
     * worker sets it while the program's thread reads it. */
    _Atomic hcomm_status_t broken;
    double timeout;     /* hcomm_comm_set_timeout; 0: HCOMM_TIMEOUT */
    atomic_int aborted; /* hcomm_comm_abort */
    hcomm_flight_t flight;
    /* Calls on device memory: streams and events on the communicator's
     * GPU (made by the first such call). */
    struct hcomm_gpu_ctx *gpu;
    /* The CUDA IPC path (src/cuda_ipc/): its workspaces once made; state 0
     * until the first call that would take it, then 1 (ready) or -1 (off). */
    struct hcomm_ipc *ipc;
    int ipc_state;
    /* hcomm_mem_alloc_device's allocations (cuda_ipc/ipc_mem.c), and the
     * last region id given (the same on every rank: allocations are
     * collective). */
    struct hcomm_ipc_region **dev_mem;
    int ndev_mem;
    uint32_t dev_mem_ids;
    /* hcomm_allreduce_ex with HCOMM_COMPRESS_AUTO: per power-of-two size,
     * 0 until measured, then 1 + the scheme picked, what it measured (us:
     * bf16, uncompressed, the lossy scheme allowed) and the lossy scheme
     * it measured (1 + the kind, 0: none allowed) at which density. */
    uint8_t compress_pick[64];
    float compress_us[64][3];
    uint8_t compress_lossy[64];
    double compress_density[64];
    uint64_t uses;
    int inflight; /* requests started and not yet completed */
    /* Stream-ordered calls queued on HCOMM's worker and not yet run (under
     * its lock), and the first one's failure that later calls report:
     * status, then message (core/stream_worker.h). */
    int stream_pending;
    atomic_int stream_failed;
    char stream_why[192];
    hcomm_plan_slot_t plans[HCOMM_PLAN_CACHE_SIZE];
    hcomm_comm_t handle;
} hcomm_comm_impl_t;

/* Resolves a handle; HCOMM_ERR_INVALID_COMM (with a message) for NULL,
 * freed or made-up handles. */
hcomm_status_t hcomm_comm_lookup(hcomm_comm_t handle, hcomm_comm_impl_t **out);

/* The MPI_COMM_WORLD rank of each of comm's size ranks, into world[size]
 * (MPI_UNDEFINED for one outside it); world has room for 2 * size ints,
 * the second half scratch. */
hcomm_status_t hcomm_world_ranks(MPI_Comm comm, int size, int *world);

/* A plan for args on this communicator, from the cache or built; release
 * it with hcomm_comm_plan_put. */
hcomm_status_t hcomm_comm_plan_get(hcomm_comm_impl_t *c,
                                   const hcomm_algo_t *algo,
                                   const hcomm_plan_args_t *args,
                                   const hcomm_plan_t **plan);
void hcomm_comm_plan_put(hcomm_comm_impl_t *c, const hcomm_plan_t *plan);

/* The communicator's GPU context for calls on device memory of device
 * (made on first use; a communicator serves one GPU). */
hcomm_status_t hcomm_comm_gpu(hcomm_comm_impl_t *c, int device,
                              struct hcomm_gpu_ctx **ctx);

/* Calls fn on every communicator alive (the flight recorder's dump). */
void hcomm_comm_foreach(void (*fn)(hcomm_comm_impl_t *c, void *arg), void *arg);
/* The seconds its calls may wait. */
double hcomm_comm_timeout(const hcomm_comm_impl_t *c);

/* Frees every communicator still alive (hcomm_finalize). */
void hcomm_comm_free_all(void);

#endif
