/* Where a rank sits among nodes, for the hierarchical plans
 * (hierarchical.c, hier_rhd.c, hier_tree.c): its node, its place in it, and
 * every node's leader (its lowest rank). */
#ifndef HCOMM_COLL_HIER_LAYOUT_H
#define HCOMM_COLL_HIER_LAYOUT_H

#include "coll/algos.h"

typedef struct {
    int nnodes, node; /* node count; this rank's node */
    int m, li;        /* ranks on this node; this rank's index among them */
    int *local;       /* [m] this node's ranks, ascending */
    int *leader;      /* [nnodes] each node's lowest rank */
} hcomm_hier_layout_t;

hcomm_status_t hcomm_hier_layout_make(const hcomm_plan_args_t *a,
                                      hcomm_hier_layout_t *l);
void hcomm_hier_layout_free(hcomm_hier_layout_t *l);

/* The chain a broadcast runs inside this rank's node: head, then the
 * node's other ranks ascending. rank's place in it (*pos, 0 for the head)
 * and its neighbours there (*prev, *next; -1 for none). */
void hcomm_hier_chain(const hcomm_hier_layout_t *l, int head, int rank,
                      int *pos, int *prev, int *next);

/* Tags of a pipelined hierarchical plan: a stage and a chunk (16 bits kept
 * by transports: they wrap past 65536 stage-chunks, so plans must post
 * messages with one tag between two ranks in the same order on both). */
static inline uint16_t hcomm_hier_tag(int stage, size_t nchunks, size_t c) {
    return (uint16_t)(((size_t)stage * nchunks + c) & 0xffff);
}

#endif
