/* Hierarchical broadcast over a double binary tree between nodes: each
 * chunk is cut in two halves, and half h goes down tree h over the node
 * heads (the root for its node, the leader for the others), then the chunk
 * runs down a chain inside each node (as in hierarchical.c). Tree 0 is the
 * in-order binary tree of positions 1..N (node v at position v + 1, nodes
 * numbered from the root's), tree 1 its mirror, so that with an even node
 * count the inner nodes of one tree are leaves of the other: a head sends
 * about one chunk per chunk received, where the binomial tree's root sends
 * log2(N) of them. Depth log2(N) + 1: the root's node feeds each tree's
 * root. */
#include "coll/hier_layout.h"

/* In-order binary tree on positions 1..n: the root is the highest power of
 * two <= n; a position's lowest set bit is its height. */
static int lowbit(int x) {
    return x & -x;
}

static int tree_parent(int x, int n) {
    int root = 1;
    while (root * 2 <= n)
        root *= 2;
    if (x == root) return 0;
    for (;;) { /* climb past positions beyond n */
        int b = lowbit(x);
        x = (x & 2 * b) ? x - b : x + b;
        if (x <= n) return x;
    }
}

/* Children of x (0 for none). */
static void tree_children(int x, int n, int out[2]) {
    int b = lowbit(x);
    out[0] = out[1] = 0;
    if (b == 1) return;
    out[0] = x - b / 2;
    for (int d = b / 2; d >= 1; d /= 2)
        if (x + d <= n) {
            out[1] = x + d;
            break;
        }
}

/* Node numbers from the root's node (vnode 0) to positions and back. */
static int pos_of(int h, int v, int n) {
    return h == 0 ? v + 1 : n - v;
}

static int vnode_of(int h, int pos, int n) {
    return h == 0 ? pos - 1 : n - pos;
}

typedef struct {
    int from;      /* vnode this node receives half h from, -1: none */
    int to[3], nt; /* vnodes it sends half h to */
} links_t;

/* Tree h's edges at vnode v. Vnode 0 has the data: it receives nothing,
 * and feeds tree h's root unless it is that root. */
static links_t links(int h, int v, int n) {
    links_t k = {-1, {0, 0, 0}, 0};
    int root = 1, ch[2];
    while (root * 2 <= n)
        root *= 2;
    int vroot = vnode_of(h, root, n), x = pos_of(h, v, n);
    if (v != 0) {
        int par = tree_parent(x, n);
        k.from = par ? vnode_of(h, par, n) : 0;
    } else if (vroot != 0) {
        k.to[k.nt++] = vroot;
    }
    tree_children(x, n, ch);
    for (int i = 0; i < 2; i++)
        if (ch[i] && vnode_of(h, ch[i], n) != 0)
            k.to[k.nt++] = vnode_of(h, ch[i], n);
    return k;
}

hcomm_status_t hcomm_bcast_hierarchical_tree(const hcomm_plan_args_t *args,
                                             hcomm_plan_t *plan) {
    if (args->size == 1) return HCOMM_SUCCESS;
    hcomm_hier_layout_t l;
    if (hcomm_hier_layout_make(args, &l) != HCOMM_SUCCESS)
        return HCOMM_ERR_NO_MEMORY;
    int N = l.nnodes, root = args->root;
    int rnode = args->node_of ? args->node_of[root] : 0;
    int v = (l.node - rnode + N) % N;
    /* The chain inside a node: its head, then its other ranks ascending. */
    int head = l.node == rnode ? root : l.leader[l.node];
    int pos, prev, next;
    hcomm_hier_chain(&l, head, args->rank, &pos, &prev, &next);
    links_t tk[2] = {links(0, v, N), links(1, v, N)};
    size_t chunk = hcomm_chunk_elems(args), count = args->count;
    size_t nchunks = (count + chunk - 1) / chunk;
    for (size_t c = 0; c < nchunks; c++) {
        size_t off = c * chunk, k = count - off < chunk ? count - off : chunk;
        int have[2] = {-1, -1};
        if (args->rank == head) {
            for (int h = 0; h < 2; h++) {
                size_t ho = h ? k - k / 2 : 0, hn = h ? k / 2 : k - k / 2;
                hcomm_ref_t buf = hcomm_ref(HCOMM_BUF_RECV, off + ho);
                uint16_t t = hcomm_hier_tag(h, nchunks, c);
                int nd = (tk[h].from + rnode) % N;
                if (tk[h].from >= 0)
                    have[h] =
                        hcomm_plan_recv(plan, nd == rnode ? root : l.leader[nd],
                                        t, buf, hn, -1, -1);
                for (int i = 0; i < tk[h].nt; i++) {
                    int to = (tk[h].to[i] + rnode) % N;
                    hcomm_plan_send(plan, l.leader[to], t, buf, hn, have[h],
                                    -1);
                }
            }
        } else {
            have[0] =
                hcomm_plan_recv(plan, prev, hcomm_hier_tag(2, nchunks, c),
                                hcomm_ref(HCOMM_BUF_RECV, off), k, -1, -1);
        }
        if (next >= 0)
            hcomm_plan_send(plan, next, hcomm_hier_tag(2, nchunks, c),
                            hcomm_ref(HCOMM_BUF_RECV, off), k, have[0],
                            have[1]);
    }
    hcomm_hier_layout_free(&l);
    return plan->oom ? HCOMM_ERR_NO_MEMORY : HCOMM_SUCCESS;
}
