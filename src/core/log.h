/* Logging on stderr by level (HCOMM_DEBUG) and the per-thread last error. */
#ifndef HCOMM_CORE_LOG_H
#define HCOMM_CORE_LOG_H

#include "hcomm.h"

typedef enum {
    HCOMM_LOG_NONE = 0,
    HCOMM_LOG_ERROR,
    HCOMM_LOG_WARN,
    HCOMM_LOG_INFO,
    HCOMM_LOG_DEBUG,
    HCOMM_LOG_TRACE
} hcomm_log_level_t;

extern int hcomm_log_level; /* set from HCOMM_DEBUG at init */

void hcomm_log_write(hcomm_log_level_t level, const char *file, int line,
                     const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#define HCOMM_LOG(level, ...)                                                  \
    do {                                                                       \
        if ((int)(level) <= hcomm_log_level)                                   \
            hcomm_log_write(level, __FILE__, __LINE__, __VA_ARGS__);           \
    } while (0)
#define hcomm_warn(...) HCOMM_LOG(HCOMM_LOG_WARN, __VA_ARGS__)
#define hcomm_info(...) HCOMM_LOG(HCOMM_LOG_INFO, __VA_ARGS__)
#define hcomm_debug(...) HCOMM_LOG(HCOMM_LOG_DEBUG, __VA_ARGS__)
#define hcomm_trace(...) HCOMM_LOG(HCOMM_LOG_TRACE, __VA_ARGS__)

/* Records the calling thread's last error message (also logged at error
 * level) and returns status, so that callers can write
 * `return hcomm_error(HCOMM_ERR_INVALID_ARG, "count %zu too large", n);`. */
hcomm_status_t hcomm_error(hcomm_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void hcomm_clear_error(void);

/* Reads HCOMM_DEBUG_SUBSYS and HCOMM_DEBUG_FILE (after the configuration
 * is loaded); a bad value is an error naming it. */
hcomm_status_t hcomm_log_configure(void);
/* The MPI_COMM_WORLD rank every line is tagged with (-1: not known). */
void hcomm_log_set_rank(int rank);
/* Closes the log file, if any (hcomm_finalize). */
void hcomm_log_close(void);

#endif
