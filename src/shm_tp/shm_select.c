/* Which direct algorithm, if any, a call takes on the node's segment, by
 * collective, size and rank count. */
#include "shm_tp/shm_layout.h"
#include "core/config.h"

/* Measured with hcomm_perf (README, "Shared memory"), 2 ranks on a 2-core
 * machine, 2 to 8 on a 16-core one: one-shot makes every rank read
 * size - 1 copies, so its limit shrinks with the rank count; below the CMA
 * limits, staging through the slots beats cross-memory reads, whose system
 * calls (size - 1 per rank) and page pinning cost microseconds. Above two
 * ranks a broadcast stays on the slots at every size: receivers copy the
 * root's slot from the shared cache, as fast as direct reads or up to 5x
 * faster (4 and 8 ranks, 32 KiB to 32 MiB). */
#define CMA_MIN_ALLREDUCE (128u << 10) /* per rank */
#define CMA_MIN_BLOCK_2 (32u << 10)    /* allgather block, broadcast, 2 ranks */
#define CMA_MIN_BLOCK (64u << 10)      /* allgather block, more ranks */
/* Reduce through the slots up to SLOTS_MAX_REDUCE (the buffer): one-shot
 * at the root up to AllReduce's one-shot limit, then two-shot (the ranks
 * reduce a block each, the root copies them); larger, the plans; at 2
 * ranks one-shot at every size. Gather, scatter and alltoall through the
 * slots (two copies of each byte, from cache), then direct copies (one
 * copy) where the kernel allows them, from HCOMM_SHM_DIRECT_MIN_SPREAD in
 * all where the copies spread over the ranks' memory (alltoall), from
 * HCOMM_SHM_SLOTS_MAX_MOVE where they all land on the root's; at 2 ranks
 * scatter and alltoall from HCOMM_SHM_DIRECT_MIN_2 a block, gather from
 * HCOMM_SHM_DIRECT_MIN_GATHER_2 in all. Without direct copies the slots take up
 * to HCOMM_SHM_SLOTS_MAX_MOVE, the plans past it. alltoallv always starts on
 * the segment, which declines blocks too large for it (shm_alltoallv.c). */
#define SLOTS_MAX_REDUCE (256u << 10)

/* A one-shot reduction: each rank that reduces reads bytes from every
 * peer's slot, up to HCOMM_FAST_PATH_SMALL_MSG in all. */
static int oneshot_fits(size_t bytes, size_t peers) {
    return bytes * peers <=
           (size_t)hcomm_cfg_int(HCOMM_CFG_FAST_PATH_SMALL_MSG);
}

/* Gather, scatter and alltoall of blocks of bytes: through the slots
 * below direct_from bytes in all, direct copies from it; without them the
 * slots up to HCOMM_SHM_SLOTS_MAX_MOVE, then the plans. */
static hcomm_shm_algo_t slots_then_direct(const hcomm_shm_t *shm, size_t bytes,
                                          size_t direct_from) {
    if (hcomm_shm_all_below(shm, bytes, direct_from)) return HCOMM_SHM_ONESHOT;
    if (shm->cma) return HCOMM_SHM_CMA;
    return hcomm_shm_all_below(shm, bytes, HCOMM_SHM_SLOTS_MAX_MOVE)
               ? HCOMM_SHM_ONESHOT
               : HCOMM_SHM_NONE;
}

hcomm_shm_algo_t hcomm_shm_select(const hcomm_shm_t *shm, hcomm_coll_t coll,
                                  size_t bytes) {
    size_t peers = (size_t)shm->size - 1;
    switch (coll) {
    case HCOMM_COLL_ALLREDUCE:
        if (oneshot_fits(bytes, peers)) return HCOMM_SHM_ONESHOT;
        return shm->cma && bytes >= CMA_MIN_ALLREDUCE * (size_t)shm->size
                   ? HCOMM_SHM_CMA
                   : HCOMM_SHM_TWOSHOT;
    case HCOMM_COLL_REDUCE_SCATTER: /* bytes: one block */
        return shm->cma && bytes >= CMA_MIN_ALLREDUCE ? HCOMM_SHM_CMA
                                                      : HCOMM_SHM_ONESHOT;
    case HCOMM_COLL_ALLGATHER:
        return shm->cma &&
                       bytes >= (peers == 1 ? CMA_MIN_BLOCK_2 : CMA_MIN_BLOCK)
                   ? HCOMM_SHM_CMA
                   : HCOMM_SHM_ONESHOT;
    case HCOMM_COLL_BCAST:
        return shm->cma && peers == 1 && bytes >= CMA_MIN_BLOCK_2
                   ? HCOMM_SHM_CMA
                   : HCOMM_SHM_ONESHOT;
    case HCOMM_COLL_BARRIER:
        return HCOMM_SHM_ONESHOT;
    case HCOMM_COLL_ALLGATHERV: /* bytes: all blocks */
        /* Direct reads at 2 to 8 ranks from allgather's block (64 KiB)
         * on average. 2 ranks here, 512 KiB-2 MiB in all: 1.01-1.09x MPI
         * where the slots took 0.54-0.80x with unchanged buffers, and
         * 1.11-1.25x against 0.96-1.19x with new data every call
         * (--rewrite); past the slots' 2 MiB 0.98-1.07x where the plans
         * took 0.92-0.96x (4-64 MiB). 8 ranks on the 16-core host, 512
         * KiB-8 MiB: 1.2-1.9x less time than the slots and the plans
         * (1.28-2.27x MPI against 0.97-1.78x); at 16 ranks, where every
         * rank reads 15 peers, no better than the noise. */
        if (shm->cma && peers < 8 && bytes >= CMA_MIN_BLOCK * (size_t)shm->size)
            return HCOMM_SHM_CMA;
        /* fall through */
    case HCOMM_COLL_REDUCE_SCATTERV:
        return bytes <= HCOMM_SHM_SLOTS_MAX_MOVE ? HCOMM_SHM_ONESHOT
                                                 : HCOMM_SHM_NONE;
    case HCOMM_COLL_ALLTOALLV:
        return HCOMM_SHM_ONESHOT;
    case HCOMM_COLL_REDUCE: /* bytes: the whole buffer */
        /* 2 ranks: the root reduces one slot while its peer fills the
         * other, at every size. Here, against MPI in the same runs:
         * 128 KiB 0.96-1.07x (two-shot 0.69-0.72x), 512 KiB-64 MiB
         * 1.49-1.77x (the plans 0.82-0.99x). */
        if (peers == 1) return HCOMM_SHM_ONESHOT;
        if (bytes > SLOTS_MAX_REDUCE) return HCOMM_SHM_NONE;
        /* as AllReduce's: the root alone does what every rank of a
         * one-shot AllReduce does */
        return oneshot_fits(bytes, peers) ? HCOMM_SHM_ONESHOT
                                          : HCOMM_SHM_TWOSHOT;
    case HCOMM_COLL_SCATTER: /* bytes: one block */
    case HCOMM_COLL_ALLTOALL:
        if (shm->cma && peers == 1 && bytes >= HCOMM_SHM_DIRECT_MIN_2)
            return HCOMM_SHM_CMA;
        return slots_then_direct(shm, bytes,
                                 coll == HCOMM_COLL_ALLTOALL
                                     ? HCOMM_SHM_DIRECT_MIN_SPREAD
                                     : HCOMM_SHM_SLOTS_MAX_MOVE);
    case HCOMM_COLL_GATHER: /* bytes: one block */
        return slots_then_direct(shm, bytes,
                                 peers == 1 ? HCOMM_SHM_DIRECT_MIN_GATHER_2
                                            : HCOMM_SHM_SLOTS_MAX_MOVE);
    default:
        return HCOMM_SHM_NONE;
    }
}
