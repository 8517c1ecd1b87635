/* The generated selection table (src/coll/select_table.c) still says what
 * the simulator says: for every table shape up to 128 ranks and every
 * table size, the algorithm hcomm_select picks is the fastest the
 * simulator predicts under tools/hcomm_sim_cluster.json (ties within 1e-9
 * allowed). Larger shapes cost minutes: `make -C build select-table`
 * regenerates them all. Also: the lookup between simulated shapes. */
#include "coll/select.h"
#include "coll/select_table.h"
#include "hcomm_sim.h"
#include "quick.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define MAX_CHECKED_RANKS 128
/* Under the sanitizers (CI's HCOMM_TEST_SANITIZER pass) the shapes up to
 * 32 ranks: the same simulator code, where the 64- and 128-rank shapes
 * took most of the test's time. */
#define MAX_CHECKED_RANKS_SANITIZER 32

static hcomm_sim_model_t model;

static int max_checked_ranks(void) {
    if (!sanitizer_pass()) return MAX_CHECKED_RANKS;
    fprintf(stderr, "HCOMM_TEST_SANITIZER: shapes up to %d ranks\n",
            MAX_CHECKED_RANKS_SANITIZER);
    return MAX_CHECKED_RANKS_SANITIZER;
}

static void test_table_matches_simulator(void **state) {
    (void)state;
    hcomm_coll_t coll;
    int nodes, ppn, cells = 0, max_ranks = max_checked_ranks();
    for (int i = 0; hcomm_sim_select_shape(i, &coll, &nodes, &ppn); i++) {
        if (nodes * ppn > max_ranks) continue;
        for (int k = 0; hcomm_sim_select_size(k); k++) {
            size_t bytes = hcomm_sim_select_size(k);
            const hcomm_algo_t *best, *got, *picked;
            double tbest, tpicked;
            char err[512];
            if (hcomm_sim_select_best(&model, coll, nodes, ppn, bytes, NULL,
                                      &best, &tbest, err,
                                      sizeof(err)) != HCOMM_SUCCESS)
                fail_msg("%s", err);
            picked = hcomm_select(coll, bytes, nodes * ppn, nodes);
            assert_non_null(picked);
            if (picked != best) {
                if (hcomm_sim_select_best(&model, coll, nodes, ppn, bytes,
                                          picked->name, &got, &tpicked, err,
                                          sizeof(err)) != HCOMM_SUCCESS)
                    fail_msg("%s", err);
                if (tpicked > tbest * (1 + 1e-9))
                    fail_msg("%s at %d nodes x %d, %zu B: the table picks %s "
                             "(%.3f us), the simulator %s (%.3f us); "
                             "regenerate it: make -C build select-table",
                             hcomm_coll_name(coll), nodes, ppn, bytes,
                             picked->name, tpicked * 1e6, best->name,
                             tbest * 1e6);
            }
            cells++;
        }
    }
    fprintf(stderr, "# %d table cells match the simulator\n", cells);
    assert_true(cells > 100);
}

/* Between simulated shapes the row of the nearest shape below applies. */
static void test_lookup(void **state) {
    (void)state;
    for (int i = 0; i < hcomm_select_table_rows; i++) {
        const hcomm_select_row_t *r = &hcomm_select_table[i];
        size_t bytes = r->upto == UINT64_MAX ? (size_t)1 << 40 : r->upto;
        int n = r->nodes * r->ppn;
        assert_ptr_equal(
            hcomm_select_table_find((hcomm_coll_t)r->coll, bytes, n, r->nodes),
            r);
        /* 1.5 times the nodes, the same ranks per node: the same row. */
        int more = r->nodes + r->nodes / 2;
        assert_ptr_equal(hcomm_select_table_find((hcomm_coll_t)r->coll, bytes,
                                                 more * r->ppn, more),
                         r);
    }
    /* Fewer than 4 nodes: the measured thresholds, not the table. */
    assert_string_equal(hcomm_select(HCOMM_COLL_ALLREDUCE, 1 << 20, 6, 3)->name,
                        "hierarchical");
}

int main(void) {
    const char *dir = getenv("top_srcdir");
    char path[4096], err[512];
    hcomm_sim_shape_t sh;
    snprintf(path, sizeof(path), "%s/tools/hcomm_sim_cluster.json",
             dir ? dir : "..");
    hcomm_sim_model_default(&model);
    if (hcomm_sim_load(path, &model, &sh, err, sizeof(err)) != HCOMM_SUCCESS) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    hcomm_sim_shape_free(&sh);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lookup),
        cmocka_unit_test(test_table_matches_simulator),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
