/* The table of every algorithm, looked up by HCOMM_ALGO and select.c. */
#include "coll/algos.h"

#include <string.h>

const hcomm_algo_t hcomm_algos[] = {
    {"ring", HCOMM_COLL_ALLREDUCE, hcomm_allreduce_ring},
    {"recursive_doubling", HCOMM_COLL_ALLREDUCE,
     hcomm_allreduce_recursive_doubling},
    {"rabenseifner", HCOMM_COLL_ALLREDUCE, hcomm_allreduce_rabenseifner},
    {"hierarchical", HCOMM_COLL_ALLREDUCE, hcomm_allreduce_hierarchical},
    {"hierarchical_rhd", HCOMM_COLL_ALLREDUCE,
     hcomm_allreduce_hierarchical_rhd},
    {"ring", HCOMM_COLL_ALLGATHER, hcomm_allgather_ring},
    {"recursive_doubling", HCOMM_COLL_ALLGATHER,
     hcomm_allgather_recursive_doubling},
    {"bruck", HCOMM_COLL_ALLGATHER, hcomm_allgather_bruck},
    {"hierarchical", HCOMM_COLL_ALLGATHER, hcomm_allgather_hierarchical},
    {"ring", HCOMM_COLL_REDUCE_SCATTER, hcomm_reduce_scatter_ring},
    {"recursive_halving", HCOMM_COLL_REDUCE_SCATTER,
     hcomm_reduce_scatter_recursive_halving},
    {"hierarchical", HCOMM_COLL_REDUCE_SCATTER,
     hcomm_reduce_scatter_hierarchical},
    {"binomial", HCOMM_COLL_BCAST, hcomm_bcast_binomial},
    {"scatter_allgather", HCOMM_COLL_BCAST, hcomm_bcast_scatter_allgather},
    {"chain", HCOMM_COLL_BCAST, hcomm_bcast_chain},
    {"hierarchical", HCOMM_COLL_BCAST, hcomm_bcast_hierarchical},
    {"hierarchical_tree", HCOMM_COLL_BCAST, hcomm_bcast_hierarchical_tree},
    {"binomial", HCOMM_COLL_REDUCE, hcomm_reduce_binomial},
    {"reduce_scatter_gather", HCOMM_COLL_REDUCE, hcomm_reduce_scatter_gather},
    {"pairwise", HCOMM_COLL_ALLTOALL, hcomm_alltoall_pairwise},
    {"bruck", HCOMM_COLL_ALLTOALL, hcomm_alltoall_bruck},
    {"dissemination", HCOMM_COLL_BARRIER, hcomm_barrier_dissemination},
    {"binomial", HCOMM_COLL_GATHER, hcomm_gather_binomial},
    {"binomial", HCOMM_COLL_SCATTER, hcomm_scatter_binomial},
    {"direct", HCOMM_COLL_SEND, hcomm_send_direct},
    {"direct", HCOMM_COLL_RECV, hcomm_recv_direct},
    {"ring", HCOMM_COLL_ALLGATHERV, hcomm_allgatherv_ring},
    {"pairwise", HCOMM_COLL_ALLTOALLV, hcomm_alltoallv_pairwise},
    {"ring", HCOMM_COLL_REDUCE_SCATTERV, hcomm_reduce_scatterv_ring},
};
const int hcomm_nalgos = sizeof(hcomm_algos) / sizeof(hcomm_algos[0]);

const hcomm_algo_t *hcomm_algo_find(hcomm_coll_t coll, const char *name) {
    for (int i = 0; i < hcomm_nalgos; i++)
        if (hcomm_algos[i].coll == coll &&
            strcmp(hcomm_algos[i].name, name) == 0)
            return &hcomm_algos[i];
    return NULL;
}

const char *hcomm_coll_name(hcomm_coll_t coll) {
    static const char *names[HCOMM_COLL_COUNT] = {
        "allreduce", "allgather",  "reduce_scatter", "bcast",          "reduce",
        "alltoall",  "barrier",    "gather",         "scatter",        "send",
        "recv",      "allgatherv", "alltoallv",      "reduce_scatterv"};
    return (unsigned)coll < HCOMM_COLL_COUNT ? names[coll] : "?";
}
