/* Logging on stderr and the per-thread last error message. */
#include "core/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int hcomm_log_level = HCOMM_LOG_WARN;

static _Thread_local char last_error[512];

static const char *level_name(hcomm_log_level_t level) {
    static const char *names[] = {"NONE", "ERROR", "WARN",
                                  "INFO", "DEBUG", "TRACE"};
    return (unsigned)level <= HCOMM_LOG_TRACE ? names[level] : "?";
}

void hcomm_log_write(hcomm_log_level_t level, const char *file, int line,
                     const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    const char *base = strrchr(file, '/');
    /* One fprintf per line so that lines of different ranks do not mix. */
    fprintf(stderr, "[hcomm %d] %s %s:%d %s\n", (int)getpid(),
            level_name(level), base ? base + 1 : file, line, msg);
}

hcomm_status_t hcomm_error(hcomm_status_t status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof(last_error), fmt, ap);
    va_end(ap);
    /* The caller gets the status: log it only when asked (HCOMM_DEBUG). */
    HCOMM_LOG(HCOMM_LOG_INFO, "%s: %s", hcomm_strerror(status), last_error);
    return status;
}

void hcomm_clear_error(void) {
    last_error[0] = '\0';
}

const char *hcomm_last_error(void) {
    return last_error;
}

const char *hcomm_strerror(hcomm_status_t status) {
    switch (status) {
    case HCOMM_SUCCESS:
        return "success";
    case HCOMM_ERR_INVALID_ARG:
        return "invalid argument";
    case HCOMM_ERR_INVALID_DTYPE:
        return "invalid data type";
    case HCOMM_ERR_INVALID_OP:
        return "invalid reduction operation";
    case HCOMM_ERR_INVALID_COMM:
        return "invalid communicator";
    case HCOMM_ERR_OVERFLOW:
        return "size overflow";
    case HCOMM_ERR_NOT_INITIALIZED:
        return "not initialized";
    case HCOMM_ERR_NO_MEMORY:
        return "out of memory";
    case HCOMM_ERR_TRANSPORT:
        return "transport error";
    case HCOMM_ERR_TIMEOUT:
        return "timeout";
    case HCOMM_ERR_UNSUPPORTED:
        return "unsupported";
    case HCOMM_ERR_INTERNAL:
        return "internal error";
    case HCOMM_ERR_IN_PROGRESS:
        return "in progress";
    case HCOMM_ERR_MISMATCH:
        return "arguments differ between ranks";
    }
    return "unknown status";
}
