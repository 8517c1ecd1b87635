/* The algorithms scale needs (hierarchical_rhd allreduce, hierarchical_tree
 * broadcast) through the verifier: 1..33, 64, 100 and 1000 virtual ranks,
 * placed one per node, node-major in nodes of 4 (the last one short),
 * round robin over 3 nodes, and in uneven nodes; counts 0, 1, 7, N+1, 1009
 * in 8-byte and 804-byte chunks and a large one; every broadcast root
 * (1000 ranks: on the uneven placement). */
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

#define MAXN 1000
static const int sizes[] = {1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11,  12,
                            13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23,  24,
                            25, 26, 27, 28, 29, 30, 31, 32, 33, 64, 100, 1000};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))
enum { ONE_PER_NODE, NODE_MAJOR, ROUND_ROBIN, UNEVEN, NPLACEMENTS };

static int32_t *sendb[MAXN], *recvb[MAXN];
static int only_n; /* HCOMM_TEST_ONLY_N: one rank count (timing, debugging) */
static size_t capacity;
static int label[MAXN];

static int32_t value(int r, size_t i) {
    return (int32_t)((uint32_t)(r + 1) * 0x9e3779b1u +
                     (uint32_t)i * 0x85ebca77u);
}

static void reserve(size_t count) {
    if (count + 1 <= capacity) return;
    capacity = count + 1;
    for (int r = 0; r < MAXN; r++) {
        sendb[r] = realloc(sendb[r], capacity * sizeof(int32_t));
        recvb[r] = realloc(recvb[r], capacity * sizeof(int32_t));
        assert_non_null(sendb[r]);
        assert_non_null(recvb[r]);
    }
}

/* Nodes numbered by their lowest rank, as topo.h numbers them. */
static void place(int n, int how) {
    static int map[MAXN];
    for (int r = 0; r < n; r++) {
        switch (how) {
        case ONE_PER_NODE:
            label[r] = r;
            break;
        case NODE_MAJOR:
            label[r] = r / 4;
            break;
        case ROUND_ROBIN:
            label[r] = r % 3;
            break;
        default: { /* node j has 1 + (3j mod 5) ranks */
            int j = 0, left = r;
            while (left >= 1 + (3 * j) % 5)
                left -= 1 + (3 * j++) % 5;
            label[r] = j;
        }
        }
    }
    for (int i = 0; i < n; i++)
        map[i] = -1;
    for (int r = 0, next = 0; r < n; r++) {
        if (map[label[r]] < 0) map[label[r]] = next++;
        label[r] = map[label[r]];
    }
}

static void check_allreduce(const hcomm_algo_t *algo, int n, size_t count,
                            int inplace, size_t chunk, int avg) {
    reserve(count);
    for (int r = 0; r < n; r++)
        for (size_t i = 0; i < count; i++) {
            sendb[r][i] = avg ? (int32_t)(r % 7 + i % 5) * n : value(r, i);
            recvb[r][i] = inplace ? sendb[r][i] : -7;
        }
    hcomm_verify_args_t a = {.algo = algo,
                             .size = n,
                             .count = count,
                             .dtype = HCOMM_INT32,
                             .op = avg ? HCOMM_AVG : HCOMM_SUM,
                             .inplace = inplace,
                             .chunk_bytes = chunk,
                             .seed = (uint32_t)(n * 131 + count + chunk),
                             .sendbufs = (void **)(inplace ? recvb : sendb),
                             .recvbufs = (void **)recvb,
                             .node_of = label};
    char err[512];
    if (hcomm_verify_run(&a, err, sizeof(err)) != HCOMM_SUCCESS)
        fail_msg("%s n=%d count=%zu inplace=%d chunk=%zu: %s", algo->name, n,
                 count, inplace, chunk, err);
    for (size_t i = 0; i < count; i++) {
        uint32_t s = 0;
        for (int r = 0; r < n; r++)
            s += avg ? (uint32_t)((r % 7 + i % 5) * n) : (uint32_t)value(r, i);
        int32_t want = avg ? (int32_t)(s / (uint32_t)n) : (int32_t)s;
        for (int r = 0; r < n; r++)
            if (recvb[r][i] != want)
                fail_msg("%s n=%d count=%zu inplace=%d chunk=%zu: rank %d "
                         "element %zu is %d, expected %d",
                         algo->name, n, count, inplace, chunk, r, i,
                         recvb[r][i], want);
    }
}

static void check_bcast(const hcomm_algo_t *algo, int n, int root, size_t count,
                        size_t chunk) {
    reserve(count);
    for (int r = 0; r < n; r++)
        for (size_t i = 0; i < count; i++)
            recvb[r][i] = r == root ? value(root, i) : -7;
    hcomm_verify_args_t a = {.algo = algo,
                             .size = n,
                             .root = root,
                             .count = count,
                             .dtype = HCOMM_INT32,
                             .op = HCOMM_SUM,
                             .inplace = 1,
                             .chunk_bytes = chunk,
                             .seed = (uint32_t)(n * 7 + root + count),
                             .sendbufs = (void **)recvb,
                             .recvbufs = (void **)recvb,
                             .node_of = label};
    char err[512];
    if (hcomm_verify_run(&a, err, sizeof(err)) != HCOMM_SUCCESS)
        fail_msg("bcast %s n=%d root=%d count=%zu: %s", algo->name, n, root,
                 count, err);
    for (int r = 0; r < n; r++)
        for (size_t i = 0; i < count; i++)
            if (recvb[r][i] != value(root, i))
                fail_msg("bcast %s n=%d root=%d count=%zu chunk=%zu: rank %d "
                         "element %zu wrong",
                         algo->name, n, root, count, chunk, r, i);
}

static void test_allreduce_hierarchical_rhd(void **state) {
    (void)state;
    const hcomm_algo_t *a =
        hcomm_algo_find(HCOMM_COLL_ALLREDUCE, "hierarchical_rhd");
    assert_non_null(a);
    for (size_t k = 0; k < NSIZES; k++) {
        int n = sizes[k];
        if (quick_skip(n)) continue;
        if (only_n && n != only_n) continue;
        for (int how = 0; how < NPLACEMENTS; how++) {
            place(n, how);
            size_t counts[] = {0, 1, 7, (size_t)n + 1, 1009};
            for (size_t c = 0; c < 5; c++) {
                if (n == 1000 && c != 3) continue; /* the verifier's time */
                if (n < 1000)
                    check_allreduce(a, n, counts[c], (int)((c + how) % 2), 8,
                                    0);
                check_allreduce(a, n, counts[c], (int)((c + how + 1) % 2), 804,
                                c == 4);
            }
            if (n <= 100) /* chunks of 16 KiB, many slots round */
                check_allreduce(a, n, (1u << 18) + 3, how % 2, 16 << 10, 0);
        }
    }
}

static void test_bcast_hierarchical_tree(void **state) {
    (void)state;
    const hcomm_algo_t *a =
        hcomm_algo_find(HCOMM_COLL_BCAST, "hierarchical_tree");
    assert_non_null(a);
    for (size_t k = 0; k < NSIZES; k++) {
        int n = sizes[k];
        if (quick_skip(n)) continue;
        if (only_n && n != only_n) continue;
        for (int how = 0; how < NPLACEMENTS; how++) {
            place(n, how);
            /* Every root; at 1000 ranks on the uneven placement only (each
             * run moves a thousand ranks' plans). */
            for (int root = 0; root < n && (n < 1000 || how == UNEVEN); root++)
                check_bcast(a, n, root, n == 1000 ? 3 : 1009,
                            root % 2 ? 804 : 4020);
            size_t counts[] = {0, 1, 7, (size_t)n + 1};
            for (size_t c = 0; c < 4; c++)
                check_bcast(a, n, (int)(c * 5) % n, counts[c], 8);
            if (n <= 100) check_bcast(a, n, n / 2, (1u << 18) + 3, 16 << 10);
        }
    }
}

int main(void) {
    const char *only = getenv("HCOMM_TEST_ONLY_N");
    only_n = only ? atoi(only) : 0;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_allreduce_hierarchical_rhd),
        cmocka_unit_test(test_bcast_hierarchical_tree),
    };
    return run_tests_split(tests, sizeof(tests) / sizeof(tests[0]), NULL, NULL);
}
