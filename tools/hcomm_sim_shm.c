/* The node's shared-memory algorithms (src/shm_tp) in the simulator. They
 * are not plans: every rank of one node runs the same copies and
 * reductions on the segment, in rounds of a slot, and waits for its peers
 * through flags, so a call's time is one rank's work, written here from
 * the code (shm_coll.c), with the CPU figures of the plans' model and the
 * segment's own ("shm" in the topology file):
 *
 *   one-shot: per round of b bytes, its input into its slot (b copied),
 *     every peer's arrival seen (n - 1 flags), and every slot reduced,
 *     the peers' read from their cores (n - 1 reductions of b);
 *   two-shot: per round, its input into its slot, the arrivals, its
 *     block of b / n reduced from every slot, the peers' results seen
 *     (n - 1 flags more), and every block copied, the peers' from their
 *     cores;
 *   direct reads (CMA): its block of B / n, read from every peer's send
 *     buffer by process_vm_readv in pieces of the bounce buffer (a
 *     system call each, then bytes at the kernel's copy rate) and
 *     reduced, and then every peer's block read into its receive buffer
 *     the same way (a call a peer); three rounds of flags.
 *
 * A broadcast through the slots: per round, the root copies its piece
 * into its slot and each receiver, once it sees the root's flag, copies
 * it out, the root's lines from its core; the root, which waits for no
 * one, runs up to the slots' two rounds ahead, so calls back to back take
 * the slower side's time a round. At 2 ranks by direct copies: the root
 * writes half into its receiver (process_vm_writev) while the receiver
 * reads the other half.
 *
 * A call starts with a fixed cost (arguments, selection, the descriptor,
 * the last round's done line). "shm" is the algorithm selection takes
 * (hcomm_shm_select, the library's own function); the others force one. */
#include "core/config.h"
#include "hcomm_sim_int.h"
#include "shm_tp/shm.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* The table's rows, and what each forces: HCOMM_SHM_NONE, what selection
 * takes ("shm"). */
const hcomm_algo_t hcomm_sim_shm_algos[] = {
    {"shm", HCOMM_COLL_ALLREDUCE, NULL},
    {"shm_oneshot", HCOMM_COLL_ALLREDUCE, NULL},
    {"shm_twoshot", HCOMM_COLL_ALLREDUCE, NULL},
    {"shm_cma", HCOMM_COLL_ALLREDUCE, NULL},
    {"shm", HCOMM_COLL_BCAST, NULL},
};
const int hcomm_sim_nshm_algos =
    sizeof(hcomm_sim_shm_algos) / sizeof(hcomm_sim_shm_algos[0]);
static const hcomm_shm_algo_t forced[] = {HCOMM_SHM_NONE, HCOMM_SHM_ONESHOT,
                                          HCOMM_SHM_TWOSHOT, HCOMM_SHM_CMA,
                                          HCOMM_SHM_NONE};
_Static_assert(sizeof(forced) / sizeof(forced[0]) ==
                   sizeof(hcomm_sim_shm_algos) / sizeof(hcomm_sim_shm_algos[0]),
               "a forced algorithm for every row");

int hcomm_sim_is_shm(const hcomm_algo_t *a) {
    return a >= hcomm_sim_shm_algos &&
           a < hcomm_sim_shm_algos + hcomm_sim_nshm_algos;
}

static hcomm_shm_algo_t selected(const hcomm_sim_model_t *m, hcomm_coll_t coll,
                                 int n, size_t bytes, size_t slot) {
    hcomm_shm_t shm;
    memset(&shm, 0, sizeof(shm));
    shm.size = n;
    shm.cma = m->shm_cma;
    shm.slot_bytes = slot;
    return hcomm_shm_select(&shm, coll, bytes);
}

/* One rank's time for a call of B bytes in n ranks, past the call's fixed
 * cost (the header above says what each algorithm does). */
static double allreduce_time(const hcomm_sim_model_t *m, hcomm_shm_algo_t a,
                             int n, double B, double slot, double copy,
                             double reduce, double peer, double *moved) {
    double p = n - 1, flags = p * m->shm_flag;
    if (a == HCOMM_SHM_CMA) {
        double blk = B / n,
               pieces = fmax(1, ceil(blk / HCOMM_SHM_BOUNCE_BYTES));
        double read = blk / m->shm_cma_bw;
        *moved = 2 * p * blk;
        return 3 * flags +
               p * (pieces * m->shm_cma_call + read + blk / reduce) +
               p * (m->shm_cma_call + read);
    }
    double rounds = fmax(1, ceil(B / slot)), b = B / rounds;
    double work = b / copy;
    if (a == HCOMM_SHM_ONESHOT)
        work += flags + p * b / (reduce * peer);
    else
        work += 2 * flags + p * (b / n) / (reduce * peer) +
                (b / n) * (p / (copy * peer) + 1 / copy);
    *moved = a == HCOMM_SHM_ONESHOT ? p * B : 2 * p * B / n;
    return rounds * work;
}

static double bcast_time(const hcomm_sim_model_t *m, hcomm_shm_algo_t a,
                         double B, double slot, double copy, double peer,
                         double *moved) {
    *moved = B;
    if (a == HCOMM_SHM_CMA)
        return m->shm_flag + m->shm_cma_call + B / 2 / m->shm_cma_bw;
    double rounds = fmax(1, ceil(B / slot)), b = B / rounds;
    return rounds * fmax(b / copy, m->shm_flag + b / (copy * peer));
}

hcomm_status_t hcomm_sim_shm_run(const hcomm_sim_model_t *m,
                                 const hcomm_sim_shape_t *sh,
                                 const hcomm_sim_call_t *c,
                                 hcomm_sim_result_t *out, char *err,
                                 size_t errlen) {
    memset(out, 0, sizeof(*out));
    out->symmetry = "formula";
    if (sh->nnodes != 1 || sh->size < 2) {
        snprintf(err, errlen, "%s: one node of 2 ranks or more", c->algo->name);
        return HCOMM_ERR_UNSUPPORTED;
    }
    int n = sh->size;
    hcomm_coll_t coll = c->algo->coll;
    double B = (double)(c->count * c->esize);
    /* selection's limits and the slot, as the library reads them */
    if (hcomm_config_load() != HCOMM_SUCCESS) {
        snprintf(err, errlen, "%s", hcomm_last_error());
        return HCOMM_ERR_INVALID_ARG;
    }
    size_t slot = m->shm_slot_bytes
                      ? m->shm_slot_bytes
                      : (size_t)hcomm_cfg_int(HCOMM_CFG_SHM_SLOT_SIZE);
    hcomm_shm_algo_t a = forced[c->algo - hcomm_sim_shm_algos];
    if (a == HCOMM_SHM_NONE) a = selected(m, coll, n, (size_t)B, slot);
    if (a == HCOMM_SHM_NONE || (a == HCOMM_SHM_CMA && !m->shm_cma)) {
        snprintf(err, errlen, "%s: not on the segment at this size",
                 c->algo->name);
        return HCOMM_ERR_UNSUPPORTED;
    }
    /* A rank's send and receive buffers in its cache: its own copies and
     * reductions at the cached rate; a peer's lines, written in the call
     * on its core, at peer_speedup times that. */
    double speed = m->cache_bytes && 2 * B <= (double)m->cache_bytes &&
                           m->cached_speedup > 0
                       ? m->cached_speedup
                       : 1;
    double copy = m->copy_bw * speed, reduce = m->reduce_bw * speed;
    double peer = m->shm_peer_speedup > 0 ? m->shm_peer_speedup : 1;
    double moved;
    out->time = m->shm_call +
                (coll == HCOMM_COLL_BCAST
                     ? bcast_time(m, a, B, (double)slot, copy, peer, &moved)
                     : allreduce_time(m, a, n, B, (double)slot, copy, reduce,
                                      peer, &moved));
    out->bytes[SIM_NODE] = moved * (coll == HCOMM_COLL_BCAST ? n - 1 : n);
    out->simulated_ranks = 1;
    out->cp_cpu = out->time;
    return HCOMM_SUCCESS;
}
