/* The plans of the variable-count collectives (allgatherv, alltoallv,
 * reduce_scatterv), run for N virtual ranks by the verifier: N = 1..33,
 * 64, 100, counts that differ per rank (and per pair) with zeros, ones,
 * odd and prime counts, blocks placed out of rank order with gaps between
 * them, in place and not, with tiny chunks (many pipelined messages) and
 * the default. Every element of every receive buffer is checked: blocks
 * against a reference computed here, gaps against the garbage they held
 * (a plan writing outside its blocks fails). float32 runs every operation
 * through reduce_scatterv. */
#include "coll/verify.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define MAXN 100
#define GARBAGE ((int32_t)0xa5a5a5a5)
#define SMALL_CHUNK 8 /* two int32: many messages per block */
#define DEFAULT_CHUNK ((size_t)256 << 10)

static const int sizes[] = {1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12,
                            13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24,
                            25, 26, 27, 28, 29, 30, 31, 32, 33, 64, 100};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static int32_t value(int r, size_t i) {
    return (int32_t)((uint32_t)(r + 1) * 0x9e3779b1u +
                     (uint32_t)i * 0x85ebca77u);
}

/* Counts of a pattern: what rank i sends rank j (alltoallv) or rank i's
 * block (j unused). Symmetric in i and j, so that in-place alltoallv (which
 * sends each peer as much as it receives from it) is legal. Large counts
 * only while the rank count keeps the buffers small. */
static size_t pattern_count(int pattern, int n, int i, int j) {
    static const size_t odd[] = {0, 1, 2, 3, 7, 13, 0, 31, 1};
    int a = i < j ? i : j, b = i < j ? j : i, s = a * 31 + b * 17;
    switch (pattern) {
    case 0:
        return 0; /* nothing anywhere */
    case 1:
        return odd[s % 9];
    case 2: /* one large prime block in three, zeros elsewhere */
        return s % 3 ? 0 : (n <= 9 ? 1009 : n <= 33 ? 101 : 11);
    default: /* 1 everywhere but one rank (pair) that has much more */
        return a == n / 2 ? (n <= 33 ? 257 : 29) : 1;
    }
}
#define NPATTERNS 4

/* Blocks in reverse rank order, a gap of two elements before each. */
static size_t place_reversed(const size_t *counts, int n, size_t *displs) {
    size_t at = 0;
    for (int b = n - 1; b >= 0; b--) {
        displs[b] = at + 2;
        at += counts[b] + 2;
    }
    return at + 1;
}

/* Blocks in rotated order (starting at rank `first`), a gap of one. */
static size_t place_rotated(const size_t *counts, int n, int first,
                            size_t *displs) {
    size_t at = 0;
    for (int k = 0; k < n; k++) {
        int b = (first + k) % n;
        displs[b] = at + 1;
        at += counts[b] + 1;
    }
    return at;
}

typedef struct {
    hcomm_vspec_t v[MAXN];
    size_t sc[MAXN][MAXN], sd[MAXN][MAXN], rc[MAXN][MAXN], rd[MAXN][MAXN];
    size_t sext[MAXN], rext[MAXN];
    int32_t *sbuf[MAXN], *rbuf[MAXN], *want[MAXN];
    void *sendp[MAXN], *recvp[MAXN];
} world_t;

static world_t *W;

typedef struct {
    const char *algo;
    hcomm_coll_t coll;
    int n, pattern, inplace, at_start;
    size_t chunk;
} shape_t;

static void describe(const shape_t *s, char *out, size_t len) {
    snprintf(out, len, "%s/%s n=%d pattern=%d inplace=%d%s chunk=%zu",
             hcomm_coll_name(s->coll), s->algo, s->n, s->pattern, s->inplace,
             s->at_start ? " (at the send buffer's start)" : "", s->chunk);
}

static void alloc_buffers(int n) {
    for (int r = 0; r < n; r++) {
        W->sbuf[r] = malloc((W->sext[r] + 1) * sizeof(int32_t));
        W->rbuf[r] = malloc((W->rext[r] + 1) * sizeof(int32_t));
        W->want[r] = malloc((W->rext[r] + 1) * sizeof(int32_t));
        assert_true(W->sbuf[r] && W->rbuf[r] && W->want[r]);
        for (size_t i = 0; i < W->sext[r]; i++)
            W->sbuf[r][i] = value(r, i);
        for (size_t i = 0; i < W->rext[r]; i++)
            W->rbuf[r][i] = W->want[r][i] = GARBAGE;
        W->sendp[r] = W->sbuf[r];
        W->recvp[r] = W->rbuf[r];
    }
}

static void free_buffers(int n) {
    for (int r = 0; r < n; r++) {
        free(W->sbuf[r]);
        free(W->rbuf[r]);
        free(W->want[r]);
    }
}

static void run_and_check(const shape_t *s, hcomm_dtype_t dtype, int op) {
    char err[512], what[200];
    hcomm_verify_args_t a = {.algo = hcomm_algo_find(s->coll, s->algo),
                             .size = s->n,
                             .dtype = dtype,
                             .op = (hcomm_op_t)op,
                             .inplace = s->inplace,
                             .chunk_bytes = s->chunk,
                             .seed = (uint32_t)(s->n * 131 + s->pattern * 7 +
                                                s->inplace + (int)s->chunk),
                             .sendbufs = W->sendp,
                             .recvbufs = W->recvp,
                             .vspecs = W->v};
    assert_non_null(a.algo);
    describe(s, what, sizeof(what));
    if (hcomm_verify_run(&a, err, sizeof(err)) != HCOMM_SUCCESS)
        fail_msg("%s: %s", what, err);
}

static void expect(const shape_t *s, int r, const int32_t *got,
                   const int32_t *exp, size_t len) {
    for (size_t i = 0; i < len; i++) {
        if (got[i] == exp[i]) continue;
        char what[200];
        describe(s, what, sizeof(what));
        fail_msg("%s: rank %d element %zu is %d, expected %d", what, r, i,
                 got[i], exp[i]);
    }
}

/* --- allgatherv ------------------------------------------------------------
 */

static void allgatherv_case(const shape_t *s) {
    int n = s->n;
    size_t counts[MAXN];
    for (int b = 0; b < n; b++)
        counts[b] = pattern_count(s->pattern, n, b, b);
    for (int r = 0; r < n; r++) {
        memcpy(W->rc[r], counts, (size_t)n * sizeof(size_t));
        /* every rank places the blocks its own way */
        W->rext[r] = r % 2 ? place_reversed(counts, n, W->rd[r])
                           : place_rotated(counts, n, r, W->rd[r]);
        W->sext[r] = counts[r];
        W->v[r] = (hcomm_vspec_t){NULL, NULL, W->rc[r], W->rd[r]};
    }
    alloc_buffers(n);
    for (int r = 0; r < n; r++) {
        for (int b = 0; b < n; b++)
            for (size_t i = 0; i < counts[b]; i++)
                W->want[r][W->rd[r][b] + i] = value(b, i);
        if (s->inplace) {
            int32_t *own = W->rbuf[r] + W->rd[r][r];
            memcpy(own, W->sbuf[r], counts[r] * sizeof(int32_t));
            W->sendp[r] = own;
        }
    }
    run_and_check(s, HCOMM_INT32, HCOMM_SUM);
    for (int r = 0; r < n; r++)
        expect(s, r, W->rbuf[r], W->want[r], W->rext[r]);
    free_buffers(n);
}

/* --- alltoallv -------------------------------------------------------------
 */

static void alltoallv_case(const shape_t *s) {
    int n = s->n;
    for (int r = 0; r < n; r++) {
        for (int j = 0; j < n; j++) {
            W->sc[r][j] = pattern_count(s->pattern, n, r, j);
            W->rc[r][j] = pattern_count(s->pattern, n, j, r);
        }
        W->sext[r] = place_rotated(W->sc[r], n, (r + 1) % n, W->sd[r]);
        W->rext[r] = place_reversed(W->rc[r], n, W->rd[r]);
        W->v[r] = (hcomm_vspec_t){W->sc[r], W->sd[r], W->rc[r], W->rd[r]};
    }
    alloc_buffers(n);
    for (int r = 0; r < n; r++) {
        if (s->inplace) { /* what r sends j sits in its receive block j */
            for (int j = 0; j < n; j++)
                for (size_t i = 0; i < W->rc[r][j]; i++)
                    W->rbuf[r][W->rd[r][j] + i] = value(r, W->rd[r][j] + i);
            W->sendp[r] = W->rbuf[r];
        }
    }
    for (int r = 0; r < n; r++)
        for (int j = 0; j < n; j++)
            for (size_t i = 0; i < W->rc[r][j]; i++)
                W->want[r][W->rd[r][j] + i] =
                    value(j, (s->inplace ? W->rd[j][r] : W->sd[j][r]) + i);
    run_and_check(s, HCOMM_INT32, HCOMM_SUM);
    for (int r = 0; r < n; r++)
        expect(s, r, W->rbuf[r], W->want[r], W->rext[r]);
    free_buffers(n);
}

/* --- reduce_scatterv -------------------------------------------------------
 */

static void reduce_scatterv_case(const shape_t *s) {
    int n = s->n;
    size_t counts[MAXN], off[MAXN], total = 0;
    for (int b = 0; b < n; b++) {
        counts[b] = pattern_count(s->pattern, n, b, b);
        off[b] = total;
        total += counts[b];
    }
    for (int r = 0; r < n; r++) {
        memcpy(W->rc[r], counts, (size_t)n * sizeof(size_t));
        W->sext[r] = total;
        W->rext[r] = counts[r];
        W->v[r] = (hcomm_vspec_t){NULL, NULL, W->rc[r], NULL};
    }
    alloc_buffers(n);
    for (int r = 0; r < n; r++) {
        for (size_t i = 0; i < counts[r]; i++) {
            uint32_t t = 0;
            for (int q = 0; q < n; q++)
                t += (uint32_t)value(q, off[r] + i);
            W->want[r][i] = (int32_t)t;
        }
        if (s->inplace) W->recvp[r] = W->sbuf[r] + (s->at_start ? 0 : off[r]);
    }
    run_and_check(s, HCOMM_INT32, HCOMM_SUM);
    for (int r = 0; r < n; r++)
        expect(s, r, W->recvp[r], W->want[r], counts[r]);
    free_buffers(n);
}

/* --- the matrix ------------------------------------------------------------
 */

static void matrix(hcomm_coll_t coll, const char *algo,
                   void (*fn)(const shape_t *)) {
    for (size_t k = 0; k < NSIZES; k++) {
        int n = sizes[k];
        for (int p = 0; p < NPATTERNS; p++)
            for (int inplace = 0; inplace < 2; inplace++) {
                shape_t s = {algo, coll, n, p, inplace, 0, DEFAULT_CHUNK};
                fn(&s);
                /* tiny chunks cost a step per element pair: not at 100 */
                s.chunk = n <= 33 ? SMALL_CHUNK : 44;
                fn(&s);
                if (coll == HCOMM_COLL_REDUCE_SCATTERV && inplace) {
                    s.at_start = 1;
                    fn(&s);
                }
            }
    }
}

static void test_allgatherv_ring(void **state) {
    (void)state;
    matrix(HCOMM_COLL_ALLGATHERV, "ring", allgatherv_case);
}

static void test_alltoallv_pairwise(void **state) {
    (void)state;
    matrix(HCOMM_COLL_ALLTOALLV, "pairwise", alltoallv_case);
}

static void test_reduce_scatterv_ring(void **state) {
    (void)state;
    matrix(HCOMM_COLL_REDUCE_SCATTERV, "ring", reduce_scatterv_case);
}

/* float32 through every operation: exact values (small integers). */
static void test_reduce_scatterv_ops(void **state) {
    (void)state;
    static const int ns[] = {1, 2, 3, 5, 8};
    for (size_t k = 0; k < sizeof(ns) / sizeof(*ns); k++) {
        int n = ns[k];
        for (int op = HCOMM_SUM; op <= HCOMM_AVG; op++) {
            if (op == HCOMM_PROD && n > 5) continue; /* n! m^n: inexact */
            size_t counts[MAXN], off[MAXN], total = 0;
            float *sb[MAXN], *rb[MAXN];
            for (int b = 0; b < n; b++) {
                counts[b] = pattern_count(1, n, b, b) + (size_t)(b == 0);
                off[b] = total;
                total += counts[b];
            }
            for (int r = 0; r < n; r++) {
                memcpy(W->rc[r], counts, (size_t)n * sizeof(size_t));
                W->v[r] = (hcomm_vspec_t){NULL, NULL, W->rc[r], NULL};
                sb[r] = malloc((total + 1) * sizeof(float));
                rb[r] = malloc((counts[r] + 1) * sizeof(float));
                assert_true(sb[r] && rb[r]);
                for (size_t i = 0; i < total; i++)
                    sb[r][i] = (float)((r + 1) * ((int)i % 5 + 1));
                W->sendp[r] = sb[r];
                W->recvp[r] = rb[r];
            }
            shape_t s = {"ring", HCOMM_COLL_REDUCE_SCATTERV, n, 1, 0, 0, 8};
            run_and_check(&s, HCOMM_FLOAT32, op);
            for (int r = 0; r < n; r++) {
                for (size_t i = 0; i < counts[r]; i++) {
                    float m = (float)((off[r] + i) % 5 + 1), want;
                    float tri = (float)(n * (n + 1) / 2);
                    float fact = 1;
                    for (int q = 1; q <= n; q++)
                        fact *= (float)q;
                    switch (op) {
                    case HCOMM_SUM:
                        want = m * tri;
                        break;
                    case HCOMM_PROD: {
                        want = fact;
                        for (int q = 0; q < n; q++)
                            want *= m;
                        break;
                    }
                    case HCOMM_MAX:
                        want = m * (float)n;
                        break;
                    case HCOMM_MIN:
                        want = m;
                        break;
                    default:
                        want = m * tri / (float)n;
                    }
                    if (rb[r][i] != want)
                        fail_msg("reduce_scatterv float32 op %d n=%d: rank %d "
                                 "element %zu is %g, expected %g",
                                 op, n, r, i, (double)rb[r][i], (double)want);
                }
                free(sb[r]);
                free(rb[r]);
            }
        }
    }
}

static int setup(void **state) {
    (void)state;
    W = calloc(1, sizeof(*W));
    return W ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    free(W);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_allgatherv_ring),
        cmocka_unit_test(test_alltoallv_pairwise),
        cmocka_unit_test(test_reduce_scatterv_ring),
        cmocka_unit_test(test_reduce_scatterv_ops),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
