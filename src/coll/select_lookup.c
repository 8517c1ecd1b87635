/* Looking up the generated table (select_table.h). */
#include "coll/select_table.h"

const hcomm_select_row_t *
hcomm_select_table_find(hcomm_coll_t coll, size_t bytes, int size, int nnodes) {
    int want_ppn = nnodes > 0 ? size / nnodes : 1, best_n = -1, best_p = -1;
    /* The shape: nodes first, then ranks per node among its rows. */
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < hcomm_select_table_rows; i++) {
            const hcomm_select_row_t *r = &hcomm_select_table[i];
            if (r->coll != coll) continue;
            if (pass == 0) {
                int fits = r->nodes <= nnodes, cur = best_n <= nnodes;
                if (best_n < 0 || (fits && (!cur || r->nodes > best_n)) ||
                    (!fits && !cur && r->nodes < best_n))
                    best_n = r->nodes;
            } else if (r->nodes == best_n) {
                int fits = r->ppn <= want_ppn, cur = best_p <= want_ppn;
                if (best_p < 0 || (fits && (!cur || r->ppn > best_p)) ||
                    (!fits && !cur && r->ppn < best_p))
                    best_p = r->ppn;
            }
        }
    if (best_n < 0) return NULL;
    for (int i = 0; i < hcomm_select_table_rows; i++) {
        const hcomm_select_row_t *r = &hcomm_select_table[i];
        if (r->coll == coll && r->nodes == best_n && r->ppn == best_p &&
            (uint64_t)bytes <= r->upto)
            return r;
    }
    return NULL;
}
