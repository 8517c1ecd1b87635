/* Hierarchical algorithms for communicators that span nodes: data crosses
 * between nodes once per node (through each node's lowest rank, its
 * leader), not once per rank, and the stages inside and between nodes are
 * pipelined chunk by chunk.
 *
 * AllReduce, per chunk: a chain inside each node reduces toward the leader
 * (the last rank sends its input, each one before adds its own and passes
 * it on); the leaders run a ring allreduce of the chunk; a chain inside each
 * node hands the result back down. Broadcast, per chunk: a binomial tree
 * over the node heads (the root, and the leader of every other node), then
 * a chain inside each node. With one node these are plain chains. */
#include "coll/algos.h"

#include <stdlib.h>

typedef struct {
    int nnodes, node; /* node count; this rank's node */
    int m, li;        /* ranks on this node; this rank's index among them */
    int *local;       /* [m] this node's ranks, ascending */
    int *leader;      /* [nnodes] each node's lowest rank */
} layout_t;

static void layout_free(layout_t *l) {
    free(l->local);
    free(l->leader);
}

static hcomm_status_t layout_make(const hcomm_plan_args_t *a, layout_t *l) {
    int n = a->size;
    l->nnodes = 1;
    for (int r = 0; r < n && a->node_of; r++)
        if (a->node_of[r] + 1 > l->nnodes) l->nnodes = a->node_of[r] + 1;
    l->node = a->node_of ? a->node_of[a->rank] : 0;
    l->local = malloc((size_t)n * sizeof(int));
    l->leader = malloc((size_t)l->nnodes * sizeof(int));
    if (!l->local || !l->leader) {
        layout_free(l);
        return HCOMM_ERR_NO_MEMORY;
    }
    for (int j = 0; j < l->nnodes; j++)
        l->leader[j] = -1;
    l->m = 0;
    for (int r = 0; r < n; r++) {
        int nd = a->node_of ? a->node_of[r] : 0;
        if (l->leader[nd] < 0) l->leader[nd] = r;
        if (nd != l->node) continue;
        if (r == a->rank) l->li = l->m;
        l->local[l->m++] = r;
    }
    return HCOMM_SUCCESS;
}

/* Tags: a stage (intra-node up, down, ring steps) and a chunk. */
static uint16_t tag_of(int stage, size_t nchunks, size_t c) {
    return (uint16_t)(((size_t)stage * nchunks + c) & 0xffff);
}

/* Steps of one chunk of the allreduce. */
typedef struct {
    size_t off, k; /* the chunk: elements [off, off + k) */
    size_t nchunks, c;
    size_t slot; /* scratch for the ring's received blocks */
} chunk_t;

static hcomm_ref_t recv_at(size_t off) {
    return hcomm_ref(HCOMM_BUF_RECV, off);
}

/* Leaders' ring allreduce of one chunk, after ready; returns the step after
 * which the whole chunk is final here (and *other, a second one). */
static int leader_ring(hcomm_plan_t *plan, const layout_t *l, const chunk_t *ch,
                       int scale, int ready, int *other) {
    int N = l->nnodes, j = l->node;
    int left = l->leader[(j - 1 + N) % N], right = l->leader[(j + 1) % N];
    hcomm_ref_t slot = hcomm_ref(HCOMM_BUF_SCRATCH, ch->slot);
#define BOFF(b) (ch->off + hcomm_block_offset(ch->k, N, (b)))
#define BCNT(b) hcomm_block_count(ch->k, N, (b))
    int last = ready, sent[64], *rs_send = N - 1 <= 64 ? sent : NULL;
    if (!rs_send && !(rs_send = malloc((size_t)(N - 1) * sizeof(int)))) {
        plan->oom = 1;
        return -1;
    }
    for (int s = 0; s < N - 1; s++) {
        int sb = (j - s + N) % N, rb = (j - s - 1 + 2 * N) % N;
        uint16_t tag = tag_of(2 + s, ch->nchunks, ch->c);
        int rcv = hcomm_plan_recv(plan, left, tag, slot, BCNT(rb), last, -1);
        rs_send[s] = hcomm_plan_send(plan, right, tag, recv_at(BOFF(sb)),
                                     BCNT(sb), last, -1);
        int red = hcomm_plan_reduce(plan, recv_at(BOFF(rb)), recv_at(BOFF(rb)),
                                    slot, BCNT(rb), rcv, last);
        if (red >= 0) last = red;
    }
    int own = (j + 1) % N;
    if (scale) {
        int sc =
            hcomm_plan_scale(plan, recv_at(BOFF(own)), BCNT(own), last, -1);
        if (sc >= 0) last = sc;
    }
    int prev = -1;
    for (int s = 0; s < N - 1; s++) {
        int sb = (j + 1 - s + N) % N, rb = (j - s + N) % N;
        uint16_t tag = tag_of(2 + N - 1 + s, ch->nchunks, ch->c);
        hcomm_plan_send(plan, right, tag, recv_at(BOFF(sb)), BCNT(sb),
                        s == 0 ? last : prev, -1);
        /* Each receive waits for the one before, so the last one done
         * means the whole chunk is. */
        int rcv = hcomm_plan_recv(plan, left, tag, recv_at(BOFF(rb)), BCNT(rb),
                                  rs_send[s], prev);
        if (rcv >= 0) prev = rcv;
    }
#undef BOFF
#undef BCNT
    if (rs_send != sent) free(rs_send);
    *other = prev;
    return last;
}

hcomm_status_t hcomm_allreduce_hierarchical(const hcomm_plan_args_t *args,
                                            hcomm_plan_t *plan) {
    if (args->size == 1) return hcomm_plan_local_copy(args, plan);
    layout_t l;
    if (layout_make(args, &l) != HCOMM_SUCCESS) return HCOMM_ERR_NO_MEMORY;
    size_t chunk = hcomm_chunk_elems(args), count = args->count;
    size_t nchunks = (count + chunk - 1) / chunk;
    size_t bmax = (chunk + (size_t)l.nnodes - 1) / (size_t)l.nnodes;
    int leader = l.li == 0, up = leader ? -1 : l.local[l.li - 1];
    int down = l.li + 1 < l.m ? l.local[l.li + 1] : -1;
    /* Scratch: the chain's incoming partial sums, then one ring slot per
     * chunk. */
    plan->scratch_count = count + (l.nnodes > 1 ? nchunks * bmax : 0);
    for (size_t c = 0; c < nchunks; c++) {
        chunk_t ch = {c * chunk,
                      count - c * chunk < chunk ? count - c * chunk : chunk,
                      nchunks, c, count + c * bmax};
        /* Up the chain: this rank's input, plus what comes from below. */
        int acc = -1;
        hcomm_ref_t mine = hcomm_ref(HCOMM_BUF_SEND, ch.off);
        if (down >= 0) {
            hcomm_ref_t in = hcomm_ref(HCOMM_BUF_SCRATCH, ch.off);
            int rcv = hcomm_plan_recv(plan, down, tag_of(0, nchunks, c), in,
                                      ch.k, -1, -1);
            acc = hcomm_plan_reduce(plan, recv_at(ch.off), mine, in, ch.k, rcv,
                                    -1);
            mine = recv_at(ch.off);
        } else if (leader && !args->inplace) {
            acc = hcomm_plan_copy(plan, recv_at(ch.off), mine, ch.k, -1, -1);
            mine = recv_at(ch.off);
        }
        if (!leader) {
            int sent = hcomm_plan_send(plan, up, tag_of(0, nchunks, c), mine,
                                       ch.k, acc, -1);
            /* Down the chain: the result, once the input has gone up. */
            int rcv = hcomm_plan_recv(plan, up, tag_of(1, nchunks, c),
                                      recv_at(ch.off), ch.k, sent, acc);
            if (down >= 0)
                hcomm_plan_send(plan, down, tag_of(1, nchunks, c),
                                recv_at(ch.off), ch.k, rcv, -1);
            continue;
        }
        int done = acc, other = -1;
        if (l.nnodes > 1)
            done = leader_ring(plan, &l, &ch, args->scale, acc, &other);
        else if (args->scale) {
            int sc = hcomm_plan_scale(plan, recv_at(ch.off), ch.k, acc, -1);
            if (sc >= 0) done = sc;
        }
        if (down >= 0)
            hcomm_plan_send(plan, down, tag_of(1, nchunks, c), recv_at(ch.off),
                            ch.k, done, other);
    }
    layout_free(&l);
    return plan->oom ? HCOMM_ERR_NO_MEMORY : HCOMM_SUCCESS;
}

hcomm_status_t hcomm_bcast_hierarchical(const hcomm_plan_args_t *args,
                                        hcomm_plan_t *plan) {
    if (args->size == 1) return HCOMM_SUCCESS;
    layout_t l;
    if (layout_make(args, &l) != HCOMM_SUCCESS) return HCOMM_ERR_NO_MEMORY;
    int N = l.nnodes, root = args->root;
    int rnode = args->node_of ? args->node_of[root] : 0;
    /* Heads: the root for its node, the leader for the others. The chain
     * inside a node: its head, then its other ranks ascending. */
    int head = l.node == rnode ? root : l.leader[l.node];
    int pos = 0, prev = -1, next = -1;
    for (int i = 0, p = 1; i < l.m; i++) {
        if (l.local[i] == head) continue;
        if (l.local[i] == args->rank) pos = p;
        p++;
    }
    for (int i = 0, p = 1; i < l.m; i++) {
        if (l.local[i] == head) continue;
        if (p == pos - 1) prev = l.local[i];
        if (p == pos + 1) next = l.local[i];
        p++;
    }
    if (pos == 1) prev = head;
    /* Binomial over heads, numbered from the root's node: the parent, and
     * the children at decreasing distances. */
    int vj = (l.node - rnode + N) % N, mask = 1, parent = -1;
    while (mask < N && !(vj & mask))
        mask <<= 1;
    if (vj != 0) {
        int pn = (vj - mask + rnode) % N;
        parent = pn == rnode ? root : l.leader[pn];
    }
    size_t chunk = hcomm_chunk_elems(args), count = args->count;
    size_t nchunks = (count + chunk - 1) / chunk;
    for (size_t c = 0; c < nchunks; c++) {
        size_t off = c * chunk, k = count - off < chunk ? count - off : chunk;
        hcomm_ref_t buf = hcomm_ref(HCOMM_BUF_RECV, off);
        int have = -1;
        if (args->rank == head) {
            if (parent >= 0)
                have = hcomm_plan_recv(plan, parent, tag_of(0, nchunks, c), buf,
                                       k, -1, -1);
            for (int d = mask >> 1; d > 0; d >>= 1)
                if (vj + d < N)
                    hcomm_plan_send(plan, l.leader[(vj + d + rnode) % N],
                                    tag_of(0, nchunks, c), buf, k, have, -1);
        } else {
            have = hcomm_plan_recv(plan, prev, tag_of(1, nchunks, c), buf, k,
                                   -1, -1);
        }
        if (next >= 0)
            hcomm_plan_send(plan, next, tag_of(1, nchunks, c), buf, k, have,
                            -1);
    }
    layout_free(&l);
    return plan->oom ? HCOMM_ERR_NO_MEMORY : HCOMM_SUCCESS;
}
