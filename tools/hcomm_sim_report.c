/* hcomm_sim's rows: every size x algorithm (x node count), as a table or
 * as JSON objects, one a line. */
#define _POSIX_C_SOURCE 200809L

#include "hcomm_sim_cli.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const dtype_names[] = {
    "int8",   "uint8",   "int32",    "uint32",  "int64",
    "uint64", "float16", "bfloat16", "float32", "float64"};

int hcomm_sim_dtype_by_name(const char *name, hcomm_dtype_t *out) {
    for (int t = 0; t < HCOMM_DTYPE_COUNT; t++)
        if (strcmp(name, dtype_names[t]) == 0) {
            *out = (hcomm_dtype_t)t;
            return 0;
        }
    return -1;
}

int hcomm_sim_coll_by_name(const char *name, hcomm_coll_t *out) {
    if (strcmp(name, "broadcast") == 0) name = "bcast";
    for (int c = 0; c < HCOMM_COLL_BARRIER; c++)
        if (strcmp(name, hcomm_coll_name((hcomm_coll_t)c)) == 0) {
            *out = (hcomm_coll_t)c;
            return 0;
        }
    for (int c = HCOMM_COLL_GATHER; c <= HCOMM_COLL_SCATTER; c++)
        if (strcmp(name, hcomm_coll_name((hcomm_coll_t)c)) == 0) {
            *out = (hcomm_coll_t)c;
            return 0;
        }
    return -1;
}

static int wanted(const char *list, const char *name) {
    if (!list || strcmp(list, "all") == 0) return 1;
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && strncmp(p, name, n) == 0) return 1;
        p += len + (e ? 1 : 0);
    }
    return 0;
}

static void size_label(size_t b, char *out, size_t len) {
    if (b >= (1u << 30) && b % (1u << 30) == 0)
        snprintf(out, len, "%zuG", b >> 30);
    else if (b >= (1u << 20) && b % (1u << 20) == 0)
        snprintf(out, len, "%zuM", b >> 20);
    else if (b >= 1024 && b % 1024 == 0)
        snprintf(out, len, "%zuK", b >> 10);
    else
        snprintf(out, len, "%zu", b);
}

typedef struct {
    const hcomm_algo_t *algo;
    int ok;
    hcomm_sim_result_t r;
    char why[160];
    double secs; /* the simulator's own time */
} row_t;

static void print_json(FILE *f, const hcomm_sim_opts_t *o,
                       const hcomm_sim_shape_t *sh, size_t bytes,
                       const row_t *w, int best) {
    double n = sh->size;
    json_t *j = json_pack("{s:s, s:i, s:i, s:I, s:s, s:b}", "collective",
                          hcomm_coll_name(o->coll), "ranks", sh->size, "nodes",
                          sh->nnodes, "bytes", (json_int_t)bytes, "algorithm",
                          w->algo->name, "best", best);
    if (!w->ok) {
        json_object_set_new(j, "error", json_string(w->why));
    } else {
        double algbw = (double)bytes / w->r.time / 1e9;
        json_t *lv = json_object(), *cp = json_object(), *cm = json_object();
        for (int l = 0; l < SIM_LEVELS; l++) {
            json_object_set_new(lv, hcomm_sim_level_names[l],
                                json_real(w->r.bytes[l] / n));
            json_object_set_new(cm, hcomm_sim_level_names[l],
                                json_integer(w->r.cp_msgs[l]));
        }
        json_object_set_new(cp, "steps", json_integer(w->r.cp_steps));
        json_object_set_new(cp, "messages", cm);
        json_object_set_new(
            cp, "message_us",
            json_real((w->r.cp_msg[0] + w->r.cp_msg[1] + w->r.cp_msg[2]) *
                      1e6));
        json_object_set_new(cp, "cpu_us", json_real(w->r.cp_cpu * 1e6));
        json_object_set_new(cp, "wait_us", json_real(w->r.cp_wait * 1e6));
        json_object_set_new(j, "time_us", json_real(w->r.time * 1e6));
        json_object_set_new(j, "algbw", json_real(algbw));
        json_object_set_new(
            j, "busbw",
            json_real(algbw * hcomm_sim_busbw_factor(o->coll, sh->size)));
        json_object_set_new(j, "bytes_per_rank", lv);
        json_object_set_new(j, "critical_path", cp);
        json_object_set_new(j, "symmetry", json_string(w->r.symmetry));
        json_object_set_new(j, "simulated_ranks",
                            json_integer(w->r.simulated_ranks));
        json_object_set_new(j, "simulated_steps",
                            json_integer((json_int_t)w->r.steps));
        json_object_set_new(j, "sim_seconds", json_real(w->secs));
    }
    json_dumpf(j, f, JSON_COMPACT);
    fputc('\n', f);
    json_decref(j);
}

static void print_row(FILE *f, const hcomm_sim_opts_t *o,
                      const hcomm_sim_shape_t *sh, size_t bytes, const row_t *w,
                      int best) {
    char sz[32];
    size_label(bytes, sz, sizeof(sz));
    if (!w->ok) {
        fprintf(f, "%6d %8s  %-20s  %s\n", sh->size, sz, w->algo->name, w->why);
        return;
    }
    const hcomm_sim_result_t *r = &w->r;
    double t = r->time, algbw = (double)bytes / t / 1e9, n = sh->size;
    double msg = r->cp_msg[0] + r->cp_msg[1] + r->cp_msg[2];
    fprintf(f,
            "%6d %8s %c%-20s %11.2f %8.3f %8.3f %9.3f %9.3f %9.3f %7d "
            "%5d/%d/%d %4.0f%% %-10s %5d\n",
            sh->size, sz, best ? '*' : ' ', w->algo->name, t * 1e6, algbw,
            algbw * hcomm_sim_busbw_factor(o->coll, sh->size),
            r->bytes[0] / n / 1048576, r->bytes[1] / n / 1048576,
            r->bytes[2] / n / 1048576, r->cp_steps, r->cp_msgs[0],
            r->cp_msgs[1], r->cp_msgs[2], t > 0 ? 100 * msg / t : 0,
            r->symmetry, r->simulated_ranks);
}

static double seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* One shape: every size x algorithm. */
static int run_shape(const hcomm_sim_opts_t *o, const hcomm_sim_shape_t *sh,
                     FILE *f) {
    row_t rows[64];
    int nrows = 0, failed = 0;
    for (int a = 0; a < hcomm_nalgos && nrows < 64; a++)
        if (hcomm_algos[a].coll == o->coll &&
            wanted(o->algos, hcomm_algos[a].name))
            rows[nrows++].algo = &hcomm_algos[a];
    /* on one node, the segment's algorithms too, where the file has them */
    for (int a = 0; o->model.shm && sh->nnodes == 1 &&
                    a < hcomm_sim_nshm_algos && nrows < 64;
         a++)
        if (hcomm_sim_shm_algos[a].coll == o->coll &&
            wanted(o->algos, hcomm_sim_shm_algos[a].name))
            rows[nrows++].algo = &hcomm_sim_shm_algos[a];
    if (!nrows) {
        fprintf(stderr, "hcomm_sim: no such algorithm for %s: %s\n",
                hcomm_coll_name(o->coll), o->algos);
        return 1;
    }
    size_t es = hcomm_dtype_size(o->dtype);
    for (size_t bytes = o->minbytes; bytes <= o->maxbytes;) {
        size_t count = hcomm_sim_count_for(o->coll, bytes, es, sh->size);
        int best = -1;
        for (int k = 0; k < nrows; k++) {
            row_t *w = &rows[k];
            hcomm_sim_call_t call = {.algo = w->algo,
                                     .count = count,
                                     .esize = es,
                                     .root = o->root,
                                     .max_steps = o->max_steps,
                                     .no_symmetry = o->no_symmetry,
                                     .calls = o->calls};
            double t0 = seconds();
            hcomm_status_t st = hcomm_sim_run(&o->model, sh, &call, &w->r,
                                              w->why, sizeof(w->why));
            w->secs = seconds() - t0;
            w->ok = st == HCOMM_SUCCESS;
            if (!w->ok && st != HCOMM_ERR_UNSUPPORTED) failed = 1;
            if (w->ok && (best < 0 || w->r.time < rows[best].r.time)) best = k;
        }
        for (int k = 0; k < nrows; k++)
            (o->json ? print_json : print_row)(f, o, sh, bytes, &rows[k],
                                               k == best);
        fflush(f);
        if (bytes > o->maxbytes / (size_t)o->factor) break;
        bytes *= (size_t)o->factor;
    }
    return failed;
}

int hcomm_sim_cli_run(const hcomm_sim_opts_t *o, FILE *f) {
    const hcomm_sim_shape_t *sh = &o->shape;
    int L = sh->node_size[0], failed = 0;
    if (!o->json) {
        const hcomm_sim_model_t *m = &o->model;
        fprintf(f,
                "# %s, %s, %d ranks on %d nodes; node %.2f us %.1f GB/s, "
                "nic %.2f us %.1f GB/s x %d rails, switch %.2f us %.1f GB/s "
                "(%d nodes each), reduce %.1f GB/s, copy %.1f GB/s, "
                "overhead %.2f us, eager %zu B (node %.1f GB/s, nic %.1f; "
                "0: the level's; zero-copy to %zu B node, %zu nic), copies "
                "to %zu B (node %.1f GB/s, nic %.1f; 0: the CPU's; + %.2f "
                "us node, %.2f nic past a fragment), rendezvous + %.2f us "
                "node, %.2f nic, chunk %zu B\n",
                hcomm_coll_name(o->coll), dtype_names[o->dtype], sh->size,
                sh->nnodes, m->lat[0] * 1e6, m->bw[0] / 1e9, m->lat[1] * 1e6,
                m->bw[1] / 1e9, m->rails ? m->rails : L, m->lat[2] * 1e6,
                m->bw[2] / 1e9, m->nodes_per_switch, m->reduce_bw / 1e9,
                m->copy_bw / 1e9, m->overhead * 1e6, m->eager_bytes,
                m->eager_bw[SIM_NODE] / 1e9, m->eager_bw[SIM_NIC] / 1e9,
                m->zcopy_bytes[SIM_NODE], m->zcopy_bytes[SIM_NIC],
                m->copy_bytes, m->copy_rate[SIM_NODE] / 1e9,
                m->copy_rate[SIM_NIC] / 1e9, m->copy_start[SIM_NODE] * 1e6,
                m->copy_start[SIM_NIC] * 1e6, m->rndv[SIM_NODE] * 1e6,
                m->rndv[SIM_NIC] * 1e6, m->chunk_bytes);
        fprintf(f,
                "# %5s %8s  %-20s %11s %8s %8s %9s %9s %9s %7s %9s %5s %-10s "
                "%5s\n",
                "ranks", "size", "algorithm", "time(us)", "algbw", "busbw",
                "MiB node", "MiB nic", "MiB sw", "cp step", "cp msgs", "msg%",
                "symmetry", "simd");
    }
    if (!o->sweep_from) return run_shape(o, sh, f);
    /* A sweep: node counts from sweep_from doubling up to the shape's, each
     * node-major of the shape's first node's size. */
    for (int nn = o->sweep_from; nn <= sh->nnodes && !failed;
         nn = nn * 2 > sh->nnodes && nn < sh->nnodes ? sh->nnodes : nn * 2) {
        hcomm_sim_shape_t s2;
        if (hcomm_sim_shape_regular(&s2, nn, L)) return 1;
        failed = run_shape(o, &s2, f);
        hcomm_sim_shape_free(&s2);
        if (nn == sh->nnodes) break;
    }
    return failed;
}
