/* The profiler: records as calls end, written under a lock, flushed at
 * each line (a killed job keeps what it had). */
#include "core/profile.h"
#include "core/config.h"
#include "core/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int hcomm_profile_on;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static FILE *out;
static int chrome, records;

static const char *dtype_names[HCOMM_DTYPE_COUNT] = {
    "int8",   "uint8",   "int32",    "uint32",  "int64",
    "uint64", "float16", "bfloat16", "float32", "float64"};

size_t hcomm_profile_bytes(hcomm_coll_t coll, size_t count, size_t esize,
                           int size) {
    switch (coll) {
    case HCOMM_COLL_ALLGATHER:      /* the whole receive buffer */
    case HCOMM_COLL_REDUCE_SCATTER: /* the whole send buffer */
    case HCOMM_COLL_ALLTOALL:
    case HCOMM_COLL_GATHER:
    case HCOMM_COLL_SCATTER:
        return count * esize * (size_t)size;
    default:
        return count * esize;
    }
}

double hcomm_profile_bus_factor(hcomm_coll_t coll, int size) {
    double n = size;
    switch (coll) {
    case HCOMM_COLL_ALLREDUCE:
        return 2.0 * (n - 1) / n;
    case HCOMM_COLL_ALLGATHER:
    case HCOMM_COLL_REDUCE_SCATTER:
    case HCOMM_COLL_ALLTOALL:
    case HCOMM_COLL_GATHER:
    case HCOMM_COLL_SCATTER:
        return (n - 1) / n;
    default:
        return 1.0;
    }
}

/* HCOMM_PROFILE with %r (world rank), %h (host) and %p (pid) expanded;
 * without %r, ".<rank>" is appended so that ranks never share a file. */
static void expand(const char *pattern, int rank, char *path, size_t len) {
    size_t n = 0;
    int has_rank = strstr(pattern, "%r") != NULL;
    char host[64] = "?";
    gethostname(host, sizeof(host) - 1);
    for (const char *p = pattern; *p && n + 1 < len; p++) {
        int w = -1;
        if (p[0] == '%' && p[1] == 'r')
            w = snprintf(path + n, len - n, "%d", rank);
        if (p[0] == '%' && p[1] == 'h')
            w = snprintf(path + n, len - n, "%s", host);
        if (p[0] == '%' && p[1] == 'p')
            w = snprintf(path + n, len - n, "%d", (int)getpid());
        if (w < 0) {
            path[n++] = *p;
            continue;
        }
        n += (size_t)w < len - n ? (size_t)w : len - n - 1;
        p++;
    }
    path[n] = '\0';
    if (!has_rank) snprintf(path + n, len - n, ".%d", rank);
}

hcomm_status_t hcomm_profile_configure(int world_rank) {
    const char *pattern = hcomm_cfg_str(HCOMM_CFG_PROFILE);
    char path[512];
    hcomm_profile_close();
    if (!*pattern) return HCOMM_SUCCESS;
    expand(pattern, world_rank, path, sizeof(path));
    FILE *f = fopen(path, "w");
    if (!f)
        return hcomm_error(HCOMM_ERR_INVALID_ARG,
                           "HCOMM_PROFILE=%s: cannot write %s: %s", pattern,
                           path, strerror(errno));
    chrome = strcmp(hcomm_cfg_str(HCOMM_CFG_PROFILE_FORMAT), "chrome") == 0;
    if (chrome) fputs("[\n", f);
    out = f;
    records = 0;
    hcomm_profile_on = 1;
    return HCOMM_SUCCESS;
}

void hcomm_profile_close(void) {
    pthread_mutex_lock(&lock);
    if (out) {
        /* Chrome's format allows the array unclosed; closed, it is JSON */
        if (chrome) fputs(records ? "\n]\n" : "]\n", out);
        fclose(out);
    }
    out = NULL;
    hcomm_profile_on = 0;
    pthread_mutex_unlock(&lock);
}

void hcomm_profile_begin(hcomm_prof_call_t *pc) {
    struct timespec m, r;
    clock_gettime(CLOCK_MONOTONIC, &m);
    clock_gettime(CLOCK_REALTIME, &r);
    pc->t0 = (double)m.tv_sec + 1e-9 * (double)m.tv_nsec;
    pc->start_us = (double)r.tv_sec * 1e6 + 1e-3 * (double)r.tv_nsec;
}

void hcomm_profile_end(const hcomm_prof_call_t *pc, hcomm_status_t status) {
    struct timespec m;
    clock_gettime(CLOCK_MONOTONIC, &m);
    double dur_us =
        ((double)m.tv_sec + 1e-9 * (double)m.tv_nsec - pc->t0) * 1e6;
    size_t esize = hcomm_dtype_size(pc->dtype);
    size_t bytes = hcomm_profile_bytes(pc->coll, pc->count, esize, pc->size);
    double algbw = dur_us > 0 ? (double)bytes / (dur_us * 1e3) : 0;
    double busbw = algbw * hcomm_profile_bus_factor(pc->coll, pc->size);
    const char *op = hcomm_coll_name(pc->coll);
    const char *dt = esize ? dtype_names[pc->dtype] : "none";
    pthread_mutex_lock(&lock);
    if (!out) goto done;
    if (chrome)
        fprintf(
            out,
            "%s{\"name\":\"%s\",\"cat\":\"hcomm\",\"ph\":\"X\",\"ts\":%.3f,"
            "\"dur\":%.3f,\"pid\":%d,\"tid\":%u,\"args\":{\"datatype\":"
            "\"%s\",\"num_elements\":%zu,\"bytes\":%zu,\"algorithm\":\"%s\","
            "\"transport\":\"%s\",\"busbw_gbps\":%.6g,\"status\":\"%s\"}}",
            records ? ",\n" : "", op, pc->start_us, dur_us, pc->rank,
            pc->comm_id, dt, pc->count, bytes, pc->algo, pc->transport, busbw,
            hcomm_strerror(status));
    else
        fprintf(out,
                "{\"comm_id\":%u,\"rank\":%d,\"nranks\":%d,\"op\":\"%s\","
                "\"datatype\":\"%s\",\"num_elements\":%zu,\"bytes\":%zu,"
                "\"root\":%d,\"algorithm\":\"%s\",\"transport\":\"%s\","
                "\"start_us\":%.3f,\"duration_us\":%.3f,\"algbw_gbps\":%.6g,"
                "\"busbw_gbps\":%.6g,\"status\":\"%s\"}\n",
                pc->comm_id, pc->rank, pc->size, op, dt, pc->count, bytes,
                pc->root, pc->algo, pc->transport, pc->start_us, dur_us, algbw,
                busbw, hcomm_strerror(status));
    records++;
    fflush(out);
done:
    pthread_mutex_unlock(&lock);
}
