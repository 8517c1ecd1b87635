/* The simulator's figures: defaults, and the topology file, which is
 * HCOMM_OVERRIDE_TOPO's format with link figures beside "nodes":
 *
 *   {"nodes": 2048, "ranks_per_node": 8,      (or "nodes": [{"ranks": [..]}])
 *    "rails": 8, "cores": 0, "nodes_per_switch": 0,
 *    "levels": {"node":   {"latency_us": 1.0, "bandwidth_GBps": 10,
 *                          "eager_bandwidth_GBps": 0, "rendezvous_us": 0,
 *                          "copy_GBps": 0, "copy_start_us": 0,
 *                          "zcopy_bytes": 0, "message_us": 0},
 *               "nic":    {"latency_us": 3.0, "bandwidth_GBps": 25},
 *               "switch": {"latency_us": 1.0, "bandwidth_GBps": 200}},
 *    "cpu": {"reduce_GBps": 10, "copy_GBps": 20, "overhead_us": 0.3,
 *            "cache_bytes": 0, "cached_speedup": 1, "cache_ranks": 0,
 *            "cross_speedup": 1},
 *    "eager_bytes": 8192, "copy_bytes": 0, "chunk_bytes": 1048576,
 *    "shm": {"call_us": 0.2, "flag_us": 0.05, "peer_speedup": 1,
 *            "cma": 1, "cma_us": 1, "cma_GBps": 5, "slot_bytes": 0}}
 *
 * Every key but "nodes" is optional; unknown keys are errors, as in the
 * override file. A "nodes" array goes through the override file's own
 * parser, so both files mean the same. */
#include "hcomm_sim.h"
#include "topo/topo.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void hcomm_sim_model_default(hcomm_sim_model_t *m) {
    memset(m, 0, sizeof(*m));
    m->lat[SIM_NODE] = 1.0e-6;
    m->bw[SIM_NODE] = 10e9;
    m->lat[SIM_NIC] = 3.0e-6;
    m->bw[SIM_NIC] = 25e9;
    m->lat[SIM_SWITCH] = 1.0e-6;
    m->bw[SIM_SWITCH] = 200e9;
    m->reduce_bw = 10e9;
    m->copy_bw = 20e9;
    m->overhead = 0.3e-6;
    m->eager_bytes = 8192;
    m->chunk_bytes = 1 << 20;
}

static int level(json_t *levels, hcomm_sim_model_t *m, int lv, char *err,
                 size_t len) {
    const char *name = hcomm_sim_level_names[lv];
    json_t *l = json_object_get(levels, name);
    json_error_t je;
    double lu = m->lat[lv] * 1e6, gb = m->bw[lv] / 1e9,
           egb = m->eager_bw[lv] / 1e9, ru = m->rndv[lv] * 1e6,
           cgb = m->copy_rate[lv] / 1e9, cu = m->copy_start[lv] * 1e6,
           mu = m->msg_cpu[lv] * 1e6;
    json_int_t zc = (json_int_t)m->zcopy_bytes[lv];
    if (!l) return 0;
    if (json_unpack_ex(l, &je, JSON_STRICT,
                       "{s?F, s?F, s?F, s?F, s?F, s?F, s?I, s?F}", "latency_us",
                       &lu, "bandwidth_GBps", &gb, "eager_bandwidth_GBps", &egb,
                       "rendezvous_us", &ru, "copy_GBps", &cgb, "copy_start_us",
                       &cu, "zcopy_bytes", &zc, "message_us", &mu) != 0) {
        snprintf(err, len, "levels.%s: %s", name, je.text);
        return -1;
    }
    if (lu < 0 || gb <= 0 || egb < 0 || ru < 0 || cgb < 0 || cu < 0 || zc < 0) {
        snprintf(err, len, "levels.%s: bandwidth > 0, the other figures >= 0",
                 name);
        return -1;
    }
    m->lat[lv] = lu * 1e-6;
    m->bw[lv] = gb * 1e9;
    m->eager_bw[lv] = egb * 1e9;
    m->rndv[lv] = ru * 1e-6;
    m->copy_rate[lv] = cgb * 1e9;
    m->copy_start[lv] = cu * 1e-6;
    m->zcopy_bytes[lv] = (size_t)zc;
    m->msg_cpu[lv] = mu * 1e-6;
    return 0;
}

/* The shared-memory algorithms' figures (hcomm_sim_shm.c). */
static int shm_figures(json_t *o, hcomm_sim_model_t *m, char *err, size_t len) {
    json_error_t je;
    double call = 0.2, flag = 0.05, peer = 1, cma_us = 1, cma_gb = 5;
    int cma = 1;
    json_int_t slot = 0;
    if (json_unpack_ex(o, &je, JSON_STRICT,
                       "{s?F, s?F, s?F, s?b, s?F, s?F, s?I}", "call_us", &call,
                       "flag_us", &flag, "peer_speedup", &peer, "cma", &cma,
                       "cma_us", &cma_us, "cma_GBps", &cma_gb, "slot_bytes",
                       &slot) != 0) {
        snprintf(err, len, "shm: %s", je.text);
        return -1;
    }
    if (call < 0 || flag < 0 || peer <= 0 || cma_us < 0 || cma_gb <= 0 ||
        slot < 0) {
        snprintf(err, len, "shm: rates > 0, the other figures >= 0");
        return -1;
    }
    m->shm = 1;
    m->shm_call = call * 1e-6;
    m->shm_flag = flag * 1e-6;
    m->shm_peer_speedup = peer;
    m->shm_cma = cma;
    m->shm_cma_call = cma_us * 1e-6;
    m->shm_cma_bw = cma_gb * 1e9;
    m->shm_slot_bytes = (size_t)slot;
    return 0;
}

/* A "nodes" array: through hcomm_topo_override_load, which reads files. */
static int nodes_array(json_t *nodes, hcomm_sim_shape_t *sh, char *err,
                       size_t len) {
    size_t i, world = 0;
    json_t *node;
    json_array_foreach(nodes, i, node) {
        json_t *ranks =
            json_is_object(node) ? json_object_get(node, "ranks") : NULL;
        world += json_is_array(ranks) ? json_array_size(ranks) : 0;
    }
    char path[] = "/tmp/hcomm_sim_nodes_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) {
        snprintf(err, len, "cannot write a temporary file");
        return -1;
    }
    close(fd);
    json_t *only = json_pack("{s:O}", "nodes", nodes);
    int rc = only ? json_dump_file(only, path, 0) : -1;
    json_decref(only);
    hcomm_topo_override_t ov;
    if (rc == 0 &&
        hcomm_topo_override_load(path, (int)world, &ov) != HCOMM_SUCCESS) {
        snprintf(err, len, "%s", hcomm_last_error());
        rc = -1;
    } else if (rc == 0) {
        rc = hcomm_sim_shape_labels(sh, (int)world, ov.node_of);
        hcomm_topo_override_free(&ov);
        if (rc) snprintf(err, len, "no memory for %zu ranks", world);
    }
    unlink(path);
    return rc;
}

hcomm_status_t hcomm_sim_load(const char *path, hcomm_sim_model_t *m,
                              hcomm_sim_shape_t *sh, char *err, size_t len) {
    json_error_t je;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    memset(sh, 0, sizeof(*sh));
    if (!root) {
        snprintf(err, len, "%s: line %d: %s", path, je.line, je.text);
        return HCOMM_ERR_INVALID_ARG;
    }
    json_t *nodes = NULL, *levels = NULL, *cpu = NULL, *shm = NULL;
    int ppn = 0, rails = m->rails, cores = m->cores, nps = m->nodes_per_switch;
    json_int_t eager = (json_int_t)m->eager_bytes,
               copy = (json_int_t)m->copy_bytes,
               chunk = (json_int_t)m->chunk_bytes;
    hcomm_status_t st = HCOMM_ERR_INVALID_ARG;
    if (json_unpack_ex(
            root, &je, JSON_STRICT,
            "{s:o, s?i, s?i, s?i, s?i, s?o, s?o, s?I, s?I, s?I, s?o}", "nodes",
            &nodes, "ranks_per_node", &ppn, "rails", &rails, "cores", &cores,
            "nodes_per_switch", &nps, "levels", &levels, "cpu", &cpu,
            "eager_bytes", &eager, "copy_bytes", &copy, "chunk_bytes", &chunk,
            "shm", &shm) != 0) {
        snprintf(err, len, "%s: %s", path, je.text);
        goto out;
    }
    if (levels && json_unpack_ex(levels, &je, JSON_STRICT, "{s?o, s?o, s?o}",
                                 "node", &(json_t *){0}, "nic", &(json_t *){0},
                                 "switch", &(json_t *){0}) != 0) {
        snprintf(err, len, "%s: levels: %s", path, je.text);
        goto out;
    }
    for (int l = 0; levels && l < SIM_LEVELS; l++)
        if (level(levels, m, l, err, len)) goto out;
    if (cpu) {
        double r = m->reduce_bw / 1e9, c = m->copy_bw / 1e9,
               o = m->overhead * 1e6, sp = m->cached_speedup,
               xs = m->cross_speedup;
        json_int_t cb = (json_int_t)m->cache_bytes;
        int cr = m->cache_ranks;
        if (json_unpack_ex(cpu, &je, JSON_STRICT,
                           "{s?F, s?F, s?F, s?I, s?F, s?i, s?F}", "reduce_GBps",
                           &r, "copy_GBps", &c, "overhead_us", &o,
                           "cache_bytes", &cb, "cached_speedup", &sp,
                           "cache_ranks", &cr, "cross_speedup", &xs) != 0 ||
            r <= 0 || c <= 0 || o < 0 || cb < 0 || sp < 0 || cr < 0 || xs < 0) {
            snprintf(err, len, "%s: cpu: %s", path,
                     je.text[0] ? je.text : "bandwidths > 0, overhead >= 0");
            goto out;
        }
        m->reduce_bw = r * 1e9;
        m->copy_bw = c * 1e9;
        m->overhead = o * 1e-6;
        m->cache_bytes = (size_t)cb;
        m->cached_speedup = sp;
        m->cache_ranks = cr;
        m->cross_speedup = xs;
    }
    if (shm && shm_figures(shm, m, err, len)) goto out;
    if (rails < 0 || cores < 0 || nps < 0 || eager < 0 || copy < 0 ||
        chunk <= 0) {
        snprintf(err, len, "%s: counts and sizes must not be negative", path);
        goto out;
    }
    m->rails = rails;
    m->cores = cores;
    m->nodes_per_switch = nps;
    m->eager_bytes = (size_t)eager;
    m->copy_bytes = (size_t)copy;
    m->chunk_bytes = (size_t)chunk;
    if (json_is_integer(nodes)) {
        json_int_t nn = json_integer_value(nodes);
        if (nn < 1 || ppn < 1 || nn * ppn > (1 << 24)) {
            snprintf(err, len,
                     "%s: \"nodes\" as a number needs \"ranks_per_node\", "
                     "both positive",
                     path);
            goto out;
        }
        if (hcomm_sim_shape_regular(sh, (int)nn, ppn)) {
            snprintf(err, len, "no memory for the shape");
            goto out;
        }
    } else if (json_is_array(nodes)) {
        if (ppn) {
            snprintf(err, len,
                     "%s: \"ranks_per_node\" goes with a number of "
                     "nodes, not a list",
                     path);
            goto out;
        }
        if (nodes_array(nodes, sh, err, len)) goto out;
    } else {
        snprintf(err, len, "%s: \"nodes\" must be a number or a list", path);
        goto out;
    }
    st = HCOMM_SUCCESS;
out:
    json_decref(root);
    return st;
}
