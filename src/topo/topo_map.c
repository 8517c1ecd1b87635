/* The node map: ranks grouped by a node label, numbered the same way on
 * every rank. Pure, so that unit tests check it without MPI. */
#include "core/log.h"
#include "topo/topo.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    int label, rank;
} labelled_t;

static int by_label_then_rank(const void *a, const void *b) {
    const labelled_t *x = a, *y = b;
    if (x->label != y->label) return x->label < y->label ? -1 : 1;
    return (x->rank > y->rank) - (x->rank < y->rank);
}

hcomm_status_t hcomm_topo_map_build(int size, const int *label,
                                    hcomm_topo_map_t *map) {
    memset(map, 0, sizeof(*map));
    if (size <= 0 || !label)
        return hcomm_error(HCOMM_ERR_INVALID_ARG,
                           "topology: a node map needs at least one rank");
    /* Labels are arbitrary ints, so sorting finds each node's lowest rank
     * without assuming they are small. */
    labelled_t *sorted = malloc((size_t)size * sizeof(*sorted));
    int *first = malloc((size_t)size * sizeof(*first));
    /* node_of, local_rank, ranks_by_node: size each; node_size and
     * node_start: at most size + 1 nodes' worth. */
    int *block = calloc(5 * (size_t)size + 1, sizeof(int));
    if (!sorted || !first || !block) {
        free(sorted);
        free(first);
        free(block);
        return hcomm_error(HCOMM_ERR_NO_MEMORY,
                           "topology: no memory for a %d-rank node map", size);
    }
    for (int r = 0; r < size; r++)
        sorted[r] = (labelled_t){label[r], r};
    qsort(sorted, (size_t)size, sizeof(*sorted), by_label_then_rank);
    for (int i = 0; i < size; i++)
        first[sorted[i].rank] =
            (i > 0 && sorted[i].label == sorted[i - 1].label)
                ? first[sorted[i - 1].rank]
                : sorted[i].rank;
    free(sorted);

    map->size = size;
    map->node_of = block;
    map->local_rank = block + size;
    map->ranks_by_node = block + 2 * (size_t)size;
    map->node_size = block + 3 * (size_t)size;
    /* Scanning ranks upwards meets each node first at its lowest rank, which
     * numbers the nodes and the ranks inside them. */
    for (int r = 0; r < size; r++) {
        int n = first[r] == r ? map->nnodes++ : map->node_of[first[r]];
        map->node_of[r] = n;
        map->local_rank[r] = map->node_size[n]++;
    }
    free(first);
    map->node_start = map->node_size + map->nnodes;
    map->node_start[0] = 0;
    for (int n = 0; n < map->nnodes; n++)
        map->node_start[n + 1] = map->node_start[n] + map->node_size[n];
    for (int r = 0; r < size; r++)
        map->ranks_by_node[map->node_start[map->node_of[r]] +
                           map->local_rank[r]] = r;
    return HCOMM_SUCCESS;
}

void hcomm_topo_map_free(hcomm_topo_map_t *map) {
    free(map->node_of);
    memset(map, 0, sizeof(*map));
}
