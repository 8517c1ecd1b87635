/* The profiler (HCOMM_PROFILE): one record per call, per rank, in a file of
 * its own: JSON Lines, or the Chrome trace event format
 * (HCOMM_PROFILE_FORMAT=chrome) that Perfetto opens. tools/hcomm_prof
 * merges the ranks' files. Costs one branch per call when off. */
#ifndef HCOMM_CORE_PROFILE_H
#define HCOMM_CORE_PROFILE_H

#include "coll/plan.h"
#include "hcomm.h"

#include <stddef.h>
#include <stdint.h>

typedef struct {
    double t0;       /* CLOCK_MONOTONIC seconds at the call */
    double start_us; /* CLOCK_REALTIME microseconds, one timeline for all */
    hcomm_coll_t coll;
    hcomm_dtype_t dtype;
    size_t count;
    int root;
    const char *algo;      /* plan or direct algorithm */
    const char *transport; /* shm, ucx, mpi (+cuda when on GPU memory) */
    unsigned comm_id;
    int rank, size;
} hcomm_prof_call_t;

extern int hcomm_profile_on;

/* Reads HCOMM_PROFILE and HCOMM_PROFILE_FORMAT (hcomm_init); the world
 * rank names the file. */
hcomm_status_t hcomm_profile_configure(int world_rank);
/* Starts a record: the clocks. */
void hcomm_profile_begin(hcomm_prof_call_t *pc);
/* Writes the record of a call that ended with status. */
void hcomm_profile_end(const hcomm_prof_call_t *pc, hcomm_status_t status);
/* Closes the file (hcomm_finalize). */
void hcomm_profile_close(void);

/* nccl-tests' conventions, shared with hcomm_perf: the bytes a call is
 * said to move, and the factor from algorithm to bus bandwidth. */
size_t hcomm_profile_bytes(hcomm_coll_t coll, size_t count, size_t esize,
                           int size);
double hcomm_profile_bus_factor(hcomm_coll_t coll, int size);

#endif
