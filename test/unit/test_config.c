/* The configuration table, HCOMM_ALGO parsing and the buffer pool. */
#include "coll/select.h"
#include "core/config.h"
#include "core/log.h"
#include "core/pool.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

static void test_defaults(void **state) {
    (void)state;
    assert_int_equal(hcomm_config_load(), HCOMM_SUCCESS);
    assert_int_equal(hcomm_cfg_int(HCOMM_CFG_CHUNK_SIZE), 1 << 20);
    assert_int_equal(hcomm_cfg_int(HCOMM_CFG_BUFFER_POOL_SIZE), 256 << 20);
    assert_string_equal(hcomm_cfg_str(HCOMM_CFG_TRANSPORT), "auto");
    assert_true(hcomm_cfg_double(HCOMM_CFG_TIMEOUT) == 300.0);
}

static void test_sizes(void **state) {
    (void)state;
    assert_int_equal(hcomm_config_set("HCOMM_CHUNK_SIZE", "4096"), 0);
    assert_int_equal(hcomm_cfg_int(HCOMM_CFG_CHUNK_SIZE), 4096);
    assert_int_equal(hcomm_config_set("HCOMM_CHUNK_SIZE", "64k"), 0);
    assert_int_equal(hcomm_cfg_int(HCOMM_CFG_CHUNK_SIZE), 65536);
    assert_int_equal(hcomm_config_set("HCOMM_CHUNK_SIZE", "2MB"), 0);
    assert_int_equal(hcomm_cfg_int(HCOMM_CFG_CHUNK_SIZE), 2 << 20);
    assert_int_equal(hcomm_config_set("HCOMM_BUFFER_POOL_SIZE", "1G"), 0);
    assert_int_equal(hcomm_cfg_int(HCOMM_CFG_BUFFER_POOL_SIZE), 1 << 30);
    /* Malformed values are errors and keep the previous value. */
    assert_int_equal(hcomm_config_set("HCOMM_CHUNK_SIZE", "12Q"),
                     HCOMM_ERR_INVALID_ARG);
    assert_int_equal(hcomm_config_set("HCOMM_CHUNK_SIZE", "-5"),
                     HCOMM_ERR_INVALID_ARG);
    assert_int_equal(hcomm_config_set("HCOMM_CHUNK_SIZE", ""),
                     HCOMM_ERR_INVALID_ARG);
    assert_int_equal(
        hcomm_config_set("HCOMM_CHUNK_SIZE", "99999999999999999999G"),
        HCOMM_ERR_INVALID_ARG);
    assert_int_equal(hcomm_cfg_int(HCOMM_CFG_CHUNK_SIZE), 2 << 20);
    assert_non_null(strstr(hcomm_last_error(), "HCOMM_CHUNK_SIZE"));
    /* Chunks below 4 KiB are refused, naming the floor; the value stays. */
    assert_int_equal(hcomm_config_set("HCOMM_CHUNK_SIZE", "1"),
                     HCOMM_ERR_INVALID_ARG);
    assert_string_equal(hcomm_last_error(),
                        "HCOMM_CHUNK_SIZE=1: below the smallest allowed, "
                        "4096 bytes (4K)");
    assert_int_equal(hcomm_config_set("HCOMM_CHUNK_SIZE", "4095"),
                     HCOMM_ERR_INVALID_ARG);
    assert_int_equal(hcomm_config_set("HCOMM_CHUNK_SIZE", "0"),
                     HCOMM_ERR_INVALID_ARG);
    assert_int_equal(hcomm_cfg_int(HCOMM_CFG_CHUNK_SIZE), 2 << 20);
    assert_int_equal(hcomm_config_set("HCOMM_CHUNK_SIZE", "4K"), 0);
    assert_int_equal(hcomm_cfg_int(HCOMM_CFG_CHUNK_SIZE), 4096);
}

static void test_choices_and_levels(void **state) {
    (void)state;
    assert_int_equal(hcomm_config_set("HCOMM_TRANSPORT", "mpi"), 0);
    assert_int_equal(hcomm_config_set("HCOMM_TRANSPORT", "tcp"),
                     HCOMM_ERR_INVALID_ARG);
    assert_non_null(strstr(hcomm_last_error(), "auto|ucx|mpi"));
    assert_string_equal(hcomm_cfg_str(HCOMM_CFG_TRANSPORT), "mpi");
    assert_int_equal(hcomm_config_set("HCOMM_DEBUG", "info"), 0);
    assert_int_equal(hcomm_cfg_int(HCOMM_CFG_DEBUG), 3);
    assert_int_equal(hcomm_config_set("HCOMM_DEBUG", "2"), 0);
    assert_int_equal(hcomm_cfg_int(HCOMM_CFG_DEBUG), 2);
    assert_int_equal(hcomm_config_set("HCOMM_DEBUG", "loud"),
                     HCOMM_ERR_INVALID_ARG);
    assert_int_equal(hcomm_config_set("HCOMM_TIMEOUT", "0"),
                     HCOMM_ERR_INVALID_ARG);
    assert_int_equal(hcomm_config_set("HCOMM_TIMEOUT", "2.5"), 0);
    assert_true(hcomm_cfg_double(HCOMM_CFG_TIMEOUT) == 2.5);
    assert_int_equal(hcomm_config_set("HCOMM_SPIN_COUNT", "auto"), 0);
    assert_int_equal(hcomm_cfg_int(HCOMM_CFG_SPIN_COUNT), -1);
    assert_int_equal(hcomm_config_set("HCOMM_NOPE", "1"),
                     HCOMM_ERR_INVALID_ARG);
}

/* Runs hcomm_config_load with stderr captured; returns what it printed. */
static char *load_capturing_stderr(hcomm_status_t *st) {
    static char text[4096];
    fflush(stderr);
    int saved = dup(2);
    FILE *tmp = tmpfile();
    dup2(fileno(tmp), 2);
    *st = hcomm_config_load();
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    rewind(tmp);
    size_t n = fread(text, 1, sizeof(text) - 1, tmp);
    text[n] = '\0';
    fclose(tmp);
    return text;
}

static void test_typo_warning(void **state) {
    (void)state;
    assert_string_equal(hcomm_config_nearest("HCOMM_CHUNKSIZE"),
                        "HCOMM_CHUNK_SIZE");
    assert_string_equal(hcomm_config_nearest("HCOMM_TRANSPROT"),
                        "HCOMM_TRANSPORT");
    assert_null(hcomm_config_nearest("HCOMM_SOMETHING_ELSE_ENTIRELY"));
    hcomm_status_t st;
    setenv("HCOMM_BUFER_POOL_SIZE", "1M", 1);
    char *out = load_capturing_stderr(&st);
    unsetenv("HCOMM_BUFER_POOL_SIZE");
    assert_int_equal(st, HCOMM_SUCCESS);
    assert_non_null(strstr(out, "HCOMM_BUFER_POOL_SIZE"));
    assert_non_null(strstr(out, "did you mean HCOMM_BUFFER_POOL_SIZE"));
    /* A malformed value in the environment fails the load. */
    setenv("HCOMM_CHUNK_SIZE", "lots", 1);
    out = load_capturing_stderr(&st);
    unsetenv("HCOMM_CHUNK_SIZE");
    assert_int_equal(st, HCOMM_ERR_INVALID_ARG);
    assert_int_equal(hcomm_config_load(), HCOMM_SUCCESS);
}

static void test_algo_spec(void **state) {
    (void)state;
    assert_int_equal(hcomm_select_configure(""), HCOMM_SUCCESS);
    assert_int_equal(hcomm_select_configure("ring"), HCOMM_SUCCESS);
    assert_string_equal(hcomm_select(HCOMM_COLL_ALLREDUCE, 8, 4, 1)->name,
                        "ring");
    assert_int_equal(hcomm_select_configure("allreduce=rabenseifner"),
                     HCOMM_SUCCESS);
    assert_string_equal(hcomm_select(HCOMM_COLL_ALLREDUCE, 8, 4, 1)->name,
                        "rabenseifner");
    assert_int_equal(hcomm_select_configure("allreduce=fastest"),
                     HCOMM_ERR_INVALID_ARG);
    assert_non_null(strstr(hcomm_last_error(), "ring"));
    assert_non_null(strstr(hcomm_last_error(), "recursive_doubling"));
    assert_int_equal(hcomm_select_configure("allgarther=ring"),
                     HCOMM_ERR_INVALID_ARG);
    assert_int_equal(hcomm_select_configure("warp"), HCOMM_ERR_INVALID_ARG);
    /* A failed parse keeps the previous choice. */
    assert_string_equal(hcomm_select(HCOMM_COLL_ALLREDUCE, 8, 4, 1)->name,
                        "rabenseifner");
    assert_int_equal(hcomm_select_configure(""), HCOMM_SUCCESS);
    assert_string_equal(hcomm_select(HCOMM_COLL_ALLREDUCE, 8, 4, 1)->name,
                        "recursive_doubling");
    assert_string_equal(
        hcomm_select(HCOMM_COLL_ALLREDUCE, 64 << 20, 4, 1)->name, "ring");
    /* Several nodes: hierarchical past the small sizes. */
    assert_string_equal(
        hcomm_select(HCOMM_COLL_ALLREDUCE, 64 << 20, 4, 2)->name,
        "hierarchical");
    assert_string_equal(hcomm_select(HCOMM_COLL_ALLREDUCE, 8, 4, 2)->name,
                        "recursive_doubling");
    assert_string_equal(hcomm_select(HCOMM_COLL_BCAST, 8, 4, 2)->name,
                        "hierarchical");
}

static void test_pool_budget(void **state) {
    (void)state;
    hcomm_pool_t pool;
    hcomm_pool_init(&pool, 64 << 10);
    void *a = hcomm_pool_get(&pool, 5000); /* an 8 KiB class */
    void *b = hcomm_pool_get(&pool, 100 << 10);
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal((uintptr_t)a % 64, 0);
    memset(a, 1, 5000);
    memset(b, 2, 100 << 10);
    assert_int_equal(pool.live_bytes, (8 << 10) + (128 << 10));
    hcomm_pool_put(&pool, a);
    hcomm_pool_put(&pool, b); /* over the budget: released, not cached */
    assert_int_equal(pool.cached_bytes, 8 << 10);
    assert_int_equal(pool.live_bytes, 0);
    void *c = hcomm_pool_get(&pool, 8000); /* reuses a */
    assert_ptr_equal(c, a);
    assert_int_equal(pool.cached_bytes, 0);
    assert_null(hcomm_pool_get(&pool, 0));
    assert_null(hcomm_pool_get(&pool, SIZE_MAX));
    hcomm_pool_put(&pool, c);
    hcomm_pool_destroy(&pool);
}

/* Reads a file whole (at most 4 KiB) into buf. */
static void slurp(const char *path, char *buf, size_t len) {
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, len - 1, f) : 0;
    buf[n] = '\0';
    if (f) fclose(f);
}

/* HCOMM_DEBUG_FILE with %p, lines tagged with host, pid and rank, and
 * HCOMM_DEBUG_SUBSYS keeping a subsystem's info lines and dropping
 * another's (warnings always pass); a bad subsystem name is an error. */
static void test_log_file_and_subsystems(void **state) {
    (void)state;
    char path[64], text[4096], want[64];
    snprintf(path, sizeof(path), "/tmp/hcomm_test_log.%d", (int)getpid());
    unlink(path);
    assert_int_equal(hcomm_config_load(), HCOMM_SUCCESS);
    assert_int_equal(hcomm_config_set("HCOMM_DEBUG", "debug"), HCOMM_SUCCESS);
    assert_int_equal(
        hcomm_config_set("HCOMM_DEBUG_FILE", "/tmp/hcomm_test_log.%p"),
        HCOMM_SUCCESS);
    assert_int_equal(hcomm_config_set("HCOMM_DEBUG_SUBSYS", "ucx"),
                     HCOMM_SUCCESS);
    assert_int_equal(hcomm_log_configure(), HCOMM_SUCCESS);
    hcomm_log_set_rank(3);
    hcomm_log_write(HCOMM_LOG_INFO, "../src/ucx_tp/ucx_ops.c", 1, "kept %d", 1);
    hcomm_log_write(HCOMM_LOG_INFO, "../src/shm_tp/shm_coll.c", 2, "dropped");
    hcomm_log_write(HCOMM_LOG_WARN, "../src/shm_tp/shm_coll.c", 3, "warned");
    hcomm_log_close();
    slurp(path, text, sizeof(text));
    snprintf(want, sizeof(want), ":%d rank 3] INFO ucx_ops.c:1 kept 1",
             (int)getpid());
    assert_non_null(strstr(text, want));
    assert_null(strstr(text, "dropped"));
    assert_non_null(strstr(text, "WARN shm_coll.c:3 warned"));
    unlink(path);
    assert_int_equal(hcomm_config_set("HCOMM_DEBUG_SUBSYS", "ucx,bogus"),
                     HCOMM_SUCCESS);
    assert_int_equal(hcomm_log_configure(), HCOMM_ERR_INVALID_ARG);
    assert_non_null(strstr(hcomm_last_error(), "'bogus'"));
    hcomm_log_set_rank(-1);
    assert_int_equal(hcomm_config_load(), HCOMM_SUCCESS);
    assert_int_equal(hcomm_log_configure(), HCOMM_SUCCESS);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_choices_and_levels),
        cmocka_unit_test(test_typo_warning),
        cmocka_unit_test(test_algo_spec),
        cmocka_unit_test(test_pool_budget),
        cmocka_unit_test(test_log_file_and_subsystems),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
