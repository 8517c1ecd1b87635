/* Shapes, plan building, and the node symmetries that let the simulator run
 * one node's ranks for the whole communicator (hcomm_sim.h). */
#include "hcomm_sim_int.h"

#include <stdlib.h>
#include <string.h>

int hcomm_sim_shape_labels(hcomm_sim_shape_t *sh, int size, const int *label) {
    memset(sh, 0, sizeof(*sh));
    sh->node_of = malloc((size_t)size * sizeof(int));
    sh->local = malloc((size_t)size * sizeof(int));
    sh->node_size = calloc((size_t)size, sizeof(int));
    int *first = malloc((size_t)size * sizeof(int)); /* node -> its label */
    if (!sh->node_of || !sh->local || !sh->node_size || !first) {
        free(first);
        hcomm_sim_shape_free(sh);
        return -1;
    }
    sh->size = size;
    /* Nodes numbered by their lowest rank: the first rank of each label. */
    for (int r = 0; r < size; r++) {
        int n = 0;
        while (n < sh->nnodes && first[n] != label[r])
            n++;
        if (n == sh->nnodes) first[sh->nnodes++] = label[r];
        sh->node_of[r] = n;
        sh->local[r] = sh->node_size[n]++;
    }
    free(first);
    return 0;
}

int hcomm_sim_shape_regular(hcomm_sim_shape_t *sh, int nnodes, int ppn) {
    memset(sh, 0, sizeof(*sh));
    int n = nnodes * ppn;
    sh->node_of = malloc((size_t)n * sizeof(int));
    sh->local = malloc((size_t)n * sizeof(int));
    sh->node_size = malloc((size_t)nnodes * sizeof(int));
    if (!sh->node_of || !sh->local || !sh->node_size) {
        hcomm_sim_shape_free(sh);
        return -1;
    }
    sh->size = n;
    sh->nnodes = nnodes;
    for (int r = 0; r < n; r++) {
        sh->node_of[r] = r / ppn;
        sh->local[r] = r % ppn;
    }
    for (int j = 0; j < nnodes; j++)
        sh->node_size[j] = ppn;
    return 0;
}

void hcomm_sim_shape_free(hcomm_sim_shape_t *sh) {
    free(sh->node_of);
    free(sh->local);
    free(sh->node_size);
    memset(sh, 0, sizeof(*sh));
}

size_t hcomm_sim_count_for(hcomm_coll_t coll, size_t bytes, size_t esize,
                           int n) {
    switch (coll) {
    case HCOMM_COLL_ALLGATHER:
    case HCOMM_COLL_REDUCE_SCATTER:
    case HCOMM_COLL_ALLTOALL:
    case HCOMM_COLL_GATHER:
    case HCOMM_COLL_SCATTER:
        return bytes / esize / (size_t)n;
    default:
        return bytes / esize;
    }
}

double hcomm_sim_busbw_factor(hcomm_coll_t coll, int n) {
    switch (coll) {
    case HCOMM_COLL_ALLREDUCE:
        return 2.0 * (n - 1) / n;
    case HCOMM_COLL_ALLGATHER:
    case HCOMM_COLL_REDUCE_SCATTER:
    case HCOMM_COLL_ALLTOALL:
        return (double)(n - 1) / n;
    default:
        return 1.0;
    }
}

hcomm_status_t hcomm_sim_build(const hcomm_sim_model_t *m,
                               const hcomm_sim_shape_t *sh,
                               const hcomm_sim_call_t *c, int rank,
                               hcomm_plan_t *plan) {
    hcomm_plan_args_t pa = {.coll = c->algo->coll,
                            .rank = rank,
                            .size = sh->size,
                            .root = c->root,
                            .count = c->count,
                            .esize = c->esize,
                            .inplace = c->inplace,
                            .scale = c->scale,
                            .chunk_bytes = m->chunk_bytes,
                            .node_of = sh->nnodes > 1 ? sh->node_of : NULL};
    hcomm_plan_init(plan);
    hcomm_status_t st = c->algo->build(&pa, plan);
    if (st != HCOMM_SUCCESS) hcomm_plan_release(plan);
    return st;
}

/* --- the group ----------------------------------------------------------- */

int hcomm_sim_sym_elem(const hcomm_sim_sym_t *s, int node) {
    if (s->kind == SYM_SHIFT) return node - node % s->G;
    if (s->kind == SYM_XOR) return node;
    return 0;
}

int hcomm_sim_sym_node(const hcomm_sim_sym_t *s, int k, int node, int inverse) {
    if (s->kind == SYM_SHIFT)
        return inverse ? (node + k) % s->N : (node - k + s->N) % s->N;
    if (s->kind == SYM_XOR) return node ^ k;
    return node;
}

int hcomm_sim_sym_rank(const hcomm_sim_sym_t *s, int k, int rank, int inverse) {
    if (s->kind == SYM_NONE) return rank;
    return hcomm_sim_sym_node(s, k, rank / s->L, inverse) * s->L + rank % s->L;
}

/* plan(image) == g plan(r): same steps, peers renamed, counts within one
 * element (equal splits differ by one between blocks). */
static int equivariant(const hcomm_sim_sym_t *s, int k, const hcomm_plan_t *a,
                       const hcomm_plan_t *b) {
    if (a->nsteps != b->nsteps) return 0;
    for (uint32_t i = 0; i < a->nsteps; i++) {
        const hcomm_step_t *x = &a->steps[i], *y = &b->steps[i];
        size_t d =
            x->count > y->count ? x->count - y->count : y->count - x->count;
        if (x->kind != y->kind || x->tag != y->tag || x->epoch != y->epoch ||
            x->dep[0] != y->dep[0] || x->dep[1] != y->dep[1] || d > 1)
            return 0;
        if ((x->kind == HCOMM_STEP_SEND || x->kind == HCOMM_STEP_RECV) &&
            hcomm_sim_sym_rank(s, k, x->peer, 1) != y->peer)
            return 0;
    }
    return 1;
}

/* Checks the candidate on sampled representatives and elements: building
 * every rank's plan is what the symmetry exists to avoid. */
static hcomm_status_t check(const hcomm_sim_model_t *m,
                            const hcomm_sim_shape_t *sh,
                            const hcomm_sim_call_t *c, const hcomm_sim_sym_t *s,
                            int *ok) {
    int reps = s->G * s->L, nodes = s->N / s->G;
    int sample_r[3] = {0, reps / 2, reps - 1};
    int sample_k[3] = {1, nodes - 1, nodes / 2};
    *ok = 0;
    for (int i = 0; i < 3; i++) {
        hcomm_plan_t base;
        hcomm_status_t st = hcomm_sim_build(m, sh, c, sample_r[i], &base);
        if (st != HCOMM_SUCCESS) return st;
        /* Large plans: one image of one rank (each build costs seconds). */
        int nk = base.nsteps > (1u << 21) ? 1 : 3;
        for (int j = 0; j < nk; j++) {
            int k = s->kind == SYM_SHIFT ? sample_k[j] * s->G : sample_k[j];
            if (k <= 0 || k >= s->N) continue;
            hcomm_plan_t img;
            st = hcomm_sim_build(
                m, sh, c, hcomm_sim_sym_rank(s, k, sample_r[i], 1), &img);
            if (st != HCOMM_SUCCESS) {
                hcomm_plan_release(&base);
                return st;
            }
            int same = equivariant(s, k, &base, &img);
            hcomm_plan_release(&img);
            if (!same) {
                hcomm_plan_release(&base);
                return HCOMM_SUCCESS;
            }
        }
        hcomm_plan_release(&base);
        if (nk == 1) break;
    }
    *ok = 1;
    return HCOMM_SUCCESS;
}

static size_t gcd(size_t a, size_t b) {
    while (b) {
        size_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

static int lcm(int a, int b) {
    return a / (int)gcd((size_t)a, (size_t)b) * b;
}

static int pow2(int x) {
    return x > 0 && (x & (x - 1)) == 0;
}

hcomm_status_t hcomm_sim_find_symmetry(const hcomm_sim_model_t *m,
                                       const hcomm_sim_shape_t *sh,
                                       const hcomm_sim_call_t *c,
                                       hcomm_sim_sym_t *out) {
    int N = sh->nnodes, L = sh->node_size[0];
    memset(out, 0, sizeof(*out));
    out->N = N;
    out->L = L;
    out->G = N;
    if (c->no_symmetry || N < 4 || c->sendbufs) return HCOMM_SUCCESS;
    for (int r = 0; r < sh->size; r++) /* node-major, equal nodes */
        if (sh->node_of[r] != r / L || sh->local[r] != r % L)
            return HCOMM_SUCCESS;
    int nps = m->nodes_per_switch > 0 && m->nodes_per_switch < N
                  ? m->nodes_per_switch
                  : 0;
    int g0 = nps ? nps : 1;
    /* A block a rank, split as allreduce_ring.c splits, repeats every
     * size / gcd(count % size, size) ranks: with fewer elements than ranks
     * that spans several nodes, and the third candidate shifts by them. */
    int period =
        sh->size / (int)gcd(c->count % (size_t)sh->size, (size_t)sh->size);
    int gp = lcm(g0, period / (int)gcd((size_t)period, (size_t)L));
    hcomm_sim_sym_t cand[3] = {
        {SYM_SHIFT, N, L, g0}, {SYM_XOR, N, L, 1}, {SYM_SHIFT, N, L, gp}};
    for (int i = 0; i < 3; i++) {
        if (i == 2 && gp == g0) break;
        hcomm_sim_sym_t *s = &cand[i];
        if (s->kind == SYM_SHIFT && (N % s->G || N / s->G < 4)) continue;
        if (s->kind == SYM_XOR && (!pow2(N) || (nps && !pow2(nps)))) continue;
        int ok;
        hcomm_status_t st = check(m, sh, c, s, &ok);
        if (st != HCOMM_SUCCESS) return st;
        if (ok) {
            *out = *s;
            return HCOMM_SUCCESS;
        }
    }
    return HCOMM_SUCCESS;
}
