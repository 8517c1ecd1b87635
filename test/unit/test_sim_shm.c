/* hcomm_sim's shared-memory algorithms (tools/hcomm_sim_shm.c):
 * - each formula gives the time its copies, reductions, flags and system
 *   calls add up to, by hand, in one round and in several (AllReduce's
 *   three, Broadcast's slots and direct copies);
 * - "shm" takes what the library's selection takes (hcomm_shm_select) at
 *   each side of the one-shot and direct-read limits, and two-shot where
 *   direct reads do not work;
 * - a shape of more than one node, or of one rank, is declined;
 * - the topology file's "shm" figures are read, and unknown ones refused. */
#include "hcomm_sim.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

/* Round figures: 1 GB/s copies and reductions, a peer's lines at half
 * that, 1 us a call, 0.1 us a flag, 2 us a system call at 4 GB/s. */
static void figures(hcomm_sim_model_t *m) {
    hcomm_sim_model_default(m);
    m->copy_bw = 1e9;
    m->reduce_bw = 1e9;
    m->shm = 1;
    m->shm_call = 1e-6;
    m->shm_flag = 0.1e-6;
    m->shm_peer_speedup = 0.5;
    m->shm_cma = 1;
    m->shm_cma_call = 2e-6;
    m->shm_cma_bw = 4e9;
}

static const hcomm_algo_t *shm_algo(hcomm_coll_t coll, const char *name) {
    for (int a = 0; a < hcomm_sim_nshm_algos; a++)
        if (hcomm_sim_shm_algos[a].coll == coll &&
            strcmp(hcomm_sim_shm_algos[a].name, name) == 0)
            return &hcomm_sim_shm_algos[a];
    fail_msg("no %s", name);
    return NULL;
}

static hcomm_status_t run_coll(const hcomm_sim_model_t *m, hcomm_coll_t coll,
                               int nodes, int ppn, const char *algo,
                               size_t bytes, double *time) {
    hcomm_sim_shape_t sh;
    assert_int_equal(hcomm_sim_shape_regular(&sh, nodes, ppn), 0);
    hcomm_sim_call_t c = {
        .algo = shm_algo(coll, algo), .count = bytes / 4, .esize = 4};
    hcomm_sim_result_t r;
    char err[256];
    hcomm_status_t st = hcomm_sim_run(m, &sh, &c, &r, err, sizeof(err));
    hcomm_sim_shape_free(&sh);
    *time = st == HCOMM_SUCCESS ? r.time : -1;
    return st;
}

static hcomm_status_t run(const hcomm_sim_model_t *m, int nodes, int ppn,
                          const char *algo, size_t bytes, double *time) {
    return run_coll(m, HCOMM_COLL_ALLREDUCE, nodes, ppn, algo, bytes, time);
}

static double bcast_time(const hcomm_sim_model_t *m, int n, size_t bytes) {
    double t;
    assert_int_equal(run_coll(m, HCOMM_COLL_BCAST, 1, n, "shm", bytes, &t),
                     HCOMM_SUCCESS);
    return t;
}

static double time_of(const hcomm_sim_model_t *m, int n, const char *algo,
                      size_t bytes) {
    double t;
    assert_int_equal(run(m, 1, n, algo, bytes, &t), HCOMM_SUCCESS);
    return t;
}

#define NEAR(a, b) assert_true(fabs((a) - (b)) < 1e-12)

static void test_formulas(void **state) {
    (void)state;
    hcomm_sim_model_t m;
    figures(&m);
    /* one-shot, 4 ranks, 4 KiB: the call, 3 flags, its input into its
     * slot, 3 peers' slots reduced at half speed */
    NEAR(time_of(&m, 4, "shm_oneshot", 4096),
         1e-6 + 0.3e-6 + 4096e-9 + 3 * 4096 / 0.5e9);
    /* two-shot, 4 ranks, 64 KiB: flags twice, the input, a block of 16
     * KiB reduced from 3 peers, 3 peers' blocks and its own copied */
    NEAR(time_of(&m, 4, "shm_twoshot", 65536), 1e-6 + 0.6e-6 + 65536e-9 +
                                                   3 * 16384 / 0.5e9 +
                                                   16384 * (3 / 0.5e9 + 1e-9));
    /* 1 MiB: four rounds of the 256 KiB slot, the call once */
    double round =
        0.6e-6 + 262144e-9 + 3 * 65536 / 0.5e9 + 65536 * (3 / 0.5e9 + 1e-9);
    NEAR(time_of(&m, 4, "shm_twoshot", 1 << 20), 1e-6 + 4 * round);
    /* direct reads, 4 ranks, 2 MiB: a block of 512 KiB from each of 3
     * peers in 4 pieces (a system call each) and reduced, then 3 blocks
     * read whole; three rounds of flags */
    double blk = 524288;
    NEAR(time_of(&m, 4, "shm_cma", 2 << 20),
         1e-6 + 0.9e-6 + 3 * (4 * 2e-6 + blk / 4e9 + blk / 1e9) +
             3 * (2e-6 + blk / 4e9));
    /* Broadcast through the slots, 4 ranks, 64 KiB: the receivers' copy
     * of the root's lines is the slower side; 1 MiB in four rounds */
    NEAR(bcast_time(&m, 4, 65536), 1e-6 + 0.1e-6 + 65536 / 0.5e9);
    NEAR(bcast_time(&m, 4, 1 << 20), 1e-6 + 4 * (0.1e-6 + 262144 / 0.5e9));
    /* at 2 ranks by direct copies from 32 KiB: half each side */
    NEAR(bcast_time(&m, 2, 1 << 20), 1e-6 + 0.1e-6 + 2e-6 + 524288 / 4e9);
    /* a call that fits the cache copies and reduces faster */
    m.cache_bytes = 1 << 20;
    m.cached_speedup = 2;
    NEAR(time_of(&m, 2, "shm_oneshot", 4096),
         1e-6 + 0.1e-6 + 4096 / 2e9 + 4096 / 1e9);
}

static void test_selection(void **state) {
    (void)state;
    hcomm_sim_model_t m;
    figures(&m);
    unsetenv("HCOMM_FAST_PATH_SMALL_MSG");
    /* one-shot while the copies a rank reads fit 16 KiB (at 2 ranks
     * below the 256 KiB slot), direct reads from 128 KiB a rank,
     * two-shot between */
    static const struct {
        int n;
        size_t bytes;
        const char *algo;
    } cells[] = {{2, 16384, "shm_oneshot"},  {2, 16388, "shm_oneshot"},
                 {2, 262140, "shm_oneshot"}, {2, 262144, "shm_cma"},
                 {4, 4096, "shm_oneshot"},   {4, 5464, "shm_twoshot"},
                 {4, 524284, "shm_twoshot"}, {4, 524288, "shm_cma"},
                 {16, 1024, "shm_oneshot"},  {16, 1096, "shm_twoshot"},
                 {16, 2 << 20, "shm_cma"}};
    for (size_t i = 0; i < sizeof(cells) / sizeof(cells[0]); i++) {
        double want = time_of(&m, cells[i].n, cells[i].algo, cells[i].bytes);
        double got = time_of(&m, cells[i].n, "shm", cells[i].bytes);
        if (fabs(got - want) > 1e-12)
            fail_msg("%d ranks, %zu B: shm took %g s, %s %g", cells[i].n,
                     cells[i].bytes, got, cells[i].algo, want);
    }
    /* without direct reads, two-shot; and no forced direct read */
    m.shm_cma = 0;
    NEAR(time_of(&m, 4, "shm", 524288), time_of(&m, 4, "shm_twoshot", 524288));
    double t;
    assert_int_equal(run(&m, 1, 4, "shm_cma", 524288, &t),
                     HCOMM_ERR_UNSUPPORTED);
    /* at 2 ranks one-shot below the slot, as large as it is */
    m.shm_slot_bytes = 65536;
    NEAR(time_of(&m, 2, "shm", 65532), time_of(&m, 2, "shm_oneshot", 65532));
    NEAR(time_of(&m, 2, "shm", 65536), time_of(&m, 2, "shm_twoshot", 65536));
    m.shm_slot_bytes = 0;
    /* the one-shot limit as the library reads it: 0, none at all */
    setenv("HCOMM_FAST_PATH_SMALL_MSG", "0", 1);
    NEAR(time_of(&m, 4, "shm", 64), time_of(&m, 4, "shm_twoshot", 64));
    NEAR(time_of(&m, 2, "shm", 64), time_of(&m, 2, "shm_twoshot", 64));
    unsetenv("HCOMM_FAST_PATH_SMALL_MSG");
}

static void test_declined(void **state) {
    (void)state;
    hcomm_sim_model_t m;
    figures(&m);
    double t;
    assert_int_equal(run(&m, 2, 4, "shm", 4096, &t), HCOMM_ERR_UNSUPPORTED);
    assert_int_equal(run(&m, 1, 1, "shm", 4096, &t), HCOMM_ERR_UNSUPPORTED);
}

static hcomm_status_t load(const char *text, hcomm_sim_model_t *m, char *err) {
    char path[] = "/tmp/test_sim_shm_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    hcomm_sim_shape_t sh;
    hcomm_sim_model_default(m);
    hcomm_status_t st = hcomm_sim_load(path, m, &sh, err, 256);
    unlink(path);
    if (st == HCOMM_SUCCESS) hcomm_sim_shape_free(&sh);
    return st;
}

static void test_file(void **state) {
    (void)state;
    hcomm_sim_model_t m;
    char err[256];
    assert_int_equal(load("{\"nodes\": 1, \"ranks_per_node\": 4}", &m, err),
                     HCOMM_SUCCESS);
    assert_int_equal(m.shm, 0);
    assert_int_equal(
        load("{\"nodes\": 1, \"ranks_per_node\": 4, \"shm\": {\"call_us\": "
             "0.5, \"flag_us\": 0.04, \"peer_speedup\": 0.7, \"cma\": false, "
             "\"cma_us\": 3, \"cma_GBps\": 6, \"slot_bytes\": 65536}}",
             &m, err),
        HCOMM_SUCCESS);
    assert_int_equal(m.shm, 1);
    NEAR(m.shm_call, 0.5e-6);
    NEAR(m.shm_flag, 0.04e-6);
    NEAR(m.shm_peer_speedup, 0.7);
    assert_int_equal(m.shm_cma, 0);
    NEAR(m.shm_cma_call, 3e-6);
    NEAR(m.shm_cma_bw, 6e9);
    assert_int_equal(m.shm_slot_bytes, 65536);
    assert_int_equal(
        load("{\"nodes\": 1, \"ranks_per_node\": 4, \"shm\": {\"flags\": 1}}",
             &m, err),
        HCOMM_ERR_INVALID_ARG);
    assert_non_null(strstr(err, "shm"));
    assert_int_equal(
        load("{\"nodes\": 1, \"ranks_per_node\": 4, \"shm\": {\"cma_GBps\": "
             "0}}",
             &m, err),
        HCOMM_ERR_INVALID_ARG);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_formulas),
        cmocka_unit_test(test_selection),
        cmocka_unit_test(test_declined),
        cmocka_unit_test(test_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
