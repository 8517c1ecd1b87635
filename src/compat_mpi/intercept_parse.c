/* HCOMM_MPI_INTERCEPT: the collectives libhcomm_mpi.so takes, and sizes. */
#include "compat_mpi/intercept_parse.h"
#include "core/size_parse.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* A size in bytes with a K, M or G suffix. A number or a product past
 * SIZE_MAX is an error: wrapped, 16777216T-like values turned into small
 * windows nobody asked for. */
static int parse_bytes(const char *s, const char **end, size_t *out, char *why,
                       size_t len) {
    int st = hcomm_parse_size_at(s, end, out);
    if (st == -1)
        snprintf(why, len, "'%.32s' is not a size in bytes", s);
    else if (st == -2)
        snprintf(why, len, "size %.*s is more than 2^64 - 1 bytes",
                 *end - s > 32 ? 32 : (int)(*end - s), s);
    return st ? -1 : 0;
}

static int names_match(const char *t, const char *name) {
    return strcasecmp(t, name) == 0;
}

int hcomm_intercept_parse(const char *s, const char *const names[], int n,
                          unsigned *mask, size_t min[], size_t max[], char *why,
                          size_t len) {
    unsigned all = n >= 32 ? ~0u : (1u << n) - 1, m = 0;
    char buf[512];
    for (int c = 0; c < n; c++) {
        min[c] = 0;
        max[c] = SIZE_MAX;
    }
    if (len) why[0] = '\0';
    if (!s || !*s || strcasecmp(s, "all") == 0) return *mask = all, 0;
    if (strcasecmp(s, "none") == 0) return *mask = 0, 0;
    if (strlen(s) >= sizeof(buf)) {
        snprintf(why, len, "longer than %zu characters", sizeof(buf) - 1);
        return -1;
    }
    strcpy(buf, s);
    for (char *save, *t = strtok_r(buf, ", ", &save); t;
         t = strtok_r(NULL, ", ", &save)) {
        char *colon = strchr(t, ':');
        size_t lo = 0, hi = SIZE_MAX;
        if (colon) {
            const char *end;
            *colon = '\0';
            if (parse_bytes(colon + 1, &end, &lo, why, len) != 0) return -1;
            if (*end == '-' && parse_bytes(end + 1, &end, &hi, why, len) != 0)
                return -1;
            if (*end != '\0') {
                snprintf(why, len, "'%.32s' after a size", end);
                return -1;
            }
            if (hi < lo) {
                snprintf(why, len, "%s: the window's end is below its start",
                         t);
                return -1;
            }
        }
        if (strncasecmp(t, "MPI_", 4) == 0) t += 4;
        int every = names_match(t, "all"), known = every;
        for (int c = 0; c < n; c++) {
            if (!every && !names_match(t, names[c])) continue;
            known = 1;
            m |= 1u << c;
            min[c] = lo;
            max[c] = hi;
        }
        if (!known) {
            snprintf(why, len, "unknown collective '%.32s'", t);
            return -1;
        }
    }
    *mask = m;
    return 0;
}
