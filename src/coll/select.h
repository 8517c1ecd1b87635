/* Algorithm choice: HCOMM_ALGO when it names one, else by size and rank
 * count. */
#ifndef HCOMM_COLL_SELECT_H
#define HCOMM_COLL_SELECT_H

#include "coll/plan.h"

/* Parses an HCOMM_ALGO value; an unknown name is an error that lists the
 * valid ones. On success it replaces the forced choices. */
hcomm_status_t hcomm_select_configure(const char *spec);
/* Whether HCOMM_ALGO names an algorithm for coll (then no direct path). */
int hcomm_select_is_forced(hcomm_coll_t coll);
/* NULL when nothing implements coll. */
const hcomm_algo_t *hcomm_select(hcomm_coll_t coll, size_t bytes, int size,
                                 int nnodes);

#endif
