/* hcomm_check: the preflight a user runs under mpirun before a long job.
 *
 *   mpirun -np N hcomm_check [--bytes SIZE] [--link-bytes SIZE]
 *                            [--iters N] [--slow-factor F]
 *
 * 1. Every rank's view (HCOMM version and MPI library, every HCOMM_*
 *    variable, whether HCOMM starts, the transport, the shared segment,
 *    the node map, the memory kinds it can take) is compared with every
 *    other's; a difference names the item, the values and the ranks.
 * 2. Every collective runs at 1 KiB and at --bytes with exact results
 *    required, and says its bandwidth.
 * 3. Every pair of ranks and every rank's memory is timed; those below
 *    --slow-factor (0.2) times the upper quartile are flagged.
 * Exit 0 when nothing was found, 1 on any problem, 2 on bad arguments.
 * The report is rank 0's, on stdout. When the views differ, the
 * collectives are not run: ranks that disagree on settings may choose
 * different algorithms and wait for each other until the timeout. */
#include "core/comm.h"
#include "core/config.h"
#include "core/gpu.h"
#include "core/size_parse.h"
#include "hcomm_check.h"
#include "shm_tp/shm.h"
#include "topo/topo.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern char **environ;

#define VIEW_LEN 2048

enum { V_VERSION, V_SETTINGS, V_PARSE, V_TRANSPORT, V_NODES, V_MEMORY, V_N };
static const char *view_names[V_N] = {"version",        "HCOMM_* settings",
                                      "settings parse", "transport",
                                      "node map",       "memory kinds"};

static int rank, nranks;

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every HCOMM_* variable as NAME=VALUE, sorted, one per line. The test
 * hook HCOMM_TEST_CHECK_SLOW_RANK is left out: it is meant to differ. */
static void settings(char *out, size_t len) {
    const char *vars[256];
    int n = 0;
    for (char **e = environ; *e && n < 256; e++)
        if (strncmp(*e, "HCOMM_", 6) == 0 &&
            strncmp(*e, "HCOMM_TEST_CHECK_", 17) != 0)
            vars[n++] = *e;
    qsort(vars, (size_t)n, sizeof(vars[0]), cmp_str);
    size_t used = 0;
    out[0] = '\0';
    for (int i = 0; i < n && used < len; i++)
        used += (size_t)snprintf(out + used, len - used, "%s\n", vars[i]);
    if (n == 0) snprintf(out, len, "(none)\n");
}

static void version(char *out, size_t len) {
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int n = 0;
    MPI_Get_library_version(lib, &n);
    lib[strcspn(lib, "\n,")] = '\0';
    snprintf(out, len, "HCOMM %s, %.200s\n", hcomm_version(), lib);
}

static void transport(hcomm_comm_t comm, char *out, size_t len) {
    hcomm_comm_impl_t *c;
    if (hcomm_comm_lookup(comm, &c) != HCOMM_SUCCESS) {
        snprintf(out, len, "(no communicator)\n");
        return;
    }
    if (c->shm)
        snprintf(out, len,
                 "%s; shared memory for %d ranks, %zu-byte slots, "
                 "cross-memory copies %s\n",
                 c->tp->ops->name, c->shm->size, c->shm->slot_bytes,
                 c->shm->cma ? "on" : "off");
    else
        snprintf(out, len, "%s; no shared segment\n", c->tp->ops->name);
}

/* The node map as this rank sees it: which node every rank is on. */
static void nodes(hcomm_comm_t comm, char *out, size_t len) {
    const hcomm_topo_t *t = hcomm_comm_topology(comm);
    if (!t) {
        snprintf(out, len, "(unknown)\n");
        return;
    }
    size_t used = (size_t)snprintf(
        out, len, "%d nodes%s, topology-aware %d:", t->map.nnodes,
        t->from_override ? " (override file)" : "", t->aware);
    for (int r = 0; r < t->map.size && used < len; r++)
        used +=
            (size_t)snprintf(out + used, len - used, " %d", t->map.node_of[r]);
    if (used < len) snprintf(out + used, len - used, "\n");
}

static void memory(char *out, size_t len) {
    int gpus = hcomm_gpu_device_count();
    if (gpus > 0)
        snprintf(out, len, "host, CUDA device memory (%d GPUs)\n", gpus);
    else
        snprintf(out, len, "host\n");
}

/* Prints, on rank 0, how the ranks' values of one view differ: each
 * distinct value once, with the ranks that have it. Returns 1 when they
 * differ (on every rank). */
static int compare(int v, const char *mine) {
    char *all = rank == 0 ? malloc((size_t)nranks * VIEW_LEN) : NULL;
    char buf[VIEW_LEN];
    snprintf(buf, sizeof(buf), "%s", mine);
    MPI_Gather(buf, VIEW_LEN, MPI_CHAR, all, VIEW_LEN, MPI_CHAR, 0,
               MPI_COMM_WORLD);
    int differ = 0;
    if (rank == 0) {
        for (int r = 1; r < nranks; r++)
            differ |= strcmp(all + (size_t)r * VIEW_LEN, all) != 0;
        if (!differ) {
            printf("  %-17s same on every rank: ", view_names[v]);
            /* One line per setting would bury the report: on one line. */
            for (const char *p = all; *p; p++)
                putchar(*p == '\n' && p[1] ? ' ' : *p);
        } else {
            printf("  %-17s DIFFERS between ranks:\n", view_names[v]);
            for (int r = 0; r < nranks; r++) {
                const char *val = all + (size_t)r * VIEW_LEN;
                int seen = 0;
                for (int q = 0; q < r && !seen; q++)
                    seen = strcmp(all + (size_t)q * VIEW_LEN, val) == 0;
                if (seen) continue;
                printf("    ranks");
                for (int q = r; q < nranks; q++)
                    if (strcmp(all + (size_t)q * VIEW_LEN, val) == 0)
                        printf(" %d", q);
                printf(":\n");
                for (const char *p = val; *p;) {
                    size_t l = strcspn(p, "\n");
                    printf("      %.*s\n", (int)l, p);
                    p += l + (p[l] == '\n');
                }
            }
        }
        free(all);
    }
    MPI_Bcast(&differ, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return differ;
}

/* Bytes to check with: 1 to 16 GiB. */
static int parse_size(const char *s, size_t *out) {
    return hcomm_parse_size(s, out) || *out == 0 || *out > (size_t)1 << 34 ? -1
                                                                           : 0;
}

static int parse_args(int argc, char **argv, check_opts_t *o) {
    *o = (check_opts_t){4u << 20, 1u << 20, 5, 0.2, -1};
    const char *slow = getenv("HCOMM_TEST_CHECK_SLOW_RANK");
    if (slow) o->slow_rank = atoi(slow);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = !v;
        if (!bad && strcmp(a, "--bytes") == 0)
            bad = parse_size(v, &o->bytes);
        else if (!bad && strcmp(a, "--link-bytes") == 0)
            bad = parse_size(v, &o->link_bytes);
        else if (!bad && strcmp(a, "--iters") == 0)
            bad = (o->iters = atoi(v)) < 1 || o->iters > 100000;
        else if (!bad && strcmp(a, "--slow-factor") == 0)
            bad = !((o->slow_factor = atof(v)) >= 0 && o->slow_factor < 1);
        else
            bad = 1;
        if (bad) {
            if (rank == 0)
                fprintf(stderr,
                        "hcomm_check: bad argument '%s%s%s'\nusage: mpirun -np "
                        "N hcomm_check [--bytes SIZE] [--link-bytes SIZE] "
                        "[--iters N] [--slow-factor F (0 <= F < 1)]\n",
                        a, v ? " " : "", v ? v : "");
            return -1;
        }
        i++;
    }
    return 0;
}

int main(int argc, char **argv) {
    int level;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &level);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    check_opts_t opts;
    if (parse_args(argc, argv, &opts) != 0) {
        MPI_Finalize();
        return 2;
    }
    double t0 = MPI_Wtime();
    char view[VIEW_LEN];
    int problems = 0;
    if (rank == 0)
        printf("hcomm_check: %d ranks\n\nwhat every rank sees:\n", nranks);
    version(view, sizeof(view));
    problems += compare(V_VERSION, view);
    settings(view, sizeof(view));
    problems += compare(V_SETTINGS, view);
    /* The settings are parsed on their own first: hcomm_init is
     * collective (it duplicates MPI_COMM_WORLD), so a rank whose settings
     * it refuses would leave the others waiting in it. */
    hcomm_status_t st = hcomm_config_load();
    if (st == HCOMM_SUCCESS)
        snprintf(view, sizeof(view), "settings valid\n");
    else
        snprintf(view, sizeof(view), "FAILED: %s\n", hcomm_last_error());
    problems += compare(V_PARSE, view);
    int up = st == HCOMM_SUCCESS, all_up, inited = 0;
    MPI_Allreduce(&up, &all_up, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (all_up) {
        st = hcomm_init(&argc, &argv);
        inited = st == HCOMM_SUCCESS;
        MPI_Allreduce(&inited, &all_up, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        if (!inited)
            fprintf(stderr, "hcomm_check: rank %d: hcomm_init: %s\n", rank,
                    hcomm_last_error());
        problems += !all_up;
    }
    hcomm_comm_t comm = HCOMM_COMM_NULL;
    if (all_up) {
        st = hcomm_comm_create(MPI_COMM_WORLD, &comm);
        if (st != HCOMM_SUCCESS)
            snprintf(view, sizeof(view), "FAILED: %s\n", hcomm_last_error());
        else
            transport(comm, view, sizeof(view));
        problems += compare(V_TRANSPORT, view);
        up = st == HCOMM_SUCCESS;
        MPI_Allreduce(&up, &all_up, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    }
    if (all_up) {
        nodes(comm, view, sizeof(view));
        problems += compare(V_NODES, view);
        memory(view, sizeof(view));
        problems += compare(V_MEMORY, view);
    }
    if (!all_up || problems) {
        if (rank == 0)
            printf("\ncollectives and links: not run (the ranks' views "
                   "differ or HCOMM did not start: ranks that disagree "
                   "may wait for each other until the timeout)\n");
    } else {
        problems += check_collectives(comm, &opts);
        problems += check_links(comm, &opts);
    }
    if (comm != HCOMM_COMM_NULL) hcomm_comm_free(&comm);
    if (inited) hcomm_finalize();
    if (rank == 0) {
        printf("\nhcomm_check: %s: %d problem%s, %.1f s\n",
               problems ? "FAILED" : "OK", problems, problems == 1 ? "" : "s",
               MPI_Wtime() - t0);
        fflush(stdout);
    }
    MPI_Finalize();
    return problems ? 1 : 0;
}
