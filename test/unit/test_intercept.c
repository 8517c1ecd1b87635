/* HCOMM_MPI_INTERCEPT's grammar (src/compat_mpi/intercept_parse.c): lists,
 * windows, suffixes, and every malformed value refused with its reason;
 * sizes past 2^64 - 1 are refused rather than wrapped (issue 18 item 6:
 * allreduce:16777216T-like windows wrapped to small ones silently). */
#include "compat_mpi/intercept_parse.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

static const char *const names[] = {"allreduce", "bcast", "barrier"};

typedef struct {
    unsigned mask;
    size_t min[3], max[3];
    char why[128];
} result_t;

static int parse(const char *s, result_t *r) {
    return hcomm_intercept_parse(s, names, 3, &r->mask, r->min, r->max, r->why,
                                 sizeof(r->why));
}

static void test_lists(void **state) {
    (void)state;
    result_t r;
    assert_int_equal(parse("all", &r), 0);
    assert_int_equal(r.mask, 7);
    assert_int_equal(parse(NULL, &r), 0);
    assert_int_equal(r.mask, 7);
    assert_int_equal(parse("NONE", &r), 0);
    assert_int_equal(r.mask, 0);
    assert_int_equal(parse("MPI_Allreduce, barrier", &r), 0);
    assert_int_equal(r.mask, 5);
    assert_true(r.min[0] == 0 && r.max[0] == SIZE_MAX);
    assert_int_equal(parse("allreduce:32K,bcast:512-1m", &r), 0);
    assert_int_equal(r.mask, 3);
    assert_true(r.min[0] == 32768 && r.max[0] == SIZE_MAX);
    assert_true(r.min[1] == 512 && r.max[1] == 1048576);
    assert_int_equal(parse("allreduce:4KB", &r), 0); /* as HCOMM_* sizes */
    assert_true(r.min[0] == 4096);
    assert_int_equal(parse("all:1G", &r), 0);
    assert_int_equal(r.mask, 7);
    assert_true(r.min[2] == (size_t)1 << 30);
    /* The largest sizes that fit: 2^64 - 1 bytes, and 2^34 - 1 G. */
    assert_int_equal(parse("bcast:18446744073709551615", &r), 0);
    assert_true(r.min[1] == SIZE_MAX);
    assert_int_equal(parse("bcast:17179869183G", &r), 0);
    assert_true(r.min[1] == ((size_t)17179869183 << 30));
}

static void refused(const char *s, const char *why) {
    result_t r;
    assert_int_equal(parse(s, &r), -1);
    if (strcmp(r.why, why) != 0)
        fail_msg("%s: why '%s', expected '%s'", s, r.why, why);
}

static void test_refused(void **state) {
    (void)state;
    refused("allreduce:18446744073709551616",
            "size 18446744073709551616 is more than 2^64 - 1 bytes");
    refused("allreduce:17179869184G",
            "size 17179869184G is more than 2^64 - 1 bytes");
    refused("bcast:1-18014398509481984K",
            "size 18014398509481984K is more than 2^64 - 1 bytes");
    refused("allreduce:99999999999999999999999M",
            "size 99999999999999999999999M is more than 2^64 - 1 bytes");
    refused("allreduce:-1", "'-1' is not a size in bytes");
    refused("allreduce:", "'' is not a size in bytes");
    refused("allreduce:4KiB", "'iB' after a size");
    refused("allreduce:2M-1K",
            "allreduce: the window's end is below its start");
    refused("alltoall", "unknown collective 'alltoall'");
    char longer[600];
    memset(longer, 'a', sizeof(longer) - 1);
    longer[sizeof(longer) - 1] = '\0';
    refused(longer, "longer than 511 characters");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lists),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
