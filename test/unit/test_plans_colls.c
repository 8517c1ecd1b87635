/* The plans of every collective but allreduce, run for N virtual ranks by
 * the verifier on real data: N = 1..33, 64, 100, every root up to N = 9 and
 * four beyond, counts 0, 1, 2, 7, N+1, 1009 (N <= 33) and one large count,
 * in place and not, with 8-byte chunks (many pipelined messages) and the
 * default 256 KiB. Every rank's result is compared element by element with
 * a reference computed here. Each plan is also checked to stay inside its
 * buffers and scratch, and to leave alone the buffers a rank may not have. */
#include "quick.h"
#include "coll/verify.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "split.h"

#define MAXN 100
#define LARGE (((size_t)1 << 18) + 3)
#define CAP (LARGE + 2 * MAXN)
#define SMALL_CHUNK 8
#define PRIME_CHUNK 804 /* 201 elements: 1009 is 5 of them and 4 */
#define DEFAULT_CHUNK ((size_t)256 << 10)

static const int sizes[] = {1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12,
                            13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24,
                            25, 26, 27, 28, 29, 30, 31, 32, 33, 64, 100};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

/* Per-rank buffers, allocated once: fresh pages for 100 ranks on every run
 * would dominate the time. */
static int32_t *sbuf[MAXN], *rbuf[MAXN], *want;
static void *sendp[MAXN], *recvp[MAXN];

/* Distinct for every (rank, index), so a block in the wrong place shows;
 * sums wrap like the kernels' (unsigned arithmetic). */
static int32_t value(int r, size_t i) {
    return (int32_t)((uint32_t)(r + 1) * 0x9e3779b1u +
                     (uint32_t)i * 0x85ebca77u);
}

static void garbage(int32_t *p, size_t len) {
    memset(p, 0xa5, len * sizeof(int32_t));
}

typedef struct {
    const hcomm_algo_t *algo;
    int n, root, inplace;
    size_t count, chunk;
} shape_t;

static void describe(const shape_t *s, char *out, size_t len) {
    snprintf(out, len, "%s/%s n=%d root=%d count=%zu inplace=%d chunk=%zu",
             hcomm_coll_name(s->algo->coll), s->algo->name, s->n, s->root,
             s->count, s->inplace, s->chunk);
}

/* --- static checks on the plans ------------------------------------------ */

static int uses(const hcomm_step_t *st, int is_dst) {
    switch (st->kind) {
    case HCOMM_STEP_SEND:
        return !is_dst;
    case HCOMM_STEP_RECV:
    case HCOMM_STEP_SCALE:
        return is_dst;
    default:
        return 1;
    }
}

static void check_ref(const shape_t *s, int r, const hcomm_plan_t *plan,
                      const hcomm_step_t *st, hcomm_ref_t ref, int is_dst) {
    char what[160];
    size_t limit;
    if (!uses(st, is_dst)) return;
    if (is_dst && ref.buf == HCOMM_BUF_SEND) {
        describe(s, what, sizeof(what));
        fail_msg("%s: rank %d writes its send buffer", what, r);
    }
    if (ref.buf == HCOMM_BUF_SCRATCH)
        limit = plan->scratch_count;
    else if (ref.buf == HCOMM_BUF_SEND)
        limit =
            hcomm_coll_send_count(s->algo->coll, s->n, r, s->root, s->count);
    else
        limit =
            hcomm_coll_recv_count(s->algo->coll, s->n, r, s->root, s->count);
    if (s->algo->coll == HCOMM_COLL_BCAST && ref.buf == HCOMM_BUF_SEND)
        limit = 0; /* broadcast works on the receive buffer only */
    if (ref.offset + st->count <= limit) return;
    describe(s, what, sizeof(what));
    fail_msg("%s: rank %d step %d reaches [%zu, %zu) of buffer %d, "
             "which holds %zu",
             what, r, (int)(st - plan->steps), ref.offset,
             ref.offset + st->count, ref.buf, limit);
}

/* Every step stays inside the buffers the rank has, and scratch. */
static void check_bounds(const shape_t *s) {
    for (int r = 0; r < s->n; r++) {
        hcomm_plan_args_t pa = {.coll = s->algo->coll,
                                .rank = r,
                                .size = s->n,
                                .root = s->root,
                                .count = s->count,
                                .esize = sizeof(int32_t),
                                .inplace = s->inplace,
                                .chunk_bytes = s->chunk};
        hcomm_plan_t plan;
        hcomm_plan_init(&plan);
        assert_int_equal(s->algo->build(&pa, &plan), HCOMM_SUCCESS);
        for (uint32_t i = 0; i < plan.nsteps; i++) {
            const hcomm_step_t *st = &plan.steps[i];
            check_ref(s, r, &plan, st, st->dst, 1);
            check_ref(s, r, &plan, st, st->a, 0);
            if (st->kind == HCOMM_STEP_REDUCE)
                check_ref(s, r, &plan, st, st->b, 0);
        }
        hcomm_plan_release(&plan);
    }
}

/* --- running and comparing ----------------------------------------------- */

static void run(const shape_t *s) {
    hcomm_verify_args_t a = {.algo = s->algo,
                             .size = s->n,
                             .root = s->root,
                             .count = s->count,
                             .dtype = HCOMM_INT32,
                             .op = HCOMM_SUM,
                             .inplace = s->inplace,
                             .chunk_bytes = s->chunk,
                             .seed = (uint32_t)(s->n * 7919 + s->root * 31 +
                                                (int)s->count * 3 + s->inplace +
                                                (int)s->chunk),
                             .sendbufs = sendp,
                             .recvbufs = recvp};
    char err[512], what[160];
    if (s->count < LARGE / 4) check_bounds(s);
    if (hcomm_verify_run(&a, err, sizeof(err)) != HCOMM_SUCCESS) {
        describe(s, what, sizeof(what));
        fail_msg("%s: %s", what, err);
    }
}

static void expect(const shape_t *s, int r, const int32_t *got,
                   const int32_t *exp, size_t len) {
    if (!len || memcmp(got, exp, len * sizeof(int32_t)) == 0) return;
    size_t i = 0;
    while (got[i] == exp[i])
        i++;
    char what[160];
    describe(s, what, sizeof(what));
    fail_msg("%s: rank %d element %zu is %d, expected %d", what, r, i, got[i],
             exp[i]);
}

static void sum_reference(int n, size_t len) {
    for (size_t i = 0; i < len; i++) {
        uint32_t t = 0;
        for (int r = 0; r < n; r++)
            t += (uint32_t)value(r, i);
        want[i] = (int32_t)t;
    }
}

static void fill_values(int r, int32_t *p, size_t len) {
    for (size_t i = 0; i < len; i++)
        p[i] = value(r, i);
}

static void allgather_case(const shape_t *s) {
    size_t c = s->count, total = (size_t)s->n * c;
    for (int r = 0; r < s->n; r++) {
        fill_values(r, sbuf[r], c);
        garbage(rbuf[r], total);
        sendp[r] = sbuf[r];
        recvp[r] = rbuf[r];
        if (s->inplace) {
            memcpy(rbuf[r] + (size_t)r * c, sbuf[r], c * sizeof(int32_t));
            sendp[r] = rbuf[r] + (size_t)r * c;
        }
    }
    for (int b = 0; b < s->n; b++)
        fill_values(b, want + (size_t)b * c, c);
    run(s);
    for (int r = 0; r < s->n; r++)
        expect(s, r, rbuf[r], want, total);
}

/* Where the receive buffer is: its own, block r of the send buffer (NCCL's
 * in place), or the send buffer's start (MPI's). */
enum { SEPARATE, AT_BLOCK, AT_START };

static void reduce_scatter_run(const shape_t *s, int where) {
    size_t c = s->count, total = (size_t)s->n * c;
    for (int r = 0; r < s->n; r++) {
        fill_values(r, sbuf[r], total);
        garbage(rbuf[r], c);
        sendp[r] = sbuf[r];
        recvp[r] = where == SEPARATE   ? rbuf[r]
                   : where == AT_BLOCK ? sbuf[r] + (size_t)r * c
                                       : sbuf[r];
    }
    sum_reference(s->n, total);
    run(s);
    for (int r = 0; r < s->n; r++)
        expect(s, r, recvp[r], want + (size_t)r * c, c);
}

/* Flagged in place, both conventions. Not flagged, the receive buffer may
 * still be block r (today's api.c flags only equal pointers). */
static void reduce_scatter_case(const shape_t *s) {
    if (s->inplace) {
        reduce_scatter_run(s, AT_BLOCK);
        reduce_scatter_run(s, AT_START);
    } else {
        reduce_scatter_run(s, SEPARATE);
        reduce_scatter_run(s, AT_BLOCK);
    }
}

static void bcast_case(const shape_t *s) {
    for (int r = 0; r < s->n; r++) {
        if (r == s->root)
            fill_values(r, rbuf[r], s->count);
        else
            garbage(rbuf[r], s->count);
        sendp[r] = recvp[r] = rbuf[r];
    }
    fill_values(s->root, want, s->count);
    run(s);
    for (int r = 0; r < s->n; r++)
        expect(s, r, rbuf[r], want, s->count);
}

static void reduce_case(const shape_t *s) {
    for (int r = 0; r < s->n; r++) {
        fill_values(r, sbuf[r], s->count);
        sendp[r] = sbuf[r];
        recvp[r] = NULL; /* non-roots have no receive buffer */
    }
    garbage(rbuf[s->root], s->count);
    recvp[s->root] = s->inplace ? sbuf[s->root] : rbuf[s->root];
    sum_reference(s->n, s->count);
    run(s);
    expect(s, s->root, recvp[s->root], want, s->count);
}

static void alltoall_case(const shape_t *s) {
    size_t c = s->count, total = (size_t)s->n * c;
    for (int r = 0; r < s->n; r++) {
        fill_values(r, sbuf[r], total);
        garbage(rbuf[r], total);
        sendp[r] = sbuf[r];
        recvp[r] = s->inplace ? sbuf[r] : rbuf[r];
    }
    run(s);
    for (int r = 0; r < s->n; r++) {
        for (int j = 0; j < s->n; j++)
            for (size_t i = 0; i < c; i++)
                want[(size_t)j * c + i] = value(j, (size_t)r * c + i);
        expect(s, r, recvp[r], want, total);
    }
}

static void gather_case(const shape_t *s) {
    size_t c = s->count, total = (size_t)s->n * c;
    int root = s->root;
    for (int r = 0; r < s->n; r++) {
        fill_values(r, sbuf[r], c);
        sendp[r] = sbuf[r];
        recvp[r] = NULL;
    }
    garbage(rbuf[root], total);
    recvp[root] = rbuf[root];
    if (s->inplace) {
        memcpy(rbuf[root] + (size_t)root * c, sbuf[root], c * sizeof(int32_t));
        sendp[root] = rbuf[root] + (size_t)root * c;
    }
    for (int b = 0; b < s->n; b++)
        fill_values(b, want + (size_t)b * c, c);
    run(s);
    expect(s, root, rbuf[root], want, total);
}

static void scatter_case(const shape_t *s) {
    size_t c = s->count, total = (size_t)s->n * c;
    int root = s->root;
    for (int r = 0; r < s->n; r++) {
        garbage(rbuf[r], c);
        sendp[r] = NULL; /* only the root sends */
        recvp[r] = rbuf[r];
    }
    fill_values(root, sbuf[root], total);
    sendp[root] = sbuf[root];
    if (s->inplace) recvp[root] = sbuf[root] + (size_t)root * c;
    fill_values(root, want, total);
    run(s);
    for (int r = 0; r < s->n; r++)
        expect(s, r, recvp[r], want + (size_t)r * c, c);
}

/* --- the matrix ---------------------------------------------------------- */

typedef void (*case_fn)(const shape_t *);

typedef struct {
    hcomm_coll_t coll;
    case_fn fn;
    int rooted;
    int blocked; /* buffers of n blocks: the large count is per block */
    int always_inplace;
} coll_desc_t;

static int pick_roots(int n, int rooted, int *roots) {
    if (!rooted) {
        roots[0] = 0;
        return 1;
    }
    if (n <= 9) {
        for (int r = 0; r < n; r++)
            roots[r] = r;
        return n;
    }
    int cand[4] = {0, 1, n / 2, n - 1}, k = 0;
    for (int i = 0; i < 4; i++) {
        int dup = 0;
        for (int j = 0; j < k; j++)
            dup |= roots[j] == cand[i];
        if (!dup) roots[k++] = cand[i];
    }
    return k;
}

static void matrix(const coll_desc_t *d, const char *name) {
    shape_t s = {.algo = hcomm_algo_find(d->coll, name)};
    assert_non_null(s.algo);
    for (size_t k = 0; k < NSIZES; k++) {
        int n = sizes[k], roots[MAXN];
        if (quick_skip(n)) continue;
        int nroots = pick_roots(n, d->rooted, roots);
        size_t counts[] = {0, 1, 2, 7, (size_t)n + 1, 1009};
        size_t ncounts = n <= 33 ? 6 : 5;
        s.n = n;
        for (int i = 0; i < nroots; i++) {
            s.root = roots[i];
            for (size_t c = 0; c < ncounts; c++) {
                s.count = counts[c];
                /* Tiny chunks: many pipelined messages per block (fewer
                 * for a large prime block between many ranks, for time). */
                s.chunk = d->blocked && n > 9 && counts[c] == 1009
                              ? PRIME_CHUNK
                              : SMALL_CHUNK;
                s.inplace = d->always_inplace || (int)(c % 2);
                d->fn(&s);
                s.chunk = DEFAULT_CHUNK;
                s.inplace = d->always_inplace || !(c % 2);
                d->fn(&s);
            }
        }
        s.root = roots[nroots - 1];
        s.count = d->blocked ? LARGE / (size_t)n + 1 : LARGE;
        s.chunk = DEFAULT_CHUNK;
        s.inplace = d->always_inplace || n % 2;
        d->fn(&s);
    }
}

static const coll_desc_t allgather = {HCOMM_COLL_ALLGATHER, allgather_case, 0,
                                      1, 0};
static const coll_desc_t reduce_scatter = {HCOMM_COLL_REDUCE_SCATTER,
                                           reduce_scatter_case, 0, 1, 0};
static const coll_desc_t bcast = {HCOMM_COLL_BCAST, bcast_case, 1, 0, 1};
static const coll_desc_t reduce = {HCOMM_COLL_REDUCE, reduce_case, 1, 0, 0};
static const coll_desc_t alltoall = {HCOMM_COLL_ALLTOALL, alltoall_case, 0, 1,
                                     0};
static const coll_desc_t gather = {HCOMM_COLL_GATHER, gather_case, 1, 1, 0};
static const coll_desc_t scatter = {HCOMM_COLL_SCATTER, scatter_case, 1, 1, 0};

#define MATRIX_TEST(fn, desc, name)                                            \
    static void fn(void **state) {                                             \
        (void)state;                                                           \
        matrix(&desc, name);                                                   \
    }

MATRIX_TEST(test_allgather_ring, allgather, "ring")
MATRIX_TEST(test_allgather_recursive_doubling, allgather, "recursive_doubling")
MATRIX_TEST(test_allgather_bruck, allgather, "bruck")
MATRIX_TEST(test_allgather_hierarchical, allgather, "hierarchical")
MATRIX_TEST(test_reduce_scatter_hierarchical, reduce_scatter, "hierarchical")
MATRIX_TEST(test_reduce_scatter_ring, reduce_scatter, "ring")
MATRIX_TEST(test_reduce_scatter_recursive_halving, reduce_scatter,
            "recursive_halving")
MATRIX_TEST(test_bcast_binomial, bcast, "binomial")
MATRIX_TEST(test_bcast_scatter_allgather, bcast, "scatter_allgather")
MATRIX_TEST(test_bcast_chain, bcast, "chain")
MATRIX_TEST(test_bcast_hierarchical, bcast, "hierarchical")
MATRIX_TEST(test_reduce_binomial, reduce, "binomial")
MATRIX_TEST(test_reduce_reduce_scatter_gather, reduce, "reduce_scatter_gather")
MATRIX_TEST(test_alltoall_pairwise, alltoall, "pairwise")
MATRIX_TEST(test_alltoall_bruck, alltoall, "bruck")
MATRIX_TEST(test_gather_binomial, gather, "binomial")
MATRIX_TEST(test_scatter_binomial, scatter, "binomial")

/* --- other operations and types for the reducing collectives -------------- */

static float fval(int r, size_t i) {
    return (float)((r * 5 + (int)i) % 9);
}

static float freference(int op, int n, size_t i) {
    float sum = 0, best = fval(0, i);
    for (int r = 0; r < n; r++) {
        float x = fval(r, i);
        sum += x;
        if (op == HCOMM_MAX && x > best) best = x;
        if (op == HCOMM_MIN && x < best) best = x;
    }
    return op == HCOMM_AVG ? sum / (float)n : best;
}

/* One float run; results (count per rank) come back in out[]. */
static void run_float(const hcomm_algo_t *algo, int n, int root, int op,
                      size_t count, int inplace, float **out) {
    float *fs[9], *fr[9];
    size_t total = algo->coll == HCOMM_COLL_REDUCE ? count : (size_t)n * count;
    for (int r = 0; r < n; r++) {
        fs[r] = (float *)sbuf[r];
        fr[r] = (float *)rbuf[r];
        for (size_t i = 0; i < total; i++)
            fs[r][i] = fval(r, i);
        sendp[r] = fs[r];
        recvp[r] = algo->coll == HCOMM_COLL_REDUCE && r != root ? NULL : fr[r];
        if (inplace)
            recvp[r] = algo->coll == HCOMM_COLL_REDUCE
                           ? (r == root ? fs[r] : NULL)
                           : fs[r] + (size_t)r * count;
        out[r] = recvp[r];
    }
    hcomm_verify_args_t a = {.algo = algo,
                             .size = n,
                             .root = root,
                             .count = count,
                             .dtype = HCOMM_FLOAT32,
                             .op = (hcomm_op_t)op,
                             .inplace = inplace,
                             .chunk_bytes = 12,
                             .seed = (uint32_t)(op * 97 + n * 13 + root),
                             .sendbufs = sendp,
                             .recvbufs = recvp};
    char err[512];
    if (hcomm_verify_run(&a, err, sizeof(err)) != HCOMM_SUCCESS)
        fail_msg("%s/%s n=%d root=%d op=%d: %s", hcomm_coll_name(algo->coll),
                 algo->name, n, root, op, err);
}

static void test_ops_and_types(void **state) {
    (void)state;
    const size_t count = 37;
    for (int k = 0; k < hcomm_nalgos; k++) {
        const hcomm_algo_t *algo = &hcomm_algos[k];
        int is_reduce = algo->coll == HCOMM_COLL_REDUCE;
        if (!is_reduce && algo->coll != HCOMM_COLL_REDUCE_SCATTER) continue;
        for (int n = 1; n <= 9; n++) {
            for (int root = 0; root < (is_reduce ? n : 1); root++) {
                for (int op = HCOMM_MAX; op <= HCOMM_AVG; op++) {
                    float *out[9];
                    int inplace = (op + root) % 2;
                    run_float(algo, n, root, op, count, inplace, out);
                    for (int r = 0; r < n; r++) {
                        if (is_reduce && r != root) continue;
                        size_t base = is_reduce ? 0 : (size_t)r * count;
                        for (size_t i = 0; i < count; i++) {
                            float w = freference(op, n, base + i);
                            if (out[r][i] != w)
                                fail_msg("%s/%s n=%d root=%d op=%d rank %d "
                                         "[%zu]: %g != %g",
                                         hcomm_coll_name(algo->coll),
                                         algo->name, n, root, op, r, i,
                                         out[r][i], w);
                        }
                    }
                }
            }
        }
    }
}

/* --- barrier and point-to-point ------------------------------------------ */

/* Follows the signals epoch by epoch: at the end every rank must have
 * heard, through some chain, from every rank, or it could leave early. */
static void check_barrier_reach(const hcomm_algo_t *algo, int n) {
    static hcomm_plan_t plans[MAXN];
    static unsigned char known[MAXN][MAXN], before[MAXN][MAXN];
    uint32_t pos[MAXN] = {0};
    memset(known, 0, sizeof(known));
    for (int r = 0; r < n; r++) {
        hcomm_plan_args_t pa = {.coll = HCOMM_COLL_BARRIER,
                                .rank = r,
                                .size = n,
                                .esize = 1,
                                .chunk_bytes = DEFAULT_CHUNK};
        hcomm_plan_init(&plans[r]);
        assert_int_equal(algo->build(&pa, &plans[r]), HCOMM_SUCCESS);
        known[r][r] = 1;
    }
    for (int busy = 1; busy;) {
        busy = 0;
        memcpy(before, known, sizeof(known));
        for (int r = 0; r < n; r++) {
            const hcomm_plan_t *p = &plans[r];
            uint32_t start = pos[r], i = start;
            for (; i < p->nsteps && p->steps[i].epoch == p->steps[start].epoch;
                 i++) {
                const hcomm_step_t *st = &p->steps[i];
                if (st->kind != HCOMM_STEP_SEND) continue;
                for (int q = 0; q < n; q++)
                    known[st->peer][q] |= before[r][q];
            }
            busy |= i > start;
            pos[r] = i;
        }
    }
    for (int r = 0; r < n; r++) {
        for (int q = 0; q < n; q++)
            if (!known[r][q])
                fail_msg("barrier n=%d: rank %d never hears from rank %d", n, r,
                         q);
        hcomm_plan_release(&plans[r]);
    }
}

static void test_barrier_dissemination(void **state) {
    (void)state;
    const hcomm_algo_t *algo =
        hcomm_algo_find(HCOMM_COLL_BARRIER, "dissemination");
    assert_non_null(algo);
    for (size_t k = 0; k < NSIZES; k++) {
        int n = sizes[k];
        if (quick_skip(n)) continue;
        for (int r = 0; r < n; r++)
            sendp[r] = recvp[r] = NULL;
        shape_t s = {algo, n, 0, 0, 0, DEFAULT_CHUNK};
        hcomm_verify_args_t a = {.algo = algo,
                                 .size = n,
                                 .dtype = HCOMM_UINT8,
                                 .chunk_bytes = DEFAULT_CHUNK,
                                 .seed = (uint32_t)n,
                                 .sendbufs = sendp,
                                 .recvbufs = recvp};
        char err[512];
        check_bounds(&s);
        if (hcomm_verify_run(&a, err, sizeof(err)) != HCOMM_SUCCESS)
            fail_msg("barrier n=%d: %s", n, err);
        check_barrier_reach(algo, n);
    }
}

static void test_send_recv(void **state) {
    (void)state;
    const hcomm_algo_t *snd = hcomm_algo_find(HCOMM_COLL_SEND, "direct");
    const hcomm_algo_t *rcv = hcomm_algo_find(HCOMM_COLL_RECV, "direct");
    assert_non_null(snd);
    assert_non_null(rcv);
    size_t counts[] = {0, 1, 7, 1009, LARGE};
    for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
        for (int from = 0; from < 2; from++) {
            int to = 1 - from;
            const hcomm_algo_t *algos[2];
            int peers[2];
            algos[from] = snd;
            algos[to] = rcv;
            peers[from] = to;
            peers[to] = from;
            fill_values(from, sbuf[from], counts[c]);
            garbage(rbuf[to], counts[c]);
            sendp[from] = sbuf[from];
            recvp[from] = NULL;
            sendp[to] = NULL;
            recvp[to] = rbuf[to];
            hcomm_verify_args_t a = {.algo = snd,
                                     .size = 2,
                                     .count = counts[c],
                                     .dtype = HCOMM_INT32,
                                     .chunk_bytes = SMALL_CHUNK,
                                     .seed = (uint32_t)c + 1,
                                     .sendbufs = sendp,
                                     .recvbufs = recvp,
                                     .rank_algos = algos,
                                     .rank_roots = peers};
            char err[512];
            if (hcomm_verify_run(&a, err, sizeof(err)) != HCOMM_SUCCESS)
                fail_msg("send/recv count=%zu: %s", counts[c], err);
            shape_t s = {snd, 2, to, 0, counts[c], SMALL_CHUNK};
            fill_values(from, want, counts[c]);
            expect(&s, to, rbuf[to], want, counts[c]);
        }
    }
}

static int setup(void **state) {
    (void)state;
    for (int r = 0; r < MAXN; r++) {
        sbuf[r] = malloc(CAP * sizeof(int32_t));
        rbuf[r] = malloc(CAP * sizeof(int32_t));
        if (!sbuf[r] || !rbuf[r]) return -1;
    }
    want = malloc(CAP * sizeof(int32_t));
    return want ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    for (int r = 0; r < MAXN; r++) {
        free(sbuf[r]);
        free(rbuf[r]);
    }
    free(want);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_allgather_ring),
        cmocka_unit_test(test_allgather_recursive_doubling),
        cmocka_unit_test(test_allgather_bruck),
        cmocka_unit_test(test_reduce_scatter_ring),
        cmocka_unit_test(test_reduce_scatter_recursive_halving),
        cmocka_unit_test(test_bcast_binomial),
        cmocka_unit_test(test_bcast_scatter_allgather),
        cmocka_unit_test(test_bcast_chain),
        cmocka_unit_test(test_bcast_hierarchical),
        cmocka_unit_test(test_allgather_hierarchical),
        cmocka_unit_test(test_reduce_scatter_hierarchical),
        cmocka_unit_test(test_reduce_binomial),
        cmocka_unit_test(test_reduce_reduce_scatter_gather),
        cmocka_unit_test(test_alltoall_pairwise),
        cmocka_unit_test(test_alltoall_bruck),
        cmocka_unit_test(test_gather_binomial),
        cmocka_unit_test(test_scatter_binomial),
        cmocka_unit_test(test_ops_and_types),
        cmocka_unit_test(test_barrier_dissemination),
        cmocka_unit_test(test_send_recv),
    };
    return run_tests_split(tests, sizeof(tests) / sizeof(tests[0]), setup,
                           teardown);
}
