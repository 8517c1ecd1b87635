/* The HCOMM_MPI_INTERCEPT grammar, apart from MPI so that unit tests and
 * the fuzzer (test/fuzz) run it alone. */
#ifndef HCOMM_COMPAT_MPI_INTERCEPT_PARSE_H
#define HCOMM_COMPAT_MPI_INTERCEPT_PARSE_H

#include <stddef.h>

/* "all", "none" or a comma list of names (names[0..n-1], an MPI_ prefix and
 * case ignored, "all" for every one), each optionally with a window of
 * message sizes that HCOMM takes, name:MIN or name:MIN-MAX (bytes, K/M/G
 * suffixes, powers of 1024). Fills *mask (bit c: names[c] is taken) and
 * min[c], max[c] (0 and SIZE_MAX where no window is given), or returns -1
 * and says why in why[len]. n is at most 32. */
int hcomm_intercept_parse(const char *s, const char *const names[], int n,
                          unsigned *mask, size_t min[], size_t max[], char *why,
                          size_t len);

#endif
