/* The plan tests' cmocka tests in two processes, which take them one at a
 * time from a shared counter. Each test is one thread of CPU-bound
 * verifier runs, and make check runs one program at a time: on CI's two
 * cores one of them sat idle for the 60 s these tests take. Each test
 * runs as a group of one, with the group's setup and teardown around it.
 * HCOMM_TEST_JOBS=1 runs them all in this process. Include after
 * cmocka.h. */
#ifndef HCOMM_TEST_UNIT_SPLIT_H
#define HCOMM_TEST_UNIT_SPLIT_H

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

/* 0 when every test passed. */
static inline int run_tests_split(const struct CMUnitTest *tests, size_t n,
                                  CMFixtureFunction setup,
                                  CMFixtureFunction teardown) {
    const char *jobs = getenv("HCOMM_TEST_JOBS");
    atomic_size_t *next = MAP_FAILED;
    if (!jobs || atoi(jobs) != 1)
        next = mmap(NULL, sizeof(*next), PROT_READ | PROT_WRITE,
                    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    atomic_size_t alone = 0;
    if (next == MAP_FAILED)
        next = &alone;
    else
        atomic_init(next, 0);
    /* whole lines from both processes in the log (stderr is unbuffered) */
    setvbuf(stdout, NULL, _IOLBF, 0);
    pid_t child = next == &alone ? -1 : fork();
    int failed = 0;
    for (size_t i; (i = atomic_fetch_add(next, 1)) < n;)
        failed += _cmocka_run_group_tests(tests[i].name, &tests[i], 1, setup,
                                          teardown) != 0;
    if (child == 0) exit(failed ? 1 : 0);
    if (child > 0) {
        int status;
        if (waitpid(child, &status, 0) != child || !WIFEXITED(status) ||
            WEXITSTATUS(status) != 0) {
            fprintf(stderr, "the second process of the tests failed\n");
            failed++;
        }
    }
    if (next != &alone) munmap(next, sizeof(*next));
    return failed != 0;
}

#endif
