/* Choosing an algorithm per call. The thresholds come from hcomm_perf runs
 * (see README, "Choosing algorithms"); from 4 nodes on, allreduce and
 * broadcast follow the table hcomm_sim generated (select_table.c): no
 * measurement here reaches that far. */
#include "coll/select.h"
#include "coll/select_table.h"
#include "core/log.h"

#include <stdio.h>
#include <string.h>

static const hcomm_algo_t *forced[HCOMM_COLL_COUNT];

static void list_names(char *out, size_t len, int coll) {
    size_t used = 0;
    out[0] = '\0';
    for (int i = 0; i < hcomm_nalgos; i++) {
        if (coll >= 0 && hcomm_algos[i].coll != (hcomm_coll_t)coll) continue;
        int dup = 0; /* a name several collectives share appears once */
        for (int j = 0; j < i && coll < 0; j++)
            dup |= strcmp(hcomm_algos[j].name, hcomm_algos[i].name) == 0;
        if (dup) continue;
        int w = snprintf(out + used, len - used, "%s%s", used ? ", " : "",
                         hcomm_algos[i].name);
        if (w < 0 || (size_t)w >= len - used) return;
        used += (size_t)w;
    }
}

static int coll_by_name(const char *name) {
    for (int c = 0; c < HCOMM_COLL_COUNT; c++)
        if (strcmp(hcomm_coll_name((hcomm_coll_t)c), name) == 0) return c;
    if (strcmp(name, "broadcast") == 0) return HCOMM_COLL_BCAST;
    return -1;
}

/* One item: "name" (every collective that has it) or "coll=name". */
static hcomm_status_t parse_item(const char *item, const hcomm_algo_t **table) {
    char names[512];
    const char *eq = strchr(item, '=');
    if (!eq) {
        int found = 0;
        for (int i = 0; i < hcomm_nalgos; i++) {
            if (strcmp(hcomm_algos[i].name, item) != 0) continue;
            table[hcomm_algos[i].coll] = &hcomm_algos[i];
            found = 1;
        }
        if (found) return HCOMM_SUCCESS;
        list_names(names, sizeof(names), -1);
        return hcomm_error(HCOMM_ERR_INVALID_ARG,
                           "HCOMM_ALGO: unknown algorithm '%s'; valid: %s",
                           item, names);
    }
    char coll_name[64];
    size_t n = (size_t)(eq - item);
    if (n >= sizeof(coll_name)) n = sizeof(coll_name) - 1;
    memcpy(coll_name, item, n);
    coll_name[n] = '\0';
    int coll = coll_by_name(coll_name);
    if (coll < 0)
        return hcomm_error(HCOMM_ERR_INVALID_ARG,
                           "HCOMM_ALGO: unknown collective '%s'; valid: "
                           "allreduce, allgather, reduce_scatter, bcast, "
                           "reduce, alltoall, barrier, gather, scatter",
                           coll_name);
    const hcomm_algo_t *a = hcomm_algo_find((hcomm_coll_t)coll, eq + 1);
    if (!a) {
        list_names(names, sizeof(names), coll);
        return hcomm_error(HCOMM_ERR_INVALID_ARG,
                           "HCOMM_ALGO: %s has no algorithm '%s'; valid: %s",
                           coll_name, eq + 1, names[0] ? names : "(none)");
    }
    table[coll] = a;
    return HCOMM_SUCCESS;
}

hcomm_status_t hcomm_select_configure(const char *spec) {
    const hcomm_algo_t *table[HCOMM_COLL_COUNT] = {0};
    char buf[512];
    if (strlen(spec) >= sizeof(buf))
        return hcomm_error(HCOMM_ERR_INVALID_ARG, "HCOMM_ALGO is too long");
    strcpy(buf, spec);
    char *save = NULL;
    for (char *item = strtok_r(buf, ",", &save); item;
         item = strtok_r(NULL, ",", &save)) {
        hcomm_status_t st = parse_item(item, table);
        if (st != HCOMM_SUCCESS) return st;
    }
    memcpy(forced, table, sizeof(forced));
    return HCOMM_SUCCESS;
}

int hcomm_select_is_forced(hcomm_coll_t coll) {
    return forced[coll] != NULL;
}

static const hcomm_algo_t *by_name(hcomm_coll_t coll, const char *name) {
    return hcomm_algo_find(coll, name);
}

/* bytes is count * element size: the whole buffer for allreduce, bcast
 * and reduce, one rank's block for allgather, reduce_scatter, alltoall,
 * gather and scatter. Small messages are latency bound: fewest rounds
 * (recursive, Bruck, trees). Large ones are bandwidth bound: rings and
 * pairwise exchanges that move each byte the fewest times. */
const hcomm_algo_t *hcomm_select(hcomm_coll_t coll, size_t bytes, int size,
                                 int nnodes) {
    size_t total = bytes * (size_t)size;
    const char *name = NULL;
    if (forced[coll]) return forced[coll];
    if (nnodes >= 4 &&
        (coll == HCOMM_COLL_ALLREDUCE || coll == HCOMM_COLL_BCAST)) {
        const hcomm_select_row_t *row =
            hcomm_select_table_find(coll, bytes, size, nnodes);
        const hcomm_algo_t *a = row ? by_name(coll, row->algo) : NULL;
        if (a) return a;
    }
    switch (coll) {
    case HCOMM_COLL_ALLREDUCE:
        /* Several nodes: past the latency-bound sizes, cross between nodes
         * once per node. */
        if (nnodes > 1 && bytes > 8192)
            name = "hierarchical";
        else if (bytes <= 8192 || size == 1)
            name = "recursive_doubling";
        else if (bytes <= (512u << 10) && size > 2)
            name = "rabenseifner";
        else
            name = "ring";
        break;
    case HCOMM_COLL_ALLGATHER:
        if (nnodes > 1 && total > (64u << 10))
            name = "hierarchical";
        else
            name = total <= (64u << 10) && size > 2 ? "bruck" : "ring";
        break;
    case HCOMM_COLL_REDUCE_SCATTER:
        if (nnodes > 1 && total > (64u << 10))
            name = "hierarchical";
        else
            name =
                total <= (64u << 10) && size > 2 ? "recursive_halving" : "ring";
        break;
    case HCOMM_COLL_BCAST:
        if (nnodes > 1)
            name = "hierarchical";
        else
            name = bytes <= (256u << 10) || size <= 2 ? "binomial"
                                                      : "scatter_allgather";
        break;
    case HCOMM_COLL_REDUCE:
        /* Even for two ranks: each reduces half, the root receives half. */
        name = bytes <= (256u << 10) ? "binomial" : "reduce_scatter_gather";
        break;
    case HCOMM_COLL_ALLTOALL:
        name = bytes <= 256 && size > 4 ? "bruck" : "pairwise";
        break;
    default:
        break;
    }
    if (name) return by_name(coll, name);
    /* One algorithm: the table's first entry for the collective. */
    for (int i = 0; i < hcomm_nalgos; i++)
        if (hcomm_algos[i].coll == coll) return &hcomm_algos[i];
    return NULL;
}
