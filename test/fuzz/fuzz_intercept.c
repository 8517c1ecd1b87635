/* libFuzzer target: the HCOMM_MPI_INTERCEPT parser
 * (src/compat_mpi/intercept_parse.c), with libhcomm_mpi.so's names. A
 * refused value must say why; an accepted one must give windows whose
 * end is not below their start. */
#include "compat_mpi/intercept_parse.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const names[] = {
    "allreduce", "iallreduce",           "allgather", "bcast",
    "reduce",    "reduce_scatter_block", "alltoall",  "barrier"};
enum { N = sizeof(names) / sizeof(names[0]) };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *s = malloc(size + 1);
    if (!s) return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    unsigned mask = 0;
    size_t lo[N], hi[N];
    char why[128];
    if (hcomm_intercept_parse(s, names, N, &mask, lo, hi, why, sizeof(why))) {
        if (!why[0]) abort(); /* refused without a reason */
    } else {
        for (int c = 0; c < N; c++)
            if (lo[c] > hi[c]) abort();
    }
    free(s);
    return 0;
}
