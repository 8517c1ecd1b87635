/* The shared-memory fast path between the ranks of a communicator that all
 * live on one node: a segment mapped by every rank, and direct algorithms on
 * it that synchronise through flags in the segment (no system call on the
 * fast path).
 *
 * Segment: one area per rank, each holding counters on their own cache
 * lines, a ring of 32 small entries, two copies (by sequence parity) of
 * an input slot and a result slot, and a ring of 32 sub-slots of 4 KiB:
 *   arrive  = s: the rank's data (or, for CMA, its buffer addresses) for
 *                round s is published (in round s's ring entry, followed by
 *                the data when it fits; else in round s's sub-slot when
 *                the data fits there, else in the slot of its parity);
 *   reduced = s: its share of the result of round s is published;
 *   done    = s: it has finished reading everything of round s.
 * Rounds are numbered alike on every rank (each direct call takes as many
 * consecutive numbers as it has rounds), so a rank writes a ring entry
 * (or sub-slot) only once every peer's done >= s - 32 +
 * HCOMM_SHM_LAG_MAX (below), and the parity-s slots once every peer's
 * done >= s - 2.
 *
 * Ranks that pass different arguments would count different rounds and
 * read or write past each other's buffers: the first round's ring entry
 * carries the call's descriptor (collective, count, type, operation,
 * root), and every rank waits for every peer's first round and compares
 * descriptors before it touches any peer's data. On a difference every
 * rank fails with HCOMM_ERR_MISMATCH, and the segment is then failed:
 * rounds are out of step, so every later call on it fails at once.
 *
 * A rank that waits for no peer's data in a one-round rooted call (a
 * broadcast or scatter root, a gather or reduce leaf) does not wait for
 * the descriptors either: as in MPI, it publishes and returns, so that it
 * runs ahead of its receivers. A rank that reads the root's data checks
 * the root's descriptor before it reads. Every other descriptor of such a
 * call is checked later: at the latest when a rank would hold more than
 * HCOMM_SHM_LAG calls unchecked (HCOMM_SHM_LAG_2 at 2 ranks), or before
 * it starts any other call; a mismatch then fails that later call with
 * HCOMM_ERR_MISMATCH. Ranks whose calls differ still never touch memory
 * past each other's buffers: the readers compare before they read.
 *
 * Above 2 ranks the later check compares every peer's descriptor, as
 * found in the call's ring entry, which therefore waits HCOMM_SHM_LAG_MAX
 * rounds more before it is reused. At 2 ranks the one peer compared
 * every descriptor already where it read (a receiver compares the root's,
 * a gather's root the leaf's), and says so on its done line
 * (shm_layout.h): the check reads that one line for up to
 * HCOMM_SHM_LAG_MAX calls, and compares descriptors only where the peer
 * finished the round without that word (it read no one's: a mismatch) or
 * stopped at a mismatch; a receiver, whose root is its one peer, waits
 * for the root's descriptor as any rank of an unrooted call does, and
 * keeps nothing to check. (Comparing
 * descriptors there, one line a call, held a root to 4 calls ahead; a
 * chain of every call's descriptors on the done line, or a vouch written
 * with the done counter, made the root wait for the peer to finish the
 * calls it checks.)
 *
 * Calls on one communicator run their rounds in call order: a call starts
 * once the previous direct call on the communicator has completed locally.
 *
 * Large messages skip the slots: each rank publishes its buffer addresses
 * and peers read them (or a 2-rank broadcast's or scatter's root writes
 * part of them) with process_vm_readv / process_vm_writev (cross-memory
 * attach, one copy), where the kernel allows it between every pair of
 * ranks. */
#ifndef HCOMM_SHM_TP_SHM_H
#define HCOMM_SHM_TP_SHM_H

#include "coll/plan.h"
#include "kernels/reduce.h"

#include <mpi.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* Registered memory (hcomm_mem_alloc): one mapping per allocation, every
 * rank's slice at base + rank * stride in every rank's view. Ids are agreed
 * (allocations are collective) and name a region to peers. */
typedef struct {
    uint32_t id;
    char *base;
    size_t stride;
} hcomm_shm_region_t;

/* One-round calls whose peers' descriptors are not checked yet (above):
 * at most this many per rank, so that a mismatch surfaces within as many
 * calls. At 2 ranks a check costs one line for all of them, above one a
 * peer for each. */
#define HCOMM_SHM_LAG 4
#define HCOMM_SHM_LAG_2 16
#define HCOMM_SHM_LAG_MAX HCOMM_SHM_LAG_2

static inline int hcomm_shm_lag_limit(int nranks) {
    return nranks == 2 ? HCOMM_SHM_LAG_2 : HCOMM_SHM_LAG;
}

typedef struct {
    uint64_t seq, desc[2];
} hcomm_shm_unchecked_t;

/* CMA reads are reduced from a bounce buffer of this many bytes, small
 * enough to stay in cache. */
#define HCOMM_SHM_BOUNCE_BYTES (128u << 10)

typedef struct hcomm_shm {
    char *base; /* the mapping */
    size_t bytes;
    int rank, size;
    size_t slot_bytes;  /* input slot; result slot is slot_bytes / size + 64 */
    size_t area_bytes;  /* one rank's area */
    int cma;            /* process_vm_readv works between every pair */
    int owns_mapping;   /* munmap at destroy (not for attached views) */
    uint64_t next_seq;  /* first round number of the next call */
    uint64_t completed; /* last round number of the last call completed */
    /* [flag * size + rank]: the highest value seen of each peer's flags,
     * so that a condition once met costs no cache miss again. */
    uint64_t *known;
    hcomm_shm_region_t *regions;
    int nregions, region_cap;
    uint32_t last_region_id;
    char *bounce; /* CMA reads before reducing (allocated on first use) */
    /* alltoallv's counts and places in bytes (allocated on first use; its
     * calls are blocking, one at a time) */
    size_t *a2av_bytes;
    /* Each rank's pid, taken once at setup from MPI and checked against
     * the segment: a pid read back from shared memory on every call could
     * have been overwritten by any rank (or a stray write) and would aim
     * process_vm_readv/writev at another process. */
    int32_t *pids;
    hcomm_status_t failed; /* a call found a mismatch: later ones fail */
    /* Oldest first: the rounds last done, one per call (any other call
     * compares them all before it starts). */
    hcomm_shm_unchecked_t unchecked[HCOMM_SHM_LAG_MAX];
    int nunchecked;
    /* 2 ranks: this rank's mask of rounds compared (its done line's), and
     * the peer's line as last read */
    uint64_t compared, peer_done, peer_compared;
    /* 2 ranks: unchecked rounds checked by comparing descriptors (a
     * mismatch: the peer stopped, or compared nothing); for tests */
    unsigned long compared_later;
} hcomm_shm_t;

typedef enum {
    HCOMM_SHM_NONE = 0, /* not a direct call: use a plan */
    HCOMM_SHM_ONESHOT,  /* from the slots: everyone reduces everything (its
                         * own block, for reduce_scatter) or copies */
    HCOMM_SHM_TWOSHOT,  /* each reduces its block, then all copy results */
    HCOMM_SHM_CMA       /* as two-shot, reading peers' buffers directly */
} hcomm_shm_algo_t;

/* Segment bytes for size ranks and a slot of slot_bytes. */
size_t hcomm_shm_segment_bytes(int size, size_t slot_bytes);

/* Collective over comm (all ranks on one node). Sets *out to NULL (and
 * returns success) where shared memory cannot be used: one rank, the
 * segment cannot be created or mapped; every rank gets the same answer.
 * The segment's name is unlinked before this returns. */
hcomm_status_t hcomm_shm_create(MPI_Comm comm, hcomm_shm_t **out);
/* A view of a mapping the caller made and zeroed, for rank of size (unit
 * tests run ranks as threads of one process). */
hcomm_status_t hcomm_shm_attach(void *base, size_t bytes, int rank, int size,
                                size_t slot_bytes, int cma, hcomm_shm_t **out);
void hcomm_shm_destroy(hcomm_shm_t *shm); /* NULL is fine */
/* Whether rank's process still exists (*pid: its pid). */
int hcomm_shm_peer_alive(const hcomm_shm_t *shm, int rank, int *pid);

/* Collective over comm: bytes of shared memory made by rank 0 and mapped by
 * every rank, its name unlinked before return; NULL on every rank if any
 * rank failed. */
void *hcomm_shm_map_shared(MPI_Comm comm, size_t bytes);
/* Registered regions: add one (the shm takes the mapping), find the one
 * holding this rank's [p, p + len) (and the offset in its slice), a peer's
 * address for an offset in its slice, remove (and unmap) the one whose
 * slice starts at ptr (0 if none does). */
hcomm_status_t hcomm_shm_region_add(hcomm_shm_t *shm, char *base, size_t stride,
                                    uint32_t *id);
const hcomm_shm_region_t *hcomm_shm_region_find(const hcomm_shm_t *shm,
                                                const void *p, size_t len,
                                                size_t *off);
char *hcomm_shm_region_peer(const hcomm_shm_t *shm, uint32_t id, int rank,
                            size_t off);
int hcomm_shm_region_remove(hcomm_shm_t *shm, const void *ptr);

/* The direct algorithm for a call of bytes (count * element size; per rank
 * block for allgather), or NONE. Depends only on what every rank agrees on.
 */
hcomm_shm_algo_t hcomm_shm_select(const hcomm_shm_t *shm, hcomm_coll_t coll,
                                  size_t bytes);

/* The eighths of each receiver's block of bytes that the root of a
 * broadcast or scatter by direct copies writes into the receiver while
 * the receiver reads the rest; 0: the receivers read it all. */
size_t hcomm_shm_root_eighths(const hcomm_shm_t *shm, hcomm_coll_t coll,
                              size_t block);

/* Where a rank's buffers of a CUDA IPC call lie in registered device
 * memory (hcomm_mem_alloc_device): region ids (0: not registered) and
 * offsets. Each rank sends its own with the call's agreement round; a
 * tail (hcomm_shm_devtail_t) follows where has_tail says so. */
typedef struct {
    uint32_t in_reg, out_reg;
    uint64_t in_off, out_off;
    uint32_t has_tail;
} hcomm_shm_devreg_t;

/* An ordinary device allocation its owner offers its peers to map
 * (src/cuda_ipc/ipc_cards.h says how they agree that all have). */
typedef struct {
    uint64_t id;              /* CUDA's buffer id of the allocation; 0: none */
    uint64_t off;             /* of the call's buffer in the allocation */
    uint64_t bytes;           /* the allocation's */
    uint32_t gen;             /* its number among its owner's offers */
    uint32_t confirmed;       /* every peer has mapped it */
    unsigned char handle[64]; /* cudaIpcMemHandle_t */
} hcomm_shm_devcard_t;

#define HCOMM_SHM_DEVTAIL_RANKS 16 /* HCOMM_IPC_MAX_RANKS */
#define HCOMM_SHM_DEVTAIL_RETIRED 2

/* What a rank's call on ordinary device buffers adds to its agreement. */
typedef struct {
    hcomm_shm_devcard_t card[2]; /* the input's and the output's */
    /* per peer, the highest gen of its cards this rank has mapped */
    uint32_t mapped[HCOMM_SHM_DEVTAIL_RANKS];
    uint64_t unmappable; /* peers one of whose cards this rank could not map */
    uint64_t retired[HCOMM_SHM_DEVTAIL_RETIRED]; /* ids freed: unmap */
} hcomm_shm_devtail_t;

/* alltoallv's record head (shm_alltoallv.c), in a rank's first-round
 * ring entry. */
typedef struct {
    uint64_t bytes;          /* the whole record's, UINT64_MAX past it */
    uint64_t sent, expected; /* sums of pair terms (shm_alltoallv.c) */
    uint64_t readable;       /* peers may read the send buffer directly */
    uint64_t largest;        /* of the blocks it sends */
} hcomm_shm_a2av_head_t;

/* One direct call in progress. */
typedef struct {
    hcomm_shm_t *shm;
    hcomm_shm_algo_t algo;
    hcomm_coll_t coll; /* any but send and recv */
    const char *sendbuf;
    char *recvbuf;
    size_t count, esize; /* count: elements (per rank for allgather) */
    int root;
    uint64_t desc[2]; /* what every rank must pass alike (shm_check.c) */
    hcomm_reduce_fn_t reduce;
    hcomm_scale_fn_t scale;      /* HCOMM_AVG, else NULL */
    uint64_t first, seq;         /* first and current round number */
    size_t rounds, round, chunk; /* chunk: elements per round */
    int phase;
    int lagged; /* compares the peers' descriptors later (shm.h) */
    /* direct copies: the eighths of each receiver's block the root writes
     * (hcomm_shm_root_eighths); 0 for every other call */
    size_t root_eighths;
    /* Whether the first round reads the line after each peer's arrive
     * counter too (alltoallv: its record's table): asked for with it. */
    int reads_next_line;
    /* The peer last waited on, for timeout messages; read by a thread
     * testing the request while another advances it (request.c). */
    _Atomic int waiting_for;
    char *own_copy; /* in-place alltoall by direct reads: what peers read */
    /* allgatherv, reduce_scatterv: every rank's count (count is the
     * largest) and, allgatherv, place */
    const size_t *vcounts, *vdispls;
    size_t *vcopy; /* what they point into: the call's copy (alltoallv:
                    * vcounts is shm->a2av_bytes) */
    int declined;  /* alltoallv: blocks too large here, run a plan */
    /* alltoallv: this rank's first-round record head, kept here: its
     * line in the segment may have moved to a peer that read it, and
     * reading it back would cost a miss. */
    hcomm_shm_a2av_head_t a2av_head;
    /* A CUDA IPC call's agreement: every rank's registration, this rank's
     * sent with the descriptor and the peers' read back before the round
     * ends (the ring entry holding them is reused only after that). */
    hcomm_shm_devreg_t *devreg;
    hcomm_shm_devtail_t *devtail;
} hcomm_shm_op_t;

/* Starts a call (it runs once its turn on the communicator comes). op is
 * ignored unless coll reduces, root unless it is a broadcast. */
hcomm_status_t hcomm_shm_op_start(hcomm_shm_op_t *op, hcomm_shm_t *shm,
                                  hcomm_shm_algo_t algo, hcomm_coll_t coll,
                                  const void *sendbuf, void *recvbuf,
                                  size_t count, hcomm_dtype_t dtype,
                                  hcomm_op_t rop, int root);
/* allgatherv: rank r's rcounts[r] elements land at rdispls[r] of every
 * rank's receive buffer; the descriptor carries a digest of the counts.
 * ONESHOT: rounds through the slots carry a piece of every block (each as
 * long as its block allows); CMA: each rank reads every peer's block from
 * its send buffer. */
hcomm_status_t hcomm_shm_op_start_v(hcomm_shm_op_t *op, hcomm_shm_t *shm,
                                    hcomm_shm_algo_t algo, const void *sendbuf,
                                    void *recvbuf, const size_t *rcounts,
                                    const size_t *rdispls, hcomm_dtype_t dtype);
/* reduce_scatterv through the slots: rank r's block of the result has
 * rcounts[r] elements, the blocks packed in rank order in every send
 * buffer; a round carries a piece of every block. */
hcomm_status_t hcomm_shm_op_start_rv(hcomm_shm_op_t *op, hcomm_shm_t *shm,
                                     const void *sendbuf, void *recvbuf,
                                     const size_t *rcounts, hcomm_dtype_t dtype,
                                     hcomm_op_t rop);
/* alltoallv on the segment, for blocking calls only (its first round may
 * add rounds to the call, which no later call may have numbered yet): rank
 * r's scounts[j] elements at sdispls[j] land at rank j's rdispls[r] (in
 * place, sendbuf == recvbuf: rcounts and rdispls stand for both). In the
 * first round every rank learns every rank's sizes and all take the same
 * route (shm_alltoallv.c): the blocks in that round, in more rounds, by
 * direct reads, or none: the call then ends with op->declined set and
 * nothing moved, and runs on a plan. The first round also compares the
 * counts: each rank publishes a digest of what it sends every peer and
 * one of what it expects from every peer, and where the sums over the
 * ranks differ, every rank fails with HCOMM_ERR_MISMATCH before anything
 * is copied; a receiver also checks each block's length where it can. */
hcomm_status_t hcomm_shm_op_start_a2av(
    hcomm_shm_op_t *op, hcomm_shm_t *shm, const void *sendbuf, void *recvbuf,
    const size_t *scounts, const size_t *sdispls, const size_t *rcounts,
    const size_t *rdispls, hcomm_dtype_t dtype);
/* A call on GPU memory runs elsewhere (the plans) but first agrees here:
 * one round whose descriptor is the call's, marked as GPU memory, so that
 * ranks that passed host memory to the same call, or other arguments, all
 * fail with HCOMM_ERR_MISMATCH instead of waiting on different paths. */
hcomm_status_t hcomm_shm_op_agree(hcomm_shm_op_t *op, hcomm_shm_t *shm,
                                  hcomm_coll_t coll, size_t count,
                                  hcomm_dtype_t dtype, hcomm_op_t rop,
                                  int root);
/* Advances as far as the peers allow: HCOMM_ERR_IN_PROGRESS, HCOMM_SUCCESS
 * or an error (HCOMM_ERR_MISMATCH, a failed cross-memory read). */
hcomm_status_t hcomm_shm_op_progress(hcomm_shm_op_t *op);
/* What an incomplete call waits for, for the timeout message. */
void hcomm_shm_op_describe(const hcomm_shm_op_t *op, char *out, size_t len);

#endif
