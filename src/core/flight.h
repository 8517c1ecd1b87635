/* The flight recorder: the last HCOMM_FLIGHT_RECORDER_DEPTH calls of each
 * communicator (what, how large, whether they ended and how), written to a
 * file per rank when a call times out and when the process gets SIGUSR1,
 * so that a hung job says on every rank where each one stopped. */
#ifndef HCOMM_CORE_FLIGHT_H
#define HCOMM_CORE_FLIGHT_H

#include "coll/plan.h"
#include "hcomm.h"

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    FLIGHT_RUNNING = 1,
    FLIGHT_DONE,
    FLIGHT_FAILED
} hcomm_flight_state_t;

typedef struct {
    uint64_t call; /* the communicator's call number (0: empty slot) */
    uint32_t seq;  /* collective sequence number (point-to-point: 0) */
    uint8_t coll, dtype, state;
    int root;
    size_t count;
    /* Coarse monotonic seconds from the first time the call was waited
     * for (a wait looks every 256 polls) or, non-blocking, started, to its
     * end; 0 and 0 for a call that ended sooner: a blocking call that ends
     * at once reads no clock (two reads took 0.01 us of a 0.17-0.25 us
     * 2-rank call on the GPU machine's host). */
    double start, end;
    hcomm_status_t status;
} hcomm_flight_entry_t;

typedef struct {
    hcomm_flight_entry_t *ring; /* NULL: recording off */
    unsigned depth;
    unsigned mask; /* the ring holds the power of two above depth, so
                    * that a call finds its entry without a division */
    uint64_t calls;
} hcomm_flight_t;

/* Reads HCOMM_FLIGHT_RECORDER(_DEPTH) and takes SIGUSR1 where the program
 * has not (hcomm_init); releases it (hcomm_finalize). */
hcomm_status_t hcomm_flight_configure(int world_rank);
void hcomm_flight_shutdown(void);

void hcomm_flight_init(hcomm_flight_t *f);
void hcomm_flight_free(hcomm_flight_t *f);
/* Records a call's start; returns its call number (0 when off). */
uint64_t hcomm_flight_begin(hcomm_flight_t *f, hcomm_coll_t coll,
                            hcomm_dtype_t dtype, size_t count, int root,
                            uint32_t seq);
/* Starts the clock of a call unless it runs already. */
void hcomm_flight_clock(hcomm_flight_t *f, uint64_t call);
/* Records its end, unless newer calls have overwritten its slot. */
void hcomm_flight_end(hcomm_flight_t *f, uint64_t call, hcomm_status_t st);

/* Writes every communicator's record to this rank's file (why: "timeout",
 * "SIGUSR1"); the file's name goes to the log. */
void hcomm_flight_dump(const char *why);
/* Set by SIGUSR1; waits and calls look at it and dump. */
extern volatile sig_atomic_t hcomm_flight_dump_asked;
static inline void hcomm_flight_poll(void) {
    if (__builtin_expect(hcomm_flight_dump_asked, 0))
        hcomm_flight_dump("SIGUSR1");
}

#endif
