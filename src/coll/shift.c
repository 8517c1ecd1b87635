/* A shift: send to one peer while receiving from another, chunk by chunk.
 * The two sides interleave per chunk: issuing every chunk for one peer
 * before the other's would fill the executor's window with sends whose
 * receivers are busy likewise, and the ring of ranks would deadlock. */
#include "coll/algos.h"

void hcomm_plan_shift(hcomm_plan_t *plan, int to, hcomm_ref_t src,
                      size_t scount, int from, hcomm_ref_t dst, size_t rcount,
                      size_t chunk, uint16_t tag_base) {
    size_t most = scount > rcount ? scount : rcount;
    for (size_t off = 0, c = 0; off < most; off += chunk, c++) {
        uint16_t tag = (uint16_t)(tag_base + c);
        if (off < rcount)
            hcomm_plan_recv(plan, from, tag, hcomm_ref_add(dst, off),
                            rcount - off < chunk ? rcount - off : chunk, -1,
                            -1);
        if (off < scount)
            hcomm_plan_send(plan, to, tag, hcomm_ref_add(src, off),
                            scount - off < chunk ? scount - off : chunk, -1,
                            -1);
    }
}
