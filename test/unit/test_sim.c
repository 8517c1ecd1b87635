/* hcomm_sim against the verifier and against itself:
 * - every algorithm of every collective, 1 to 9, 16 and 17 ranks on one
 *   node, two node-major nodes and three round-robin ones: run by the
 *   simulator on real data (in its event order) and by the verifier, the
 *   results are the same bit for bit and so are the bytes that cross
 *   between nodes;
 * - where a node symmetry holds, simulating one node gives the time and
 *   bytes of simulating every rank;
 * - both, with UCX's copy protocols in the model too;
 * - one message costs what the model says (overhead, latency, bytes over
 *   bandwidth, the rendezvous' extra latency; with copies, the sender's
 *   copy-in and the receiver's copy-out, fragments pipelined, and both on a
 *   rank that sends and receives), and eight ranks sharing one NIC get an
 *   eighth of it each; a level's CPU a message, and calls back to back;
 * - the hierarchical allreduce no longer deadlocks where its tags wrap. */
#include "coll/verify.h"
#include "hcomm_sim.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define MAXN 17

static int32_t value(int r, size_t i) {
    return (int32_t)((uint32_t)(r + 1) * 0x9e3779b1u +
                     (uint32_t)i * 0x85ebca77u);
}

typedef struct {
    void *send[MAXN], *recv[MAXN];
} bufs_t;

static void fill(bufs_t *b, hcomm_coll_t coll, int n, int root, size_t count) {
    for (int r = 0; r < n; r++) {
        size_t sc = hcomm_coll_send_count(coll, n, r, root, count);
        size_t rc = hcomm_coll_recv_count(coll, n, r, root, count);
        if (coll == HCOMM_COLL_BCAST) sc = 0;
        int32_t *s = malloc(sc * 4 + 4), *q = malloc(rc * 4 + 4);
        assert_non_null(s);
        assert_non_null(q);
        for (size_t i = 0; i < sc; i++)
            s[i] = value(r, i);
        for (size_t i = 0; i < rc; i++)
            q[i] = coll == HCOMM_COLL_BCAST && r == root ? value(r, i) : -7;
        b->send[r] = coll == HCOMM_COLL_BCAST ? q : s;
        b->recv[r] = q;
        if (coll == HCOMM_COLL_BCAST) free(s);
    }
}

static void release(bufs_t *b, hcomm_coll_t coll, int n) {
    for (int r = 0; r < n; r++) {
        if (coll != HCOMM_COLL_BCAST) free(b->send[r]);
        free(b->recv[r]);
    }
}

static void label_nodes(int n, int how, int *label) {
    for (int r = 0; r < n; r++)
        label[r] = how == 0 ? 0 : how == 1 ? r / ((n + 1) / 2) : r % 3;
}

/* Every algorithm, shape and count of the verifier test, under *mp. */
static int against_verifier(const hcomm_sim_model_t *mp) {
    static const int ns[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 17};
    static const size_t counts[] = {1, 7, 1009};
    hcomm_sim_model_t m = *mp;
    int runs = 0;
    for (int a = 0; a < hcomm_nalgos; a++) {
        const hcomm_algo_t *algo = &hcomm_algos[a];
        if (algo->coll >= HCOMM_COLL_BARRIER &&
            algo->coll != HCOMM_COLL_GATHER && algo->coll != HCOMM_COLL_SCATTER)
            continue;
        for (size_t k = 0; k < sizeof(ns) / sizeof(*ns); k++)
            for (int how = 0; how < 3; how++)
                for (size_t c = 0; c < 3; c++) {
                    int n = ns[k], root = n - 1, label[MAXN];
                    label_nodes(n, how, label);
                    hcomm_sim_shape_t sh;
                    assert_int_equal(hcomm_sim_shape_labels(&sh, n, label), 0);
                    bufs_t v, s;
                    fill(&v, algo->coll, n, root, counts[c]);
                    fill(&s, algo->coll, n, root, counts[c]);
                    uint64_t cross = 0;
                    char err[512];
                    hcomm_verify_args_t va = {
                        .algo = algo,
                        .size = n,
                        .root = root,
                        .count = counts[c],
                        .dtype = HCOMM_INT32,
                        .op = HCOMM_SUM,
                        .chunk_bytes = m.chunk_bytes,
                        .seed = (uint32_t)(n + 7 * c),
                        .sendbufs = v.send,
                        .recvbufs = v.recv,
                        .node_of = sh.nnodes > 1 ? sh.node_of : NULL,
                        .cross_node_bytes = &cross};
                    if (hcomm_verify_run(&va, err, sizeof(err)) !=
                        HCOMM_SUCCESS)
                        fail_msg("verifier: %s", err);
                    hcomm_sim_call_t sc = {.algo = algo,
                                           .count = counts[c],
                                           .esize = 4,
                                           .root = root,
                                           .inplace =
                                               algo->coll == HCOMM_COLL_BCAST,
                                           .sendbufs = s.send,
                                           .recvbufs = s.recv,
                                           .dtype = HCOMM_INT32,
                                           .op = HCOMM_SUM};
                    hcomm_sim_result_t res;
                    if (hcomm_sim_run(&m, &sh, &sc, &res, err, sizeof(err)) !=
                        HCOMM_SUCCESS)
                        fail_msg("%s/%s n=%d: simulator: %s",
                                 hcomm_coll_name(algo->coll), algo->name, n,
                                 err);
                    for (int r = 0; r < n; r++) {
                        size_t rc = hcomm_coll_recv_count(algo->coll, n, r,
                                                          root, counts[c]);
                        if (memcmp(v.recv[r], s.recv[r], rc * 4) != 0)
                            fail_msg("%s/%s n=%d nodes=%d count=%zu: rank %d's "
                                     "result differs from the verifier's",
                                     hcomm_coll_name(algo->coll), algo->name, n,
                                     sh.nnodes, counts[c], r);
                    }
                    double sim_cross =
                        res.bytes[SIM_NIC] + res.bytes[SIM_SWITCH];
                    if (fabs(sim_cross - (double)cross) > 0.5)
                        fail_msg("%s/%s n=%d nodes=%d count=%zu: %.0f bytes "
                                 "cross nodes in the simulator, %llu in the "
                                 "verifier",
                                 hcomm_coll_name(algo->coll), algo->name, n,
                                 sh.nnodes, counts[c], sim_cross,
                                 (unsigned long long)cross);
                    release(&v, algo->coll, n);
                    release(&s, algo->coll, n);
                    hcomm_sim_shape_free(&sh);
                    runs++;
                }
    }
    return runs;
}

static void test_against_verifier(void **state) {
    (void)state;
    hcomm_sim_model_t m;
    hcomm_sim_model_default(&m);
    m.chunk_bytes = 64; /* many chunks: pipelines in flight at once */
    int runs = against_verifier(&m);
    /* Copies change the order events complete in, not the results. */
    m.copy_bytes = 256;
    m.eager_bytes = 32; /* fragments, with chunks of 64 */
    runs += against_verifier(&m);
    fprintf(stderr, "# %d runs matched the verifier\n", runs);
}

/* Runs call c on sh under the symmetry the simulator finds, then with
 * every rank: the same time and bytes over each level. Returns how many
 * ranks the first run simulated. */
static int matches_every_rank(const hcomm_sim_model_t *m,
                              const hcomm_sim_shape_t *sh, hcomm_sim_call_t c,
                              const char *what) {
    hcomm_sim_result_t a, b;
    char err[512];
    assert_int_equal(hcomm_sim_run(m, sh, &c, &a, err, sizeof(err)),
                     HCOMM_SUCCESS);
    c.no_symmetry = 1;
    assert_int_equal(hcomm_sim_run(m, sh, &c, &b, err, sizeof(err)),
                     HCOMM_SUCCESS);
    assert_int_equal(b.simulated_ranks, sh->size);
    if (fabs(a.time - b.time) > 1e-9 * b.time)
        fail_msg("%s: %s predicts %.6f us, every rank %.6f us", what,
                 a.symmetry, a.time * 1e6, b.time * 1e6);
    for (int l = 0; l < SIM_LEVELS; l++)
        assert_true(fabs(a.bytes[l] - b.bytes[l]) < 0.5);
    return a.simulated_ranks;
}

/* One node's ranks stand for all: time and bytes as with every rank. */
static int symmetry_runs(const hcomm_sim_model_t *m) {
    static const char *names[] = {"ring", "recursive_doubling", "rabenseifner",
                                  "hierarchical", "hierarchical_rhd"};
    static const size_t sizes[] = {4096, 1 << 20, 24 << 20};
    int reduced = 0;
    for (int i = 0; i < 5; i++)
        for (int k = 0; k < 3; k++)
            for (int nodes = 4; nodes <= 8; nodes += 4) {
                hcomm_sim_shape_t sh;
                assert_int_equal(hcomm_sim_shape_regular(&sh, nodes, 4), 0);
                hcomm_sim_call_t c = {
                    .algo = hcomm_algo_find(HCOMM_COLL_ALLREDUCE, names[i]),
                    .count = sizes[k] / 4,
                    .esize = 4};
                char what[96];
                snprintf(what, sizeof(what), "%s %d x 4, %zu B", names[i],
                         nodes, sizes[k]);
                reduced += matches_every_rank(m, &sh, c, what) < sh.size;
                hcomm_sim_shape_free(&sh);
            }
    return reduced;
}

static void test_symmetry(void **state) {
    (void)state;
    hcomm_sim_model_t m;
    hcomm_sim_model_default(&m);
    m.rails = 2;
    int reduced = symmetry_runs(&m);
    /* Copies: a receive's copy-out is on the representative's CPU. */
    m.copy_bytes = 256 << 10;
    m.copy_rate[SIM_NODE] = 4e9;
    reduced += symmetry_runs(&m);
    fprintf(stderr, "# %d runs used a symmetry\n", reduced);
    assert_true(reduced >= 40);
}

/* A ring allreduce of fewer elements than ranks repeats only every
 * size / gcd(count % size, size) ranks (allreduce_ring.c): the simulator
 * runs that many nodes' ranks, with every rank's time and bytes. */
static void test_symmetry_period(void **state) {
    (void)state;
    /* Elements over 16 nodes of 4, and the ranks simulated: the nodes one
     * period spans, with switches of 2 nodes at least 2 of them, and every
     * rank where that is more than a quarter of the nodes. */
    static const struct {
        size_t count;
        int ranks, ranks_switched;
    } cases[] = {{4, 16, 16}, {8, 8, 8},   {24, 8, 8},   {12, 16, 16},
                 {32, 4, 8},  {2, 64, 64}, {63, 64, 64}, {64, 4, 8}};
    for (int nps = 0; nps <= 2; nps += 2)
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
            hcomm_sim_model_t m;
            hcomm_sim_model_default(&m);
            m.nodes_per_switch = nps;
            hcomm_sim_shape_t sh;
            assert_int_equal(hcomm_sim_shape_regular(&sh, 16, 4), 0);
            hcomm_sim_call_t c = {
                .algo = hcomm_algo_find(HCOMM_COLL_ALLREDUCE, "ring"),
                .count = cases[i].count,
                .esize = 4};
            char what[96];
            snprintf(what, sizeof(what), "%zu elements, switches of %d",
                     cases[i].count, nps);
            int ranks = matches_every_rank(&m, &sh, c, what);
            int expect = nps ? cases[i].ranks_switched : cases[i].ranks;
            if (ranks != expect)
                fail_msg("%s: %d ranks simulated, expected %d", what, ranks,
                         expect);
            hcomm_sim_shape_free(&sh);
        }
}

/* The predicted time of call c on nodes x ppn ranks. */
static double sim_time(const hcomm_sim_model_t *m, int nodes, int ppn,
                       const hcomm_sim_call_t *c) {
    hcomm_sim_shape_t sh;
    assert_int_equal(hcomm_sim_shape_regular(&sh, nodes, ppn), 0);
    hcomm_sim_result_t r;
    char err[512];
    assert_int_equal(hcomm_sim_run(m, &sh, c, &r, err, sizeof(err)),
                     HCOMM_SUCCESS);
    hcomm_sim_shape_free(&sh);
    return r.time;
}

/* The model's arithmetic on a broadcast between two ranks. */
static double one_message(const hcomm_sim_model_t *m, int nodes, size_t bytes) {
    hcomm_sim_call_t c = {.algo = hcomm_algo_find(HCOMM_COLL_BCAST, "binomial"),
                          .count = bytes,
                          .esize = 1,
                          .inplace = 1};
    return sim_time(m, nodes, 2 / nodes, &c);
}

/* Two ranks' allreduce by algo, bytes in all. */
static double allreduce2(const hcomm_sim_model_t *m, const char *algo,
                         size_t bytes) {
    hcomm_sim_call_t c = {.algo = hcomm_algo_find(HCOMM_COLL_ALLREDUCE, algo),
                          .count = bytes / 4,
                          .esize = 4};
    return sim_time(m, 1, 2, &c);
}

/* Two ranks' recursive-doubling allreduce: receive, send, reduce. */
static double exchange(const hcomm_sim_model_t *m, size_t bytes) {
    return allreduce2(m, "recursive_doubling", bytes);
}

/* UCX's copy protocols: the sender's CPU copies in, the receiver's out. */
static void test_copies(void **state) {
    (void)state;
    hcomm_sim_model_t m;
    hcomm_sim_model_default(&m);
    m.chunk_bytes = 1 << 30;
    double o = m.overhead, lat = m.lat[SIM_NODE];
    m.copy_bytes = 1 << 20;
    m.copy_rate[SIM_NODE] = 2e9;
    double c = 4096 / 2e9, c8 = 8192 / 2e9;
    /* One fragment: copied in, then out, after the latency. */
    assert_true(fabs(one_message(&m, 1, 4096) - (o + c + lat + c)) < 1e-12);
    /* Eight fragments: the copy-out follows the copy-in a fragment behind. */
    assert_true(fabs(one_message(&m, 1, 65536) - (o + 8 * c8 + lat + c8)) <
                1e-12);
    /* Each rank sends and receives: its CPU pays both copies, after it
     * posts both; past one fragment, the latency hides behind them. */
    assert_true(fabs(exchange(&m, 4096) -
                     (2 * o + c + lat + c + 4096 / m.reduce_bw)) < 1e-12);
    assert_true(fabs(exchange(&m, 65536) -
                     (2 * o + 16 * c8 + 65536 / m.reduce_bw)) < 1e-12);
    /* Between nodes at the CPU's copy rate, and the wire between. */
    double cc = 4096 / m.copy_bw;
    assert_true(fabs(one_message(&m, 2, 4096) - (o + cc + 4096 / m.bw[SIM_NIC] +
                                                 m.lat[SIM_NIC] + cc)) < 1e-12);
    /* Past copy_bytes: the rendezvous, as without copies. */
    m.copy_bytes = 65536;
    m.eager_bytes = 4096;
    assert_true(fabs(one_message(&m, 1, 65537) -
                     (o + lat + 65537 / m.bw[SIM_NODE] + lat)) < 1e-12);
    /* A level's zero-copy limit (TCP's): up to it, one message at the
     * eager bandwidth and no copy on either side; past it, the copies. */
    m.zcopy_bytes[SIM_NODE] = 16384;
    m.eager_bw[SIM_NODE] = 3e9;
    assert_true(fabs(one_message(&m, 1, 16384) - (o + 16384 / 3e9 + lat)) <
                1e-12);
    double c4 = 4096 / 2e9;
    assert_true(fabs(one_message(&m, 1, 16388) -
                     (o + 4 * c4 + 4 / 2e9 + lat + c4)) < 1e-12);
}

/* A level's CPU a message (message_us) on both sides, and calls back to
 * back: a broadcast's root runs ahead, and the latency counts once; an
 * exchange waits for its peer every call. */
static void test_back_to_back(void **state) {
    (void)state;
    hcomm_sim_model_t m;
    hcomm_sim_model_default(&m);
    m.chunk_bytes = 1 << 30;
    double o = m.overhead, lat = m.lat[SIM_NODE], wire = 4096 / m.bw[SIM_NODE];
    double t1 = one_message(&m, 1, 4096);
    assert_true(fabs(t1 - (o + wire + lat)) < 1e-12);
    const double cpu = 2e-6;
    m.msg_cpu[SIM_NODE] = cpu;
    assert_true(fabs(one_message(&m, 1, 4096) - (t1 + cpu)) < 1e-12);
    hcomm_sim_call_t b = {.algo = hcomm_algo_find(HCOMM_COLL_BCAST, "binomial"),
                          .count = 4096,
                          .esize = 1,
                          .inplace = 1,
                          .calls = 4};
    /* the root's next call once its message has moved; the receiver's
     * CPU keeps up: the latency once */
    assert_true(fabs(sim_time(&m, 1, 2, &b) -
                     (4 * (o + cpu + wire) + lat) / 4) < 1e-12);
    hcomm_sim_call_t x = {
        .algo = hcomm_algo_find(HCOMM_COLL_ALLREDUCE, "recursive_doubling"),
        .count = 1024,
        .esize = 4};
    double one = sim_time(&m, 1, 2, &x);
    x.calls = 4;
    assert_true(fabs(sim_time(&m, 1, 2, &x) - one) < 1e-12);
}

/* A rendezvous that reads the sender's input goes at the cache's speed; one
 * that reads a block the sender wrote in the call, at cross_speedup times
 * the uncached rate, for the share of the call's data the cache holds.
 * Recursive doubling's one exchange reads the input; the ring's second half
 * sends the reduced block. */
static void test_written_lines(void **state) {
    (void)state;
    hcomm_sim_model_t m;
    hcomm_sim_model_default(&m);
    m.chunk_bytes = 1 << 30;
    m.eager_bytes = 4096;
    m.cache_bytes = 1 << 20;
    m.cached_speedup = 4;
    m.cache_ranks = 2;
    const size_t b = 65536;
    double rd = allreduce2(&m, "recursive_doubling", b);
    double ring = allreduce2(&m, "ring", b);
    m.cross_speedup = 0.5;
    assert_true(fabs(allreduce2(&m, "recursive_doubling", b) - rd) < 1e-12);
    /* the reduced half: at half the uncached rate, not at it (a
     * cross_speedup of 0 is 1) */
    double half = (double)(b / 2) / m.bw[SIM_NODE];
    assert_true(fabs(allreduce2(&m, "ring", b) - (ring + half)) < 1e-12);
    /* A call of 4 caches (send and receive buffers of 2 MiB): a quarter of
     * the reduced half still in its writer's cache goes at half the
     * uncached rate, the rest at it. */
    const size_t big = 2u << 20;
    m.cross_speedup = 0;
    rd = allreduce2(&m, "recursive_doubling", big);
    ring = allreduce2(&m, "ring", big);
    m.cross_speedup = 0.5;
    assert_true(fabs(allreduce2(&m, "recursive_doubling", big) - rd) < 1e-12);
    half = (double)(big / 2) / m.bw[SIM_NODE];
    assert_true(fabs(allreduce2(&m, "ring", big) - (ring + 0.25 * half)) <
                1e-12);
}

static void test_model(void **state) {
    (void)state;
    hcomm_sim_model_t m;
    hcomm_sim_model_default(&m);
    m.chunk_bytes = 1 << 30;
    double o = m.overhead;
    /* Eager inside a node: overhead + bytes / bandwidth + latency. */
    assert_true(fabs(one_message(&m, 1, 4096) -
                     (o + 4096 / m.bw[SIM_NODE] + m.lat[SIM_NODE])) < 1e-12);
    /* Rendezvous between nodes: one latency more for the handshake. */
    double want =
        o + m.lat[SIM_NIC] + (1 << 20) / m.bw[SIM_NIC] + m.lat[SIM_NIC];
    assert_true(fabs(one_message(&m, 2, 1 << 20) - want) < 1e-12);
    /* With the protocols' own figures: eager at its bandwidth, and the
     * rendezvous's cost on top of the handshake. */
    m.eager_bw[SIM_NODE] = 2e9;
    m.rndv[SIM_NIC] = 1.5e-6;
    assert_true(fabs(one_message(&m, 1, 4096) -
                     (o + 4096 / 2e9 + m.lat[SIM_NODE])) < 1e-12);
    assert_true(fabs(one_message(&m, 2, 1 << 20) - (want + 1.5e-6)) < 1e-12);
    m.eager_bw[SIM_NODE] = 0;
    m.rndv[SIM_NIC] = 0;
    /* 8 ranks per node sharing one NIC, or each with its own. */
    hcomm_sim_shape_t sh;
    assert_int_equal(hcomm_sim_shape_regular(&sh, 2, 8), 0);
    m.rails = 1;
    m.chunk_bytes = 1 << 20;
    hcomm_sim_call_t c = {
        .algo = hcomm_algo_find(HCOMM_COLL_ALLREDUCE, "rabenseifner"),
        .count = (16u << 20) / 4,
        .esize = 4};
    hcomm_sim_result_t one, eight;
    char err[512];
    assert_int_equal(hcomm_sim_run(&m, &sh, &c, &one, err, sizeof(err)),
                     HCOMM_SUCCESS);
    m.rails = 8;
    assert_int_equal(hcomm_sim_run(&m, &sh, &c, &eight, err, sizeof(err)),
                     HCOMM_SUCCESS);
    /* Every rank sends half its 16 MiB across in the first round and gets
     * the other half back in the last: one NIC moves 8 x 8 MiB each time,
     * eight NICs 8 MiB each, in parallel. */
    double per_round = 64.0 * (1 << 20) / m.bw[SIM_NIC];
    assert_true(one.time >= 2 * per_round);
    assert_true(one.time - eight.time > 0.9 * 2 * per_round * 7 / 8);
    hcomm_sim_shape_free(&sh);
}

/* hierarchical at 128 nodes and 1024 chunks: tags wrap at 16 bits, and
 * the leaders' first allgather receive, posted early, took a
 * reduce-scatter message of the same tag (deadlocked before the fix). */
static void test_tag_wrap(void **state) {
    (void)state;
    hcomm_sim_model_t m;
    hcomm_sim_model_default(&m);
    hcomm_sim_shape_t sh;
    assert_int_equal(hcomm_sim_shape_regular(&sh, 128, 1), 0);
    hcomm_sim_call_t c = {
        .algo = hcomm_algo_find(HCOMM_COLL_ALLREDUCE, "hierarchical"),
        .count = (size_t)1 << 28,
        .esize = 4};
    hcomm_sim_result_t r;
    char err[512];
    if (hcomm_sim_run(&m, &sh, &c, &r, err, sizeof(err)) != HCOMM_SUCCESS)
        fail_msg("%s", err);
    assert_true(r.time > 0);
    hcomm_sim_shape_free(&sh);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tag_wrap),
        cmocka_unit_test(test_model),
        cmocka_unit_test(test_copies),
        cmocka_unit_test(test_back_to_back),
        cmocka_unit_test(test_written_lines),
        cmocka_unit_test(test_symmetry),
        cmocka_unit_test(test_symmetry_period),
        cmocka_unit_test(test_against_verifier),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
