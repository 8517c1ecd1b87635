/* Communicator handles, creation, splitting and the plan cache. */
#include "core/comm.h"
#include "compat_mpi/mpi_tp.h"
#include "core/config.h"
#include "core/context.h"
#include "core/gpu.h"
#include "cuda_ipc/ipc.h"
#include "core/log.h"
#include "core/stream_worker.h"
#include "shm_tp/shm.h"
#include "topo/topo.h"
#include "ucx_tp/ucx_tp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A handle is (generation << 16 | id) + 1: the communicator id indexes the
 * table, and the generation, bumped at every free, makes a stale handle
 * (freed, or from before a re-use of the id) fail the lookup instead of
 * reaching freed memory. */
static hcomm_comm_impl_t *table[HCOMM_MAX_COMM_IDS];
static uint32_t generation[HCOMM_MAX_COMM_IDS];

hcomm_status_t hcomm_comm_lookup(hcomm_comm_t handle, hcomm_comm_impl_t **out) {
    uintptr_t h = (uintptr_t)handle;
    if (h == 0)
        return hcomm_error(HCOMM_ERR_INVALID_COMM, "communicator is NULL");
    h -= 1;
    uint32_t id = (uint32_t)(h & 0xffff), gen = (uint32_t)(h >> 16);
    hcomm_comm_impl_t *c = table[id];
    if (!c || generation[id] != gen || (h >> 16) > UINT32_MAX)
        return hcomm_error(HCOMM_ERR_INVALID_COMM,
                           "communicator handle %p is freed or was never "
                           "created",
                           (void *)handle);
    *out = c;
    return HCOMM_SUCCESS;
}

/* All ranks agree on the lowest id free on every one of them. The
 * bitmaps travel in one allreduce, with one more byte that any rank
 * without UCX sets, so that all pick the same transport. */
static hcomm_status_t agree_on_id(MPI_Comm mc, uint16_t *id, int *use_ucx) {
    enum { MAP = HCOMM_MAX_COMM_IDS / 8 };
    uint8_t *mine = malloc(MAP + 1), *all = malloc(MAP + 1);
    hcomm_status_t st = HCOMM_ERR_NO_MEMORY;
    if (!mine || !all) goto out;
    for (;;) {
        pthread_mutex_lock(&hcomm_ctx.lock);
        memcpy(mine, hcomm_ctx.id_used, MAP);
        pthread_mutex_unlock(&hcomm_ctx.lock);
        mine[MAP] = !hcomm_ctx.ucx_ok;
        if (PMPI_Allreduce(mine, all, MAP + 1, MPI_BYTE, MPI_BOR, mc) !=
            MPI_SUCCESS) {
            st = hcomm_error(HCOMM_ERR_TRANSPORT, "MPI_Allreduce failed");
            goto out;
        }
        int pick = -1;
        for (int i = 0; i < HCOMM_MAX_COMM_IDS && pick < 0; i++)
            if (!(all[i / 8] & (1u << (i % 8)))) pick = i;
        /* Another thread may have taken the id meanwhile: all retry then. */
        int ok = 0, all_ok = 0;
        pthread_mutex_lock(&hcomm_ctx.lock);
        if (pick >= 0 && !(hcomm_ctx.id_used[pick / 8] & (1u << (pick % 8)))) {
            hcomm_ctx.id_used[pick / 8] |= (uint8_t)(1u << (pick % 8));
            ok = 1;
        }
        pthread_mutex_unlock(&hcomm_ctx.lock);
        if (pick < 0) {
            st = hcomm_error(HCOMM_ERR_NO_MEMORY,
                             "all %d communicator ids are in use",
                             HCOMM_MAX_COMM_IDS);
            goto out;
        }
        PMPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, mc);
        if (all_ok) {
            *id = (uint16_t)pick;
            *use_ucx = !all[MAP];
            st = HCOMM_SUCCESS;
            goto out;
        }
        if (ok) {
            pthread_mutex_lock(&hcomm_ctx.lock);
            hcomm_ctx.id_used[pick / 8] &= (uint8_t) ~(1u << (pick % 8));
            pthread_mutex_unlock(&hcomm_ctx.lock);
        }
    }
out:
    free(mine);
    free(all);
    return st;
}

static void release_id(uint16_t id) {
    pthread_mutex_lock(&hcomm_ctx.lock);
    hcomm_ctx.id_used[id / 8] &= (uint8_t) ~(1u << (id % 8));
    pthread_mutex_unlock(&hcomm_ctx.lock);
}

static hcomm_status_t make_transport(hcomm_comm_impl_t *c, int ucx_everywhere) {
    const char *want = hcomm_cfg_str(HCOMM_CFG_TRANSPORT);
    int use_ucx = strcmp(want, "mpi") != 0 && ucx_everywhere;
    if (strcmp(want, "ucx") == 0 && !ucx_everywhere)
        return hcomm_error(HCOMM_ERR_UNSUPPORTED,
#ifdef HAVE_UCX
                           "HCOMM_TRANSPORT=ucx, but UCX did not initialise "
                           "on every rank (set HCOMM_DEBUG=info for why)"
#else
                           "HCOMM_TRANSPORT=ucx, but HCOMM was built without "
                           "UCX"
#endif
        );
    if (use_ucx)
        return hcomm_ucx_tp_create(c->mpi_comm, c->id, c->topo, &c->tp);
    return hcomm_mpi_tp_create(c->mpi_comm, &c->tp);
}

hcomm_status_t hcomm_world_ranks(MPI_Comm comm, int size, int *world) {
    int *in = world + size;
    MPI_Group group = MPI_GROUP_NULL, wgroup = MPI_GROUP_NULL;
    hcomm_status_t st = HCOMM_SUCCESS;
    for (int i = 0; i < size; i++)
        in[i] = i;
    if (PMPI_Comm_group(comm, &group) != MPI_SUCCESS ||
        PMPI_Comm_group(MPI_COMM_WORLD, &wgroup) != MPI_SUCCESS ||
        PMPI_Group_translate_ranks(group, size, in, wgroup, world) !=
            MPI_SUCCESS)
        st = hcomm_error(HCOMM_ERR_TRANSPORT,
                         "translating a communicator's ranks to "
                         "MPI_COMM_WORLD's failed");
    if (group != MPI_GROUP_NULL) PMPI_Group_free(&group);
    if (wgroup != MPI_GROUP_NULL) PMPI_Group_free(&wgroup);
    return st;
}

/* c->world: NULL where the ranks are MPI_COMM_WORLD's in order (or MPI
 * cannot say: the messages then name this communicator's ranks only). */
static int *world_map(MPI_Comm comm, int size) {
    int wsize = 0, same = 1;
    int *world = malloc(2 * (size_t)size * sizeof(int));
    if (!world || PMPI_Comm_size(MPI_COMM_WORLD, &wsize) != MPI_SUCCESS ||
        hcomm_world_ranks(comm, size, world) != HCOMM_SUCCESS) {
        free(world);
        return NULL;
    }
    for (int i = 0; i < size; i++)
        same &= world[i] == i;
    if (same && wsize == size) {
        free(world);
        return NULL;
    }
    return world;
}

static hcomm_status_t create_from(MPI_Comm parent, hcomm_comm_t *out) {
    hcomm_comm_impl_t *c = calloc(1, sizeof(*c));
    hcomm_status_t st = HCOMM_ERR_NO_MEMORY;
    int have_id = 0, ucx_everywhere = 0;
    if (!c) goto fail;
    c->mpi_comm = MPI_COMM_NULL;
    if (PMPI_Comm_dup(parent, &c->mpi_comm) != MPI_SUCCESS) {
        st = hcomm_error(HCOMM_ERR_TRANSPORT, "MPI_Comm_dup failed");
        goto fail;
    }
    /* The library returns errors; it never lets MPI abort the job. */
    PMPI_Comm_set_errhandler(c->mpi_comm, MPI_ERRORS_RETURN);
    PMPI_Comm_rank(c->mpi_comm, &c->rank);
    PMPI_Comm_size(c->mpi_comm, &c->size);
    c->world = world_map(c->mpi_comm, c->size);
    st = agree_on_id(c->mpi_comm, &c->id, &ucx_everywhere);
    if (st != HCOMM_SUCCESS) goto fail;
    have_id = 1;
    st = hcomm_topo_create(c->mpi_comm, &c->topo);
    if (st != HCOMM_SUCCESS) goto fail;
    st = make_transport(c, ucx_everywhere);
    if (st != HCOMM_SUCCESS) goto fail;
    if (c->topo->map.nnodes == 1 &&
        (st = hcomm_shm_create(c->mpi_comm, &c->shm)) != HCOMM_SUCCESS)
        goto fail;
    c->seq = 1;
    hcomm_flight_init(&c->flight);
    c->handle =
        (hcomm_comm_t)(((uintptr_t)generation[c->id] << 16 | c->id) + 1);
    table[c->id] = c;
    hcomm_debug("communicator %u: rank %d of %d over %s", (unsigned)c->id,
                c->rank, c->size, c->tp->ops->name);
    *out = c->handle;
    return HCOMM_SUCCESS;
fail:
    if (c) {
        if (c->tp) c->tp->ops->destroy(c->tp);
        hcomm_topo_free(c->topo);
        if (have_id) release_id(c->id);
        if (c->mpi_comm != MPI_COMM_NULL) PMPI_Comm_free(&c->mpi_comm);
        free(c->world);
        free(c);
    }
    return st;
}

static hcomm_status_t check_ready(void *out) {
    if (!hcomm_is_initialized())
        return hcomm_error(HCOMM_ERR_NOT_INITIALIZED, "call hcomm_init first");
    if (!out)
        return hcomm_error(HCOMM_ERR_INVALID_ARG,
                           "the output handle pointer is NULL");
    return HCOMM_SUCCESS;
}

hcomm_status_t hcomm_comm_create(MPI_Comm mpi_comm, hcomm_comm_t *comm) {
    hcomm_status_t st = check_ready(comm);
    if (st != HCOMM_SUCCESS) return st;
    *comm = HCOMM_COMM_NULL;
    int inter = 0;
    if (mpi_comm == MPI_COMM_NULL)
        return hcomm_error(HCOMM_ERR_INVALID_COMM, "MPI_COMM_NULL given");
    PMPI_Comm_test_inter(mpi_comm, &inter);
    if (inter)
        return hcomm_error(HCOMM_ERR_UNSUPPORTED,
                           "intercommunicators are not supported");
    hcomm_stream_drain(NULL);
    return create_from(mpi_comm, comm);
}

hcomm_status_t hcomm_comm_split(hcomm_comm_t comm, int color, int key,
                                hcomm_comm_t *newcomm) {
    hcomm_comm_impl_t *c;
    hcomm_status_t st = check_ready(newcomm);
    if (st != HCOMM_SUCCESS) return st;
    *newcomm = HCOMM_COMM_NULL;
    if ((st = hcomm_comm_lookup(comm, &c)) != HCOMM_SUCCESS) return st;
    hcomm_stream_drain(c);
    MPI_Comm part;
    if (PMPI_Comm_split(c->mpi_comm, color < 0 ? MPI_UNDEFINED : color, key,
                        &part) != MPI_SUCCESS)
        return hcomm_error(HCOMM_ERR_TRANSPORT, "MPI_Comm_split failed");
    if (part == MPI_COMM_NULL) return HCOMM_SUCCESS;
    st = create_from(part, newcomm);
    PMPI_Comm_free(&part);
    return st;
}

hcomm_status_t hcomm_comm_dup(hcomm_comm_t comm, hcomm_comm_t *newcomm) {
    hcomm_comm_impl_t *c;
    hcomm_status_t st = check_ready(newcomm);
    if (st != HCOMM_SUCCESS) return st;
    *newcomm = HCOMM_COMM_NULL;
    if ((st = hcomm_comm_lookup(comm, &c)) != HCOMM_SUCCESS) return st;
    hcomm_stream_drain(c);
    return create_from(c->mpi_comm, newcomm);
}

static void destroy(hcomm_comm_impl_t *c) {
    /* Sub-communicators, unless hcomm_comm_free_all took them first. */
    hcomm_comm_impl_t *sub;
    if (c->node_comm && hcomm_comm_lookup(c->node_comm, &sub) == HCOMM_SUCCESS)
        destroy(sub);
    if (c->rail_comm && hcomm_comm_lookup(c->rail_comm, &sub) == HCOMM_SUCCESS)
        destroy(sub);
    for (int i = 0; i < HCOMM_PLAN_CACHE_SIZE; i++)
        if (c->plans[i].valid) hcomm_plan_release(&c->plans[i].plan);
#ifdef HAVE_CUDA
    hcomm_ipc_free(c); /* before the segment: its free waits for peers */
    hcomm_ipc_mem_free_all(c); /* after: no kernel reads them any more */
#endif
    if (c->tp) c->tp->ops->destroy(c->tp);
    hcomm_shm_destroy(c->shm);
    for (int i = 0; i < c->nplain_mem; i++)
        free(c->plain_mem[i]);
    free(c->plain_mem);
    hcomm_topo_free(c->topo);
    hcomm_flight_free(&c->flight);
#ifdef HAVE_CUDA
    hcomm_gpu_ctx_destroy(c->gpu);
#endif
    generation[c->id]++;
    table[c->id] = NULL;
    release_id(c->id);
    PMPI_Comm_free(&c->mpi_comm);
    free(c->world);
    free(c);
}

hcomm_status_t hcomm_comm_free(hcomm_comm_t *comm) {
    hcomm_comm_impl_t *c;
    hcomm_status_t st = check_ready(comm);
    if (st != HCOMM_SUCCESS) return st;
    if ((st = hcomm_comm_lookup(*comm, &c)) != HCOMM_SUCCESS) return st;
    hcomm_stream_drain(c);
    if (c->inflight)
        return hcomm_error(HCOMM_ERR_INVALID_ARG,
                           "communicator %u has %d requests in flight: wait "
                           "for them before freeing it",
                           (unsigned)c->id, c->inflight);
    destroy(c);
    *comm = HCOMM_COMM_NULL;
    return HCOMM_SUCCESS;
}

void hcomm_comm_free_all(void) {
    for (int id = 0; id < HCOMM_MAX_COMM_IDS; id++)
        if (table[id]) destroy(table[id]);
}

hcomm_status_t hcomm_comm_rank(hcomm_comm_t comm, int *rank) {
    hcomm_comm_impl_t *c;
    hcomm_status_t st = check_ready(rank);
    if (st == HCOMM_SUCCESS) st = hcomm_comm_lookup(comm, &c);
    if (st == HCOMM_SUCCESS) *rank = c->rank;
    return st;
}

hcomm_status_t hcomm_comm_size(hcomm_comm_t comm, int *size) {
    hcomm_comm_impl_t *c;
    hcomm_status_t st = check_ready(size);
    if (st == HCOMM_SUCCESS) st = hcomm_comm_lookup(comm, &c);
    if (st == HCOMM_SUCCESS) *size = c->size;
    return st;
}

static int same_args(const hcomm_plan_args_t *a, const hcomm_plan_args_t *b) {
    return a->coll == b->coll && a->root == b->root && a->count == b->count &&
           a->esize == b->esize && a->inplace == b->inplace &&
           a->scale == b->scale && a->chunk_bytes == b->chunk_bytes &&
           a->node_of == b->node_of;
}

hcomm_status_t hcomm_comm_plan_get(hcomm_comm_impl_t *c,
                                   const hcomm_algo_t *algo,
                                   const hcomm_plan_args_t *args,
                                   const hcomm_plan_t **plan) {
    hcomm_plan_slot_t *victim = NULL;
    c->uses++;
    /* Variable-count plans depend on the caller's arrays: never cached. */
    for (int i = 0; !args->v && i < HCOMM_PLAN_CACHE_SIZE; i++) {
        hcomm_plan_slot_t *s = &c->plans[i];
        if (s->valid && s->algo == algo && same_args(&s->args, args)) {
            atomic_fetch_add(&s->refs, 1);
            s->last_use = c->uses;
            *plan = &s->plan;
            return HCOMM_SUCCESS;
        }
        if (atomic_load(&s->refs) == 0 &&
            (!victim || !s->valid ||
             (victim->valid && s->last_use < victim->last_use)))
            victim = s;
    }
    /* Every slot runs a plan: build one that the request owns alone. */
    hcomm_plan_t tmp;
    hcomm_plan_init(&tmp);
    hcomm_status_t st = algo->build(args, &tmp);
    if (st != HCOMM_SUCCESS) {
        hcomm_plan_release(&tmp);
        return st == HCOMM_ERR_NO_MEMORY
                   ? hcomm_error(st, "no memory to build a %s plan", algo->name)
                   : hcomm_error(st, "algorithm %s cannot run %s here",
                                 algo->name, hcomm_coll_name(args->coll));
    }
    if (!victim) {
        hcomm_plan_t *own = malloc(sizeof(*own));
        if (!own) {
            hcomm_plan_release(&tmp);
            return hcomm_error(HCOMM_ERR_NO_MEMORY, "no memory for a plan");
        }
        *own = tmp;
        *plan = own;
        return HCOMM_SUCCESS;
    }
    if (victim->valid) hcomm_plan_release(&victim->plan);
    victim->valid = 1;
    victim->algo = algo;
    victim->args = *args;
    victim->plan = tmp;
    atomic_store(&victim->refs, 1);
    victim->last_use = c->uses;
    *plan = &victim->plan;
    return HCOMM_SUCCESS;
}

void hcomm_comm_plan_put(hcomm_comm_impl_t *c, const hcomm_plan_t *plan) {
    for (int i = 0; i < HCOMM_PLAN_CACHE_SIZE; i++) {
        if (c->plans[i].valid && &c->plans[i].plan == plan) {
            atomic_fetch_sub(&c->plans[i].refs, 1);
            return;
        }
    }
    hcomm_plan_t *own = (hcomm_plan_t *)(uintptr_t)plan;
    hcomm_plan_release(own);
    free(own);
}

hcomm_status_t hcomm_comm_gpu(hcomm_comm_impl_t *c, int device,
                              struct hcomm_gpu_ctx **ctx) {
#ifdef HAVE_CUDA
    if (!c->gpu) {
        hcomm_status_t st = hcomm_gpu_ctx_create(device, &c->gpu);
        if (st != HCOMM_SUCCESS) return st;
    }
    if (hcomm_gpu_ctx_device(c->gpu) != device)
        return hcomm_error(HCOMM_ERR_INVALID_ARG,
                           "communicator %u runs on GPU %d; this call's "
                           "buffers are on GPU %d (use one communicator per "
                           "GPU)",
                           (unsigned)c->id, hcomm_gpu_ctx_device(c->gpu),
                           device);
    *ctx = c->gpu;
    return HCOMM_SUCCESS;
#else
    (void)c, (void)device, (void)ctx;
    return hcomm_error(HCOMM_ERR_UNSUPPORTED, "HCOMM was built without CUDA");
#endif
}

void hcomm_comm_foreach(void (*fn)(hcomm_comm_impl_t *c, void *arg),
                        void *arg) {
    for (int id = 0; id < HCOMM_MAX_COMM_IDS; id++)
        if (table[id]) fn(table[id], arg);
}

double hcomm_comm_timeout(const hcomm_comm_impl_t *c) {
    return c->timeout > 0 ? c->timeout : hcomm_cfg_double(HCOMM_CFG_TIMEOUT);
}

hcomm_status_t hcomm_comm_set_timeout(hcomm_comm_t comm, double seconds) {
    hcomm_comm_impl_t *c;
    hcomm_status_t st = check_ready(&seconds);
    if (st == HCOMM_SUCCESS) st = hcomm_comm_lookup(comm, &c);
    if (st != HCOMM_SUCCESS) return st;
    if (!(seconds >= 0) || seconds > 1e9)
        return hcomm_error(HCOMM_ERR_INVALID_ARG,
                           "hcomm_comm_set_timeout: %g seconds (0 or more)",
                           seconds);
    c->timeout = seconds;
    return HCOMM_SUCCESS;
}

hcomm_status_t hcomm_comm_abort(hcomm_comm_t comm) {
    hcomm_comm_impl_t *c;
    hcomm_status_t st = check_ready(&comm);
    if (st == HCOMM_SUCCESS) st = hcomm_comm_lookup(comm, &c);
    if (st == HCOMM_SUCCESS) atomic_store(&c->aborted, 1);
#ifdef HAVE_CUDA
    if (st == HCOMM_SUCCESS) hcomm_ipc_abort(c);
#endif
    return st;
}
