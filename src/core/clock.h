/* The monotonic clock every timeout and measurement reads. */
#ifndef HCOMM_CORE_CLOCK_H
#define HCOMM_CORE_CLOCK_H

#include <time.h>

static inline double hcomm_now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif
