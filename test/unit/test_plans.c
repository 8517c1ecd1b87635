/* Every algorithm's plans, run for N virtual ranks by the verifier on real
 * data: N = 1..33, 64, 100, counts 0, 1, 2, 3, 7, N-1, N, N+1, a prime over
 * 1000 and 2^18+3, in place and out of place, with exact results. */
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

static const int sizes[] = {1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12,
                            13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24,
                            25, 26, 27, 28, 29, 30, 31, 32, 33, 64, 100};

static int32_t value(int r, size_t i) {
    return (int32_t)((r + 1) * (int)(i % 1000 + 1)) - 300;
}

/* Per-rank buffers, kept between runs: faulting in fresh pages for 100
 * ranks x 4 MiB on every run would dominate the test's time. */
static int32_t *send[100], *recv[100], *want;
static size_t capacity;
/* The node map the next runs give hierarchical plans (NULL: one node), and
 * where the verifier adds up the bytes that cross between nodes. */
static const int *node_of;
static uint64_t cross_node;

static void reserve(size_t count) {
    if (count + 1 <= capacity) return;
    capacity = count + 1;
    for (int r = 0; r < 100; r++) {
        send[r] = realloc(send[r], capacity * sizeof(int32_t));
        recv[r] = realloc(recv[r], capacity * sizeof(int32_t));
        assert_non_null(send[r]);
        assert_non_null(recv[r]);
    }
    want = realloc(want, capacity * sizeof(int32_t));
    assert_non_null(want);
}

/* Runs one allreduce shape and checks every rank's result. */
static void check_allreduce(const hcomm_algo_t *algo, int n, size_t count,
                            int inplace, size_t chunk_bytes, uint32_t seed) {
    reserve(count);
    for (size_t i = 0; i < count; i++) {
        int64_t s = 0;
        for (int r = 0; r < n; r++)
            s += value(r, i);
        want[i] = (int32_t)s;
    }
    for (int r = 0; r < n; r++) {
        for (size_t i = 0; i < count; i++) {
            send[r][i] = value(r, i);
            recv[r][i] = inplace ? value(r, i) : -7;
        }
    }
    hcomm_verify_args_t a = {.algo = algo,
                             .size = n,
                             .count = count,
                             .dtype = HCOMM_INT32,
                             .op = HCOMM_SUM,
                             .inplace = inplace,
                             .chunk_bytes = chunk_bytes,
                             .seed = seed,
                             .sendbufs = (void **)(inplace ? recv : send),
                             .recvbufs = (void **)recv,
                             .node_of = node_of,
                             .cross_node_bytes = &cross_node};
    char err[512];
    hcomm_status_t st = hcomm_verify_run(&a, err, sizeof(err));
    if (st != HCOMM_SUCCESS)
        fail_msg("%s n=%d count=%zu inplace=%d: %s", algo->name, n, count,
                 inplace, err);
    for (int r = 0; r < n; r++) {
        if (count && memcmp(recv[r], want, count * sizeof(int32_t)) != 0) {
            size_t i = 0;
            while (recv[r][i] == want[i])
                i++;
            fail_msg("%s n=%d count=%zu inplace=%d: rank %d element %zu is "
                     "%d, expected %d",
                     algo->name, n, count, inplace, r, i, recv[r][i], want[i]);
        }
    }
}

static void allreduce_matrix(const char *name) {
    const hcomm_algo_t *algo = hcomm_algo_find(HCOMM_COLL_ALLREDUCE, name);
    assert_non_null(algo);
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        int n = sizes[k];
        if (quick_skip(n)) continue;
        size_t counts[] = {
            0, 1, 2, 3, 7, (size_t)n - 1, (size_t)n, (size_t)n + 1, 1009};
        for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
            /* Tiny chunks: many pipelined messages per block. */
            check_allreduce(algo, n, counts[c], (int)(c % 2), 8,
                            (uint32_t)(n * 31 + c));
            check_allreduce(algo, n, counts[c], (int)!(c % 2), 256 << 10,
                            (uint32_t)(n * 17 + c));
        }
        /* Large: blocks of several 64 KiB chunks up to 16 ranks (2^20 in
         * 256 KiB chunks tested the same in four times the time). */
        check_allreduce(algo, n, (1u << 18) + 3, n % 2, 64 << 10, (uint32_t)n);
    }
}

static void test_ring(void **state) {
    (void)state;
    allreduce_matrix("ring");
}

static void test_recursive_doubling(void **state) {
    (void)state;
    allreduce_matrix("recursive_doubling");
}

static void test_rabenseifner(void **state) {
    (void)state;
    allreduce_matrix("rabenseifner");
}

static void test_hierarchical(void **state) {
    (void)state;
    allreduce_matrix("hierarchical");
}

/* A broadcast from root, checked on every rank. */
static void check_bcast(const hcomm_algo_t *algo, int n, int root, size_t count,
                        size_t chunk_bytes, uint32_t seed) {
    reserve(count);
    for (int r = 0; r < n; r++)
        for (size_t i = 0; i < count; i++)
            recv[r][i] = r == root ? value(root, i) : -7;
    hcomm_verify_args_t a = {.algo = algo,
                             .size = n,
                             .root = root,
                             .count = count,
                             .dtype = HCOMM_INT32,
                             .op = HCOMM_SUM,
                             .inplace = 1,
                             .chunk_bytes = chunk_bytes,
                             .seed = seed,
                             .sendbufs = (void **)recv,
                             .recvbufs = (void **)recv,
                             .node_of = node_of};
    char err[512];
    if (hcomm_verify_run(&a, err, sizeof(err)) != HCOMM_SUCCESS)
        fail_msg("bcast %s n=%d root=%d count=%zu: %s", algo->name, n, root,
                 count, err);
    for (int r = 0; r < n; r++)
        for (size_t i = 0; i < count; i++)
            if (recv[r][i] != value(root, i))
                fail_msg("bcast %s n=%d root=%d count=%zu: rank %d element "
                         "%zu wrong",
                         algo->name, n, root, count, r, i);
}

/* An allgather of count elements per rank, checked on every rank. */
static void check_allgather(const hcomm_algo_t *algo, int n, size_t count,
                            int inplace, size_t chunk_bytes, uint32_t seed) {
    reserve(count * (size_t)n);
    void *sp[100];
    for (int r = 0; r < n; r++) {
        for (size_t i = 0; i < count * (size_t)n; i++)
            recv[r][i] = -7;
        int32_t *mine = inplace ? recv[r] + (size_t)r * count : send[r];
        for (size_t i = 0; i < count; i++)
            mine[i] = value(r, i);
        sp[r] = mine;
    }
    hcomm_verify_args_t a = {.algo = algo,
                             .size = n,
                             .count = count,
                             .dtype = HCOMM_INT32,
                             .op = HCOMM_SUM,
                             .inplace = inplace,
                             .chunk_bytes = chunk_bytes,
                             .seed = seed,
                             .sendbufs = sp,
                             .recvbufs = (void **)recv,
                             .node_of = node_of};
    char err[512];
    if (hcomm_verify_run(&a, err, sizeof(err)) != HCOMM_SUCCESS)
        fail_msg("allgather %s n=%d count=%zu: %s", algo->name, n, count, err);
    for (int r = 0; r < n; r++)
        for (int q = 0; q < n; q++)
            for (size_t i = 0; i < count; i++)
                if (recv[r][(size_t)q * count + i] != value(q, i))
                    fail_msg("allgather %s n=%d count=%zu inplace=%d: rank %d "
                             "block %d element %zu wrong",
                             algo->name, n, count, inplace, r, q, i);
}

/* A reduce_scatter of count elements per rank, checked on every rank. */
static void check_reduce_scatter(const hcomm_algo_t *algo, int n, size_t count,
                                 int inplace, size_t chunk_bytes,
                                 uint32_t seed) {
    size_t total = count * (size_t)n;
    reserve(total);
    void *sp[100], *rp[100];
    for (int r = 0; r < n; r++) {
        for (size_t i = 0; i < total; i++)
            send[r][i] = value(r, i);
        sp[r] = send[r];
        rp[r] = inplace ? send[r] + (size_t)r * count : recv[r];
    }
    hcomm_verify_args_t a = {.algo = algo,
                             .size = n,
                             .count = count,
                             .dtype = HCOMM_INT32,
                             .op = HCOMM_SUM,
                             .inplace = inplace,
                             .chunk_bytes = chunk_bytes,
                             .seed = seed,
                             .sendbufs = sp,
                             .recvbufs = rp,
                             .node_of = node_of};
    char err[512];
    if (hcomm_verify_run(&a, err, sizeof(err)) != HCOMM_SUCCESS)
        fail_msg("reduce_scatter %s n=%d count=%zu: %s", algo->name, n, count,
                 err);
    for (int r = 0; r < n; r++)
        for (size_t i = 0; i < count; i++) {
            int64_t s = 0;
            for (int q = 0; q < n; q++)
                s += value(q, (size_t)r * count + i);
            if (((int32_t *)rp[r])[i] != (int32_t)s)
                fail_msg("reduce_scatter %s n=%d count=%zu inplace=%d: rank "
                         "%d element %zu wrong",
                         algo->name, n, count, inplace, r, i);
        }
}

/* Nodes numbered by their lowest rank, as topo.h numbers them. */
static void renumber(int n, int *label) {
    int map[100];
    for (int i = 0; i < 100; i++)
        map[i] = -1;
    int next = 0;
    for (int r = 0; r < n; r++) {
        if (map[label[r]] < 0) map[label[r]] = next++;
        label[r] = map[label[r]];
    }
}

/* Hierarchical plans (allreduce, broadcast, allgather, reduce_scatter) for
 * 1 to 8 nodes x
 * 1 to 8 ranks, node-major and
 * interleaved placements, and uneven nodes; every root of the broadcast
 * on the smaller shapes. */
static void test_hierarchical_nodes(void **state) {
    (void)state;
    const hcomm_algo_t *ar =
        hcomm_algo_find(HCOMM_COLL_ALLREDUCE, "hierarchical");
    const hcomm_algo_t *bc = hcomm_algo_find(HCOMM_COLL_BCAST, "hierarchical");
    const hcomm_algo_t *ag =
        hcomm_algo_find(HCOMM_COLL_ALLGATHER, "hierarchical");
    const hcomm_algo_t *rs =
        hcomm_algo_find(HCOMM_COLL_REDUCE_SCATTER, "hierarchical");
    assert_non_null(rs);
    assert_non_null(ag);
    assert_non_null(ar);
    assert_non_null(bc);
    int label[100];
    for (int nodes = 1; nodes <= 8; nodes++)
        for (int ppn = 1; ppn <= 8; ppn++)
            for (int shape = 0; shape < 3; shape++) {
                if (quick_skip_shape(nodes) || quick_skip_shape(ppn)) continue;
                int n = nodes * ppn;
                if (shape == 2) { /* uneven: node j has 1 + (3j mod ppn) */
                    n = 0;
                    for (int j = 0; j < nodes; j++)
                        for (int k = 0; k < 1 + (3 * j) % ppn; k++)
                            label[n++] = j;
                } else {
                    for (int r = 0; r < n; r++)
                        label[r] = shape == 0 ? r / ppn : r % nodes;
                }
                renumber(n, label);
                node_of = label;
                uint32_t seed = (uint32_t)(nodes * 64 + ppn * 3 + shape);
                size_t counts[] = {0, 1, 7, (size_t)n + 1, 1009};
                for (size_t c = 0; c < 5; c++) {
                    check_allreduce(ar, n, counts[c], (int)(c % 2), 8, seed);
                    check_bcast(bc, n, (int)(c * 7) % n, counts[c], 12, seed);
                    check_allgather(ag, n, counts[c], (int)(c % 2),
                                    counts[c] > 100 ? 256 : 8, seed);
                }
                check_allgather(ag, n, 4099, shape % 2, 4 << 10, seed);
                check_reduce_scatter(rs, n, 1031, shape % 2, 256, seed);
                check_reduce_scatter(rs, n, 3, !(shape % 2), 4, seed);
                check_allreduce(ar, n, 100003, shape % 2, 64 << 10, seed);
                for (int root = 0; root < n && n <= 16; root++)
                    check_bcast(bc, n, root, 1009, 256, seed + (uint32_t)root);
            }
    node_of = NULL;
}

/* Bytes that cross between nodes, per rank, for an allreduce of 4 MiB:
 * hierarchical against the flat algorithms, with ranks placed node-major
 * and round robin. Printed (stderr) for the README's table; hierarchical
 * must never send more than the ring. */
static void test_cross_node_traffic(void **state) {
    (void)state;
    static const char *names[] = {"hierarchical", "ring", "rabenseifner",
                                  "recursive_doubling"};
    size_t count = (4u << 20) / sizeof(int32_t);
    int label[100];
    fprintf(stderr, "# allreduce of 4 MiB: MiB crossing between nodes, per "
                    "rank\n# nodes x ranks  placement   hierarchical  ring  "
                    "rabenseifner  recursive_doubling\n");
    for (int nodes = 2; nodes <= 8; nodes *= 2)
        for (int placement = 0; placement < 2; placement++) {
            int ppn = 4, n = nodes * ppn;
            for (int r = 0; r < n; r++)
                label[r] = placement == 0 ? r / ppn : r % nodes;
            renumber(n, label);
            node_of = label;
            double mib[4];
            for (int k = 0; k < 4; k++) {
                check_allreduce(hcomm_algo_find(HCOMM_COLL_ALLREDUCE, names[k]),
                                n, count, 0, 1 << 20, 1);
                mib[k] = (double)cross_node / n / (1 << 20);
            }
            fprintf(stderr,
                    "  %d x %d        %-11s %8.2f %8.2f %10.2f %14.2f\n", nodes,
                    ppn, placement ? "round-robin" : "node-major", mib[0],
                    mib[1], mib[2], mib[3]);
            assert_true(mib[0] <= mib[1] + 1e-9);
        }
    node_of = NULL;
}

/* Other types and operations through the plans: avg scales once, max and
 * float types go through the same steps. */
static void test_ops_and_types(void **state) {
    (void)state;
    for (int k = 0; k < hcomm_nalgos; k++) {
        const hcomm_algo_t *algo = &hcomm_algos[k];
        if (algo->coll != HCOMM_COLL_ALLREDUCE) continue;
        for (int n = 1; n <= 9; n++) {
            size_t count = 37;
            float *fsend[9], *frecv[9];
            for (int r = 0; r < n; r++) {
                fsend[r] = malloc(count * sizeof(float));
                frecv[r] = malloc(count * sizeof(float));
                for (size_t i = 0; i < count; i++)
                    fsend[r][i] = (float)((r * 5 + (int)i) % 9);
            }
            for (int op = HCOMM_MAX; op <= HCOMM_AVG; op++) {
                hcomm_verify_args_t a = {.algo = algo,
                                         .size = n,
                                         .count = count,
                                         .dtype = HCOMM_FLOAT32,
                                         .op = (hcomm_op_t)op,
                                         .chunk_bytes = 12,
                                         .seed = (uint32_t)(op + n),
                                         .sendbufs = (void **)fsend,
                                         .recvbufs = (void **)frecv};
                char err[512];
                if (hcomm_verify_run(&a, err, sizeof(err)) != HCOMM_SUCCESS)
                    fail_msg("%s n=%d op=%d: %s", algo->name, n, op, err);
                for (size_t i = 0; i < count; i++) {
                    float sum = 0, best = fsend[0][i];
                    for (int r = 0; r < n; r++) {
                        sum += fsend[r][i];
                        if (op == HCOMM_MAX && fsend[r][i] > best)
                            best = fsend[r][i];
                        if (op == HCOMM_MIN && fsend[r][i] < best)
                            best = fsend[r][i];
                    }
                    float want = op == HCOMM_AVG ? sum / (float)n : best;
                    for (int r = 0; r < n; r++)
                        if (frecv[r][i] != want)
                            fail_msg("%s n=%d op=%d rank %d [%zu]: %g != %g",
                                     algo->name, n, op, r, i, frecv[r][i],
                                     want);
                }
            }
            for (int r = 0; r < n; r++) {
                free(fsend[r]);
                free(frecv[r]);
            }
        }
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ring),
        cmocka_unit_test(test_recursive_doubling),
        cmocka_unit_test(test_hierarchical),
        cmocka_unit_test(test_hierarchical_nodes),
        cmocka_unit_test(test_cross_node_traffic),
        cmocka_unit_test(test_rabenseifner),
        cmocka_unit_test(test_ops_and_types),
    };
    return run_tests_split(tests, sizeof(tests) / sizeof(tests[0]), NULL, NULL);
}
