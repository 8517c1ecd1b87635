/* hcomm_sim: predicted time of HCOMM's real plans for a communicator of any
 * shape (the model and how it scales: hcomm_sim.h).
 *
 *   hcomm_sim --nodes 2048 --ppn 8 allreduce            every algorithm, 8 B..1
 * GiB hcomm_sim --topo cluster.json -a ring,hierarchical_rhd -b 1M -e 1G
 *   hcomm_sim --nodes 2048 --ppn 8 --sweep 1 --json     rank counts 8..16384
 *
 * The table goes to stdout; --json writes one object per row instead. */
#define _POSIX_C_SOURCE 200809L

#include "core/size_parse.h"
#include "hcomm_sim_cli.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void usage(FILE *f) {
    fprintf(
        f,
        "usage: hcomm_sim [COLLECTIVE] [options]\n"
        "Predicts the time of HCOMM's plans (the executor's builders) over a\n"
        "cost model. COLLECTIVE: allreduce (default), allgather,\n"
        "reduce_scatter, bcast, reduce, alltoall, gather, scatter.\n"
        "  --topo FILE          shape and link figures (HCOMM_OVERRIDE_TOPO's\n"
        "                       format with figures; tools/hcomm_sim_model.c)\n"
        "  --nodes N --ppn L    N nodes of L ranks, node-major (default 2 x "
        "4)\n"
        "  -a, --algo LIST      algorithms, comma-separated (default: all)\n"
        "  -b, -e, -f           sizes from, to, factor (8, 1G, 4); as "
        "hcomm_perf\n"
        "  -d, --dtype NAME     float32 (default), float64, int32, bfloat16, "
        "...\n"
        "  -r, --root R         root of rooted collectives (0)\n"
        "  --sweep FROM         also every node count FROM, 2 FROM, ... N\n"
        "  --json               one JSON object per row\n"
        "  --no-symmetry        simulate every rank\n"
        "  --max-steps N        refuse runs over N simulated steps (32M)\n"
        "  --calls N            N calls back to back, time per call, as\n"
        "                       hcomm_perf times them (1)\n"
        "  --select-table       write src/coll/select_table.c for the figures\n"
        "  --measure-cpu        this machine's reduce and copy GB/s (JSON)\n"
        "  figures (override the file's): --lat-node --lat-nic --lat-switch "
        "US,\n"
        "  --bw-node --bw-nic --bw-switch GBPS, --rails N, --cores N,\n"
        "  --nodes-per-switch N, --reduce-bw --copy-bw GBPS, --overhead US,\n"
        "  --eager BYTES, --chunk BYTES\n"
        "On one node, where the file gives \"shm\" figures, the node's\n"
        "shared-memory algorithms too: shm (what selection takes), and\n"
        "allreduce's shm_oneshot, shm_twoshot and shm_cma, by formula.\n"
        "Columns: size, algorithm, time, algbw and busbw (GB/s, nccl-tests'),\n"
        "MiB per rank over each level, the critical path (steps, messages\n"
        "node/nic/switch, share of its time in messages), the symmetry used\n"
        "and the ranks simulated. '*' marks the fastest per size.\n");
}

static int parse_double(const char *s, double *out) {
    char *end;
    errno = 0;
    *out = strtod(s, &end);
    return errno || end == s || *end || *out < 0 ? -1 : 0;
}

enum {
    O_TOPO = 256,
    O_NODES,
    O_PPN,
    O_SWEEP,
    O_JSON,
    O_NOSYM,
    O_MAXSTEPS,
    O_CALLS,
    O_LAT0,
    O_LAT1,
    O_LAT2,
    O_BW0,
    O_BW1,
    O_BW2,
    O_RAILS,
    O_CORES,
    O_NPS,
    O_RBW,
    O_CBW,
    O_OVH,
    O_EAGER,
    O_CHUNK,
    O_SELECT,
    O_CPU
};

static const struct option longopts[] = {{"topo", 1, 0, O_TOPO},
                                         {"nodes", 1, 0, O_NODES},
                                         {"ppn", 1, 0, O_PPN},
                                         {"algo", 1, 0, 'a'},
                                         {"dtype", 1, 0, 'd'},
                                         {"root", 1, 0, 'r'},
                                         {"sweep", 1, 0, O_SWEEP},
                                         {"json", 0, 0, O_JSON},
                                         {"no-symmetry", 0, 0, O_NOSYM},
                                         {"max-steps", 1, 0, O_MAXSTEPS},
                                         {"calls", 1, 0, O_CALLS},
                                         {"lat-node", 1, 0, O_LAT0},
                                         {"lat-nic", 1, 0, O_LAT1},
                                         {"lat-switch", 1, 0, O_LAT2},
                                         {"bw-node", 1, 0, O_BW0},
                                         {"bw-nic", 1, 0, O_BW1},
                                         {"bw-switch", 1, 0, O_BW2},
                                         {"rails", 1, 0, O_RAILS},
                                         {"cores", 1, 0, O_CORES},
                                         {"nodes-per-switch", 1, 0, O_NPS},
                                         {"reduce-bw", 1, 0, O_RBW},
                                         {"copy-bw", 1, 0, O_CBW},
                                         {"overhead", 1, 0, O_OVH},
                                         {"eager", 1, 0, O_EAGER},
                                         {"chunk", 1, 0, O_CHUNK},
                                         {"select-table", 0, 0, O_SELECT},
                                         {"measure-cpu", 0, 0, O_CPU},
                                         {"help", 0, 0, 'h'},
                                         {0, 0, 0, 0}};

/* Figures given on the command line win over the file's, whatever the
 * order: they are applied after it is read. */
typedef struct {
    int set;
    double v;
} fig_t;

static int apply_figures(hcomm_sim_model_t *m, const fig_t *f) {
    for (int l = 0; l < SIM_LEVELS; l++) {
        if (f[O_LAT0 - O_LAT0 + l].set) m->lat[l] = f[l].v * 1e-6;
        if (f[O_BW0 - O_LAT0 + l].set) m->bw[l] = f[O_BW0 - O_LAT0 + l].v * 1e9;
    }
    if (f[O_RAILS - O_LAT0].set) m->rails = (int)f[O_RAILS - O_LAT0].v;
    if (f[O_CORES - O_LAT0].set) m->cores = (int)f[O_CORES - O_LAT0].v;
    if (f[O_NPS - O_LAT0].set) m->nodes_per_switch = (int)f[O_NPS - O_LAT0].v;
    if (f[O_RBW - O_LAT0].set) m->reduce_bw = f[O_RBW - O_LAT0].v * 1e9;
    if (f[O_CBW - O_LAT0].set) m->copy_bw = f[O_CBW - O_LAT0].v * 1e9;
    if (f[O_OVH - O_LAT0].set) m->overhead = f[O_OVH - O_LAT0].v * 1e-6;
    if (f[O_EAGER - O_LAT0].set) m->eager_bytes = (size_t)f[O_EAGER - O_LAT0].v;
    if (f[O_CHUNK - O_LAT0].set) m->chunk_bytes = (size_t)f[O_CHUNK - O_LAT0].v;
    for (int l = 0; l < SIM_LEVELS; l++)
        if (m->bw[l] <= 0) return -1;
    return m->reduce_bw > 0 && m->copy_bw > 0 && m->chunk_bytes > 0 ? 0 : -1;
}

int main(int argc, char **argv) {
    hcomm_sim_opts_t o;
    fig_t figs[O_CHUNK - O_LAT0 + 1];
    const char *topo = NULL;
    char err[512];
    int nodes = 2, ppn = 4, c, select_table = 0, shape_given = 0;
    memset(&o, 0, sizeof(o));
    memset(figs, 0, sizeof(figs));
    hcomm_sim_model_default(&o.model);
    o.coll = HCOMM_COLL_ALLREDUCE;
    o.dtype = HCOMM_FLOAT32;
    o.minbytes = 8;
    o.maxbytes = (size_t)1 << 30;
    o.factor = 4;
    while ((c = getopt_long(argc, argv, "a:b:e:f:d:r:h", longopts, NULL)) !=
           -1) {
        size_t z;
        double v;
        switch (c) {
        case 'a':
            o.algos = optarg;
            break;
        case 'b':
        case 'e':
            if (hcomm_parse_size(optarg, &z)) goto bad;
            *(c == 'b' ? &o.minbytes : &o.maxbytes) = z;
            break;
        case 'f':
            o.factor = atoi(optarg);
            if (o.factor < 2) goto bad;
            break;
        case 'd':
            if (hcomm_sim_dtype_by_name(optarg, &o.dtype)) goto bad;
            break;
        case 'r':
            o.root = atoi(optarg);
            break;
        case O_TOPO:
            topo = optarg;
            break;
        case O_NODES:
        case O_PPN:
            *(c == O_NODES ? &nodes : &ppn) = atoi(optarg);
            shape_given = 1;
            break;
        case O_SWEEP:
            o.sweep_from = atoi(optarg);
            if (o.sweep_from < 1) goto bad;
            break;
        case O_JSON:
            o.json = 1;
            break;
        case O_NOSYM:
            o.no_symmetry = 1;
            break;
        case O_CALLS:
            o.calls = atoi(optarg);
            if (o.calls < 1) goto bad;
            break;
        case O_MAXSTEPS:
            if (hcomm_parse_size(optarg, &z)) goto bad;
            o.max_steps = z;
            break;
        case O_SELECT:
            select_table = 1;
            break;
        case O_CPU: {
            double r, cp;
            if (hcomm_sim_measure_cpu(&r, &cp)) return 1;
            printf("{\"reduce_GBps\": %.2f, \"copy_GBps\": %.2f}\n", r / 1e9,
                   cp / 1e9);
            return 0;
        }
        case 'h':
            usage(stdout);
            return 0;
        default:
            if (c < O_LAT0 || c > O_CHUNK) goto bad;
            if (c == O_EAGER || c == O_CHUNK) {
                if (hcomm_parse_size(optarg, &z)) goto bad;
                v = (double)z;
            } else if (parse_double(optarg, &v)) {
                goto bad;
            }
            figs[c - O_LAT0] = (fig_t){1, v};
        }
    }
    if (optind < argc && hcomm_sim_coll_by_name(argv[optind++], &o.coll))
        goto bad;
    if (optind < argc || nodes < 1 || ppn < 1 || o.minbytes > o.maxbytes)
        goto bad;
    if (topo && hcomm_sim_load(topo, &o.model, &o.shape, err, sizeof(err)) !=
                    HCOMM_SUCCESS) {
        fprintf(stderr, "hcomm_sim: %s\n", err);
        return 1;
    }
    if (topo && shape_given) /* --nodes/--ppn win over the file's shape */
        hcomm_sim_shape_free(&o.shape);
    if ((!topo || shape_given) &&
        hcomm_sim_shape_regular(&o.shape, nodes, ppn)) {
        fprintf(stderr, "hcomm_sim: no memory\n");
        return 1;
    }
    if (apply_figures(&o.model, figs)) goto bad;
    if (o.root < 0 || o.root >= o.shape.size) goto bad;
    if (select_table) { /* the shapes are the table's, not the file's */
        hcomm_sim_shape_free(&o.shape);
        return hcomm_sim_write_select_table(
            &o.model, topo ? topo : "the defaults", stdout);
    }
    int rc = hcomm_sim_cli_run(&o, stdout);
    hcomm_sim_shape_free(&o.shape);
    return rc;
bad:
    usage(stderr);
    return 2;
}
