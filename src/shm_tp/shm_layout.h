/* Where things are in the segment (see shm.h). Private to src/shm_tp. */
#ifndef HCOMM_SHM_TP_SHM_LAYOUT_H
#define HCOMM_SHM_TP_SHM_LAYOUT_H

#include "shm_tp/shm.h"

#include <stdatomic.h>

#define HCOMM_SHM_LINE 64
/* Lines: arrive (parity 0), arrive (parity 1), reduced, done, info. */
#define HCOMM_SHM_HEADER 512
/* Rounds of at most this many bytes travel inside their parity's arrive
 * line, after the counter: a peer's data then costs no second cache miss,
 * and the next round writes the other line. */
#define HCOMM_SHM_INLINE (HCOMM_SHM_LINE - 8)

typedef struct {
    int32_t pid;
    uint64_t probe_addr; /* &pid in the owner's address space */
    /* CMA: the owner's buffers, by round parity: addresses in its own
     * space, or, where reg is a region id (registered memory), offsets in
     * its slice of that region, which peers read in place. */
    uint64_t send_addr[2];
    uint64_t recv_addr[2];
    uint32_t send_reg[2], recv_reg[2];
} hcomm_shm_info_t;

typedef enum { SHM_ARRIVE = 0, SHM_REDUCED = 1, SHM_DONE = 2 } hcomm_shm_flag_t;

static inline size_t hcomm_shm_result_bytes(int size, size_t slot_bytes) {
    return (slot_bytes / (size_t)size + 2 * HCOMM_SHM_LINE) &
           ~(size_t)(HCOMM_SHM_LINE - 1);
}

static inline size_t hcomm_shm_area_bytes(int size, size_t slot_bytes) {
    size_t b = HCOMM_SHM_HEADER +
               2 * (slot_bytes + hcomm_shm_result_bytes(size, slot_bytes));
    return (b + 4095) & ~(size_t)4095;
}

static inline char *hcomm_shm_area(const hcomm_shm_t *shm, int rank) {
    return shm->base + (size_t)rank * shm->area_bytes;
}

/* The counter f of rank for round seq (arrive has a line per parity). */
static inline _Atomic uint64_t *hcomm_shm_flag(const hcomm_shm_t *shm, int rank,
                                               hcomm_shm_flag_t f,
                                               uint64_t seq) {
    size_t line = f == SHM_ARRIVE ? (size_t)(seq & 1) : (size_t)f + 1;
    return (_Atomic uint64_t *)(void *)(hcomm_shm_area(shm, rank) +
                                        line * HCOMM_SHM_LINE);
}

static inline hcomm_shm_info_t *hcomm_shm_info(const hcomm_shm_t *shm,
                                               int rank) {
    return (hcomm_shm_info_t *)(void *)(hcomm_shm_area(shm, rank) +
                                        4 * HCOMM_SHM_LINE);
}

/* Input slot of round parity p, for a round of bytes. */
static inline char *hcomm_shm_in(const hcomm_shm_t *shm, int rank, int p,
                                 size_t bytes) {
    if (bytes <= HCOMM_SHM_INLINE)
        return hcomm_shm_area(shm, rank) + (size_t)p * HCOMM_SHM_LINE + 8;
    return hcomm_shm_area(shm, rank) + HCOMM_SHM_HEADER +
           (size_t)p * shm->slot_bytes;
}

/* Result slot of round parity p. */
static inline char *hcomm_shm_res(const hcomm_shm_t *shm, int rank, int p) {
    return hcomm_shm_area(shm, rank) + HCOMM_SHM_HEADER + 2 * shm->slot_bytes +
           (size_t)p * hcomm_shm_result_bytes(shm->size, shm->slot_bytes);
}

#endif
