/* The node layout of the hierarchical plans (hier_layout.h). */
#include "coll/hier_layout.h"

#include <stdlib.h>

void hcomm_hier_layout_free(hcomm_hier_layout_t *l) {
    free(l->local);
    free(l->leader);
}

hcomm_status_t hcomm_hier_layout_make(const hcomm_plan_args_t *a,
                                      hcomm_hier_layout_t *l) {
    int n = a->size;
    l->nnodes = 1;
    for (int r = 0; r < n && a->node_of; r++)
        if (a->node_of[r] + 1 > l->nnodes) l->nnodes = a->node_of[r] + 1;
    l->node = a->node_of ? a->node_of[a->rank] : 0;
    l->local = malloc((size_t)n * sizeof(int));
    l->leader = malloc((size_t)l->nnodes * sizeof(int));
    if (!l->local || !l->leader) {
        hcomm_hier_layout_free(l);
        return HCOMM_ERR_NO_MEMORY;
    }
    for (int j = 0; j < l->nnodes; j++)
        l->leader[j] = -1;
    l->m = 0;
    for (int r = 0; r < n; r++) {
        int nd = a->node_of ? a->node_of[r] : 0;
        if (l->leader[nd] < 0) l->leader[nd] = r;
        if (nd != l->node) continue;
        if (r == a->rank) l->li = l->m;
        l->local[l->m++] = r;
    }
    return HCOMM_SUCCESS;
}

void hcomm_hier_chain(const hcomm_hier_layout_t *l, int head, int rank,
                      int *pos, int *prev, int *next) {
    *pos = 0;
    *prev = *next = -1;
    for (int i = 0, p = 1; i < l->m; i++) {
        if (l->local[i] == head) continue;
        if (l->local[i] == rank) *pos = p;
        p++;
    }
    for (int i = 0, p = 1; i < l->m; i++) {
        if (l->local[i] == head) continue;
        if (p == *pos - 1) *prev = l->local[i];
        if (p == *pos + 1) *next = l->local[i];
        p++;
    }
    if (*pos == 1) *prev = head;
}
