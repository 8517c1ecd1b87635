/* hcomm_info: the version, build options and configuration of HCOMM, and,
 * under mpirun, the job's topology (with the links between the GPUs of
 * rank 0's node).
 *   hcomm_info                  everything, values and where they came from
 *                               (launched by mpirun: also the topology)
 *   hcomm_info --topology       initialise MPI (a singleton without mpirun)
 *                               and print the topology too
 *   hcomm_info --compress [MAX] under mpirun: what HCOMM_COMPRESS=auto
 *                               picks on this job, 64 KiB to MAX (16M)
 *   hcomm_info --env-markdown   the README's table of variables */
#include "core/comm.h"
#include "core/config.h"
#include "core/gpu.h"
#include "compress/compress.h"
#include "core/size_parse.h"
#include "hcomm.h"
#include "topo/topo.h"
#include "shm_tp/shm.h"
#include "ucx_tp/ucx_tp.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef HAVE_UCX
#define HAS_UCX "yes"
#define TRANSPORTS "ucx, mpi, shm"
#else
#define HAS_UCX "no"
#define TRANSPORTS "mpi, shm"
#endif
#ifdef HAVE_HWLOC
#define HAS_HWLOC "yes"
#else
#define HAS_HWLOC "no"
#endif
#ifdef HAVE_JANSSON
#define HAS_JANSSON "yes"
#else
#define HAS_JANSSON "no"
#endif
#ifdef HAVE_CUDA
#define HAS_CUDA "yes (kernels for sm_" HCOMM_CUDA_ARCH ")"
#else
#define HAS_CUDA "no (host memory only)"
#endif

/* What one rank tells rank 0 about itself. */
typedef struct {
    char node_name[HCOMM_TOPO_NAME_LEN];
    char line[960];
} rank_report_t;

static int launched_by_mpi(void) {
    static const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK",
                                 "PMI_SIZE", "PMI_RANK", NULL};
    for (const char **v = vars; *v; v++)
        if (getenv(*v)) return 1;
    return 0;
}

static void print_header(void) {
    printf("HCOMM %s\n", hcomm_version());
    printf("build: UCX %s, hwloc %s, jansson %s, CUDA %s\n", HAS_UCX, HAS_HWLOC,
           HAS_JANSSON, HAS_CUDA);
    printf("transports built: %s\n", TRANSPORTS);
#ifdef HAVE_UCX
    char ver[32];
    const char *thresh = hcomm_ucx_rndv_thresh(ver, sizeof(ver));
    const char *user = getenv("UCX_RNDV_THRESH");
    if (thresh)
        printf("UCX %s: rendezvous threshold %s\n", ver, thresh);
    else if (user)
        printf("UCX %s: rendezvous threshold %s (UCX_RNDV_THRESH)\n", ver,
               user);
    else
        printf("UCX %s: rendezvous threshold UCX's own (HCOMM "
               "sets " HCOMM_UCX_RNDV_THRESH " from UCX 1.17)\n",
               ver);
#endif
    hcomm_gpu_init();
    printf("GPUs: %d (the CUDA driver's count; device buffers %s)\n",
           hcomm_gpu_device_count(),
#ifdef HAVE_CUDA
           "work in every collective"
#else
           "are refused: built without CUDA"
#endif
    );
}

static void append_devs(char *buf, size_t len, const char *what,
                        const hcomm_topo_dev_t *devs, int n) {
    size_t used = strlen(buf);
    used += (size_t)snprintf(buf + used, len - used, ", %s: ", what);
    if (n == 0 && used < len) snprintf(buf + used, len - used, "none");
    for (int i = 0; i < n && used < len; i++) {
        /* The override file may name a device by its PCI bus id. */
        int show_pci = devs[i].pci[0] && strcmp(devs[i].pci, devs[i].name);
        used +=
            (size_t)snprintf(buf + used, len - used, "%s%s%s%s%s",
                             i ? "; " : "", devs[i].name, show_pci ? " (" : "",
                             show_pci ? devs[i].pci : "", show_pci ? ")" : "");
    }
}

static void describe(const hcomm_topo_t *t, rank_report_t *r) {
    char numa[16] = "unknown", socket[16] = "unknown";
    if (t->numa >= 0) snprintf(numa, sizeof(numa), "%d", t->numa);
    if (t->socket >= 0) snprintf(socket, sizeof(socket), "%d", t->socket);
    memset(r, 0, sizeof(*r));
    snprintf(r->node_name, sizeof(r->node_name), "%s", t->node_name);
    snprintf(r->line, sizeof(r->line),
             "rank %d: node %d, local rank %d, NUMA %s, socket %s", t->rank,
             t->map.node_of[t->rank], t->map.local_rank[t->rank], numa, socket);
    append_devs(r->line, sizeof(r->line), "GPUs", t->gpus, t->ngpus);
    append_devs(r->line, sizeof(r->line), "NICs", t->nics, t->nnics);
}

/* How the GPUs of this rank's node (as its GPUs line lists them) reach
 * each other: a matrix, with each GPU's name at the end of its row. */
static void print_gpu_links(const hcomm_topo_t *t) {
    printf("  GPU links on node %d \"%s\"", t->map.node_of[t->rank],
           t->node_name);
    if (t->ngpus == 0) {
        printf(": no GPUs\n");
        return;
    }
    printf(" (%s):\n%11s", t->gpu_links ? "HCOMM_OVERRIDE_TOPO" : "detected",
           "");
    for (int j = 0; j < t->ngpus; j++) /* no blanks after the last */
        printf(j + 1 < t->ngpus ? "  gpu%-4d" : "  gpu%d", j);
    printf("\n");
    for (int i = 0; i < t->ngpus; i++) {
        printf("    gpu%-4d", i);
        for (int j = 0; j < t->ngpus; j++)
            printf("  %-7s", hcomm_gpu_link_name(hcomm_topo_gpu_link(t, i, j)));
        printf("  %s\n", t->gpus[i].name);
    }
}

static void print_topology(const hcomm_topo_t *t, const rank_report_t *all) {
    const hcomm_topo_map_t *m = &t->map;
    const char *path = hcomm_cfg_str(HCOMM_CFG_OVERRIDE_TOPO);
    printf("topology of MPI_COMM_WORLD: %d ranks on %d node%s (%s%s), "
           "topology-aware %s\n",
           m->size, m->nnodes, m->nnodes == 1 ? "" : "s",
           t->from_override ? "HCOMM_OVERRIDE_TOPO=" : "detected by MPI",
           t->from_override ? path : "", t->aware ? "on" : "off");
    for (int n = 0; n < m->nnodes; n++) {
        const int *ranks = m->ranks_by_node + m->node_start[n];
        printf("  node %d \"%s\": %d rank%s:", n, all[ranks[0]].node_name,
               m->node_size[n], m->node_size[n] == 1 ? "" : "s");
        for (int i = 0; i < m->node_size[n]; i++)
            printf(" %d", ranks[i]);
        printf("\n");
    }
    for (int r = 0; r < m->size; r++)
        printf("  %s\n", all[r].line);
    print_gpu_links(t);
}

/* What compression auto picks here (hcomm_allreduce_ex, HCOMM_COMPRESS_AUTO,
 * with the lossy scheme HCOMM_COMPRESS=auto:<lossy> allows): its first
 * call of each size measures bf16 (and that scheme) against no compression
 * on the job's own links, the slowest rank's times deciding; rank 0 prints
 * them. */
static int print_compress_picks(hcomm_comm_t comm, int rank, size_t max) {
    hcomm_comm_impl_t *c;
    hcomm_allreduce_opts_t auto_opts = {.compress = HCOMM_COMPRESS_AUTO};
    const char *cfg = hcomm_cfg_str(HCOMM_CFG_COMPRESS);
    float *in = malloc(max), *out = malloc(max);
    hcomm_status_t st = in && out ? HCOMM_SUCCESS : HCOMM_ERR_NO_MEMORY;
    if (st == HCOMM_SUCCESS && strncmp(cfg, "auto:", 5) == 0)
        st = hcomm_compress_parse(cfg, &auto_opts.compress, &auto_opts.density,
                                  &auto_opts.lossy);
    if (st == HCOMM_SUCCESS) st = hcomm_comm_lookup(comm, &c);
    int lossy = auto_opts.lossy != HCOMM_COMPRESS_NONE;
    char col[48] = "", head[32];
    snprintf(head, sizeof(head), "%s (us)",
             hcomm_compress_name(auto_opts.lossy));
    if (lossy) snprintf(col, sizeof(col), " %12s", head);
    if (rank == 0 && st == HCOMM_SUCCESS)
        printf("compression auto (a lossier scheme where at least 20%% faster; "
               "float32 sum, slowest rank):\n%12s %12s %12s%s  %s\n",
               "bytes", "bf16 (us)", "none (us)", col, "picks");
    for (size_t bytes = 64 << 10; st == HCOMM_SUCCESS && bytes <= max;
         bytes *= 4) {
        size_t count = bytes / sizeof(float);
        for (size_t i = 0; i < count; i++)
            in[i] = (float)(i % 97) / 97.0f;
        st = hcomm_allreduce_ex(in, out, count, HCOMM_FLOAT32, HCOMM_SUM, comm,
                                &auto_opts);
        unsigned cls = 63 - (unsigned)__builtin_clzll(bytes);
        char lossy_us[48] = ""; /* the lossy scheme's column */
        if (lossy && st == HCOMM_SUCCESS)
            snprintf(lossy_us, sizeof(lossy_us), " %12.0f",
                     c->compress_us[cls][2]);
        if (rank == 0 && st == HCOMM_SUCCESS)
            printf("%12zu %12.0f %12.0f%s  %s\n", bytes, c->compress_us[cls][0],
                   c->compress_us[cls][1], lossy_us,
                   hcomm_compress_name(c->compress_pick[cls] - 1));
    }
    if (st != HCOMM_SUCCESS && rank == 0)
        fprintf(stderr, "hcomm_info: %s\n", hcomm_last_error());
    free(in);
    free(out);
    return st == HCOMM_SUCCESS ? 0 : 1;
}

/* Under MPI: every rank creates a communicator, rank 0 prints. */
static int run_with_mpi(int *argc, char ***argv, size_t compress_max) {
    hcomm_comm_t comm = HCOMM_COMM_NULL;
    hcomm_comm_impl_t *impl;
    rank_report_t mine, *all = NULL;
    int rank = 0, size = 1, rc = 1;
    if (hcomm_init(argc, argv) != HCOMM_SUCCESS) {
        fprintf(stderr, "hcomm_info: %s\n", hcomm_last_error());
        return 1;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    /* Collective: every rank gets the same status. */
    if (hcomm_comm_create(MPI_COMM_WORLD, &comm) != HCOMM_SUCCESS) {
        if (rank == 0) fprintf(stderr, "hcomm_info: %s\n", hcomm_last_error());
        goto out;
    }
    if (compress_max) {
        rc = print_compress_picks(comm, rank, compress_max);
        goto out;
    }
    describe(hcomm_comm_topology(comm), &mine);
    if (rank == 0 && !(all = malloc((size_t)size * sizeof(*all)))) {
        fprintf(stderr, "hcomm_info: no memory for %d ranks\n", size);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Gather(&mine, (int)sizeof(mine), MPI_BYTE, all, (int)sizeof(mine),
               MPI_BYTE, 0, MPI_COMM_WORLD);
    rc = 0;
    if (rank != 0) goto out;
    hcomm_comm_lookup(comm, &impl);
    print_header();
    printf("transports in use: MPI_COMM_WORLD on %s (UCX %s on rank 0)\n",
           impl->tp->ops->name,
           hcomm_ucx_available() ? "initialised" : "not initialised");
    if (impl->shm)
        printf("shared memory: %zu bytes for %d ranks, cross-memory reads "
               "%s\n",
               impl->shm->bytes, impl->shm->size,
               impl->shm->cma ? "on" : "off");
    else
        printf("shared memory: off (one rank, several nodes, or "
               "HCOMM_SHM_SLOT_SIZE=0)\n");
    printf("configuration:\n");
    hcomm_config_print_values(stdout);
    print_topology(hcomm_comm_topology(comm), all);
out:
    free(all);
    if (comm) hcomm_comm_free(&comm);
    hcomm_finalize();
    return rc;
}

int main(int argc, char **argv) {
    int topology = launched_by_mpi();
    if (argc > 1 && strcmp(argv[1], "--env-markdown") == 0) {
        hcomm_config_print_markdown(stdout);
        return 0;
    }
    size_t compress_max = 0;
    if (argc > 1 && strcmp(argv[1], "--topology") == 0) {
        topology = 1;
    } else if (argc > 1 && strcmp(argv[1], "--compress") == 0 &&
               (argc == 2 ||
                (argc == 3 && !hcomm_parse_size(argv[2], &compress_max) &&
                 compress_max >= 64 << 10))) {
        if (argc == 2) compress_max = 16 << 20;
        topology = 1;
    } else if (argc > 1) {
        fprintf(stderr,
                "usage: %s [--env-markdown | --topology | --compress "
                "[MAXBYTES, at least 64K]]\n",
                argv[0]);
        return 2;
    }
    if (topology) return run_with_mpi(&argc, &argv, compress_max);
    if (hcomm_config_load() != HCOMM_SUCCESS) {
        fprintf(stderr, "hcomm_info: %s\n", hcomm_last_error());
        return 1;
    }
    print_header();
    printf("configuration:\n");
    hcomm_config_print_values(stdout);
    return 0;
}
