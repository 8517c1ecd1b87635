/* Logging on stderr and the per-thread last error message. */
#include "core/log.h"
#include "core/config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int hcomm_log_level = HCOMM_LOG_WARN;

/* Subsystems, named after the folder (or file) a message comes from. */
static const struct {
    const char *name, *where;
} subsystems[] = {
    {"cuda", "core/gpu"}, {"cuda", "kernels/reduce_cuda"},
    {"cuda", "cuda_tp/"}, {"cuda", "coll/exec_gpu"},
    {"init", "core/"},    {"coll", "coll/"},
    {"ucx", "ucx_tp/"},   {"shm", "shm_tp/"},
    {"topo", "topo/"},    {"mpi", "compat_mpi/"},
    {"coll", "kernels/"},
};
#define NSUBSYS (sizeof(subsystems) / sizeof(subsystems[0]))
static unsigned subsys_mask = ~0u; /* bit i: subsystems[i] is logged */
static FILE *log_file;
static int log_rank = -1;
static char host[64];

void hcomm_log_set_rank(int rank) {
    log_rank = rank;
}

static int logged(hcomm_log_level_t level, const char *file) {
    if (level <= HCOMM_LOG_WARN || subsys_mask == ~0u) return 1;
    for (size_t i = 0; i < NSUBSYS; i++)
        if (strstr(file, subsystems[i].where)) return (subsys_mask >> i) & 1u;
    return 1;
}

static hcomm_status_t parse_subsys(const char *list) {
    unsigned mask = 0;
    if (strcmp(list, "all") == 0 || !*list) {
        subsys_mask = ~0u;
        return HCOMM_SUCCESS;
    }
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ",");
        int found = 0;
        for (size_t i = 0; i < NSUBSYS; i++)
            if (strlen(subsystems[i].name) == len &&
                strncmp(subsystems[i].name, p, len) == 0) {
                mask |= 1u << i;
                found = 1;
            }
        if (!found)
            return hcomm_error(HCOMM_ERR_INVALID_ARG,
                               "HCOMM_DEBUG_SUBSYS=%s: unknown part '%.*s' "
                               "(all, init, coll, ucx, shm, cuda, topo, mpi)",
                               list, (int)len, p);
        p += len;
        if (*p == ',') p++;
    }
    subsys_mask = mask;
    return HCOMM_SUCCESS;
}

/* HCOMM_DEBUG_FILE with %h and %p expanded. */
static hcomm_status_t open_file(const char *pattern) {
    char path[512];
    size_t n = 0;
    for (const char *p = pattern; *p && n + 1 < sizeof(path); p++) {
        if (p[0] == '%' && (p[1] == 'h' || p[1] == 'p')) {
            int w =
                p[1] == 'h'
                    ? snprintf(path + n, sizeof(path) - n, "%s", host)
                    : snprintf(path + n, sizeof(path) - n, "%d", (int)getpid());
            n += w > 0 ? (size_t)w : 0;
            p++;
        } else {
            path[n++] = *p;
        }
    }
    path[n < sizeof(path) ? n : sizeof(path) - 1] = '\0';
    FILE *f = fopen(path, "a");
    if (!f)
        return hcomm_error(HCOMM_ERR_INVALID_ARG,
                           "HCOMM_DEBUG_FILE=%s: cannot open %s: %s", pattern,
                           path, strerror(errno));
    setvbuf(f, NULL, _IOLBF, 0);
    hcomm_log_close();
    log_file = f;
    return HCOMM_SUCCESS;
}

hcomm_status_t hcomm_log_configure(void) {
    if (!host[0] && gethostname(host, sizeof(host) - 1) != 0)
        snprintf(host, sizeof(host), "?");
    hcomm_status_t st = parse_subsys(hcomm_cfg_str(HCOMM_CFG_DEBUG_SUBSYS));
    const char *file = hcomm_cfg_str(HCOMM_CFG_DEBUG_FILE);
    if (st == HCOMM_SUCCESS && *file) st = open_file(file);
    return st;
}

void hcomm_log_close(void) {
    if (log_file) fclose(log_file);
    log_file = NULL;
}

static _Thread_local char last_error[512];

static const char *level_name(hcomm_log_level_t level) {
    static const char *names[] = {"NONE", "ERROR", "WARN",
                                  "INFO", "DEBUG", "TRACE"};
    return (unsigned)level <= HCOMM_LOG_TRACE ? names[level] : "?";
}

void hcomm_log_write(hcomm_log_level_t level, const char *file, int line,
                     const char *fmt, ...) {
    char msg[768], rank[16] = "?";
    va_list ap;
    if (!logged(level, file)) return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    const char *base = strrchr(file, '/');
    if (log_rank >= 0) snprintf(rank, sizeof(rank), "%d", log_rank);
    /* One fprintf per line so that lines of different ranks do not mix. */
    fprintf(log_file ? log_file : stderr, "[hcomm %s:%d rank %s] %s %s:%d %s\n",
            host[0] ? host : "?", (int)getpid(), rank, level_name(level),
            base ? base + 1 : file, line, msg);
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
    case HCOMM_ERR_ABORTED:
        return "aborted";
    }
    return "unknown status";
}
