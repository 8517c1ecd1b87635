/* hcomm_check: the preflight run under mpirun before a long job. The
 * views every rank has (hcomm_check.c) and the measurements
 * (hcomm_check_run.c). */
#ifndef HCOMM_TOOLS_HCOMM_CHECK_H
#define HCOMM_TOOLS_HCOMM_CHECK_H

#include "hcomm.h"

#include <mpi.h>
#include <stddef.h>

typedef struct {
    size_t bytes;       /* per collective call (large size) */
    size_t link_bytes;  /* per ping-pong message */
    int iters;          /* timed calls per collective and size */
    double slow_factor; /* flag what is below this fraction of the median */
    int slow_rank;      /* HCOMM_TEST_CHECK_SLOW_RANK (tests), else -1 */
} check_opts_t;

/* Runs every collective at a small size and at opts->bytes with exact
 * checks, prints (rank 0) a table with bandwidths; returns the number of
 * problems (the same on every rank). */
int check_collectives(hcomm_comm_t comm, const check_opts_t *opts);
/* Times every pair of ranks (ping-pong) and every rank's own memory
 * bandwidth; flags those far below the median. Returns the problems. */
int check_links(hcomm_comm_t comm, const check_opts_t *opts);

#endif
