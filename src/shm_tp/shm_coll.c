/* Direct algorithms on the node's segment: each call is a small state
 * machine that advances while its peers' flags allow and otherwise returns,
 * so that blocking and non-blocking calls share it. */
#include "shm_tp/shm_layout.h"
#include "core/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

enum {
    PHASE_TURN = 0, /* wait for the previous call on the communicator */
    PHASE_FREE,     /* wait until the parity's slots are free */
    PHASE_ARRIVE,   /* wait for the peers' data of this round */
    PHASE_REDUCED,  /* wait for the peers' reduced blocks */
    PHASE_DONE      /* CMA: wait until no peer reads this rank's buffers */
};

static int reached(hcomm_shm_op_t *op, int rank, hcomm_shm_flag_t f,
                   uint64_t value) {
    hcomm_shm_t *shm = op->shm;
    uint64_t *known = &shm->known[(size_t)f * (size_t)shm->size + (size_t)rank];
    if (*known >= value) return 1;
    uint64_t v = atomic_load_explicit(hcomm_shm_flag(shm, rank, f, value),
                                      memory_order_acquire);
    if (v > *known) *known = v;
    /* A rank publishes round v only after it finished round v - 1. */
    uint64_t *done =
        &shm->known[(size_t)SHM_DONE * (size_t)shm->size + (size_t)rank];
    if (f == SHM_ARRIVE && v > *done + 1) *done = v - 1;
    if (v >= value) return 1;
    atomic_store_explicit(&op->waiting_for, rank, memory_order_relaxed);
    return 0;
}

static int all_reached(hcomm_shm_op_t *op, hcomm_shm_flag_t f, uint64_t value) {
    const hcomm_shm_t *shm = op->shm;
    const uint64_t *known = &shm->known[(size_t)f * (size_t)shm->size];
    /* The counters still to read, each a miss in another core's cache:
     * asked for together, they cost about one miss, not one per peer
     * (15 in a row at 16 ranks). The line after the counter's, where a
     * call's first round reads it, is asked for with it, not after it
     * (alltoallv's table at 2 ranks, 4-byte blocks: 0.21 us to 0.20, MPI
     * 0.19-0.20; with the cores far apart 0.48-0.54 to 0.42-0.48). */
    int next = f == SHM_ARRIVE && op->reads_next_line && value == op->first;
    for (int p = 0; p < shm->size; p++)
        if (p != shm->rank && known[p] < value) {
            const char *line = (const char *)hcomm_shm_flag(shm, p, f, value);
            __builtin_prefetch(line);
            if (next) __builtin_prefetch(line + HCOMM_SHM_LINE);
        }
    for (int p = 0; p < shm->size; p++)
        if (p != shm->rank && !reached(op, p, f, value)) return 0;
    return 1;
}

/* Whether every peer's counter f is known to be at least seq - lag,
 * without reading it. */
static int all_known(const hcomm_shm_op_t *op, hcomm_shm_flag_t f, uint64_t seq,
                     uint64_t lag) {
    const hcomm_shm_t *shm = op->shm;
    const uint64_t *known = &shm->known[(size_t)f * (size_t)shm->size];
    for (int p = 0; p < shm->size; p++)
        if (p != shm->rank && known[p] + lag < seq) return 0;
    return 1;
}

static void publish(hcomm_shm_op_t *op, hcomm_shm_flag_t f) {
    atomic_store_explicit(hcomm_shm_flag(op->shm, op->shm->rank, f, op->seq),
                          op->seq, memory_order_release);
}

/* Sets or clears round seq's bit in this rank's mask of rounds compared
 * (2 ranks, shm_layout.h); a mask that does not change is not stored:
 * the line stays put. */
static void set_compared(hcomm_shm_t *shm, uint64_t seq, int compared) {
    uint64_t bit = 1ull << (seq % 64);
    uint64_t mask = compared ? shm->compared | bit : shm->compared & ~bit;
    if (mask == shm->compared) return;
    shm->compared = mask;
    atomic_store_explicit(&hcomm_shm_done_line(shm, shm->rank)->compared, mask,
                          memory_order_release);
}

/* The round's reads are over. The bit of round seq + AHEAD, which was
 * round seq + AHEAD - 64's, is cleared for it. */
static void publish_done(hcomm_shm_op_t *op) {
    if (op->shm->size == 2)
        set_compared(op->shm, op->seq + HCOMM_SHM_COMPARED_AHEAD, 0);
    publish(op, SHM_DONE);
}

/* The peer's bit for round seq, valid while the peer has not finished the
 * round whose bit it later reuses. */
static int compared_bit_set(const hcomm_shm_t *shm, uint64_t seq) {
    return shm->peer_done + HCOMM_SHM_COMPARED_AHEAD >= seq &&
           (shm->peer_compared & (1ull << (seq % 64)));
}

/* Whether a 2-rank peer compared the descriptors of an unchecked round:
 * 1 yes, 0 not yet, -1 compare them here (it finished the round without,
 * or stopped at a mismatch). The peer's line is read again only for a
 * round it was not known to have compared: it rewrites the line every
 * round, and reading it for every one would cost a miss each. */
static int peer_compared(hcomm_shm_op_t *op, uint64_t seq) {
    hcomm_shm_t *shm = op->shm;
    int peer = 1 - shm->rank;
    if (compared_bit_set(shm, seq)) return 1;
    if (shm->peer_done >= seq) return -1;
    const hcomm_shm_done_line_t *line = hcomm_shm_done_line(shm, peer);
    uint64_t done = atomic_load_explicit(&line->done, memory_order_acquire);
    int failed = atomic_load_explicit(&line->failed, memory_order_acquire) != 0;
    shm->peer_done = done;
    shm->peer_compared =
        atomic_load_explicit(&line->compared, memory_order_acquire);
    uint64_t *known = &shm->known[(size_t)SHM_DONE * 2 + (size_t)peer];
    if (done > *known) *known = done;
    if (compared_bit_set(shm, seq)) return 1;
    if (done >= seq || failed) return -1;
    atomic_store_explicit(&op->waiting_for, peer, memory_order_relaxed);
    return 0;
}

/* Checks the unchecked rounds, oldest first, as far as the peers allow:
 * HCOMM_ERR_IN_PROGRESS while some are left, HCOMM_ERR_MISMATCH at a
 * difference. */
static hcomm_status_t check_unchecked(hcomm_shm_op_t *op) {
    hcomm_shm_t *shm = op->shm;
    /* above 2 ranks the peers' lines of every unchecked round at once,
     * not one miss after the other */
    for (int u = 0; shm->size > 2 && u < shm->nunchecked; u++)
        for (int p = 0; p < shm->size; p++)
            if (p != shm->rank)
                __builtin_prefetch(
                    hcomm_shm_entry(shm, p, shm->unchecked[u].seq));
    while (shm->nunchecked) {
        const hcomm_shm_unchecked_t *u = &shm->unchecked[0];
        int v = shm->size == 2 ? peer_compared(op, u->seq) : -1;
        if (v == 0) return HCOMM_ERR_IN_PROGRESS;
        if (v < 0) {
            if (!all_reached(op, SHM_ARRIVE, u->seq))
                return HCOMM_ERR_IN_PROGRESS;
            if (hcomm_shm_desc_differs(shm, u->seq, u->desc))
                return hcomm_shm_desc_mismatch(shm, u->seq, 1);
            if (shm->size == 2) shm->compared_later++;
        }
        shm->nunchecked--;
        memmove(shm->unchecked, shm->unchecked + 1,
                (size_t)shm->nunchecked * sizeof(*u));
    }
    return HCOMM_SUCCESS;
}

/* Whether a call is one whose ranks may lag (below): one round through
 * the ring entries or slots of a rooted collective. */
static int rooted_one_round(const hcomm_shm_op_t *op) {
    return op->algo == HCOMM_SHM_ONESHOT && op->rounds == 1 &&
           (op->coll == HCOMM_COLL_BCAST || op->coll == HCOMM_COLL_SCATTER ||
            op->coll == HCOMM_COLL_GATHER || op->coll == HCOMM_COLL_REDUCE);
}

/* Whether a call is one whose rank waits for no peer's descriptor but the
 * root's, or none (shm.h): on host memory, any rank of such a call but a
 * gather's or reduce's root, which reads every rank's data anyway, and a
 * 2-rank receiver, whose root is every peer it has. */
static int lags(const hcomm_shm_op_t *op) {
    if (!rooted_one_round(op)) return 0;
    if (op->shm->rank == op->root)
        return op->coll == HCOMM_COLL_BCAST || op->coll == HCOMM_COLL_SCATTER;
    return op->coll == HCOMM_COLL_GATHER || op->coll == HCOMM_COLL_REDUCE ||
           op->shm->size > 2;
}

/* Copies bytes between local memory and a peer's address: reads them
 * into local, or, with to_peer, writes them from local. */
static hcomm_status_t cma_copy(const hcomm_shm_op_t *op, int peer, void *local,
                               uint64_t remote, size_t bytes, int to_peer) {
    pid_t pid = op->shm->pids[peer];
    char *l = local;
    while (bytes > 0) {
        struct iovec lv = {l, bytes};
        struct iovec rv = {(void *)(uintptr_t)remote, bytes};
        ssize_t got = to_peer ? process_vm_writev(pid, &lv, 1, &rv, 1, 0)
                              : process_vm_readv(pid, &lv, 1, &rv, 1, 0);
        if (got <= 0)
            return hcomm_error(HCOMM_ERR_TRANSPORT,
                               "shm: %s %zu bytes %s rank %d (pid %d) "
                               "failed: %s",
                               to_peer ? "writing" : "reading", bytes,
                               to_peer ? "to" : "from", peer, (int)pid,
                               got < 0 ? strerror(errno) : "nothing moved");
        l += got;
        remote += (uint64_t)got;
        bytes -= (size_t)got;
    }
    return HCOMM_SUCCESS;
}

/* Whether a rank's slot holds a piece of every rank's block: the send
 * buffer has a block for every rank. */
static int per_block(hcomm_coll_t coll) {
    return coll == HCOMM_COLL_REDUCE_SCATTER || coll == HCOMM_COLL_ALLTOALL ||
           coll == HCOMM_COLL_SCATTER || coll == HCOMM_COLL_REDUCE_SCATTERV;
}

hcomm_status_t hcomm_shm_op_start(hcomm_shm_op_t *op, hcomm_shm_t *shm,
                                  hcomm_shm_algo_t algo, hcomm_coll_t coll,
                                  const void *sendbuf, void *recvbuf,
                                  size_t count, hcomm_dtype_t dtype,
                                  hcomm_op_t rop, int root) {
    /* Field by field: a memset of the whole op (rep stos) cost a small
     * call more than its protocol. */
    op->shm = shm;
    op->algo = algo;
    op->coll = coll;
    op->sendbuf = sendbuf;
    op->recvbuf = recvbuf;
    op->count = count;
    op->esize = hcomm_dtype_size(dtype);
    op->root = root;
    op->reduce = NULL;
    op->scale = NULL;
    op->round = 0;
    op->phase = 0;
    op->own_copy = NULL;
    op->vcounts = op->vdispls = NULL;
    op->vcopy = NULL;
    op->declined = 0;
    op->devreg = NULL;
    op->devtail = NULL;
    op->reads_next_line = 0;
    if (coll == HCOMM_COLL_ALLREDUCE || coll == HCOMM_COLL_REDUCE_SCATTER ||
        coll == HCOMM_COLL_REDUCE || coll == HCOMM_COLL_REDUCE_SCATTERV) {
        op->reduce = hcomm_kernel_reduce(dtype, rop);
        op->scale = rop == HCOMM_AVG ? hcomm_kernel_scale(dtype) : NULL;
        if (!op->reduce)
            return hcomm_error(HCOMM_ERR_INTERNAL,
                               "shm: no kernel for the type");
    }
    atomic_init(&op->waiting_for, -1);
    size_t esize = op->esize;
    if (algo == HCOMM_SHM_CMA && coll == HCOMM_COLL_BCAST && shm->size != 2)
        return hcomm_error(HCOMM_ERR_INTERNAL,
                           "shm: a direct-read broadcast takes 2 ranks");
    op->root_eighths = algo == HCOMM_SHM_CMA
                           ? hcomm_shm_root_eighths(shm, coll, count * esize)
                           : 0;
    if (algo == HCOMM_SHM_CMA) {
        op->chunk = count;
        op->rounds = count ? 1 : 0;
        /* In place, peers would read blocks this rank overwrites: they read
         * a copy. */
        if (coll == HCOMM_COLL_ALLTOALL && sendbuf == recvbuf && count) {
            size_t all = count * op->esize * (size_t)shm->size;
            if (!(op->own_copy = malloc(all)))
                return hcomm_error(HCOMM_ERR_NO_MEMORY,
                                   "no memory for an in-place alltoall");
            memcpy(op->own_copy, sendbuf, all);
            op->sendbuf = op->own_copy;
        }
        /* Calls on a communicator run one at a time: they share one. */
        if ((coll == HCOMM_COLL_ALLREDUCE ||
             coll == HCOMM_COLL_REDUCE_SCATTER) &&
            !shm->bounce && !(shm->bounce = malloc(HCOMM_SHM_BOUNCE_BYTES)))
            return hcomm_error(HCOMM_ERR_NO_MEMORY, "no memory for shm bounce");
    } else {
        /* a round holds a piece of every rank's block */
        size_t pieces = per_block(coll) ? (size_t)shm->size : 1;
        if (count * esize * pieces <= shm->slot_bytes) {
            op->chunk = count; /* one round, and no division */
            op->rounds = 1;
        } else {
            op->chunk = shm->slot_bytes / esize / pieces;
            op->rounds = (count + op->chunk - 1) / op->chunk;
        }
    }
    /* Even a call of nothing takes a round: its descriptor must meet the
     * peers' (a rank that passed 0 against others' count would otherwise
     * pair its next call with theirs). */
    if (op->rounds == 0) op->rounds = 1;
    hcomm_shm_desc_make(op, dtype, rop);
    op->lagged = lags(op);
    op->first = shm->next_seq;
    op->seq = op->first;
    shm->next_seq += op->rounds;
    return HCOMM_SUCCESS;
}

/* A copy of the caller's arrays, which the caller of a non-blocking call
 * may free once it returns (hcomm.h); made before the call takes its
 * rounds, freed when it ends. */
static size_t *copy_counts(const hcomm_shm_t *shm, const size_t *counts,
                           const size_t *displs) {
    size_t n = (size_t)shm->size;
    size_t *copy = malloc((displs ? 2 : 1) * n * sizeof(size_t));
    if (!copy) {
        hcomm_error(HCOMM_ERR_NO_MEMORY, "no memory for the counts");
        return NULL;
    }
    memcpy(copy, counts, n * sizeof(size_t));
    if (displs) memcpy(copy + n, displs, n * sizeof(size_t));
    return copy;
}

static hcomm_status_t keep_counts(hcomm_shm_op_t *op, hcomm_status_t st,
                                  size_t *copy, int has_displs) {
    if (st != HCOMM_SUCCESS) {
        free(copy);
        return st;
    }
    op->vcounts = op->vcopy = copy;
    op->vdispls = has_displs ? copy + op->shm->size : NULL;
    return HCOMM_SUCCESS;
}

/* Every rank's counts, as one word: what the ranks must pass alike. */
static uint64_t counts_digest(const size_t *counts, int n, size_t *most) {
    uint64_t digest = 0xcbf29ce484222325ull;
    *most = 0;
    for (int r = 0; r < n; r++) {
        if (counts[r] > *most) *most = counts[r];
        digest = (digest ^ counts[r]) * 0x100000001b3ull;
    }
    return digest;
}

hcomm_status_t hcomm_shm_op_start_rv(hcomm_shm_op_t *op, hcomm_shm_t *shm,
                                     const void *sendbuf, void *recvbuf,
                                     const size_t *rcounts, hcomm_dtype_t dtype,
                                     hcomm_op_t rop) {
    size_t most, *copy = copy_counts(shm, rcounts, NULL);
    uint64_t digest = counts_digest(rcounts, shm->size, &most);
    if (!copy) return HCOMM_ERR_NO_MEMORY;
    hcomm_status_t st = hcomm_shm_op_start(op, shm, HCOMM_SHM_ONESHOT,
                                           HCOMM_COLL_REDUCE_SCATTERV, sendbuf,
                                           recvbuf, most, dtype, rop, 0);
    op->desc[0] = digest;
    return keep_counts(op, st, copy, 0);
}

hcomm_status_t hcomm_shm_op_start_v(hcomm_shm_op_t *op, hcomm_shm_t *shm,
                                    hcomm_shm_algo_t algo, const void *sendbuf,
                                    void *recvbuf, const size_t *rcounts,
                                    const size_t *rdispls,
                                    hcomm_dtype_t dtype) {
    size_t most, *copy = copy_counts(shm, rcounts, rdispls);
    uint64_t digest = counts_digest(rcounts, shm->size, &most);
    if (!copy) return HCOMM_ERR_NO_MEMORY;
    hcomm_status_t st =
        hcomm_shm_op_start(op, shm, algo, HCOMM_COLL_ALLGATHERV, sendbuf,
                           recvbuf, most, dtype, HCOMM_SUM, 0);
    op->desc[0] = digest; /* every rank's counts, not only the largest */
    return keep_counts(op, st, copy, 1);
}

hcomm_status_t hcomm_shm_op_agree(hcomm_shm_op_t *op, hcomm_shm_t *shm,
                                  hcomm_coll_t coll, size_t count,
                                  hcomm_dtype_t dtype, hcomm_op_t rop,
                                  int root) {
    /* a call of nothing: one round, its descriptor alone ... */
    hcomm_status_t st = hcomm_shm_op_start(op, shm, HCOMM_SHM_ONESHOT, coll,
                                           NULL, NULL, 0, dtype, rop, root);
    if (st != HCOMM_SUCCESS) return st;
    /* ... which says what the call is, and that it is on GPU memory, and
     * which every rank waits for: the call then runs elsewhere */
    op->desc[0] = count;
    op->desc[1] |= HCOMM_SHM_DESC_GPU;
    op->lagged = 0;
    return HCOMM_SUCCESS;
}

void hcomm_shm_publish_buffer(const hcomm_shm_t *shm, const void *buf,
                              size_t len, uint64_t *addr, uint32_t *reg) {
    size_t off;
    const hcomm_shm_region_t *r = hcomm_shm_region_find(shm, buf, len, &off);
    *reg = r ? r->id : 0;
    *addr = r ? (uint64_t)off : (uint64_t)(uintptr_t)buf;
}

/* A peer's buffer at off: in place when it is registered (NULL if not). */
static const char *peer_buffer(const hcomm_shm_op_t *op, int peer, int recv,
                               size_t off) {
    const hcomm_shm_info_t *info = hcomm_shm_info(op->shm, peer);
    int p = (int)(op->seq & 1);
    uint32_t reg = recv ? info->recv_reg[p] : info->send_reg[p];
    uint64_t at = recv ? info->recv_addr[p] : info->send_addr[p];
    return reg ? hcomm_shm_region_peer(op->shm, reg, peer, (size_t)at + off)
               : NULL;
}

hcomm_status_t hcomm_shm_peer_copy(const hcomm_shm_op_t *op, int peer, int recv,
                                   size_t off, void *dst, size_t bytes) {
    const char *src = peer_buffer(op, peer, recv, off);
    if (src) {
        memcpy(dst, src, bytes);
        return HCOMM_SUCCESS;
    }
    const hcomm_shm_info_t *info = hcomm_shm_info(op->shm, peer);
    int p = (int)(op->seq & 1);
    return cma_copy(op, peer, dst,
                    (recv ? info->recv_addr[p] : info->send_addr[p]) + off,
                    bytes, 0);
}

/* Copies bytes from src into a peer's receive buffer at off. */
static hcomm_status_t peer_write(const hcomm_shm_op_t *op, int peer, size_t off,
                                 const void *src, size_t bytes) {
    char *dst = (char *)peer_buffer(op, peer, 1, off);
    if (dst) {
        memcpy(dst, src, bytes);
        return HCOMM_SUCCESS;
    }
    const hcomm_shm_info_t *info = hcomm_shm_info(op->shm, peer);
    return cma_copy(op, peer, (void *)src, info->recv_addr[op->seq & 1] + off,
                    bytes, 1);
}

/* Whether the root writes into its receivers (split_copy). */
static int root_writes(const hcomm_shm_op_t *op) {
    return op->root_eighths > 0;
}

/* A broadcast or scatter by direct copies: the receivers would copy their
 * blocks while the root idles, so the root writes each block's tail into
 * its receiver while the receiver reads the head. Receiver r's block is
 * at r * stride in the root's send buffer. */
static hcomm_status_t split_copy(const hcomm_shm_op_t *op, size_t stride,
                                 size_t bytes) {
    const hcomm_shm_t *shm = op->shm;
    size_t head = bytes - (bytes * op->root_eighths / 8 & ~(size_t)63);
    if (shm->rank != op->root)
        return hcomm_shm_peer_copy(op, op->root, 0, (size_t)shm->rank * stride,
                                   op->recvbuf, head);
    for (int k = 1; k < shm->size; k++) {
        int r = (op->root + k) % shm->size;
        const char *tail = op->sendbuf + (size_t)r * stride + head;
        hcomm_status_t st = peer_write(op, r, head, tail, bytes - head);
        if (st != HCOMM_SUCCESS) return st;
    }
    return HCOMM_SUCCESS;
}

/* This round's elements: [offset, offset + n) of the call. */
static size_t round_offset(const hcomm_shm_op_t *op) {
    return op->round * op->chunk;
}
static size_t round_count(const hcomm_shm_op_t *op) {
    size_t left = op->count - round_offset(op);
    return left < op->chunk ? left : op->chunk;
}
/* Bytes each rank puts in its slot (or ring entry) for the round. */
static size_t round_in_bytes(const hcomm_shm_op_t *op) {
    size_t n = round_count(op) * op->esize;
    return per_block(op->coll) ? n * (size_t)op->shm->size : n;
}

/* allgatherv: elements of rank r's block in this round (its piece of the
 * round's span, which may be shorter or empty). */
static size_t v_piece(const hcomm_shm_op_t *op, int r) {
    size_t off = round_offset(op), n = round_count(op), c = op->vcounts[r];
    return c <= off ? 0 : c - off < n ? c - off : n;
}

/* Whether this rank's block is read by a peer: not a broadcast's or a
 * scatter's receivers (they have none), nor a gather's or one-shot
 * reduce's root (it reads its own block in place; but in place past rank
 * 1, the reduction in rank order would overwrite it before reading it). */
static int publishes_block(const hcomm_shm_op_t *op) {
    int root = op->shm->rank == op->root;
    switch (op->coll) {
    case HCOMM_COLL_BCAST:
    case HCOMM_COLL_SCATTER:
        return root;
    case HCOMM_COLL_GATHER:
        return !root;
    case HCOMM_COLL_REDUCE:
        return !root || op->algo != HCOMM_SHM_ONESHOT ||
               (op->sendbuf == op->recvbuf && op->root > 1);
    default:
        return 1;
    }
}

/* A CUDA IPC call's registrations, in the agreement's ring entry: the
 * head always, the tail only where the head says so (most calls have
 * none, and would pay for reading it from every peer). */
#define DEVREG_BYTES (sizeof(hcomm_shm_devreg_t) + sizeof(hcomm_shm_devtail_t))
_Static_assert(sizeof(hcomm_shm_devreg_t) % 8 == 0 &&
                   DEVREG_BYTES <= HCOMM_SHM_RING_DATA,
               "a CUDA IPC call's registrations fit its ring entry");

static void devreg_publish(hcomm_shm_op_t *op) {
    hcomm_shm_t *shm = op->shm;
    char *at = hcomm_shm_in(shm, shm->rank, op->seq, DEVREG_BYTES);
    const hcomm_shm_devreg_t *mine = &op->devreg[shm->rank];
    memcpy(at, mine, sizeof(*mine));
    if (mine->has_tail)
        memcpy(at + sizeof(*mine), &op->devtail[shm->rank],
               sizeof(*op->devtail));
}

static void devreg_read(hcomm_shm_op_t *op, int r) {
    const char *at = hcomm_shm_in(op->shm, r, op->seq, DEVREG_BYTES);
    memcpy(&op->devreg[r], at, sizeof(*op->devreg));
    if (op->devreg[r].has_tail)
        memcpy(&op->devtail[r], at + sizeof(*op->devreg), sizeof(*op->devtail));
}

/* Puts this rank's part of the round where peers will find it. */
static void publish_input(hcomm_shm_op_t *op) {
    hcomm_shm_t *shm = op->shm;
    int p = (int)(op->seq & 1);
    size_t off = round_offset(op) * op->esize, n = round_count(op) * op->esize;
    if (op->count == 0) {
        /* the descriptor alone (an agreement, alltoallv's too), or with a
         * CUDA IPC call's registration */
        if (op->devreg) devreg_publish(op);
    } else if (op->coll == HCOMM_COLL_ALLTOALLV) {
        hcomm_shm_a2av_publish(op);
    } else if (op->algo == HCOMM_SHM_CMA) {
        hcomm_shm_info_t *info = hcomm_shm_info(shm, shm->rank);
        size_t rn = op->count * op->esize, sn = rn;
        if (op->coll == HCOMM_COLL_ALLGATHER || op->coll == HCOMM_COLL_GATHER ||
            op->coll == HCOMM_COLL_ALLTOALL)
            rn *= (size_t)shm->size;
        if (per_block(op->coll)) sn *= (size_t)shm->size;
        if (op->coll == HCOMM_COLL_ALLGATHERV) { /* peers read the block */
            sn = op->vcounts[shm->rank] * op->esize;
            rn = 0;
        }
        hcomm_shm_publish_buffer(shm, op->sendbuf, sn, &info->send_addr[p],
                                 &info->send_reg[p]);
        hcomm_shm_publish_buffer(shm, op->recvbuf, rn, &info->recv_addr[p],
                                 &info->recv_reg[p]);
    } else if (op->coll == HCOMM_COLL_REDUCE_SCATTERV) {
        /* every block's piece (blocks packed in rank order), at a stride
         * of the round's span */
        char *in = hcomm_shm_in(shm, shm->rank, op->seq, round_in_bytes(op));
        size_t at = 0;
        for (int b = 0; b < shm->size; b++) {
            memcpy(in + (size_t)b * n, op->sendbuf + (at * op->esize + off),
                   v_piece(op, b) * op->esize);
            at += op->vcounts[b];
        }
    } else if (per_block(op->coll) &&
               (op->coll != HCOMM_COLL_SCATTER || shm->rank == op->root)) {
        /* this round's piece of every block, one after the other */
        char *in = hcomm_shm_in(shm, shm->rank, op->seq, round_in_bytes(op));
        for (int b = 0; b < shm->size; b++)
            memcpy(in + (size_t)b * n,
                   op->sendbuf + (size_t)b * op->count * op->esize + off, n);
    } else if (op->coll == HCOMM_COLL_ALLGATHERV) {
        /* ring or slot by the round's largest piece, as the readers do */
        memcpy(hcomm_shm_in(shm, shm->rank, op->seq, n), op->sendbuf + off,
               v_piece(op, shm->rank) * op->esize);
    } else if (!per_block(op->coll) && publishes_block(op)) {
        memcpy(hcomm_shm_in(shm, shm->rank, op->seq, n), op->sendbuf + off, n);
    }
    /* Last, right before the counter: peers spin on that line, and a
     * write to it long before the counter's would cost them a miss more. */
    if (op->seq == op->first)
        memcpy(hcomm_shm_desc(shm, shm->rank, op->seq), op->desc,
               sizeof(op->desc));
    publish(op, SHM_ARRIVE);
}

/* Rank r's input to a one-shot round: its slot; this rank's own, its
 * send buffer. A load from its own slot would wait for the store there
 * to complete, which waits for the peers spinning on that line to let it
 * go (8 B AllReduce at 2 ranks: 0.24-0.26 us to 0.22-0.24). In place, a
 * rank past the first two reads its slot: by its turn its buffer holds
 * the sum so far. */
static const char *oneshot_input(const hcomm_shm_op_t *op, int r,
                                 size_t bytes) {
    if (r == op->shm->rank && (op->sendbuf != op->recvbuf || r < 2))
        return op->sendbuf + round_offset(op) * op->esize;
    return hcomm_shm_in(op->shm, r, op->seq, bytes);
}

/* One-shot: every rank reduces the whole round from every slot, in rank
 * order, so all get bit-identical results. */
static void oneshot_reduce(hcomm_shm_op_t *op) {
    hcomm_shm_t *shm = op->shm;
    size_t n = round_count(op), bytes = n * op->esize;
    if (bytes >
        HCOMM_SHM_LINE - HCOMM_SHM_ENTRY_DATA) /* past the counter's line */
        for (int r = 0; r < shm->size; r++)
            if (r != shm->rank)
                hcomm_shm_prefetch(hcomm_shm_in(shm, r, op->seq, bytes), bytes);
    char *dst = op->recvbuf + round_offset(op) * op->esize;
    op->reduce(dst, oneshot_input(op, 0, bytes), oneshot_input(op, 1, bytes),
               n);
    for (int r = 2; r < shm->size; r++)
        op->reduce(dst, dst, oneshot_input(op, r, bytes), n);
    if (op->scale) op->scale(dst, n, shm->size);
}

/* Two-shot, first half: this rank's block of the round into its result
 * slot. */
static void twoshot_reduce(hcomm_shm_op_t *op) {
    hcomm_shm_t *shm = op->shm;
    int p = (int)(op->seq & 1), me = shm->rank;
    size_t n = round_count(op), bytes = n * op->esize;
    size_t boff = hcomm_block_offset(n, shm->size, me) * op->esize;
    size_t bn = hcomm_block_count(n, shm->size, me);
    char *dst = hcomm_shm_res(shm, me, p);
    op->reduce(dst, hcomm_shm_in(shm, 0, op->seq, bytes) + boff,
               hcomm_shm_in(shm, 1, op->seq, bytes) + boff, bn);
    for (int r = 2; r < shm->size; r++)
        op->reduce(dst, dst, hcomm_shm_in(shm, r, op->seq, bytes) + boff, bn);
    if (op->scale) op->scale(dst, bn, shm->size);
}

/* Two-shot, second half: every block from its owner's result slot. */
static void twoshot_gather(hcomm_shm_op_t *op) {
    hcomm_shm_t *shm = op->shm;
    int p = (int)(op->seq & 1);
    size_t n = round_count(op);
    char *dst = op->recvbuf + round_offset(op) * op->esize;
    for (int r = 0; r < shm->size; r++)
        memcpy(dst + hcomm_block_offset(n, shm->size, r) * op->esize,
               hcomm_shm_res(shm, r, p),
               hcomm_block_count(n, shm->size, r) * op->esize);
}

/* CMA allreduce, first half: this rank's block of the result, reading the
 * peers' send buffers piece by piece into the bounce buffer (or in place,
 * when registered). The block is accumulated in the receive buffer; with
 * the in-place form that overwrites only this rank's block, which no peer
 * reads. */
static hcomm_status_t cma_reduce(hcomm_shm_op_t *op) {
    hcomm_shm_t *shm = op->shm;
    int me = shm->rank, rs = op->coll == HCOMM_COLL_REDUCE_SCATTER;
    size_t es = op->esize, step = HCOMM_SHM_BOUNCE_BYTES / es;
    /* reduce_scatter: blocks of count, and the receive buffer is the block */
    size_t boff = rs ? (size_t)me * op->count
                     : hcomm_block_offset(op->count, shm->size, me);
    size_t bn = rs ? op->count : hcomm_block_count(op->count, shm->size, me);
    char *block = rs ? op->recvbuf : op->recvbuf + boff * es;
    for (size_t done = 0; done < bn; done += step) {
        size_t n = bn - done < step ? bn - done : step;
        size_t off = (boff + done) * es;
        char *dst = block + done * es;
        const char *acc = op->sendbuf + off;
        for (int r = 0; r < shm->size; r++) {
            if (r == me) continue;
            const char *src = peer_buffer(op, r, 0, off);
            if (!src) {
                hcomm_status_t st =
                    hcomm_shm_peer_copy(op, r, 0, off, shm->bounce, n * es);
                if (st != HCOMM_SUCCESS) return st;
                src = shm->bounce;
            }
            op->reduce(dst, acc, src, n);
            acc = dst;
        }
    }
    if (op->scale) op->scale(block, bn, shm->size);
    return HCOMM_SUCCESS;
}

/* This rank's piece of the round, n elements at offset mine of every
 * rank's slot, reduced in rank order into dst; its own from own, in its
 * send buffer, as oneshot_input's (in place too: the first two inputs are
 * read before dst is written). */
static void reduce_piece(hcomm_shm_op_t *op, char *dst, const char *own,
                         size_t mine, size_t n) {
    hcomm_shm_t *shm = op->shm;
    size_t in = round_in_bytes(op);
    const char *src[2];
    for (int r = 0; r < 2; r++)
        src[r] =
            r == shm->rank ? own : hcomm_shm_in(shm, r, op->seq, in) + mine;
    op->reduce(dst, src[0], src[1], n);
    for (int r = 2; r < shm->size; r++)
        op->reduce(dst, dst, hcomm_shm_in(shm, r, op->seq, in) + mine, n);
    if (op->scale) op->scale(dst, n, shm->size);
}

/* Reduce-scatter from the slots: this rank's piece of the round from every
 * rank's slot. */
static void slots_reduce_scatter(hcomm_shm_op_t *op) {
    hcomm_shm_t *shm = op->shm;
    size_t n = round_count(op), in = round_in_bytes(op);
    size_t mine = (size_t)shm->rank * n * op->esize;
    for (int r = 0; r < shm->size; r++)
        if (r != shm->rank && in > HCOMM_SHM_LINE - HCOMM_SHM_ENTRY_DATA)
            hcomm_shm_prefetch(hcomm_shm_in(shm, r, op->seq, in) + mine,
                               n * op->esize);
    reduce_piece(op, op->recvbuf + round_offset(op) * op->esize,
                 op->sendbuf +
                     ((size_t)shm->rank * op->count + round_offset(op)) *
                         op->esize,
                 mine, n);
}

/* reduce_scatterv: this rank's piece of the round from every rank's slot
 * (its block starts after the blocks of the ranks before it). */
static void slots_reduce_scatterv(hcomm_shm_op_t *op) {
    hcomm_shm_t *shm = op->shm;
    size_t n = v_piece(op, shm->rank), before = 0;
    if (!n) return;
    for (int r = 0; r < shm->rank; r++)
        before += op->vcounts[r];
    reduce_piece(op, op->recvbuf + round_offset(op) * op->esize,
                 op->sendbuf + (before + round_offset(op)) * op->esize,
                 (size_t)shm->rank * round_count(op) * op->esize, n);
}

/* CMA allreduce, second half: the other blocks from their owners' receive
 * buffers. */
static hcomm_status_t cma_gather_blocks(hcomm_shm_op_t *op) {
    hcomm_shm_t *shm = op->shm;
    for (int k = 1; k < shm->size; k++) {
        int r = hcomm_shm_rotated(shm, k);
        size_t off = hcomm_block_offset(op->count, shm->size, r) * op->esize;
        size_t n = hcomm_block_count(op->count, shm->size, r) * op->esize;
        hcomm_status_t st =
            hcomm_shm_peer_copy(op, r, 1, off, op->recvbuf + off, n);
        if (st != HCOMM_SUCCESS) return st;
    }
    return HCOMM_SUCCESS;
}

/* Allgather: every rank's block of the round into place. */
static hcomm_status_t allgather_copy(hcomm_shm_op_t *op) {
    hcomm_shm_t *shm = op->shm;
    size_t block = op->count * op->esize;
    size_t off = round_offset(op) * op->esize, n = round_count(op) * op->esize;
    for (int k = 0; k < shm->size; k++) {
        int r = hcomm_shm_rotated(shm, k);
        char *dst = op->recvbuf + (size_t)r * block + off;
        if (r == shm->rank) {
            if (dst != op->sendbuf + off) memcpy(dst, op->sendbuf + off, n);
        } else if (op->algo == HCOMM_SHM_CMA) {
            hcomm_status_t st = hcomm_shm_peer_copy(op, r, 0, off, dst, n);
            if (st != HCOMM_SUCCESS) return st;
        } else {
            memcpy(dst, hcomm_shm_in(shm, r, op->seq, n), n);
        }
    }
    return HCOMM_SUCCESS;
}

/* Gather at the root: every rank's piece of the round into its block;
 * scatter: this rank's piece from the root's slot; alltoall: this rank's
 * piece from every rank's slot. Own pieces come from the send buffer (in
 * place, they are there already). */
static void rooted_or_a2a_copy(hcomm_shm_op_t *op) {
    hcomm_shm_t *shm = op->shm;
    int me = shm->rank;
    size_t block = op->count * op->esize;
    size_t off = round_offset(op) * op->esize, n = round_count(op) * op->esize;
    size_t in = round_in_bytes(op);
    if (op->coll == HCOMM_COLL_SCATTER) {
        const char *src =
            me == op->root
                ? op->sendbuf + (size_t)me * block + off
                : hcomm_shm_in(shm, op->root, op->seq, in) + (size_t)me * n;
        if (op->recvbuf + off != src) memcpy(op->recvbuf + off, src, n);
        return;
    }
    for (int k = 0; k < shm->size; k++) {
        int r = hcomm_shm_rotated(shm, k);
        char *dst = op->recvbuf + (size_t)r * block + off;
        const char *src;
        if (op->coll == HCOMM_COLL_GATHER)
            src =
                r == me ? op->sendbuf + off : hcomm_shm_in(shm, r, op->seq, in);
        else /* alltoall */
            src = r == me ? op->sendbuf + (size_t)me * block + off
                          : hcomm_shm_in(shm, r, op->seq, in) + (size_t)me * n;
        if (dst != src) memcpy(dst, src, n);
    }
}

/* Direct copies: a gather's rank writes its block into the root's receive
 * buffer, a scatter's receiver reads its block of the root's send buffer
 * (up to a size, the root writes part of it: split_copy),
 * an alltoall rank its block of every peer's (in place, of the copy each
 * keeps, op->own_copy). A gather's root that read every block itself
 * would make every copy on one core: the ranks' writes run side by side. */
static hcomm_status_t rooted_or_a2a_cma(hcomm_shm_op_t *op) {
    hcomm_shm_t *shm = op->shm;
    int me = shm->rank;
    size_t block = op->count * op->esize;
    /* this rank's block: in the root's buffers (gather, scatter), in
     * every rank's send buffer (alltoall) */
    size_t mine = (size_t)me * block;
    if (op->coll == HCOMM_COLL_GATHER) {
        if (me != op->root)
            return peer_write(op, op->root, mine, op->sendbuf, block);
        if (op->recvbuf + mine != op->sendbuf)
            memcpy(op->recvbuf + mine, op->sendbuf, block);
        return HCOMM_SUCCESS;
    }
    if (op->coll == HCOMM_COLL_SCATTER) {
        if (root_writes(op)) {
            hcomm_status_t st = split_copy(op, block, block);
            if (st != HCOMM_SUCCESS || me != op->root) return st;
        } else if (me != op->root) {
            return hcomm_shm_peer_copy(op, op->root, 0, mine, op->recvbuf,
                                       block);
        }
        if (op->recvbuf != op->sendbuf + mine)
            memcpy(op->recvbuf, op->sendbuf + mine, block);
        return HCOMM_SUCCESS;
    }
    for (int k = 0; k < shm->size; k++) { /* alltoall */
        int r = hcomm_shm_rotated(shm, k);
        char *dst = op->recvbuf + (size_t)r * block;
        if (r == me) {
            const char *src =
                (op->own_copy ? op->own_copy : op->sendbuf) + mine;
            if (dst != src) memcpy(dst, src, block);
            continue;
        }
        hcomm_status_t st = hcomm_shm_peer_copy(op, r, 0, mine, dst, block);
        if (st != HCOMM_SUCCESS) return st;
    }
    return HCOMM_SUCCESS;
}

/* allgatherv by direct reads: every peer's block from its send buffer. */
static hcomm_status_t allgatherv_cma(hcomm_shm_op_t *op) {
    hcomm_shm_t *shm = op->shm;
    for (int k = 0; k < shm->size; k++) {
        int r = hcomm_shm_rotated(shm, k);
        size_t len = op->vcounts[r] * op->esize;
        char *dst = op->recvbuf + op->vdispls[r] * op->esize;
        hcomm_status_t st = HCOMM_SUCCESS;
        if (r != shm->rank)
            st = len ? hcomm_shm_peer_copy(op, r, 0, 0, dst, len)
                     : HCOMM_SUCCESS;
        else if (len && dst != op->sendbuf)
            memcpy(dst, op->sendbuf, len);
        if (st != HCOMM_SUCCESS) return st;
    }
    return HCOMM_SUCCESS;
}

/* allgatherv: every rank's piece of the round into its place. */
static void allgatherv_copy(hcomm_shm_op_t *op) {
    hcomm_shm_t *shm = op->shm;
    size_t off = round_offset(op), n = round_count(op) * op->esize;
    for (int k = 0; k < shm->size; k++) {
        int r = hcomm_shm_rotated(shm, k);
        size_t len = v_piece(op, r) * op->esize;
        char *dst = op->recvbuf + (op->vdispls[r] + off) * op->esize;
        const char *src = r == shm->rank ? op->sendbuf + off * op->esize
                                         : hcomm_shm_in(shm, r, op->seq, n);
        if (len && dst != src) memcpy(dst, src, len);
    }
}

/* Broadcast: the receivers' part of the round; by direct copies (two
 * ranks) the root's too. */
static hcomm_status_t bcast_copy(hcomm_shm_op_t *op) {
    size_t off = round_offset(op) * op->esize, n = round_count(op) * op->esize;
    if (op->algo != HCOMM_SHM_CMA) {
        memcpy(op->recvbuf + off, hcomm_shm_in(op->shm, op->root, op->seq, n),
               n);
        return HCOMM_SUCCESS;
    }
    return split_copy(op, 0, op->count * op->esize);
}

/* After its direct copies, a root that writes into its receivers says its
 * writes are over (reduced), for which the receivers then wait. */
static int root_wrote(hcomm_shm_op_t *op, hcomm_status_t st) {
    if (st != HCOMM_SUCCESS || !root_writes(op)) return -1;
    if (op->shm->rank != op->root) return PHASE_REDUCED;
    publish(op, SHM_REDUCED);
    return -1;
}

/* The work of a round once its inputs have arrived; returns the next phase
 * (or an error through *st). */
static int after_arrive(hcomm_shm_op_t *op, hcomm_status_t *st) {
    int is_root = op->shm->rank == op->root;
    if (op->count == 0) { /* the descriptors were all */
        for (int r = 0; op->devreg && r < op->shm->size; r++)
            devreg_read(op, r);
        return -1;
    }
    switch (op->coll) {
    case HCOMM_COLL_ALLREDUCE:
        if (op->algo == HCOMM_SHM_ONESHOT) {
            oneshot_reduce(op);
            return -1;
        }
        if (op->algo == HCOMM_SHM_TWOSHOT)
            twoshot_reduce(op);
        else if ((*st = cma_reduce(op)) != HCOMM_SUCCESS)
            return -1;
        publish(op, SHM_REDUCED);
        return PHASE_REDUCED;
    case HCOMM_COLL_REDUCE_SCATTER:
        if (op->algo == HCOMM_SHM_CMA)
            *st = cma_reduce(op);
        else
            slots_reduce_scatter(op);
        return -1;
    case HCOMM_COLL_ALLGATHER:
        *st = allgather_copy(op);
        return -1;
    case HCOMM_COLL_ALLGATHERV:
        if (op->algo == HCOMM_SHM_CMA)
            *st = allgatherv_cma(op);
        else
            allgatherv_copy(op);
        return -1;
    case HCOMM_COLL_REDUCE_SCATTERV:
        slots_reduce_scatterv(op);
        return -1;
    case HCOMM_COLL_ALLTOALLV:
        *st = hcomm_shm_a2av_copy(op);
        return -1;
    case HCOMM_COLL_REDUCE:
        if (op->algo == HCOMM_SHM_ONESHOT) { /* at the root only */
            if (is_root) oneshot_reduce(op);
            return -1;
        }
        /* two-shot: every rank reduces its block, the root gathers them */
        twoshot_reduce(op);
        publish(op, SHM_REDUCED);
        return is_root ? PHASE_REDUCED : -1;
    case HCOMM_COLL_GATHER:
    case HCOMM_COLL_SCATTER:
    case HCOMM_COLL_ALLTOALL:
        if (op->algo != HCOMM_SHM_CMA) {
            if (op->coll != HCOMM_COLL_GATHER || is_root)
                rooted_or_a2a_copy(op);
            return -1;
        }
        *st = rooted_or_a2a_cma(op);
        return root_wrote(op, *st);
    default: /* broadcast */
        if (op->algo == HCOMM_SHM_CMA)
            return root_wrote(op, *st = bcast_copy(op));
        if (!is_root) *st = bcast_copy(op);
        return -1;
    }
}

/* Whether this rank reads the root's data alone: a broadcast's or a
 * scatter's receiver. */
static int reads_the_root(const hcomm_shm_op_t *op) {
    return op->shm->rank != op->root &&
           (op->coll == HCOMM_COLL_BCAST || op->coll == HCOMM_COLL_SCATTER);
}

/* Whether this round's inputs are there: every peer's, or the root's. A
 * call's first round waits for every peer, whose descriptor it checks: a
 * broadcast root too, which then no longer runs ahead of its receivers. */
static int inputs_arrived(hcomm_shm_op_t *op) {
    /* A lagged receiver reads the root's data only if the root's
     * descriptor is its own; else it waits for every rank's to explain.
     * The root's arrival is read once: a root that arrived after a first
     * look but before a second would have its data read unchecked. */
    if (op->lagged && reads_the_root(op)) {
        if (!reached(op, op->root, SHM_ARRIVE, op->seq)) return 0;
        const uint64_t *d = hcomm_shm_desc(op->shm, op->root, op->seq);
        if (!hcomm_shm_desc_equal(d, op->desc)) op->lagged = 0;
    }
    if (op->seq == op->first && !op->lagged)
        return all_reached(op, SHM_ARRIVE, op->seq);
    if (root_writes(op) && op->shm->rank == op->root)
        return all_reached(op, SHM_ARRIVE, op->seq); /* its receivers' */
    if (op->coll == HCOMM_COLL_BCAST || op->coll == HCOMM_COLL_SCATTER)
        return op->shm->rank == op->root ||
               reached(op, op->root, SHM_ARRIVE, op->seq);
    /* gather, one-shot reduce: only the root reads */
    if (op->coll == HCOMM_COLL_GATHER ||
        (op->coll == HCOMM_COLL_REDUCE && op->algo == HCOMM_SHM_ONESHOT))
        return op->shm->rank != op->root ||
               all_reached(op, SHM_ARRIVE, op->seq);
    return all_reached(op, SHM_ARRIVE, op->seq);
}

/* Whether this rank must stay until every peer has finished the round:
 * CMA peers read its own buffers, which are the blocks it publishes (a
 * broadcast's, only the root's), or, a gather's root, write into them. */
static int waits_for_readers(const hcomm_shm_op_t *op) {
    if (op->algo == HCOMM_SHM_CMA && op->coll == HCOMM_COLL_GATHER)
        return op->shm->rank == op->root; /* its peers write into it */
    return op->algo == HCOMM_SHM_CMA && publishes_block(op);
}

/* How many rounds back the peers must be done before this round may
 * write: a round that lives in its ring entry or sub-slot (or writes
 * nothing else) reuses those of round seq - HCOMM_SHM_RING; any other
 * writes the slots (or, for CMA, the buffer addresses) of its parity,
 * last used by round seq - 2. A peer may still compare the descriptors of
 * its last HCOMM_SHM_LAG_MAX rounds done, which stay in their ring entries
 * until then (shm.h). */
static uint64_t reuse_distance(const hcomm_shm_op_t *op) {
    /* A rank that puts no data in the slots (a scatter's or broadcast's
     * receiver, a gather's root) writes only its ring entry. */
    if (op->algo == HCOMM_SHM_ONESHOT &&
        (!hcomm_shm_in_slot(round_in_bytes(op)) || !publishes_block(op)))
        return HCOMM_SHM_RING - HCOMM_SHM_LAG_MAX;
    return 2;
}

/* A call queued behind one that failed: the rounds are out of step. */
static hcomm_status_t failed_earlier(const hcomm_shm_op_t *op) {
    return hcomm_error(
        op->shm->failed, "%s: an earlier call on this communicator failed (%s)",
        hcomm_coll_name(op->coll), hcomm_strerror(op->shm->failed));
}

/* A call that ended, well or not, frees what it holds. */
static hcomm_status_t op_end(hcomm_shm_op_t *op, hcomm_status_t st) {
    free(op->own_copy);
    free(op->vcopy);
    op->own_copy = NULL;
    op->vcopy = NULL;
    return st;
}

/* A call that must wait looks meanwhile at the descriptors it has not
 * compared: a peer that found a mismatch in one of those calls stopped,
 * and what this rank waits for would never come. */
static hcomm_status_t waiting(hcomm_shm_op_t *op) {
    hcomm_status_t st = HCOMM_ERR_IN_PROGRESS;
    if (op->shm->nunchecked) st = check_unchecked(op);
    return st == HCOMM_SUCCESS || st == HCOMM_ERR_IN_PROGRESS
               ? HCOMM_ERR_IN_PROGRESS
               : op_end(op, st);
}

hcomm_status_t hcomm_shm_op_progress(hcomm_shm_op_t *op) {
    hcomm_shm_t *shm = op->shm;
    hcomm_status_t st = HCOMM_SUCCESS;
    for (;;) {
        if (op->round == op->rounds) {
            if (op->rounds) shm->completed = op->first + op->rounds - 1;
            return op_end(op, HCOMM_SUCCESS);
        }
        switch (op->phase) {
        case PHASE_TURN:
            if (shm->completed + 1 != op->first)
                return shm->failed ? op_end(op, failed_earlier(op))
                                   : HCOMM_ERR_IN_PROGRESS;
            /* at most the lag limit of calls unchecked, and none before
             * a call that waits for every rank anyway */
            int unchecked_max = op->lagged ? hcomm_shm_lag_limit(shm->size) : 1;
            if (shm->nunchecked >= unchecked_max) {
                st = check_unchecked(op);
                if (st != HCOMM_SUCCESS && st != HCOMM_ERR_IN_PROGRESS)
                    return op_end(op, st);
                if (shm->nunchecked >= unchecked_max)
                    return HCOMM_ERR_IN_PROGRESS;
                st = HCOMM_SUCCESS;
            }
            op->phase = PHASE_FREE;
            /* fall through */
        case PHASE_FREE: {
            uint64_t lag = reuse_distance(op);
            /* A sender at the end of its ring would read its readers'
             * counters every call (a miss each): once it must look, it
             * lets them come halfway, and runs that far on what it saw. */
            if (op->lagged && lag > 2 && !all_known(op, SHM_DONE, op->seq, lag))
                lag /= 2;
            if (op->seq > lag && !all_reached(op, SHM_DONE, op->seq - lag))
                return waiting(op);
        }
            publish_input(op);
            op->phase = PHASE_ARRIVE;
            /* fall through */
        case PHASE_ARRIVE: {
            if (!inputs_arrived(op)) return waiting(op);
            if (op->lagged) {
                hcomm_shm_unchecked_t *u = &shm->unchecked[shm->nunchecked++];
                u->seq = op->seq;
                memcpy(u->desc, op->desc, sizeof(u->desc));
            } else if (op->seq == op->first) {
                if ((st = hcomm_shm_desc_check(op)) != HCOMM_SUCCESS)
                    return op_end(op, st);
                /* only where the peer may lag: else it never asks */
                if (shm->size == 2 && rooted_one_round(op))
                    set_compared(shm, op->seq, 1);
            }
            int next = after_arrive(op, &st);
            if (st != HCOMM_SUCCESS) return op_end(op, st);
            if (next < 0) break;
            op->phase = next;
        }
            /* fall through */
        case PHASE_REDUCED:
            if (root_writes(op)) {
                if (!reached(op, op->root, SHM_REDUCED, op->seq))
                    return waiting(op); /* the root's writes */
                break;
            }
            if (!all_reached(op, SHM_REDUCED, op->seq)) return waiting(op);
            if (op->algo == HCOMM_SHM_TWOSHOT)
                twoshot_gather(op);
            else if ((st = cma_gather_blocks(op)) != HCOMM_SUCCESS)
                return op_end(op, st);
            break;
        case PHASE_DONE:
            if (!all_reached(op, SHM_DONE, op->seq)) return waiting(op);
            op->phase = PHASE_FREE;
            op->round++;
            op->seq++;
            continue;
        }
        /* The round's reads are over. */
        publish_done(op);
        if (waits_for_readers(op)) {
            op->phase = PHASE_DONE;
            continue;
        }
        op->phase = PHASE_FREE;
        op->round++;
        op->seq++;
    }
}

void hcomm_shm_op_describe(const hcomm_shm_op_t *op, char *out, size_t len) {
    static const char *what[] = {"the previous call on this communicator",
                                 "slots still read by", "data from",
                                 "reduced blocks from", "the end of reads by"};
    if (op->phase == PHASE_TURN && op->shm->nunchecked)
        snprintf(out, len,
                 "shared memory: the check of round %llu, waiting for rank %d",
                 (unsigned long long)op->shm->unchecked[0].seq,
                 atomic_load_explicit(&op->waiting_for, memory_order_relaxed));
    else if (op->phase == PHASE_TURN)
        snprintf(out, len, "shared memory: %s", what[0]);
    else
        snprintf(out, len, "shared memory, round %llu: %s rank %d",
                 (unsigned long long)op->seq, what[op->phase],
                 atomic_load_explicit(&op->waiting_for, memory_order_relaxed));
}
