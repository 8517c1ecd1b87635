/* The table of every algorithm, looked up by HCOMM_ALGO and select.c. */
#include "coll/algos.h"

#include <string.h>

const hcomm_algo_t hcomm_algos[] = {
    {"ring", HCOMM_COLL_ALLREDUCE, hcomm_allreduce_ring},
    {"recursive_doubling", HCOMM_COLL_ALLREDUCE,
     hcomm_allreduce_recursive_doubling},
    {"rabenseifner", HCOMM_COLL_ALLREDUCE, hcomm_allreduce_rabenseifner},
};
const int hcomm_nalgos = sizeof(hcomm_algos) / sizeof(hcomm_algos[0]);

const hcomm_algo_t *hcomm_algo_find(hcomm_coll_t coll, const char *name) {
    for (int i = 0; i < hcomm_nalgos; i++)
        if (hcomm_algos[i].coll == coll && strcmp(hcomm_algos[i].name, name) == 0)
            return &hcomm_algos[i];
    return NULL;
}

const char *hcomm_coll_name(hcomm_coll_t coll) {
    static const char *names[HCOMM_COLL_COUNT] = {
        "allreduce", "allgather", "reduce_scatter", "bcast",
        "reduce",    "alltoall",  "barrier",        "gather",
        "scatter",   "send",      "recv"};
    return (unsigned)coll < HCOMM_COLL_COUNT ? names[coll] : "?";
}
