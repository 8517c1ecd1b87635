/* alltoallv on the node's segment (hcomm_shm_op_start_a2av, shm.h). A rank
 * knows only its own counts, so in the call's first round every rank
 * publishes one record: a head (the record's length, its largest block, two
 * digests of its counts, whether peers may read its send buffer directly),
 * a table (per peer: where the block for it lies, in the record where the
 * record is whole, else in the send buffer; its length; and the length
 * this rank expects back), then the blocks for its peers (its own it copies
 * from its send buffer). The head sits in the round's
 * ring entry, on the arrive counter's line; the record with it where it
 * fits, else in the slot of the round's parity. A record too large for the
 * slot leaves its blocks out, and its table too where even that does not
 * fit.
 *
 * Once every record is published, every rank sees the same heads and takes
 * the same route:
 *  - every record whole: each peer's block from its record;
 *  - else, where every rank's blocks can be read and the largest is large
 *    enough (direct_first, as alltoall's rule), direct reads (below);
 *  - else, where the largest block of any rank, times the ranks, is below
 *    HCOMM_SHM_SLOTS_MAX_MOVE: more rounds through the slots, as alltoall
 *    takes, each carrying a piece of every block (the call's rounds grow
 *    from one: it is blocking, so no later call holds round numbers yet);
 *  - else each peer's block from its record where whole, else by a direct
 *    read of the peer's send buffer (a rank whose buffer is read stays
 *    until its peers are done);
 *  - where some rank's blocks can be reached none of these ways, none
 *    (declined). */
#include "shm_tp/shm_layout.h"
#include "core/log.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef hcomm_shm_a2av_head_t head_t;
/* The head rides on the arrive counter's line (shm_layout.h): a word more
 * before it took a third line for 8-byte blocks at 2 ranks (0.14 us to
 * 0.17). */
_Static_assert(HCOMM_SHM_ENTRY_DATA + sizeof(head_t) <= HCOMM_SHM_LINE,
               "the head shares the counter's line");

typedef struct {
    /* the block in the record where the record is whole, else in the send
     * buffer: one word, so that a 2-rank record of 8-byte blocks fills one
     * line after its head's (two words took a third line: 8 B at 2 ranks,
     * 0.60-0.71 us against 0.50-0.58) */
    uint64_t where;
    uint64_t bytes, expects;
} block_t;

/* Records up to this long are fetched whole before they are read. */
#define PREFETCH_MAX 2048

/* What a record may take: a slot, and no more than the slots move best. */
static size_t record_limit(const hcomm_shm_t *shm) {
    return shm->slot_bytes < HCOMM_SHM_SLOTS_MAX_MOVE
               ? shm->slot_bytes
               : HCOMM_SHM_SLOTS_MAX_MOVE;
}

/* Each block's piece in a round through the slots (0: too small). */
static size_t piece_bytes(const hcomm_shm_t *shm) {
    return (shm->slot_bytes / (size_t)shm->size) & ~(size_t)7;
}

/* A rank's table has an entry for each peer, none for itself: its own
 * block no peer reads, and at 2 ranks 24-byte blocks then fit the line
 * after the head's (a third line took 0.57-0.58 us where two took
 * 0.34-0.44). */
static size_t table_bytes(const hcomm_shm_t *shm) {
    return sizeof(head_t) + (size_t)(shm->size - 1) * sizeof(block_t);
}

/* Where peer j's entry is in rank r's table. */
static size_t entry_of(int r, int j) {
    return (size_t)(j < r ? j : j - 1);
}

/* The part of a record of `bytes` that is published: all of it, the head
 * and table, or the head alone. Writer and readers compute it alike. */
static size_t published_bytes(const hcomm_shm_t *shm, uint64_t bytes) {
    size_t limit = record_limit(shm);
    return bytes <= limit              ? (size_t)bytes
           : table_bytes(shm) <= limit ? table_bytes(shm)
                                       : sizeof(head_t);
}

/* One pair's term, as sender from and receiver to of bytes. A rank's sent
 * digest sums the terms of what it sends, its expected digest those of
 * what it expects; the sums over all ranks are equal exactly when every
 * rank expects what its peers send it (but for a 64-bit collision, which
 * the receiver's check of each block's length still catches). */
static uint64_t pair_term(int from, int to, uint64_t bytes) {
    uint64_t x = ((uint64_t)(uint32_t)from << 32 | (uint32_t)to) ^
                 (bytes * 0x9e3779b97f4a7c15ull);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static head_t *own_head(hcomm_shm_op_t *op) {
    return &op->a2av_head;
}

static const head_t *head_of(const hcomm_shm_t *shm, int r, uint64_t seq) {
    return (const head_t *)(const void *)hcomm_shm_in(shm, r, seq,
                                                      sizeof(head_t));
}

/* Whether a record of bytes (its head's) is published whole, blocks and
 * all: UINT64_MAX marks one that is not (record_head). */
static int is_whole(uint64_t bytes) {
    return bytes != UINT64_MAX;
}

/* Rank r's head: this rank's own from the op. */
static const head_t *head_at(hcomm_shm_op_t *op, int r) {
    return r == op->shm->rank ? own_head(op) : head_of(op->shm, r, op->seq);
}

/* Rank r's table, or NULL where it was left out. */
static const block_t *table_of(const hcomm_shm_t *shm, int r, uint64_t seq) {
    size_t len = published_bytes(shm, head_of(shm, r, seq)->bytes);
    if (len == sizeof(head_t)) return NULL;
    return (const block_t *)(const void *)(hcomm_shm_in(shm, r, seq, len) +
                                           sizeof(head_t));
}

/* Whether blocks as large as largest go by direct reads, not through the
 * slots, where every rank's send buffer may be read: where alltoall's
 * would, whose copies these are, in the same rotated order (layout.h;
 * measured on alltoall, not on alltoallv). */
static int direct_first(const hcomm_shm_t *shm, uint64_t largest) {
    return hcomm_shm_select(shm, HCOMM_COLL_ALLTOALL, (size_t)largest) ==
           HCOMM_SHM_CMA;
}

/* The head as the counts decide it: the largest block sent, and the whole
 * record's length, UINT64_MAX past what a record may take or where its
 * blocks are to be read directly. */
static head_t record_head(const hcomm_shm_op_t *op) {
    size_t n = (size_t)op->shm->size, me = (size_t)op->shm->rank;
    uint64_t bytes = table_bytes(op->shm), largest = 0;
    for (size_t j = 0; j < n; j++) {
        if (op->vcounts[j] > largest) largest = op->vcounts[j];
        if (j == me) continue; /* kept from the send buffer (copy_blocks) */
        /* blocks may overlap: saturate */
        bytes = op->vcounts[j] > UINT64_MAX - bytes ? UINT64_MAX
                                                    : bytes + op->vcounts[j];
    }
    if ((direct_first(op->shm, largest) && op->sendbuf != op->recvbuf) ||
        bytes > record_limit(op->shm))
        bytes = UINT64_MAX;
    return (head_t){.bytes = bytes, .largest = largest};
}

hcomm_status_t hcomm_shm_op_start_a2av(
    hcomm_shm_op_t *op, hcomm_shm_t *shm, const void *sendbuf, void *recvbuf,
    const size_t *scounts, const size_t *sdispls, const size_t *rcounts,
    const size_t *rdispls, hcomm_dtype_t dtype) {
    size_t n = (size_t)shm->size, esize = hcomm_dtype_size(dtype);
    if (sendbuf == recvbuf) { /* in place: the blocks sent are those kept */
        scounts = rcounts;
        sdispls = rdispls;
    }
    /* in bytes: what is sent and from where, what comes and to where */
    if (!shm->a2av_bytes && !(shm->a2av_bytes = malloc(4 * n * sizeof(size_t))))
        return hcomm_error(HCOMM_ERR_NO_MEMORY, "no memory for the counts");
    size_t *b = shm->a2av_bytes;
    for (size_t j = 0; j < n; j++) {
        b[j] = scounts[j] * esize;
        b[n + j] = sdispls[j] * esize;
        b[2 * n + j] = rcounts[j] * esize;
        b[3 * n + j] = rdispls[j] * esize;
    }
    hcomm_status_t st =
        hcomm_shm_op_start(op, shm, HCOMM_SHM_ONESHOT, HCOMM_COLL_ALLTOALLV,
                           sendbuf, recvbuf, 0, dtype, HCOMM_SUM, 0);
    if (st != HCOMM_SUCCESS) return st;
    op->vcounts = b;
    op->reads_next_line = 1; /* the record's table */
    /* One round of one element per byte published: the slot's or the ring
     * entry's reuse then follows from the length, as for the others. */
    op->esize = 1;
    *own_head(op) = record_head(op);
    op->count = op->chunk = published_bytes(shm, own_head(op)->bytes);
    return HCOMM_SUCCESS;
}

/* A later round's piece of block j: [*off, *off + return value). */
static size_t piece_of(const hcomm_shm_op_t *op, size_t len, size_t *off) {
    size_t piece = piece_bytes(op->shm);
    *off = (op->round - 1) * piece;
    return len <= *off ? 0 : len - *off < piece ? len - *off : piece;
}

/* A later round: this round's piece of every block, block j's at
 * j * piece_bytes in the slot. */
static void publish_pieces(hcomm_shm_op_t *op) {
    hcomm_shm_t *shm = op->shm;
    size_t n = (size_t)shm->size, piece = piece_bytes(shm), off;
    const size_t *len = op->vcounts, *from = len + n;
    char *in = hcomm_shm_in(shm, shm->rank, op->seq, n * piece);
    for (size_t j = 0; j < n; j++) {
        size_t bytes = piece_of(op, len[j], &off);
        if (bytes) memcpy(in + j * piece, op->sendbuf + from[j] + off, bytes);
    }
}

static void copy_pieces(hcomm_shm_op_t *op) {
    hcomm_shm_t *shm = op->shm;
    int n = shm->size, me = shm->rank;
    size_t piece = piece_bytes(shm), off;
    const size_t *want = op->vcounts + 2 * (size_t)n, *to = want + n;
    for (int k = 0; k < n; k++) {
        int r = hcomm_shm_rotated(shm, k);
        size_t bytes = piece_of(op, want[r], &off);
        const char *in = hcomm_shm_in(shm, r, op->seq, (size_t)n * piece);
        if (bytes)
            memcpy(op->recvbuf + to[r] + off, in + (size_t)me * piece, bytes);
    }
}

void hcomm_shm_a2av_publish(hcomm_shm_op_t *op) {
    if (op->round > 0) {
        publish_pieces(op);
        return;
    }
    hcomm_shm_t *shm = op->shm;
    int me = shm->rank;
    size_t n = (size_t)shm->size;
    const size_t *len = op->vcounts, *from = len + n, *expects = len + 2 * n;
    head_t *head = own_head(op);
    size_t extent = 0; /* of the send buffer */
    for (size_t j = 0; j < n; j++) {
        head->sent += pair_term(me, (int)j, len[j]);
        head->expected += pair_term((int)j, me, expects[j]);
        if (len[j] && from[j] + len[j] > extent) extent = from[j] + len[j];
    }
    size_t published = published_bytes(shm, head->bytes);
    char *rec = hcomm_shm_in(shm, me, op->seq, published);
    if (published > sizeof(*head)) {
        block_t *table = (block_t *)(void *)(rec + sizeof(*head));
        uint64_t at = table_bytes(shm);
        int whole = is_whole(head->bytes);
        for (size_t j = 0; j < n; j++) {
            if (j == (size_t)me) continue;
            table[entry_of(me, (int)j)] =
                (block_t){whole ? at : from[j], len[j], expects[j]};
            if (whole && len[j]) {
                memcpy(rec + at, op->sendbuf + from[j], len[j]);
                at += len[j];
            }
        }
    }
    /* Where the blocks stay out, peers may read them in the send buffer:
     * not in place, where this rank writes what it receives over them. */
    if (!is_whole(head->bytes) && published > sizeof(*head) && shm->cma &&
        op->sendbuf != op->recvbuf) {
        hcomm_shm_info_t *info = hcomm_shm_info(shm, me);
        int p = (int)(op->seq & 1);
        hcomm_shm_publish_buffer(shm, op->sendbuf, extent, &info->send_addr[p],
                                 &info->send_reg[p]);
        head->readable = 1;
    }
    memcpy(hcomm_shm_in(shm, me, op->seq, sizeof(*head)), head, sizeof(*head));
}

/* Every rank finds the same first pair that differs, where the tables are
 * there to compare (only on this error path: n * n reads). The round ends
 * without this rank's done, so the segment fails, as on any mismatch. A
 * rank's pair with itself is not in its table: hcomm_alltoallv refuses
 * such a call on that rank before it starts. */
static hcomm_status_t mismatch(const hcomm_shm_op_t *op) {
    hcomm_shm_t *shm = op->shm;
    hcomm_shm_fail_mismatch(shm);
    for (int a = 0; a < shm->size; a++) {
        const block_t *ta = table_of(shm, a, op->seq);
        for (int b = 0; ta && b < shm->size; b++) {
            const block_t *tb = b == a ? NULL : table_of(shm, b, op->seq);
            if (!tb) continue;
            const block_t *ab = &ta[entry_of(a, b)], *ba = &tb[entry_of(b, a)];
            if (ab->bytes != ba->expects)
                return hcomm_error(
                    HCOMM_ERR_MISMATCH,
                    "alltoallv: rank %d sends %llu bytes to rank %d, which "
                    "expects %llu",
                    a, (unsigned long long)ab->bytes, b,
                    (unsigned long long)ba->expects);
        }
    }
    return hcomm_error(HCOMM_ERR_MISMATCH,
                       "alltoallv: some rank sends a peer another number of "
                       "bytes than the peer expects");
}

/* Each peer's block for this rank: from its record where the record is
 * whole, else from its send buffer; prefetched together where small. */
static hcomm_status_t copy_blocks(hcomm_shm_op_t *op) {
    hcomm_shm_t *shm = op->shm;
    int n = shm->size, me = shm->rank;
    const size_t *len = op->vcounts, *from = len + n;
    const size_t *want = len + 2 * (size_t)n, *to = want + n;
    for (int r = 0; r < n; r++) {
        uint64_t bytes = r == me ? UINT64_MAX : head_of(shm, r, op->seq)->bytes;
        if (bytes <= PREFETCH_MAX)
            hcomm_shm_prefetch(hcomm_shm_in(shm, r, op->seq, bytes), bytes);
    }
    /* This rank's own block from its send buffer (in place, where it is
     * already), not from its record: the lines of that may have moved to
     * the peers that read them. */
    if (len[me] != want[me]) return mismatch(op);
    if (len[me] && op->recvbuf + to[me] != op->sendbuf + from[me])
        memcpy(op->recvbuf + to[me], op->sendbuf + from[me], len[me]);
    for (int k = 1; k < n; k++) {
        int r = hcomm_shm_rotated(shm, k);
        uint64_t rec_bytes = head_of(shm, r, op->seq)->bytes;
        int whole = is_whole(rec_bytes);
        const char *rec = hcomm_shm_in(shm, r, op->seq, rec_bytes);
        const block_t *b = table_of(shm, r, op->seq) + entry_of(r, me);
        /* as long as this rank expects, and within the peer's record */
        if (b->bytes != want[r] || (whole && (b->where > rec_bytes ||
                                              b->bytes > rec_bytes - b->where)))
            return mismatch(op);
        char *dst = op->recvbuf + to[r];
        hcomm_status_t st = HCOMM_SUCCESS;
        if (!b->bytes)
            continue;
        else if (whole)
            memcpy(dst, rec + b->where, b->bytes);
        else
            st = hcomm_shm_peer_copy(op, r, 0, b->where, dst, b->bytes);
        if (st != HCOMM_SUCCESS) return st;
    }
    return HCOMM_SUCCESS;
}

/* The rounds through the slots that the largest block needs, or 0 where
 * they are not the route (above). */
static size_t piece_rounds(const hcomm_shm_t *shm, uint64_t largest) {
    size_t piece = piece_bytes(shm);
    /* as alltoall's slots take them */
    if (!piece || !hcomm_shm_all_below(shm, largest, HCOMM_SHM_SLOTS_MAX_MOVE))
        return 0;
    return (size_t)(largest + piece - 1) / piece;
}

/* Rounds through the slots follow: the call takes their numbers. */
static hcomm_status_t take_rounds(hcomm_shm_op_t *op, size_t more) {
    hcomm_shm_t *shm = op->shm;
    int n = shm->size, me = shm->rank;
    const size_t *want = op->vcounts + 2 * (size_t)n;
    for (int r = 0; r < n; r++) { /* the lengths, where tables are here */
        const block_t *t = r == me ? NULL : table_of(shm, r, op->seq);
        if (t && t[entry_of(r, me)].bytes != want[r]) return mismatch(op);
    }
    size_t round = (size_t)n * piece_bytes(shm);
    op->rounds = 1 + more;
    op->chunk = round;
    op->count = op->rounds * round;
    shm->next_seq = op->first + op->rounds;
    return HCOMM_SUCCESS;
}

hcomm_status_t hcomm_shm_a2av_copy(hcomm_shm_op_t *op) {
    if (op->round > 0) {
        copy_pieces(op);
        return HCOMM_SUCCESS;
    }
    hcomm_shm_t *shm = op->shm;
    uint64_t sent = 0, expected = 0, largest = 0;
    int whole = 1, reachable = 1; /* every record whole, or readable */
    for (int r = 0; r < shm->size; r++) {
        const head_t *h = head_at(op, r);
        sent += h->sent;
        expected += h->expected;
        whole &= is_whole(h->bytes);
        reachable &= is_whole(h->bytes) || h->readable == 1;
        if (h->largest > largest) largest = h->largest;
    }
    if (sent != expected) return mismatch(op);
    size_t more = whole || (reachable && direct_first(shm, largest))
                      ? 0
                      : piece_rounds(shm, largest);
    if (more) return take_rounds(op, more);
    if (!reachable) {
        op->declined = 1;
        return HCOMM_SUCCESS;
    }
    /* Peers read this rank's send buffer: it stays until they are done
     * (shm_coll.c waits for that before the call returns). */
    if (!is_whole(own_head(op)->bytes)) op->algo = HCOMM_SHM_CMA;
    return copy_blocks(op);
}
