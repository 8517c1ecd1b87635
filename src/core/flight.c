/* The flight recorder (flight.h). */
#include "core/flight.h"
#include "core/comm.h"
#include "core/config.h"
#include "core/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

volatile sig_atomic_t hcomm_flight_dump_asked;

static unsigned depth;
static char path[512];
static int took_signal;
static struct sigaction previous;
static pthread_mutex_t dump_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *dtype_names[HCOMM_DTYPE_COUNT] = {
    "int8",   "uint8",   "int32",    "uint32",  "int64",
    "uint64", "float16", "bfloat16", "float32", "float64"};

/* Fine enough for a record read in seconds, at a fifth of the fine
 * clock's cost (4.7 against 26 ns on the GPU machine's host). */
static double coarse_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void on_sigusr1(int sig) {
    (void)sig;
    hcomm_flight_dump_asked = 1;
}

/* HCOMM_FLIGHT_RECORDER with %h, %p and %r expanded. */
static void expand(const char *pattern, int rank) {
    char host[64] = "?";
    size_t n = 0;
    gethostname(host, sizeof(host) - 1);
    for (const char *p = pattern; *p && n + 1 < sizeof(path); p++) {
        int w = -1;
        if (p[0] == '%' && p[1] == 'h')
            w = snprintf(path + n, sizeof(path) - n, "%s", host);
        else if (p[0] == '%' && p[1] == 'p')
            w = snprintf(path + n, sizeof(path) - n, "%d", (int)getpid());
        else if (p[0] == '%' && p[1] == 'r')
            w = snprintf(path + n, sizeof(path) - n, "%d", rank);
        if (w < 0) {
            path[n++] = *p;
            continue;
        }
        n += (size_t)w < sizeof(path) - n ? (size_t)w : sizeof(path) - n - 1;
        p++;
    }
    path[n] = '\0';
}

hcomm_status_t hcomm_flight_configure(int world_rank) {
    const char *pattern = hcomm_cfg_str(HCOMM_CFG_FLIGHT_RECORDER);
    depth = (unsigned)hcomm_cfg_int(HCOMM_CFG_FLIGHT_RECORDER_DEPTH);
    if (!*pattern) depth = 0;
    if (!depth) return HCOMM_SUCCESS;
    expand(pattern, world_rank);
    /* SIGUSR1 only where the program left it alone */
    struct sigaction now, ours;
    if (sigaction(SIGUSR1, NULL, &now) == 0 && now.sa_handler == SIG_DFL &&
        !(now.sa_flags & SA_SIGINFO)) {
        memset(&ours, 0, sizeof(ours));
        ours.sa_handler = on_sigusr1;
        ours.sa_flags = SA_RESTART;
        sigemptyset(&ours.sa_mask);
        took_signal = sigaction(SIGUSR1, &ours, &previous) == 0;
    }
    return HCOMM_SUCCESS;
}

void hcomm_flight_shutdown(void) {
    if (took_signal) sigaction(SIGUSR1, &previous, NULL);
    took_signal = 0;
    depth = 0;
}

void hcomm_flight_init(hcomm_flight_t *f) {
    f->calls = 0;
    unsigned cap = 1;
    while (cap < depth)
        cap *= 2;
    f->depth = depth;
    f->mask = cap - 1;
    f->ring = depth ? calloc(cap, sizeof(*f->ring)) : NULL;
}

void hcomm_flight_free(hcomm_flight_t *f) {
    free(f->ring);
    f->ring = NULL;
}

uint64_t hcomm_flight_begin(hcomm_flight_t *f, hcomm_coll_t coll,
                            hcomm_dtype_t dtype, size_t count, int root,
                            uint32_t seq) {
    if (!f->ring) return 0;
    uint64_t call = ++f->calls;
    hcomm_flight_entry_t *e = &f->ring[call & f->mask];
    *e = (hcomm_flight_entry_t){.call = call,
                                .seq = seq,
                                .coll = (uint8_t)coll,
                                .dtype = (uint8_t)dtype,
                                .state = FLIGHT_RUNNING,
                                .root = root,
                                .count = count};
    return call;
}

void hcomm_flight_clock(hcomm_flight_t *f, uint64_t call) {
    if (!f->ring || !call) return;
    hcomm_flight_entry_t *e = &f->ring[call & f->mask];
    if (e->call == call && !e->start) e->start = coarse_now();
}

void hcomm_flight_end(hcomm_flight_t *f, uint64_t call, hcomm_status_t st) {
    if (!f->ring || !call) return;
    hcomm_flight_entry_t *e = &f->ring[call & f->mask];
    if (e->call != call) return;
    if (e->start) e->end = coarse_now();
    e->status = st;
    e->state = st == HCOMM_SUCCESS ? FLIGHT_DONE : FLIGHT_FAILED;
}

static void dump_comm(hcomm_comm_impl_t *c, void *arg) {
    FILE *out = arg;
    const hcomm_flight_t *f = &c->flight;
    static const char *states[] = {"-", "RUNNING", "done", "FAILED"};
    double now = coarse_now();
    fprintf(out,
            "communicator %u: rank %d of %d, %llu calls, next sequence "
            "%u%s%s\n",
            (unsigned)c->id, c->rank, c->size, (unsigned long long)f->calls,
            c->seq, c->broken ? ", broken: " : "",
            c->broken ? hcomm_strerror(c->broken) : "");
    if (!f->ring) return;
    uint64_t first = f->calls >= f->depth ? f->calls - f->depth + 1 : 1;
    for (uint64_t call = first; call <= f->calls; call++) {
        const hcomm_flight_entry_t *e = &f->ring[call & f->mask];
        if (e->call != call) continue;
        /* no clock yet: ended, or running, before its wait's first read */
        double took = !e->start                    ? 0
                      : e->state == FLIGHT_RUNNING ? now - e->start
                                                   : e->end - e->start;
        fprintf(out,
                "  call %llu  %-14s seq %-6u count %-10zu %-8s root %-3d "
                "%-7s %.6f s%s%s\n",
                (unsigned long long)call, hcomm_coll_name(e->coll), e->seq,
                e->count,
                e->dtype < HCOMM_DTYPE_COUNT ? dtype_names[e->dtype] : "-",
                e->root, states[e->state], took,
                e->state == FLIGHT_FAILED ? "  " : "",
                e->state == FLIGHT_FAILED ? hcomm_strerror(e->status) : "");
    }
}

void hcomm_flight_dump(const char *why) {
    hcomm_flight_dump_asked = 0;
    if (!depth) return;
    pthread_mutex_lock(&dump_lock);
    FILE *out = fopen(path, "a");
    if (!out) {
        hcomm_warn("flight recorder: cannot write %s: %s", path,
                   strerror(errno));
    } else {
        time_t t = time(NULL);
        char when[32];
        strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", localtime(&t));
        fprintf(out, "# HCOMM flight recorder, pid %d, %s, on %s\n",
                (int)getpid(), when, why);
        hcomm_comm_foreach(dump_comm, out);
        fclose(out);
        hcomm_warn("flight recorder (%s): the last calls of every "
                   "communicator are in %s",
                   why, path);
    }
    pthread_mutex_unlock(&dump_lock);
}
