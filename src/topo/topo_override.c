/* HCOMM_OVERRIDE_TOPO: the JSON file that states the nodes, the
 * MPI_COMM_WORLD ranks on each, and their devices (format in topo.h). Pure: no
 * MPI, so that unit tests feed it files. */
#include "core/log.h"
#include "topo/topo.h"

#include <ctype.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Where a problem is, as a JSON path, for the error message. */
typedef struct {
    const char *file;
    char where[96];
} ctx_t;

static hcomm_status_t bad(const ctx_t *cx, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static hcomm_status_t bad(const ctx_t *cx, const char *fmt, ...) {
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    return hcomm_error(HCOMM_ERR_INVALID_ARG,
                       "HCOMM_OVERRIDE_TOPO file %s: %s%s%s", cx->file,
                       cx->where, cx->where[0] ? ": " : "", what);
}

static const char *type_name(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
        return "an integer";
    case JSON_REAL:
        return "a real number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    case JSON_NULL:
        return "null";
    }
    return "a JSON value";
}

/* Unknown keys are errors: a misspelt "rank" would otherwise leave a node
 * without its ranks, or a misspelt "gpu" drop devices, without a word. */
static hcomm_status_t only_keys(ctx_t *cx, json_t *obj,
                                const char *const *known) {
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        int ok = 0;
        for (const char *const *k = known; *k && !ok; k++)
            ok = strcmp(key, *k) == 0;
        if (!ok) return bad(cx, "unknown key \"%s\"", key);
    }
    return HCOMM_SUCCESS;
}

/* A PCI bus id exactly as hwloc writes it ("dddd:bb:dd.f", lower-case
 * hex), into out; 0 for anything else. Checked character by character:
 * sscanf's %x would take leading blanks, a sign or 0x, and so a string far
 * longer than the field. */
#define PCI_FORM "hhhh:hh:hh.h"
_Static_assert(sizeof(PCI_FORM) <= HCOMM_TOPO_PCI_LEN, "an id fits pci");

static int read_pci(const char *s, char out[HCOMM_TOPO_PCI_LEN]) {
    static const char form[] = PCI_FORM;
    for (size_t i = 0; i < sizeof(form); i++) {
        int hex = form[i] == 'h' && isxdigit((unsigned char)s[i]);
        if (!hex && s[i] != form[i]) return 0; /* the '\0's match too */
    }
    for (size_t i = 0; i < sizeof(form); i++)
        out[i] = (char)tolower((unsigned char)s[i]);
    return 1;
}

/* A device's name, into d. */
static hcomm_status_t read_dev_name(ctx_t *cx, json_t *v, hcomm_topo_dev_t *d) {
    const char *s = json_string_value(v);
    if (!s) return bad(cx, "expected a string, got %s", type_name(v));
    if (!s[0] || strlen(s) >= HCOMM_TOPO_NAME_LEN)
        return bad(cx, "a device name needs 1 to %d characters",
                   HCOMM_TOPO_NAME_LEN - 1);
    snprintf(d->name, sizeof(d->name), "%s", s);
    read_pci(s, d->pci);
    return HCOMM_SUCCESS;
}

/* A NIC's "ranks": node's ranks, appended to n->nic_ranks[*used...]. */
static hcomm_status_t read_nic_ranks(ctx_t *cx, json_t *ranks, int node,
                                     const hcomm_topo_override_t *ov,
                                     hcomm_topo_onode_t *n, int *used) {
    size_t i;
    json_t *v;
    if (!json_is_array(ranks) || json_array_size(ranks) == 0 ||
        json_array_size(ranks) > (size_t)ov->world_size)
        return bad(cx, "\"ranks\" must be an array of 1 to %d ranks",
                   ov->world_size);
    json_array_foreach(ranks, i, v) {
        json_int_t r = json_is_integer(v) ? json_integer_value(v) : -1;
        if (r < 0 || r >= ov->world_size || ov->node_of[r] != node)
            return bad(cx, "ranks[%zu] is not a rank of this node", i);
        n->nic_ranks[(*used)++] = (int)r;
    }
    return HCOMM_SUCCESS;
}

/* "gpus" or "nics": an array of non-empty strings; a NIC may also be
 * {"name": ..., "ranks": [...]}, near those ranks of the node only. */
static hcomm_status_t read_devs(ctx_t *cx, json_t *node, int index,
                                const hcomm_topo_override_t *ov,
                                hcomm_topo_onode_t *n, const char *key) {
    static const char *const known[] = {"name", "ranks", NULL};
    int nics = strcmp(key, "nics") == 0, used = 0;
    int *count = nics ? &n->nnics : &n->ngpus;
    hcomm_topo_dev_t **out = nics ? &n->nics : &n->gpus;
    json_t *arr = json_object_get(node, key);
    size_t base = strlen(cx->where), i;
    json_t *v;
    hcomm_status_t st;
    *count = -1;
    if (!arr) return HCOMM_SUCCESS;
    snprintf(cx->where + base, sizeof(cx->where) - base, ".%s", key);
    if (!json_is_array(arr))
        return bad(cx, "expected an array of strings, got %s", type_name(arr));
    if (json_array_size(arr) > HCOMM_TOPO_MAX_DEVS)
        return bad(cx, "more than %d devices", HCOMM_TOPO_MAX_DEVS);
    *out = calloc(json_array_size(arr) + 1, sizeof(**out));
    if (!*out)
        return hcomm_error(HCOMM_ERR_NO_MEMORY, "no memory for %s", cx->file);
    json_array_foreach(arr, i, v) {
        snprintf(cx->where + base, sizeof(cx->where) - base, ".%s[%zu]", key,
                 i);
        json_t *name = v, *ranks = NULL;
        if (nics && json_is_object(v)) {
            if ((st = only_keys(cx, v, known)) != HCOMM_SUCCESS) return st;
            name = json_object_get(v, "name");
            ranks = json_object_get(v, "ranks");
            if (!name) return bad(cx, "the NIC has no \"name\"");
        }
        if ((st = read_dev_name(cx, name, &(*out)[i])) != HCOMM_SUCCESS)
            return st;
        if (ranks && !n->nic_first) { /* the first NIC that names ranks */
            n->nic_first = calloc(json_array_size(arr) + 1, sizeof(int));
            n->nic_ranks = malloc((size_t)ov->world_size *
                                  json_array_size(arr) * sizeof(int));
            if (!n->nic_first || !n->nic_ranks)
                return hcomm_error(HCOMM_ERR_NO_MEMORY, "no memory for %s",
                                   cx->file);
        }
        if (ranks && (st = read_nic_ranks(cx, ranks, index, ov, n, &used)) !=
                         HCOMM_SUCCESS)
            return st;
        if (n->nic_first) n->nic_first[i + 1] = used;
    }
    *count = (int)json_array_size(arr);
    cx->where[base] = '\0';
    return HCOMM_SUCCESS;
}

/* One entry of "gpu_links": a stated word, "self" on the diagonal only,
 * and the same both ways (row i is read after rows 0 to i - 1). */
static hcomm_status_t read_link(ctx_t *cx, json_t *v, hcomm_topo_onode_t *n,
                                int i, int j) {
    const char *s = json_string_value(v);
    const char *want = i == j ? "\"self\" (a GPU's link to itself)"
                              : "\"nvlink\", \"pcie\" or \"none\"";
    hcomm_gpu_link_t *links = n->gpu_links, link;
    if (!s) return bad(cx, "expected %s, got %s", want, type_name(v));
    if (hcomm_gpu_link_parse(s, &link) != 0 ||
        (i == j) != (link == HCOMM_GPU_LINK_SAME))
        return bad(cx, "expected %s, got \"%s\"", want, s);
    if (j < i && links[j * n->ngpus + i] != link)
        return bad(cx,
                   "\"%s\", but gpu_links[%d][%d] is \"%s\" (a link joins "
                   "both GPUs)",
                   s, j, i, hcomm_gpu_link_name(links[j * n->ngpus + i]));
    links[i * n->ngpus + j] = link;
    return HCOMM_SUCCESS;
}

/* "gpu_links": how the node's "gpus" reach each other, a square matrix in
 * their order. */
static hcomm_status_t read_gpu_links(ctx_t *cx, json_t *node,
                                     hcomm_topo_onode_t *n) {
    json_t *rows = json_object_get(node, "gpu_links"), *row, *v;
    size_t base = strlen(cx->where), i, j;
    if (!rows) return HCOMM_SUCCESS;
    if (n->ngpus < 0)
        return bad(cx, "\"gpu_links\" needs \"gpus\" (the GPUs it links, in "
                       "order)");
    size_t g = (size_t)n->ngpus;
    snprintf(cx->where + base, sizeof(cx->where) - base, ".gpu_links");
    if (!json_is_array(rows))
        return bad(cx, "expected an array of rows, got %s", type_name(rows));
    if (json_array_size(rows) != g)
        return bad(cx, "expected %zu rows (one per GPU of \"gpus\"), got %zu",
                   g, json_array_size(rows));
    n->gpu_links = calloc(g * g + 1, sizeof(*n->gpu_links));
    if (!n->gpu_links)
        return hcomm_error(HCOMM_ERR_NO_MEMORY, "no memory for %s", cx->file);
    json_array_foreach(rows, i, row) {
        snprintf(cx->where + base, sizeof(cx->where) - base, ".gpu_links[%zu]",
                 i);
        if (!json_is_array(row))
            return bad(cx, "expected an array of links, got %s",
                       type_name(row));
        if (json_array_size(row) != g)
            return bad(cx,
                       "expected %zu links (one per GPU of \"gpus\"), got %zu",
                       g, json_array_size(row));
        json_array_foreach(row, j, v) {
            snprintf(cx->where + base, sizeof(cx->where) - base,
                     ".gpu_links[%zu][%zu]", i, j);
            hcomm_status_t st = read_link(cx, v, n, (int)i, (int)j);
            if (st != HCOMM_SUCCESS) return st;
        }
    }
    cx->where[base] = '\0';
    return HCOMM_SUCCESS;
}

static hcomm_status_t read_ranks(ctx_t *cx, json_t *node, int index,
                                 hcomm_topo_override_t *ov) {
    json_t *ranks = json_object_get(node, "ranks"), *v;
    size_t base = strlen(cx->where), i;
    if (!ranks) return bad(cx, "the node has no \"ranks\"");
    snprintf(cx->where + base, sizeof(cx->where) - base, ".ranks");
    if (!json_is_array(ranks))
        return bad(cx, "expected an array of ranks, got %s", type_name(ranks));
    if (json_array_size(ranks) == 0)
        return bad(cx, "empty: a node needs at least one rank");
    json_array_foreach(ranks, i, v) {
        snprintf(cx->where + base, sizeof(cx->where) - base, ".ranks[%zu]", i);
        if (!json_is_integer(v))
            return bad(cx, "expected an integer rank, got %s", type_name(v));
        json_int_t r = json_integer_value(v);
        if (r < 0 || r >= ov->world_size)
            return bad(cx, "rank %lld is not in MPI_COMM_WORLD (ranks 0 to %d)",
                       (long long)r, ov->world_size - 1);
        if (ov->node_of[r] >= 0)
            return bad(cx, "rank %lld is listed twice (also on node \"%s\")",
                       (long long)r, ov->nodes[ov->node_of[r]].name);
        ov->node_of[r] = index;
    }
    cx->where[base] = '\0';
    return HCOMM_SUCCESS;
}

static hcomm_status_t read_node(ctx_t *cx, json_t *node, int index,
                                hcomm_topo_override_t *ov) {
    static const char *const known[] = {"name", "ranks",     "gpus",
                                        "nics", "gpu_links", NULL};
    hcomm_topo_onode_t *n = &ov->nodes[index];
    hcomm_status_t st;
    n->ngpus = n->nnics = -1;
    snprintf(cx->where, sizeof(cx->where), "nodes[%d]", index);
    if (!json_is_object(node))
        return bad(cx, "expected an object, got %s", type_name(node));
    if ((st = only_keys(cx, node, known)) != HCOMM_SUCCESS) return st;
    json_t *name = json_object_get(node, "name");
    if (name) {
        const char *s = json_string_value(name);
        if (!s)
            return bad(cx, "\"name\" must be a string, got %s",
                       type_name(name));
        if (!s[0] || strlen(s) >= HCOMM_TOPO_NAME_LEN)
            return bad(cx, "a node name needs 1 to %d characters",
                       HCOMM_TOPO_NAME_LEN - 1);
        for (int j = 0; j < index; j++)
            if (strcmp(ov->nodes[j].name, s) == 0)
                return bad(cx, "node name \"%s\" is used twice", s);
        strcpy(n->name, s);
    } else {
        snprintf(n->name, sizeof(n->name), "node%d", index);
    }
    if ((st = read_ranks(cx, node, index, ov)) != HCOMM_SUCCESS) return st;
    if ((st = read_devs(cx, node, index, ov, n, "gpus")) != HCOMM_SUCCESS ||
        (st = read_gpu_links(cx, node, n)) != HCOMM_SUCCESS)
        return st;
    return read_devs(cx, node, index, ov, n, "nics");
}

/* Every rank on exactly one node: report the first few missing. */
static hcomm_status_t check_all_placed(ctx_t *cx, hcomm_topo_override_t *ov) {
    char list[128] = "";
    int missing = 0;
    for (int r = 0; r < ov->world_size; r++) {
        if (ov->node_of[r] >= 0) continue;
        if (++missing <= 8) {
            size_t len = strlen(list);
            snprintf(list + len, sizeof(list) - len, "%s%d",
                     missing > 1 ? ", " : "", r);
        }
    }
    if (!missing) return HCOMM_SUCCESS;
    cx->where[0] = '\0';
    return bad(cx, "%d of the %d MPI_COMM_WORLD ranks are on no node: %s%s",
               missing, ov->world_size, list, missing > 8 ? ", ..." : "");
}

static hcomm_status_t read_root(ctx_t *cx, json_t *root,
                                hcomm_topo_override_t *ov) {
    static const char *const known[] = {"nodes", NULL};
    hcomm_status_t st;
    if (!json_is_object(root))
        return bad(cx, "the file must hold an object, not %s", type_name(root));
    if ((st = only_keys(cx, root, known)) != HCOMM_SUCCESS) return st;
    json_t *nodes = json_object_get(root, "nodes");
    if (!nodes) return bad(cx, "no \"nodes\" array");
    snprintf(cx->where, sizeof(cx->where), "nodes");
    if (!json_is_array(nodes))
        return bad(cx, "expected an array of nodes, got %s", type_name(nodes));
    if (json_array_size(nodes) == 0)
        return bad(cx, "empty: list at least one node");
    ov->node_of = malloc((size_t)ov->world_size * sizeof(int));
    ov->nodes = calloc(json_array_size(nodes), sizeof(*ov->nodes));
    if (!ov->node_of || !ov->nodes)
        return hcomm_error(HCOMM_ERR_NO_MEMORY, "no memory for %s", cx->file);
    for (int r = 0; r < ov->world_size; r++)
        ov->node_of[r] = -1;
    size_t i;
    json_t *node;
    json_array_foreach(nodes, i, node) {
        ov->nnodes = (int)i + 1; /* so that free sees this node's arrays */
        if ((st = read_node(cx, node, (int)i, ov)) != HCOMM_SUCCESS) return st;
    }
    return check_all_placed(cx, ov);
}

hcomm_status_t hcomm_topo_override_load(const char *path, int world_size,
                                        hcomm_topo_override_t *out) {
    ctx_t cx = {.file = path, .where = ""};
    json_error_t err;
    memset(out, 0, sizeof(*out));
    out->world_size = world_size;
    /* Duplicate keys would make the file mean what the last one says. */
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &err);
    if (!root) {
        if (err.line > 0)
            return hcomm_error(HCOMM_ERR_INVALID_ARG,
                               "HCOMM_OVERRIDE_TOPO file %s: line %d, column "
                               "%d: %s",
                               path, err.line, err.column, err.text);
        return hcomm_error(HCOMM_ERR_INVALID_ARG,
                           "HCOMM_OVERRIDE_TOPO file %s: %s", path, err.text);
    }
    hcomm_status_t st = read_root(&cx, root, out);
    json_decref(root);
    if (st != HCOMM_SUCCESS) hcomm_topo_override_free(out);
    return st;
}

void hcomm_topo_override_free(hcomm_topo_override_t *ov) {
    for (int n = 0; ov->nodes && n < ov->nnodes; n++) {
        free(ov->nodes[n].gpus);
        free(ov->nodes[n].nics);
        free(ov->nodes[n].nic_first);
        free(ov->nodes[n].nic_ranks);
        free(ov->nodes[n].gpu_links);
    }
    free(ov->nodes);
    free(ov->node_of);
    memset(ov, 0, sizeof(*ov));
}
