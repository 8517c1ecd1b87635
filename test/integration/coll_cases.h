/* The cases of the collective tests (coll_cases.c). */
#ifndef HCOMM_TEST_COLL_CASES_H
#define HCOMM_TEST_COLL_CASES_H

#include "coll/plan.h"
#include "hcomm.h"

#include <stddef.h>

typedef struct {
    hcomm_coll_t coll;
    hcomm_dtype_t t;
    hcomm_op_t op;
    size_t count;
    int root;
    int inplace;
    const char *algo;
} shape_t;

/* Fills the send side and the expected receive side for this rank, and
 * returns the buffers to pass, honouring the in-place forms of hcomm.h. */
typedef struct {
    char *send, *recv, *want;
    size_t want_count;         /* elements of recv to check (0: none) */
    char *mem_send, *mem_recv; /* bytes each */
    size_t bytes;
} bufs_t;

int case_reduces(hcomm_coll_t c);
int case_rooted(hcomm_coll_t c);
/* Host buffers for rank r of n: inputs in send (or recv, in place), recv
 * poisoned, want the expected result (want_count elements of recv). */
void case_prepare(const shape_t *s, int n, int r, bufs_t *b);
/* The non-blocking call of the shape on b's buffers. */
hcomm_status_t case_start(const shape_t *s, bufs_t *b, hcomm_comm_t comm,
                          hcomm_request_t *req);
void case_describe(const shape_t *s, char *out, size_t len);
/* Checks status and result (counted in mpi_check.h) and frees b. */
void case_finish(const shape_t *s, bufs_t *b, hcomm_status_t st);
/* The same, where names how the call ran (appended to the case's name). */
void case_finish_at(const shape_t *s, bufs_t *b, hcomm_status_t st,
                    const char *where);

#endif
