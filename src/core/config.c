/* The configuration table and its parser. */
#include "core/config.h"
#include "core/size_parse.h"
#include "core/log.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

extern char **environ;

typedef enum {
    CFG_SIZE,   /* bytes, with K/M/G suffixes */
    CFG_INT,    /* integer >= 0 */
    CFG_DOUBLE, /* seconds */
    CFG_CHOICE, /* one of a '|' separated list */
    CFG_LEVEL,  /* log level name or number */
    CFG_STRING  /* validated by its user */
} cfg_type_t;

typedef struct {
    const char *name;
    cfg_type_t type;
    const char *default_value;
    const char *choices; /* CFG_CHOICE */
    const char *doc;
} cfg_entry_t;

/* Order matches hcomm_cfg_id_t. */
static const cfg_entry_t table[HCOMM_CFG_COUNT] = {
    {"HCOMM_DEBUG", CFG_LEVEL, "warn", NULL,
     "Log level on stderr: none, error, warn, info, debug, trace (or 0-5)."},
    {"HCOMM_TRANSPORT", CFG_CHOICE, "auto", "auto|ucx|mpi",
     "Transport between processes: ucx, mpi (PMPI point-to-point), or auto "
     "(UCX when it initialises, else MPI)."},
    {"HCOMM_ALGO", CFG_STRING, "", NULL,
     "Force algorithms: one name for every collective (`ring`) or a list "
     "per collective (`allreduce=ring,bcast=binomial`). Empty: chosen by size "
     "and rank count."},
    {"HCOMM_CHUNK_SIZE", CFG_SIZE, "1M", NULL,
     "Pipelining granularity of large messages, in bytes (K, M, G suffixes); "
     "at least 4K."},
    {"HCOMM_BUFFER_POOL_SIZE", CFG_SIZE, "256M", NULL,
     "Most bytes of scratch memory kept cached for reuse; scratch beyond it "
     "is allocated and freed per call."},
    {"HCOMM_TIMEOUT", CFG_DOUBLE, "300", NULL,
     "Seconds a call may wait for its peers (a non-blocking one: tested "
     "back to back) before it fails with HCOMM_ERR_TIMEOUT, naming the "
     "operation and the peers it waited for."},
    {"HCOMM_SPIN_COUNT", CFG_INT, "auto", NULL,
     "Idle polls before a waiting rank yields the CPU on each poll; auto: "
     "0 when a node has more ranks than cores, else 20000."},
    {"HCOMM_MPI_INTERCEPT", CFG_STRING, "all", NULL,
     "libhcomm_mpi.so: the MPI calls HCOMM takes: all, none (pure "
     "pass-through) or a list of allreduce, iallreduce, allgather, bcast, "
     "reduce, reduce_scatter_block, alltoall, barrier, each with an optional "
     "window of sizes in bytes as hcomm_perf reports them (`allreduce:32K`, "
     "`bcast:512-1M`)."},
    {"HCOMM_MPI_STATS", CFG_INT, "0", NULL,
     "libhcomm_mpi.so: 1 prints on stderr at MPI_Finalize, per rank and "
     "collective, the calls HCOMM took and those left to MPI, and why."},
    {"HCOMM_ENABLE_TOPOLOGY_AWARE", CFG_CHOICE, "1", "0|1",
     "1: algorithms may use the node map; 0: it is still found and shown by "
     "hcomm_info, but algorithms treat every communicator as flat."},
    {"HCOMM_OVERRIDE_TOPO", CFG_STRING, "", NULL,
     "Path of a JSON file stating the nodes in place of the detected ones: "
     "`{\"nodes\": [{\"name\": \"n0\", \"ranks\": [0, 1], \"gpus\": "
     "[...], \"nics\": [...]}, ...]}` with every MPI_COMM_WORLD rank once; "
     "name, gpus, nics and gpu_links optional, other keys an error; a NIC "
     "may be `{\"name\": ..., \"ranks\": [...]}` (near those ranks only); "
     "gpu_links: the links between the node's gpus, a square matrix of "
     "\"self\" (diagonal), \"nvlink\", \"pcie\" or \"none\"."},
    {"HCOMM_SHM_SLOT_SIZE", CFG_SIZE, "256K", NULL,
     "Bytes each rank stages per round in the node's shared segment (two "
     "slots per rank); 0 turns the shared-memory path off."},
    {"HCOMM_FAST_PATH_SMALL_MSG", CFG_SIZE, "16K", NULL,
     "Largest allreduce, in bytes, that every rank reduces whole from the "
     "shared segment (one-shot), times the n - 1 copies each rank reads; at "
     "2 ranks one-shot takes every call below a slot "
     "(HCOMM_SHM_SLOT_SIZE). 0 turns that path off."},
    {"HCOMM_CUDA", CFG_CHOICE, "auto", "auto|0",
     "auto: buffers in GPU memory are recognised (through the CUDA driver, "
     "once the program uses CUDA); 0: every buffer is host memory and the "
     "driver is never loaded."},
    {"HCOMM_CUDA_STAGING", CFG_CHOICE, "auto", "auto|1",
     "Device data between processes: auto: UCX carries it where UCX has "
     "CUDA support, else it goes through pinned host buffers, pipelined; 1: "
     "always through pinned host buffers."},
    {"HCOMM_CUDA_CHUNK_SIZE", CFG_SIZE, "16M", NULL,
     "HCOMM_CHUNK_SIZE of the plans on a communicator whose every rank's "
     "UCX carries device memory, and of the node stages of a hierarchical "
     "call on device memory: fewer, larger messages, each of which costs "
     "UCX several microseconds on a GPU; at least 4K."},
    {"HCOMM_MEMLOG", CFG_CHOICE, "0", "0|1",
     "1: log on stderr every growth and release of the GPU scratch and "
     "pinned staging pools, with the GPU's free memory."},
    {"HCOMM_CUDA_IPC", CFG_CHOICE, "auto", "0|auto",
     "Device buffers when every rank is on one node: auto: AllReduce, "
     "ReduceScatter, AllGather and Broadcast run as kernels that read the "
     "peers' GPU memory through CUDA IPC; 0: through the plans."},
    {"HCOMM_CUDA_IPC_ALGO", CFG_CHOICE, "auto", "auto|oneshot|twoshot",
     "The CUDA IPC AllReduce: oneshot (every rank reduces the whole "
     "buffer), twoshot (reduce-scatter then allgather), or auto by size."},
    {"HCOMM_CUDA_IPC_BUFFER", CFG_SIZE, "8M", NULL,
     "Bytes of each of the two device buffers per rank that peers read "
     "through CUDA IPC; larger calls go through them in rounds."},
    {"HCOMM_CUDA_IPC_ONESHOT_MAX", CFG_SIZE, "8M", NULL,
     "Largest AllReduce (bytes) that the CUDA IPC path reduces in one shot "
     "with auto; larger ones take two shots."},
    {"HCOMM_CUDA_IPC_BLOCKS", CFG_INT, "32", NULL,
     "Most thread blocks of a CUDA IPC kernel (1 to 64); each moves at "
     "least 32 KiB of a round, or 8 KiB in up to 8 blocks."},
    {"HCOMM_CUDA_IPC_DIRECT_MIN", CFG_SIZE, "4M", NULL,
     "Smallest CUDA IPC call (bytes per rank's buffer) that reads and "
     "writes the peers' buffers in place: ordinary device buffers are then "
     "mapped by the peers (CUDA IPC handles, kept until the communicator is "
     "freed), and an AllReduce on such or registered buffers takes two "
     "shots in place rather than one through the workspaces."},
    {"HCOMM_CUDA_IPC_EARLY", CFG_CHOICE, "auto", "0|auto",
     "auto: a CUDA IPC kernel that follows another on its stream is "
     "started while that one ends (programmatic dependent launch, compute "
     "capability 9.0 and up), where the GPU holds both kernels of every "
     "rank at once; 0: once it has ended."},
    {"HCOMM_CUDA_NODE_STAGES_MAX", CFG_SIZE, "256K", NULL,
     "Largest AllReduce (bytes) of device memory on several nodes that runs "
     "as node stages (CUDA IPC inside a node, every local rank's rail "
     "across); larger ones, and broadcasts, take the hierarchical plans. "
     "0: never."},
    {"HCOMM_DEBUG_SUBSYS", CFG_STRING, "all", NULL,
     "Parts whose info, debug and trace lines are logged: all, or a list of "
     "init, coll, ucx, shm, cuda, topo, mpi (`ucx,shm`); errors and warnings "
     "are always logged."},
    {"HCOMM_DEBUG_FILE", CFG_STRING, "", NULL,
     "Log to this file instead of stderr (appended); %h is replaced by the "
     "host name, %p by the process id (`/tmp/hcomm.%h.%p.log`)."},
    {"HCOMM_PROFILE", CFG_STRING, "", NULL,
     "Record every call in this file, one per rank: %r is replaced by the "
     "MPI_COMM_WORLD rank (else `.<rank>` is appended), %h by the host name, "
     "%p by the process id. tools/hcomm_prof merges the files."},
    {"HCOMM_PROFILE_FORMAT", CFG_CHOICE, "json", "json|chrome",
     "json: one JSON object per call and line; chrome: the Chrome trace "
     "event format (open the files in Perfetto)."},
    {"HCOMM_FLIGHT_RECORDER", CFG_STRING, "/tmp/hcomm-flight.%h.%p.txt", NULL,
     "Where every rank writes the last calls of each communicator when a "
     "call times out or the process gets SIGUSR1 (%h host, %p pid, %r "
     "rank); empty: never."},
    {"HCOMM_FLIGHT_RECORDER_DEPTH", CFG_INT, "64", NULL,
     "Calls the flight recorder keeps per communicator (0: none)."},
    {"HCOMM_CHECK", CFG_CHOICE, "0", "0|1",
     "1: before every collective, the ranks compare what they passed "
     "(collective, count, type, operation, root, host or GPU memory) and "
     "all fail with HCOMM_ERR_MISMATCH, naming ranks and fields, when they "
     "differ; costs an MPI allgather per call."},
    {"HCOMM_COMPRESS", CFG_STRING, "none", NULL,
     "What hcomm_allreduce_ex sends without options: none, bf16, fp16 "
     "(float32 sums as 16-bit numbers), topk:<density> or onebit (lossy, "
     "without error feedback; pass a state in the options for it), auto "
     "(bf16 for the sizes where a first call measured it 20% faster), or "
     "auto:topk:<density> or auto:onebit (that scheme too, where 20% faster "
     "than the best less lossy one)."},
    {"HCOMM_USE_MULTIPATH", CFG_CHOICE, "1", "0|1",
     "1: messages between nodes spread over every network device of the "
     "node (those UCX_NET_DEVICES names, where it names several), in "
     "proportion to each one's bandwidth measured at the first communicator "
     "across nodes, a rank's collective messages of up to 16 KiB over its "
     "nearest device (where some are nearer than others); 0: UCX picks."},
    {"HCOMM_SOCKET_THREADS", CFG_INT, "1", NULL,
     "With multipath, the connections (UCX contexts) per network device, 1 "
     "to 8 in all."},
};

typedef struct {
    char text[512];
    long long i;
    double d;
    hcomm_cfg_src_t src;
} cfg_value_t;

static cfg_value_t values[HCOMM_CFG_COUNT];

/* Sizes with a floor. A chunk of a few bytes turns one large call into
 * hundreds of thousands of plan steps and messages (HCOMM_CHUNK_SIZE=1
 * made a 300,000-float allreduce run past the timeout): below a page it
 * buys no pipelining, only overhead. */
static const long long size_min[HCOMM_CFG_COUNT] = {
    [HCOMM_CFG_CHUNK_SIZE] = 4096,
    [HCOMM_CFG_CUDA_CHUNK_SIZE] = 4096,
};

static int parse_size(const char *s, long long *out) {
    size_t v;
    if (hcomm_parse_size(s, &v) || v > (size_t)LLONG_MAX) return -1;
    *out = (long long)v;
    return 0;
}

static int parse_level(const char *s, long long *out) {
    static const char *names[] = {"none", "error", "warn",
                                  "info", "debug", "trace"};
    for (int i = 0; i < 6; i++) {
        if (strcasecmp(s, names[i]) == 0) {
            *out = i;
            return 0;
        }
    }
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end || v < 0 || v > 5) return -1;
    *out = v;
    return 0;
}

static int in_choices(const char *choices, const char *s) {
    size_t n = strlen(s);
    for (const char *p = choices; *p;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && strncmp(p, s, n) == 0) return 1;
        p += len + (bar ? 1 : 0);
    }
    return 0;
}

static hcomm_status_t parse_value(int id, const char *s, hcomm_cfg_src_t src) {
    const cfg_entry_t *e = &table[id];
    cfg_value_t v = {.src = src};
    if (strlen(s) >= sizeof(v.text))
        return hcomm_error(HCOMM_ERR_INVALID_ARG, "%s: value too long",
                           e->name);
    strcpy(v.text, s);
    int bad = 0;
    switch (e->type) {
    case CFG_SIZE:
        bad = parse_size(s, &v.i);
        if (!bad && v.i < size_min[id])
            return hcomm_error(HCOMM_ERR_INVALID_ARG,
                               "%s=%s: below the smallest allowed, %lld "
                               "bytes (4K)",
                               e->name, s, size_min[id]);
        break;
    case CFG_INT:
        if (strcmp(s, "auto") == 0) {
            v.i = -1;
        } else {
            char *end;
            errno = 0;
            v.i = strtoll(s, &end, 10);
            bad = end == s || *end || errno || v.i < 0;
        }
        break;
    case CFG_DOUBLE: {
        char *end;
        v.d = strtod(s, &end);
        bad = end == s || *end || !(v.d > 0);
        break;
    }
    case CFG_CHOICE:
        bad = !in_choices(e->choices, s);
        break;
    case CFG_LEVEL:
        bad = parse_level(s, &v.i);
        break;
    case CFG_STRING:
        break;
    }
    if (bad) {
        static const char *expect[] = {
            "a size in bytes (e.g. 4096, 256K, 1M)",
            "an integer >= 0 or auto",
            "a number > 0",
            NULL,
            "none|error|warn|info|debug|trace or 0-5",
            NULL};
        return hcomm_error(
            HCOMM_ERR_INVALID_ARG, "%s=%s: expected %s", e->name, s,
            e->type == CFG_CHOICE ? e->choices : expect[e->type]);
    }
    values[id] = v;
    if (id == HCOMM_CFG_DEBUG) hcomm_log_level = (int)v.i;
    return HCOMM_SUCCESS;
}

static int find(const char *name) {
    for (int i = 0; i < HCOMM_CFG_COUNT; i++)
        if (strcmp(table[i].name, name) == 0) return i;
    return -1;
}

/* Levenshtein distance, for the typo warning. */
static size_t edit_distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 64 || lb > 64) return (size_t)-1;
    size_t row[65];
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (row[j] + 1 < best) best = row[j] + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

const char *hcomm_config_nearest(const char *name) {
    const char *best = NULL;
    size_t best_d = 5; /* farther than this is not a typo */
    for (int i = 0; i < HCOMM_CFG_COUNT; i++) {
        size_t d = edit_distance(name, table[i].name);
        if (d < best_d) {
            best_d = d;
            best = table[i].name;
        }
    }
    return best;
}

hcomm_status_t hcomm_config_load(void) {
    for (int i = 0; i < HCOMM_CFG_COUNT; i++) {
        hcomm_status_t st =
            parse_value(i, table[i].default_value, HCOMM_CFG_SRC_DEFAULT);
        if (st != HCOMM_SUCCESS) return st;
    }
    /* HCOMM_DEBUG first, so that the warnings below obey it. */
    for (int i = 0; i < HCOMM_CFG_COUNT; i++) {
        const char *env = getenv(table[i].name);
        if (!env) continue;
        hcomm_status_t st = parse_value(i, env, HCOMM_CFG_SRC_ENV);
        if (st != HCOMM_SUCCESS) return st;
    }
    for (char **e = environ; e && *e; e++) {
        if (strncmp(*e, "HCOMM_", 6) != 0) continue;
        char name[128];
        size_t len = strcspn(*e, "=");
        if (len >= sizeof(name)) continue;
        memcpy(name, *e, len);
        name[len] = '\0';
        if (find(name) >= 0 || strncmp(name, "HCOMM_TEST_", 11) == 0) continue;
        const char *near = hcomm_config_nearest(name);
        if (near)
            hcomm_warn("unknown variable %s: did you mean %s?", name, near);
        else
            hcomm_warn("unknown variable %s (hcomm_info lists them)", name);
    }
    return HCOMM_SUCCESS;
}

hcomm_status_t hcomm_config_set(const char *name, const char *value) {
    int id = find(name);
    if (id < 0) {
        const char *near = hcomm_config_nearest(name);
        return hcomm_error(HCOMM_ERR_INVALID_ARG, "unknown variable %s%s%s",
                           name, near ? ": did you mean " : "",
                           near ? near : "");
    }
    return parse_value(id, value, HCOMM_CFG_SRC_SET);
}

long long hcomm_cfg_int(hcomm_cfg_id_t id) {
    return values[id].i;
}

double hcomm_cfg_double(hcomm_cfg_id_t id) {
    return values[id].d;
}

const char *hcomm_cfg_str(hcomm_cfg_id_t id) {
    return values[id].text;
}

hcomm_cfg_src_t hcomm_cfg_source(hcomm_cfg_id_t id) {
    return values[id].src;
}

void hcomm_config_print_markdown(FILE *out) {
    fprintf(out, "| variable | default | meaning |\n| --- | --- | --- |\n");
    for (int i = 0; i < HCOMM_CFG_COUNT; i++)
        fprintf(out, "| `%s` | `%s` | %s |\n", table[i].name,
                table[i].default_value[0] ? table[i].default_value : "\"\"",
                table[i].doc);
}

void hcomm_config_print_values(FILE *out) {
    static const char *src[] = {"default", "environment", "set"};
    for (int i = 0; i < HCOMM_CFG_COUNT; i++)
        fprintf(out, "%s=%s (%s)\n", table[i].name, values[i].text,
                src[values[i].src]);
}
