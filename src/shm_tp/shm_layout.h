/* Where things are in the segment (see shm.h). Private to src/shm_tp. */
#ifndef HCOMM_SHM_TP_SHM_LAYOUT_H
#define HCOMM_SHM_TP_SHM_LAYOUT_H

#include "shm_tp/shm.h"

#include <stdatomic.h>

#define HCOMM_SHM_LINE 64
/* Lines: reduced, done, info (two). */
#define HCOMM_SHM_COUNTERS (4 * HCOMM_SHM_LINE)
/* Every round's arrive counter sits in an entry of a ring indexed by the
 * round number, then, in a call's first round, the call's descriptor (two
 * words), then, when the round is small enough, its data: a peer's
 * descriptor and data then cost no second cache miss. A rank may run
 * HCOMM_SHM_RING small rounds ahead of its slowest peer, so it reads a
 * peer's done counter once per several rounds, not every round. Larger
 * rounds put their data in the slot of their parity. */
#define HCOMM_SHM_RING 32
#define HCOMM_SHM_ENTRY 512
/* Rounds too large for their entry but at most this large (a scatter
 * root's blocks of 128 B at 8 ranks, say) go in a ring of as many
 * sub-slots, one per entry, so that they too may run a ring's length
 * ahead: in a slot of their parity, a rank would wait every other round
 * for its slowest reader (a small scatter's root at 8 and 16 ranks was
 * 0.7-0.8x MPI). Larger rounds take the slots. */
#define HCOMM_SHM_SUB 4096
#define HCOMM_SHM_ENTRY_DESC 8  /* offset of the descriptor in an entry */
#define HCOMM_SHM_ENTRY_DATA 24 /* offset of the data */
#define HCOMM_SHM_RING_DATA (HCOMM_SHM_ENTRY - HCOMM_SHM_ENTRY_DATA)
#define HCOMM_SHM_HEADER (HCOMM_SHM_COUNTERS + HCOMM_SHM_RING * HCOMM_SHM_ENTRY)

typedef struct {
    int32_t pid;
    uint64_t probe_addr; /* &pid in the owner's address space */
    /* CMA: the owner's buffers, by round parity: addresses in its own
     * space, or, where reg is a region id (registered memory), offsets in
     * its slice of that region, which peers read in place. */
    uint64_t send_addr[2];
    uint64_t recv_addr[2];
    uint32_t send_reg[2], recv_reg[2];
} hcomm_shm_info_t;
_Static_assert(sizeof(hcomm_shm_info_t) <= 2 * HCOMM_SHM_LINE,
               "the info fits its two lines");

typedef enum { SHM_ARRIVE = 0, SHM_REDUCED = 1, SHM_DONE = 2 } hcomm_shm_flag_t;

static inline size_t hcomm_shm_result_bytes(int size, size_t slot_bytes) {
    return (slot_bytes / (size_t)size + 2 * HCOMM_SHM_LINE) &
           ~(size_t)(HCOMM_SHM_LINE - 1);
}

static inline size_t hcomm_shm_area_bytes(int size, size_t slot_bytes) {
    size_t b = HCOMM_SHM_HEADER +
               2 * (slot_bytes + hcomm_shm_result_bytes(size, slot_bytes)) +
               HCOMM_SHM_RING * HCOMM_SHM_SUB;
    return (b + 4095) & ~(size_t)4095;
}

static inline char *hcomm_shm_area(const hcomm_shm_t *shm, int rank) {
    return shm->base + (size_t)rank * shm->area_bytes;
}

static inline char *hcomm_shm_entry(const hcomm_shm_t *shm, int rank,
                                    uint64_t seq) {
    return hcomm_shm_area(shm, rank) + HCOMM_SHM_COUNTERS +
           (size_t)(seq % HCOMM_SHM_RING) * HCOMM_SHM_ENTRY;
}

/* The counter f of rank for round seq (arrive: the round's ring entry). */
static inline _Atomic uint64_t *hcomm_shm_flag(const hcomm_shm_t *shm, int rank,
                                               hcomm_shm_flag_t f,
                                               uint64_t seq) {
    char *at = f == SHM_ARRIVE ? hcomm_shm_entry(shm, rank, seq)
                               : hcomm_shm_area(shm, rank) +
                                     (size_t)(f - 1) * HCOMM_SHM_LINE;
    return (_Atomic uint64_t *)(void *)at;
}

/* At 2 ranks the done counter's line also says, for rounds near its
 * owner's (bit seq % 64), those in which it compared its peer's
 * descriptor equal to its own, set as it compared (shm.h); failed: the
 * owner found a mismatch and stopped. Round seq's bit is cleared when the
 * owner is done with round seq - HCOMM_SHM_COMPARED_AHEAD, so a bit read
 * once its owner was done with that round is seq's: a rank writes round
 * seq's ring entry (and then checks seq) only once its peer is done with
 * seq - (RING - LAG_MAX), and the peer cannot be done with seq + RING
 * before the rank is done with seq + LAG_MAX, which it is not while seq is
 * unchecked (the ring entry of round seq + RING waits for that). */
#define HCOMM_SHM_COMPARED_AHEAD 24
/* A rank that holds LAG_MAX rounds unchecked must still find its next
 * ring entry free without its peer's next round: with a ring of LAG_MAX
 * entries both ranks of a 2-rank gather waited for each other (spun until
 * the timeout). */
_Static_assert(HCOMM_SHM_RING > HCOMM_SHM_LAG_MAX,
               "a lagging rank's next ring entry waits on no later round");
_Static_assert(HCOMM_SHM_COMPARED_AHEAD > HCOMM_SHM_RING - HCOMM_SHM_LAG_MAX &&
                   HCOMM_SHM_COMPARED_AHEAD + HCOMM_SHM_RING < 64,
               "a compared bit is its round's while the peer checks it");
typedef struct {
    _Atomic uint64_t done, compared, failed;
} hcomm_shm_done_line_t;

static inline hcomm_shm_done_line_t *hcomm_shm_done_line(const hcomm_shm_t *shm,
                                                         int rank) {
    return (hcomm_shm_done_line_t *)(void *)hcomm_shm_flag(shm, rank, SHM_DONE,
                                                           0);
}

/* This rank found a mismatch: its later calls fail at once, and peers
 * that wait for its done counter to check a round see why it stopped. */
static inline void hcomm_shm_fail_mismatch(hcomm_shm_t *shm) {
    shm->failed = HCOMM_ERR_MISMATCH;
    atomic_store_explicit(&hcomm_shm_done_line(shm, shm->rank)->failed, 1,
                          memory_order_release);
}

static inline hcomm_shm_info_t *hcomm_shm_info(const hcomm_shm_t *shm,
                                               int rank) {
    return (hcomm_shm_info_t *)(void *)(hcomm_shm_area(shm, rank) +
                                        2 * HCOMM_SHM_LINE);
}

/* Whether a round of bytes travels in its ring entry. */
static inline int hcomm_shm_in_ring(size_t bytes) {
    return bytes <= HCOMM_SHM_RING_DATA;
}

/* Whether a round of bytes takes the slot of its parity (else its ring
 * entry or its sub-slot, reused a ring's length later). */
static inline int hcomm_shm_in_slot(size_t bytes) {
    return bytes > HCOMM_SHM_SUB;
}

/* Where rank puts its input of round seq, a round of bytes. */
static inline char *hcomm_shm_in(const hcomm_shm_t *shm, int rank, uint64_t seq,
                                 size_t bytes) {
    if (hcomm_shm_in_ring(bytes))
        return hcomm_shm_entry(shm, rank, seq) + HCOMM_SHM_ENTRY_DATA;
    char *slots = hcomm_shm_area(shm, rank) + HCOMM_SHM_HEADER;
    if (!hcomm_shm_in_slot(bytes)) /* the sub-slots, after the results */
        return slots +
               2 * (shm->slot_bytes +
                    hcomm_shm_result_bytes(shm->size, shm->slot_bytes)) +
               (size_t)(seq % HCOMM_SHM_RING) * HCOMM_SHM_SUB;
    return slots + (size_t)(seq & 1) * shm->slot_bytes;
}

/* The descriptor rank wrote in the first round of the call at seq. */
static inline uint64_t *hcomm_shm_desc(const hcomm_shm_t *shm, int rank,
                                       uint64_t seq) {
    return (uint64_t *)(void *)(hcomm_shm_entry(shm, rank, seq) +
                                HCOMM_SHM_ENTRY_DESC);
}

/* Whether two descriptors (shm.h) are the same call's. */
static inline int hcomm_shm_desc_equal(const uint64_t a[2],
                                       const uint64_t b[2]) {
    return a[0] == b[0] && a[1] == b[1];
}

/* Result slot of round parity p. */
static inline char *hcomm_shm_res(const hcomm_shm_t *shm, int rank, int p) {
    return hcomm_shm_area(shm, rank) + HCOMM_SHM_HEADER + 2 * shm->slot_bytes +
           (size_t)p * hcomm_shm_result_bytes(shm->size, shm->slot_bytes);
}

/* The k-th peer to copy from: rank + k, so that peers copying at once
 * read different ranks (reads of one buffer by many contend on its pages,
 * which each direct read pins). */
static inline int hcomm_shm_rotated(const hcomm_shm_t *shm, int k) {
    return (shm->rank + k) % shm->size;
}

/* Peers' lines come from other cores' caches one miss at a time unless
 * asked for together: request them all before reading. */
static inline void hcomm_shm_prefetch(const char *p, size_t bytes) {
    /* every line the bytes touch: data in a ring entry starts mid-line */
    size_t skew = (uintptr_t)p % HCOMM_SHM_LINE;
    for (size_t i = 0; i < skew + bytes; i += HCOMM_SHM_LINE)
        __builtin_prefetch(p - skew + i);
}

/* The slots carry less than this many bytes (all blocks) of a call that
 * moves blocks: two copies of each byte, from cache. Scatter and gather
 * above 2 ranks go to direct copies (one copy) from it, where the slots
 * overflow the cache, although all of those copies land on the root's
 * memory: 2 MiB in all on the 16-core host took 176-240 us through the
 * slots and 76-190 directly (scatter), 265-301 and 58-234 (gather), at
 * 4-16 ranks; at 512 KiB and 1 MiB the direct copies took 1.2-1.6x longer
 * (README, "Shared memory"). */
#define HCOMM_SHM_SLOTS_MAX_MOVE (2u << 20)
/* Whether a block of bytes for each rank comes to less than limit in all
 * (a comparison that cannot overflow). */
static inline int hcomm_shm_all_below(const hcomm_shm_t *shm, uint64_t block,
                                      size_t limit) {
    size_t n = (size_t)shm->size;
    return block < (limit + n - 1) / n;
}
/* Alltoall and alltoallv above 2 ranks go to direct copies from this
 * many bytes in all: each of their copies lands on a different rank's
 * memory (their ranks read their peers in rotated order). On the 16-core
 * host they took 1.9-2.7x less time that way than through the slots at
 * 512 KiB and 1 MiB (alltoall at 4, 8 and 16 ranks), 1.1-2x less at 256
 * KiB (alltoallv 2-3.6x at 512 KiB and 1 MiB); at 128 KiB alltoall at 16
 * ranks took longer. */
#define HCOMM_SHM_DIRECT_MIN_SPREAD (256u << 10)
/* A 2-rank gather goes to direct copies (its peer writes into the root)
 * from this many bytes in all. Through the slots its root copies one
 * slot out while its peer fills the other. On the 16-core host direct
 * copies were faster from 128 KiB (4 us against 7-8, 7 against 11-12; MPI
 * 12 and 21) and 2x at 512 KiB. Here (2 cores) the answer moves with
 * the spells of the vCPUs' distance (README): at stop 50 the slots took
 * 1.8 us at 128 KiB and 3.4 at 256 KiB, direct copies 6-7.6 and 10-12
 * (MPI 6.5-8.5 and 11.5-15); at stop 54, a line's round trip 250-330 ns,
 * 6 runs each with new data every call, the slots took 7.6 and 12.5 us,
 * direct copies 4.7 and 7.5 (MPI 21 and 37), and at 64 KiB 3.7 against
 * 3.0 (MPI 13). The limit is where the 16-core host puts it. */
#define HCOMM_SHM_DIRECT_MIN_GATHER_2 (128u << 10)
/* At 2 ranks scatter, alltoall and alltoallv read blocks from this size
 * directly where the kernel allows it: here
 * 128 KiB to 2 MiB blocks took 1.3-2x longer through the slots, 64
 * KiB 1.1-1.5x, 32 KiB about the same (a gather: above). */
#define HCOMM_SHM_DIRECT_MIN_2 (64u << 10)

/* Publishes where this rank's buffer of len bytes is: a region id and
 * offset when it is registered, else its address. */
void hcomm_shm_publish_buffer(const hcomm_shm_t *shm, const void *buf,
                              size_t len, uint64_t *addr, uint32_t *reg);
/* Copies bytes of a peer's buffer (its receive buffer with recv, else its
 * send buffer) at off into dst: in place from registered memory, else with
 * a cross-memory read. */
hcomm_status_t hcomm_shm_peer_copy(const hcomm_shm_op_t *op, int peer, int recv,
                                   size_t off, void *dst, size_t bytes);

/* alltoallv's round (shm_alltoallv.c): this rank's blocks published, and,
 * once every rank's are, its own copied in (or the call declined). */
void hcomm_shm_a2av_publish(hcomm_shm_op_t *op);
hcomm_status_t hcomm_shm_a2av_copy(hcomm_shm_op_t *op);

/* A call's descriptor: what every rank must pass alike. Word 0 is the
 * count; word 1 is [root:32][op:8][type:8][0:8][collective:8], where the
 * type is the data type of a reduction, else the element size with
 * HCOMM_SHM_DESC_SIZE set (moving bytes, int32 and float32 are alike), and
 * op and root are kept only where they matter, so that what a call ignores
 * cannot differ. */
#define HCOMM_SHM_DESC_SIZE 0x80u
#define HCOMM_SHM_DESC_NO_OP 0xffu
/* Word 1, bit 8: the rank's buffers are GPU memory (hcomm_shm_op_agree). */
#define HCOMM_SHM_DESC_GPU (1ull << 8)

static inline void hcomm_shm_desc_make(hcomm_shm_op_t *op, hcomm_dtype_t dtype,
                                       hcomm_op_t rop) {
    int r = op->coll == HCOMM_COLL_ALLREDUCE ||
            op->coll == HCOMM_COLL_REDUCE_SCATTER ||
            op->coll == HCOMM_COLL_REDUCE ||
            op->coll == HCOMM_COLL_REDUCE_SCATTERV;
    int rooted =
        op->coll == HCOMM_COLL_BCAST || op->coll == HCOMM_COLL_REDUCE ||
        op->coll == HCOMM_COLL_GATHER || op->coll == HCOMM_COLL_SCATTER;
    uint64_t type = r ? (uint64_t)dtype : HCOMM_SHM_DESC_SIZE | op->esize;
    uint64_t o = r ? (uint64_t)rop : HCOMM_SHM_DESC_NO_OP;
    uint64_t root = rooted ? (uint32_t)op->root : 0;
    op->desc[0] = op->count;
    op->desc[1] = (uint64_t)op->coll | type << 16 | o << 24 | root << 32;
}

/* HCOMM_ERR_MISMATCH with a message that names the fields and the ranks
 * that differ in the call whose first round is seq (all published), one
 * before the current call's when earlier; the segment is failed
 * (shm_check.c). */
hcomm_status_t hcomm_shm_desc_mismatch(hcomm_shm_t *shm, uint64_t seq,
                                       int earlier);

/* Whether a peer's descriptor of the call whose first round is seq (all
 * published) differs from desc: two words per peer from lines the arrive
 * counters brought in. Not this rank's own line: a peer's read may have
 * taken it away (a remote read of a line just written can migrate it),
 * and reading it back would cost a miss. */
static inline int hcomm_shm_desc_differs(const hcomm_shm_t *shm, uint64_t seq,
                                         const uint64_t desc[2]) {
    const char *d = (const char *)hcomm_shm_desc(shm, 0, seq);
    uint64_t differ = 0;
    for (int p = 0; p < shm->size; p++, d += shm->area_bytes) {
        const uint64_t *w = (const uint64_t *)(const void *)d;
        if (p != shm->rank) differ |= (w[0] ^ desc[0]) | (w[1] ^ desc[1]);
    }
    return differ != 0;
}

/* Whether every peer's descriptor of op's first round (all published) is
 * op's. */
static inline hcomm_status_t hcomm_shm_desc_check(hcomm_shm_op_t *op) {
    return hcomm_shm_desc_differs(op->shm, op->first, op->desc)
               ? hcomm_shm_desc_mismatch(op->shm, op->first, 0)
               : HCOMM_SUCCESS;
}

#endif
