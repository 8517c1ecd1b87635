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
#include "coll/hier_layout.h"

#include <stdlib.h>

/* Tags: a stage (intra-node up, down, ring steps) and a chunk. */
static uint16_t tag_of(int stage, size_t nchunks, size_t c) {
    return hcomm_hier_tag(stage, nchunks, c);
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
static int leader_ring(hcomm_plan_t *plan, const hcomm_hier_layout_t *l,
                       const chunk_t *ch, int scale, int ready, int *other) {
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
         * means the whole chunk is; the first waits for the reduce-scatter
         * to end: tags wrap at 16 bits past 64 nodes of 1024 chunks, and a
         * receive posted early takes the reduce-scatter's message of the
         * same tag (hcomm_sim deadlocked on it at 128 nodes and 1 GiB). */
        int rcv = hcomm_plan_recv(plan, left, tag, recv_at(BOFF(rb)), BCNT(rb),
                                  rs_send[s], s == 0 ? last : prev);
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
    hcomm_hier_layout_t l;
    if (hcomm_hier_layout_make(args, &l) != HCOMM_SUCCESS)
        return HCOMM_ERR_NO_MEMORY;
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
    hcomm_hier_layout_free(&l);
    return plan->oom ? HCOMM_ERR_NO_MEMORY : HCOMM_SUCCESS;
}

hcomm_status_t hcomm_bcast_hierarchical(const hcomm_plan_args_t *args,
                                        hcomm_plan_t *plan) {
    if (args->size == 1) return HCOMM_SUCCESS;
    hcomm_hier_layout_t l;
    if (hcomm_hier_layout_make(args, &l) != HCOMM_SUCCESS)
        return HCOMM_ERR_NO_MEMORY;
    int N = l.nnodes, root = args->root;
    int rnode = args->node_of ? args->node_of[root] : 0;
    /* Heads: the root for its node, the leader for the others. The chain
     * inside a node: its head, then its other ranks ascending. */
    int head = l.node == rnode ? root : l.leader[l.node];
    int pos, prev, next;
    hcomm_hier_chain(&l, head, args->rank, &pos, &prev, &next);
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
    hcomm_hier_layout_free(&l);
    return plan->oom ? HCOMM_ERR_NO_MEMORY : HCOMM_SUCCESS;
}

/* AllGather: each node's blocks go to its leader; the leaders pass node
 * blocks round a ring; every block then runs down the node's chain (the
 * leader, then the others ascending) as soon as the leader has it. A rank
 * already holds its own block: the chain skips it and it starts the rest of
 * the chain from its own data. */
typedef struct {
    const hcomm_plan_args_t *a;
    const hcomm_hier_layout_t *l;
    size_t chunk, nch;
    int *got; /* [rank * nch + c]: the step after which that chunk is here */
} gather_t;

static size_t gchunk(const gather_t *g, size_t c) {
    size_t left = g->a->count - c * g->chunk;
    return left < g->chunk ? left : g->chunk;
}

static uint16_t gtag(const gather_t *g, int stage, int q, size_t c) {
    return (
        uint16_t)((((size_t)stage * (size_t)g->a->size + (size_t)q) * g->nch +
                   c) &
                  0xffff);
}

static hcomm_ref_t gblock(const gather_t *g, int q, size_t c) {
    return hcomm_ref(HCOMM_BUF_RECV, (size_t)q * g->a->count + c * g->chunk);
}

static int node_rank_of(const hcomm_plan_args_t *a, int q) {
    return a->node_of ? a->node_of[q] : 0;
}

/* The next rank after q on node nd (q = -1: the first), or -2 for none
 * (which stays -2). */
static int next_of(const hcomm_plan_args_t *a, int nd, int q) {
    if (q == -2) return -2;
    for (int r = q + 1; r < a->size; r++)
        if (node_rank_of(a, r) == nd) return r;
    return -2;
}

/* Block q down this rank's part of the node's chain. */
static void chain_block(hcomm_plan_t *plan, const gather_t *g, int q) {
    const hcomm_hier_layout_t *l = g->l;
    int lo = -1; /* q's index on this node, if it is from here */
    for (int i = 0; i < l->m; i++)
        if (l->local[i] == q) lo = i;
    int prev = l->li > 0 ? l->local[l->li - 1] : -1;
    int next = l->li + 1 < l->m ? l->local[l->li + 1] : -1;
    for (size_t c = 0; c < g->nch; c++) {
        size_t k = gchunk(g, c);
        int have = g->got[(size_t)q * g->nch + c];
        if (l->li > 0 && lo != l->li)
            have = hcomm_plan_recv(plan, prev, gtag(g, 2, q, c),
                                   gblock(g, q, c), k, -1, -1);
        if (next < 0 || lo == l->li + 1) continue;
        hcomm_ref_t src = lo == l->li && l->li > 0
                              ? hcomm_ref(HCOMM_BUF_SEND, c * g->chunk)
                              : gblock(g, q, c);
        hcomm_plan_send(plan, next, gtag(g, 2, q, c), src, k, have, -1);
    }
}

hcomm_status_t hcomm_allgather_hierarchical(const hcomm_plan_args_t *args,
                                            hcomm_plan_t *plan) {
    if (args->size == 1 || args->count == 0)
        return hcomm_plan_local_copy(args, plan);
    hcomm_hier_layout_t l;
    if (hcomm_hier_layout_make(args, &l) != HCOMM_SUCCESS)
        return HCOMM_ERR_NO_MEMORY;
    int n = args->size, N = l.nnodes, j = l.node, me = args->rank;
    gather_t g = {args, &l, hcomm_chunk_elems(args), 0, NULL};
    g.nch = (args->count + g.chunk - 1) / g.chunk;
    g.got = malloc((size_t)n * g.nch * sizeof(int));
    if (!g.got) {
        hcomm_hier_layout_free(&l);
        return HCOMM_ERR_NO_MEMORY;
    }
    for (size_t i = 0; i < (size_t)n * g.nch; i++)
        g.got[i] = -1;
    /* This rank's block into place. */
    if (!args->inplace)
        for (size_t c = 0; c < g.nch; c++)
            g.got[(size_t)me * g.nch + c] = hcomm_plan_copy(
                plan, gblock(&g, me, c), hcomm_ref(HCOMM_BUF_SEND, c * g.chunk),
                gchunk(&g, c), -1, -1);
    /* Inside the node, up: every block to the leader. */
    for (int i = 1; i < l.m; i++) {
        int q = l.local[i];
        if (l.li == 0)
            for (size_t c = 0; c < g.nch; c++)
                g.got[(size_t)q * g.nch + c] =
                    hcomm_plan_recv(plan, q, gtag(&g, 0, q, c),
                                    gblock(&g, q, c), gchunk(&g, c), -1, -1);
        else if (q == me)
            for (size_t c = 0; c < g.nch; c++)
                hcomm_plan_send(plan, l.local[0], gtag(&g, 0, q, c),
                                hcomm_ref(HCOMM_BUF_SEND, c * g.chunk),
                                gchunk(&g, c), -1, -1);
    }
    /* Down the chain: this node's blocks, then the others' in ring order,
     * each as the leader gets it. */
    for (int i = 0; i < l.m; i++)
        chain_block(plan, &g, l.local[i]);
    int left = l.leader[(j - 1 + N) % N], right = l.leader[(j + 1) % N];
    for (int s = 0; s < N - 1; s++) {
        int sn = (j - s + N) % N, rn = (j - s - 1 + 2 * N) % N;
        /* The i-th block of the node sent and the i-th of the node
         * received, chunk by chunk, so that both leaders post in the same
         * order. */
        for (int qs = next_of(args, sn, -1), qr = next_of(args, rn, -1);
             l.li == 0 && (qs >= 0 || qr >= 0);
             qs = next_of(args, sn, qs), qr = next_of(args, rn, qr))
            for (size_t c = 0; c < g.nch; c++) {
                if (qs >= 0)
                    hcomm_plan_send(plan, right, gtag(&g, 1, qs, c),
                                    gblock(&g, qs, c), gchunk(&g, c),
                                    g.got[(size_t)qs * g.nch + c], -1);
                if (qr >= 0)
                    g.got[(size_t)qr * g.nch + c] = hcomm_plan_recv(
                        plan, left, gtag(&g, 1, qr, c), gblock(&g, qr, c),
                        gchunk(&g, c), -1, -1);
            }
        for (int q = 0; q < n; q++)
            if (node_rank_of(args, q) == rn) chain_block(plan, &g, q);
    }
    free(g.got);
    hcomm_hier_layout_free(&l);
    return plan->oom ? HCOMM_ERR_NO_MEMORY : HCOMM_SUCCESS;
}

/* ReduceScatter: inside each node a chain reduces every block toward the
 * leader (into scratch: the send buffer is read only), the leaders run a
 * ring reduce-scatter of node blocks that leaves each leader its own node's
 * blocks, and the leader hands each rank its block. The chain takes the
 * blocks in the order the ring needs them, so the stages overlap. */
typedef struct {
    gather_t g;   /* shape, chunking, tags (got unused) */
    int *last;    /* [q * nch + c]: the last step that wrote acc(q, c) */
    char *in_acc; /* acc(q, c) is in scratch (else still the send buffer) */
} rs_t;

static size_t rs_off(const rs_t *s, int q, size_t c) {
    return (size_t)q * s->g.a->count + c * s->g.chunk;
}

static hcomm_ref_t rs_acc(const rs_t *s, int q, size_t c) {
    size_t i = (size_t)q * s->g.nch + c;
    return s->in_acc[i] ? hcomm_ref(HCOMM_BUF_SCRATCH,
                                    (size_t)s->g.a->size * s->g.a->count +
                                        rs_off(s, q, c))
                        : hcomm_ref(HCOMM_BUF_SEND, rs_off(s, q, c));
}

/* acc(q, c) op= what arrives from peer (tag stage); returns the reduce. */
static void rs_receive_reduce(hcomm_plan_t *plan, rs_t *s, int peer, int stage,
                              int q, size_t c) {
    size_t i = (size_t)q * s->g.nch + c, k = gchunk(&s->g, c);
    hcomm_ref_t in = hcomm_ref(HCOMM_BUF_SCRATCH, rs_off(s, q, c));
    int rcv = hcomm_plan_recv(plan, peer, gtag(&s->g, stage, q, c), in, k,
                              s->last[i], -1);
    hcomm_ref_t a = rs_acc(s, q, c);
    s->in_acc[i] = 1;
    int red =
        hcomm_plan_reduce(plan, rs_acc(s, q, c), a, in, k, rcv, s->last[i]);
    if (red >= 0) s->last[i] = red;
}

hcomm_status_t hcomm_reduce_scatter_hierarchical(const hcomm_plan_args_t *args,
                                                 hcomm_plan_t *plan) {
    if (args->size == 1 || args->count == 0)
        return hcomm_plan_local_copy(args, plan);
    hcomm_hier_layout_t l;
    if (hcomm_hier_layout_make(args, &l) != HCOMM_SUCCESS)
        return HCOMM_ERR_NO_MEMORY;
    int n = args->size, N = l.nnodes, j = l.node, me = args->rank;
    rs_t s = {{args, &l, hcomm_chunk_elems(args), 0, NULL}, NULL, NULL};
    s.g.nch = (args->count + s.g.chunk - 1) / s.g.chunk;
    size_t cells = (size_t)n * s.g.nch;
    s.last = malloc(cells * sizeof(int));
    s.in_acc = calloc(cells, 1);
    int *up = malloc(s.g.nch * sizeof(int)); /* own block sent up */
    if (!s.last || !s.in_acc || !up) {
        free(s.last);
        free(s.in_acc);
        free(up);
        hcomm_hier_layout_free(&l);
        return HCOMM_ERR_NO_MEMORY;
    }
    for (size_t i = 0; i < cells; i++)
        s.last[i] = -1;
    for (size_t c = 0; c < s.g.nch; c++)
        up[c] = -1;
    plan->scratch_count = 2 * (size_t)n * args->count;
    int leader = l.li == 0;
    int down = l.li + 1 < l.m ? l.local[l.li + 1] : -1;
    int upr = leader ? -1 : l.local[l.li - 1];
    /* Up the chain, node by node in the order the ring sends them. */
    for (int t = 1; t <= N; t++) {
        int nd = (j - t + N) % N;
        for (int q = next_of(args, nd, -1); q >= 0; q = next_of(args, nd, q))
            for (size_t c = 0; c < s.g.nch; c++) {
                if (down >= 0) rs_receive_reduce(plan, &s, down, 0, q, c);
                if (leader) continue;
                size_t i = (size_t)q * s.g.nch + c;
                int snd = hcomm_plan_send(plan, upr, gtag(&s.g, 0, q, c),
                                          rs_acc(&s, q, c), gchunk(&s.g, c),
                                          s.last[i], -1);
                if (q == me) up[c] = snd;
            }
    }
    /* The leaders' ring: step t sends node j-1-t, reduces node j-2-t. */
    int left = l.leader[(j - 1 + N) % N], right = l.leader[(j + 1) % N];
    for (int t = 0; leader && t < N - 1; t++) {
        int sn = (j - 1 - t + 2 * N) % N, rn = (j - 2 - t + 3 * N) % N;
        for (int qs = next_of(args, sn, -1), qr = next_of(args, rn, -1);
             qs >= 0 || qr >= 0;
             qs = next_of(args, sn, qs), qr = next_of(args, rn, qr))
            for (size_t c = 0; c < s.g.nch; c++) {
                if (qs >= 0) {
                    size_t i = (size_t)qs * s.g.nch + c;
                    s.last[i] = hcomm_plan_send(
                        plan, right, gtag(&s.g, 1, qs, c), rs_acc(&s, qs, c),
                        gchunk(&s.g, c), s.last[i], -1);
                }
                if (qr >= 0) rs_receive_reduce(plan, &s, left, 1, qr, c);
            }
    }
    /* Each rank's block from its leader. */
    for (size_t c = 0; c < s.g.nch; c++) {
        size_t k = gchunk(&s.g, c);
        hcomm_ref_t dst = hcomm_ref(HCOMM_BUF_RECV, c * s.g.chunk);
        int got = -1;
        if (leader) {
            for (int i = 1; i < l.m; i++) {
                int q = l.local[i];
                hcomm_plan_send(plan, q, gtag(&s.g, 2, q, c), rs_acc(&s, q, c),
                                k, s.last[(size_t)q * s.g.nch + c], -1);
            }
            size_t i = (size_t)me * s.g.nch + c;
            if (s.in_acc[i] || !args->inplace)
                got = hcomm_plan_copy(plan, dst, rs_acc(&s, me, c), k,
                                      s.last[i], -1);
        } else {
            got = hcomm_plan_recv(plan, l.local[0], gtag(&s.g, 2, me, c), dst,
                                  k, up[c], -1);
        }
        if (args->scale) hcomm_plan_scale(plan, dst, k, got, -1);
    }
    free(s.last);
    free(s.in_acc);
    free(up);
    hcomm_hier_layout_free(&l);
    return plan->oom ? HCOMM_ERR_NO_MEMORY : HCOMM_SUCCESS;
}
