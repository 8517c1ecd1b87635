/* Sizes in bytes as users write them ("64M", "4k", "1GB", "4096"): the one
 * parser of the library, its tools and benchmarks. Header-only, because
 * the benchmarks link only the public library. */
#ifndef HCOMM_CORE_SIZE_PARSE_H
#define HCOMM_CORE_SIZE_PARSE_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

/* Digits first (strtoull would take a sign or spaces and negate "-1"),
 * then an optional K, M or G, either case, and an optional B. *end is
 * where the size ends. 0, or -1 for no number, -2 for a size past
 * SIZE_MAX: a wrapped "16777216T"-like value must not become a small one. */
static inline int hcomm_parse_size_at(const char *s, const char **end,
                                      size_t *out) {
    if (*s < '0' || *s > '9') return -1;
    char *e;
    errno = 0;
    unsigned long long v = strtoull(s, &e, 10);
    unsigned shift = 0;
    switch (*e) {
    case 'k':
    case 'K':
        shift = 10;
        break;
    case 'm':
    case 'M':
        shift = 20;
        break;
    case 'g':
    case 'G':
        shift = 30;
        break;
    default:
        break;
    }
    e += shift != 0;
    if (*e == 'b' || *e == 'B') e++;
    *end = e;
    if (errno == ERANGE || v > (unsigned long long)(SIZE_MAX >> shift))
        return -2;
    *out = (size_t)v << shift;
    return 0;
}

/* The whole of s is a size: 0, else -1. */
static inline int hcomm_parse_size(const char *s, size_t *out) {
    const char *end;
    return hcomm_parse_size_at(s, &end, out) == 0 && *end == '\0' ? 0 : -1;
}

#endif
