/* The plan tests' rank counts under a sanitizer. CI's sanitizer job sets
 * HCOMM_TEST_SANITIZER=1: there every verifier run is several times
 * slower, and all 35 rank counts of the three plan tests took 6 minutes
 * of its 20. It keeps 1 to 9, 16, 33 and the largest (100, 1000): powers
 * of two, one past one, odd counts and the biggest shapes. Said
 * once on stderr, so the log shows what ran. */
#ifndef HCOMM_TEST_UNIT_QUICK_H
#define HCOMM_TEST_UNIT_QUICK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whether this is CI's sanitizer pass (HCOMM_TEST_SANITIZER set, not 0). */
static inline int sanitizer_pass(void) {
    const char *e = getenv("HCOMM_TEST_SANITIZER");
    return e && *e && strcmp(e, "0") != 0;
}

static inline int quick_on(void) {
    static int quick = -1;
    if (quick < 0) {
        quick = sanitizer_pass();
        if (quick)
            fprintf(stderr, "HCOMM_TEST_SANITIZER: rank counts 1-9, 16, 33, "
                            "100, 1000 only; nodes and ranks per node 1-4, "
                            "7, 8\n");
    }
    return quick;
}

/* Node shapes (nodes, ranks per node, 1 to 8): 5 and 6 go. */
static inline int quick_skip_shape(int k) {
    return quick_on() && (k == 5 || k == 6);
}

static inline int quick_skip(int n) {
    if (!quick_on() || n <= 9) return 0;
    return !(n == 16 || n == 33 || n == 100 || n == 1000);
}

#endif
