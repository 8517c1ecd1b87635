/* Helpers for the MPI integration tests: counted checks and one summary
 * line ("N passed, M failed") printed by rank 0. */
#ifndef HCOMM_TEST_MPI_CHECK_H
#define HCOMM_TEST_MPI_CHECK_H

#include "hcomm.h"

#include <stdio.h>

extern long check_passed, check_failed;
extern int check_rank;

#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (cond) {                                                            \
            check_passed++;                                                    \
        } else {                                                               \
            check_failed++;                                                    \
            if (check_failed <= 20) {                                          \
                fprintf(stderr, "[rank %d] %s:%d: ", check_rank, __FILE__,     \
                        __LINE__);                                             \
                fprintf(stderr, __VA_ARGS__);                                  \
                fputc('\n', stderr);                                           \
            }                                                                  \
        }                                                                      \
    } while (0)

#define CHECK_OK(call)                                                         \
    do {                                                                       \
        hcomm_status_t st_ = (call);                                           \
        CHECK(st_ == HCOMM_SUCCESS, "%s -> %s (%s)", #call,                    \
              hcomm_strerror(st_), hcomm_last_error());                        \
    } while (0)

/* Sums the counts over MPI_COMM_WORLD, prints the summary on rank 0 and
 * returns the exit code. */
int check_summary(const char *name);

#endif
