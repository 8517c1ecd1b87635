/* Which direct algorithm, if any, a call takes on the node's segment, by
 * collective, size and rank count, and how a scatter's or broadcast's
 * direct copies split between the root and its receivers. */
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
 * peer's slot, up to HCOMM_FAST_PATH_SMALL_MSG in all. At 2 ranks
 * two-shot reads as many of the peer's bytes as one-shot (half to
 * reduce, half to copy back) and adds a round of flags: one-shot takes
 * every call below a slot there, unless the limit is 0. Here, AllReduce,
 * 4 alternated runs, medians, us, two-shot against one-shot (MPI in the
 * same runs): 32 KiB 8.99 against 6.80 (13.0), 64 KiB 12.68 against 9.87
 * (19.6), 128 KiB 24.24 against 21.23 (30.7); with new data every call
 * (--rewrite) 8.67 against 7.03, 12.22 against 11.19, 24.87 against
 * 21.40. (Reduce at 2 ranks is one-shot at every size.) */
static int oneshot_fits(const hcomm_shm_t *shm, size_t bytes, size_t peers) {
    size_t limit = (size_t)hcomm_cfg_int(HCOMM_CFG_FAST_PATH_SMALL_MSG);
    if (peers == 1 && limit > 0 && bytes < shm->slot_bytes) return 1;
    return bytes * peers <= limit;
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
        if (oneshot_fits(shm, bytes, peers)) return HCOMM_SHM_ONESHOT;
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
         * (1.28-2.27x MPI against 0.97-1.78x); at 16 ranks up to 2 MiB,
         * where every rank reads 15 peers, no better than the slots. Above
         * 8 ranks they take what the slots leave to the plans. Stop 60, 12
         * and 16 ranks on two 16-core hosts, 5 sets of 3 rotated runs
         * (unchanged buffers, new data): 4-32 MiB took 0.75-1.06 of the
         * plans' time summed over the sizes, 0.69-1.02 at 32 MiB; the 2 MiB
         * cells, the same code both ways, came to 0.85-0.94 in 4 of those
         * sets, so below 32 MiB the two are level within the noise. */
        if (shm->cma && bytes >= CMA_MIN_BLOCK * (size_t)shm->size &&
            (peers < 8 || bytes > HCOMM_SHM_SLOTS_MAX_MOVE))
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
        return oneshot_fits(shm, bytes, peers) ? HCOMM_SHM_ONESHOT
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

/* A 2-rank scatter's direct copies: the root writes 3/4 of its receiver's
 * block into it while the receiver reads the rest, 1/2 from
 * SCATTER_HALVES_2, and from SCATTER_READ_2 the
 * receiver reads it all while the root copies its own block. The root
 * reads its own cache; a receiver reading lines the root has just
 * written takes them one by one from the root's core. Stop 56, 128 KiB
 * to 1 MiB in all (blocks of 64-512 KiB), medians of 3 runs, us, new
 * data every call / unchanged buffers:
 *   16-core host: 3/4 8.7-49.3 / 5.5-36.9, 1/2 10.7-59.5 / 4.8-29.9,
 *                 all read 20.0-105.1 / 4.5-25.4 (MPI 14-76 / 14-75);
 *   here (2 cores): 3/4 8.4-66.2 / 5.6-42.2, 1/2 10.1-65.9 / 5.1-31.6,
 *                   all read 15.5-101.2 / 4.6-24.5 (MPI 20-119 / 7-39).
 * 3/4 of a 512 KiB block took longer than MPI here (42.2 against 38.9).
 * From 1 MiB blocks any share of the root's took longer than none on
 * both machines (up to 1.5x with new data, 3.2x with unchanged buffers):
 * it copies its own block after its share. */
#define SCATTER_HALVES_2 (512u << 10)
#define SCATTER_READ_2 (1u << 20)
/* Above 2 ranks a scatter's direct copies have the root write a quarter
 * of every receiver's block while the receivers read the rest, below
 * this many bytes in all; from it the receivers read it all while the
 * root copies its own block. Readers of lines the root has just written
 * take them from its core, all at once. On the 16-core host (stop 58,
 * 4-16 ranks, medians of 4 runs, new data every call and the output read
 * after it, --rewrite --consume), 2 MiB in all took 140-259 us where the
 * receivers read it all took 167-363 (MPI 236-272), 4 MiB 255-413
 * against 302-412; with unchanged buffers 61-188 against 68-252 at 2-4
 * MiB. A half or 3/4 took longer from 4 MiB; at 8 MiB a quarter took
 * 1.0-1.8x the time of none (2-3 runs): the root's share grows with the
 * size while each reader's shrinks with the rank count. */
#define SCATTER_SHARE_MAX (8u << 20)

size_t hcomm_shm_root_eighths(const hcomm_shm_t *shm, hcomm_coll_t coll,
                              size_t block) {
    if (coll == HCOMM_COLL_BCAST) return 4; /* 2 ranks only */
    if (coll != HCOMM_COLL_SCATTER) return 0;
    if (shm->size > 2)
        return hcomm_shm_all_below(shm, block, SCATTER_SHARE_MAX) ? 2 : 0;
    return block >= SCATTER_READ_2 ? 0 : block >= SCATTER_HALVES_2 ? 4 : 6;
}
