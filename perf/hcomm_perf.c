/*
 * hcomm_perf: HCOMM against MPI, in the same run, on the same buffers,
 * after nccl-tests.
 *
 *   mpirun -np N hcomm_perf [COLLECTIVE] [options]        (-h for the list)
 *
 * For each size: one untimed call per side (it pays connection setup and
 * lets hcomm answer HCOMM_ERR_UNSUPPORTED), warmup (for the run's first
 * size, at least FIRST_WARMUP_S of it), then PERF_TRIALS trials
 * per side, alternating hcomm and MPI so that a noisy neighbour hurts both
 * alike. A trial is a barrier and then iters calls back to back; its time
 * per call is taken on the slowest rank, and the table shows the median
 * trial. Then, with -c 1, one more call per side on fresh data, checked on
 * every rank against results it computes itself (perf_report.c).
 *
 * With -D cuda the buffers are GPU memory, filled and checked through host
 * copies, and the baseline is what a program without HCOMM does: copy to
 * host, MPI_*, copy back (or, with --nccl, NCCL on the same buffers). With
 * -S hcomm's stream-ordered forms are timed, the stream synchronised once
 * per trial, as nccl-tests times NCCL.
 *
 * MPI has no avg op and no float16 or bfloat16 type: for those reductions
 * the MPI columns read n/a (timing MPI_SUM instead would compare different
 * work). Non-reducing collectives move float16/bfloat16 as MPI_UINT16_T.
 */
#define _POSIX_C_SOURCE 200809L

#include "core/size_parse.h"
#include "perf.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mpi.h>

#define ERRLEN 256
#define MAX_ITERS 100000 /* bounds the iteration raise of tiny sizes */

enum { PARSE_OK = 0, PARSE_HELP = 1, PARSE_BAD = 2 };
enum { SIDE_HCOMM = 0, SIDE_MPI = 1 };

typedef struct {
    perf_opts_t opts;
    int rank, nranks;
    hcomm_comm_t comm;    /* HCOMM_COMM_NULL with --mpi-only */
    unsigned warned;      /* collectives already reported unsupported */
    int warned_mpi_count; /* a count past INT_MAX was reported */
    int warmed;           /* the run's first size had its longer warmup */
    char nccl_na[160];    /* --nccl: why NCCL cannot run, or "" */
    perf_placement_t *placement; /* NULL: no core round trip reported */
    /* the v-forms' counts and displacements (equal blocks), per rank */
    size_t *vcounts, *vdispls;
    int *mcounts, *mdispls;
} perf_ctx_t;

typedef struct {
    void *send, *recv;
    void *hsend, *hrecv; /* -D cuda: host copies (fill, check, MPI) */
} perf_bufs_t;

/* --- options ------------------------------------------------------------ */

enum {
    OPT_MINBYTES,
    OPT_MAXBYTES,
    OPT_STEPFACTOR,
    OPT_STEPBYTES,
    OPT_ITERS,
    OPT_WARMUP,
    OPT_CHECK,
    OPT_DTYPE,
    OPT_OP,
    OPT_ROOT,
    OPT_INPLACE,
    OPT_REGISTERED,
    OPT_COLL,
    OPT_JSON,
    OPT_MPI_ONLY,
    OPT_HCOMM_ONLY,
    OPT_PMPI,
    OPT_DEVICE,
    OPT_STREAM,
    OPT_NCCL,
    OPT_REWRITE,
    OPT_CONSUME,
    OPT_HELP
};

typedef struct {
    char short_name; /* 0: long form only */
    const char *long_name;
    int has_arg;
    int id;
} opt_spec_t;

/* Long names are nccl-tests' where it has the option. */
static const opt_spec_t opt_specs[] = {
    {'b', "minbytes", 1, OPT_MINBYTES},
    {'e', "maxbytes", 1, OPT_MAXBYTES},
    {'f', "stepfactor", 1, OPT_STEPFACTOR},
    {'i', "stepbytes", 1, OPT_STEPBYTES},
    {'n', "iters", 1, OPT_ITERS},
    {'w', "warmup_iters", 1, OPT_WARMUP},
    {'c', "check", 1, OPT_CHECK},
    {'d', "datatype", 1, OPT_DTYPE},
    {'o', "op", 1, OPT_OP},
    {'r', "root", 1, OPT_ROOT},
    {'I', "inplace", 0, OPT_INPLACE},
    {'R', "registered", 0, OPT_REGISTERED},
    {'C', "collective", 1, OPT_COLL},
    {0, "json", 0, OPT_JSON},
    {0, "mpi-only", 0, OPT_MPI_ONLY},
    {0, "hcomm-only", 0, OPT_HCOMM_ONLY},
    {0, "pmpi", 0, OPT_PMPI},
    {'D', "device", 1, OPT_DEVICE},
    {'S', "stream", 0, OPT_STREAM},
    {0, "nccl", 0, OPT_NCCL},
    {0, "rewrite", 0, OPT_REWRITE},
    {0, "consume", 0, OPT_CONSUME},
    {'h', "help", 0, OPT_HELP},
};
#define NSPECS (sizeof opt_specs / sizeof opt_specs[0])

typedef struct {
    const char *name;
    int value;
} name_t;

static const name_t coll_names[] = {
    {"allreduce", PERF_ALLREDUCE},
    {"allgather", PERF_ALLGATHER},
    {"reduce_scatter", PERF_REDUCE_SCATTER},
    {"broadcast", PERF_BROADCAST},
    {"bcast", PERF_BROADCAST},
    {"reduce", PERF_REDUCE},
    {"alltoall", PERF_ALLTOALL},
    {"barrier", PERF_BARRIER},
    {"gather", PERF_GATHER},
    {"scatter", PERF_SCATTER},
    {"allgatherv", PERF_ALLGATHERV},
    {"alltoallv", PERF_ALLTOALLV},
    {"reduce_scatterv", PERF_REDUCE_SCATTERV},
    {"all", PERF_COLL_ALL},
};

static const name_t dtype_names[] = {
    {"int8", HCOMM_INT8},         {"uint8", HCOMM_UINT8},
    {"int32", HCOMM_INT32},       {"uint32", HCOMM_UINT32},
    {"int64", HCOMM_INT64},       {"uint64", HCOMM_UINT64},
    {"float16", HCOMM_FLOAT16},   {"half", HCOMM_FLOAT16},
    {"bfloat16", HCOMM_BFLOAT16}, {"float32", HCOMM_FLOAT32},
    {"float", HCOMM_FLOAT32},     {"float64", HCOMM_FLOAT64},
    {"double", HCOMM_FLOAT64},
};

static const name_t op_names[] = {
    {"sum", HCOMM_SUM}, {"prod", HCOMM_PROD}, {"max", HCOMM_MAX},
    {"min", HCOMM_MIN}, {"avg", HCOMM_AVG},
};

#define LOOKUP(table, s, out)                                                  \
    lookup(table, sizeof table / sizeof *table, s, out)

static int lookup(const name_t *t, size_t n, const char *s, int *out) {
    for (size_t i = 0; i < n; i++) {
        if (strcmp(t[i].name, s) == 0) {
            *out = t[i].value;
            return 0;
        }
    }
    return -1;
}

static void print_usage(FILE *f) {
    fputs(
        "Usage: hcomm_perf [COLLECTIVE] [options]\n"
        "Times a collective in HCOMM and in MPI, in one run, on the same "
        "buffers.\n\n"
        "Collectives: allreduce (default), allgather, reduce_scatter,\n"
        "  broadcast (bcast), reduce, alltoall, barrier, gather, scatter,\n"
        "  allgatherv, alltoallv, reduce_scatterv (equal counts: MPI's "
        "v-forms,\n"
        "  MPI_Reduce_scatter); all: each in turn.\n"
        "Options:\n"
        "  -C, --collective NAME  the collective, as an option\n"
        "  -b, --minbytes N       smallest size (default 8); suffixes K M G\n"
        "                         are powers of 1024\n"
        "  -e, --maxbytes N       largest size (default 64M)\n"
        "  -f, --stepfactor N     multiply the size by N (default 2)\n"
        "  -i, --stepbytes N      add N bytes to the size instead\n"
        "  -n, --iters N          calls per trial, at least (default 20;\n"
        "                         raised so a trial lasts >= 1 ms)\n"
        "  -w, --warmup_iters N   untimed calls per size (default 5;\n"
        "                         the first size's go on for 50 ms)\n"
        "  -c, --check 0|1        check the results of each size once "
        "(default 1)\n"
        "  -d, --datatype T       int8 uint8 int32 uint32 int64 uint64\n"
        "                         float16 (half) bfloat16 float32 (float)\n"
        "                         float64 (double); default float32\n"
        "  -o, --op OP            sum prod max min avg (default sum)\n"
        "  -r, --root N           root of broadcast, reduce, gather and\n"
        "                         scatter (default 0)\n"
        "  -I, --inplace          in place\n"
        "  -R, --registered       buffers from hcomm_mem_alloc (allreduce,\n"
        "                         allgather, broadcast), used by both sides;\n"
        "                         with -D cuda, hcomm_mem_alloc_device\n"
        "                         (those and reduce_scatter)\n"
        "      --json             one JSON object per row on stdout, nothing "
        "else\n"
        "      --mpi-only         only the MPI side (under an LD_PRELOAD "
        "interposer)\n"
        "      --hcomm-only       only the hcomm side\n"
        "      --pmpi             under an LD_PRELOAD interposer: the hcomm\n"
        "                         columns time MPI_* (the interposer), the\n"
        "                         MPI columns PMPI_* (MPI itself)\n"
        "  -D, --device host|cuda buffers in host (default) or GPU memory;\n"
        "                         with cuda the MPI columns copy to host,\n"
        "                         call MPI and copy back\n"
        "  -S, --stream           -D cuda: time hcomm's stream-ordered forms\n"
        "                         (one stream synchronisation per trial)\n"
        "      --nccl             -D cuda: NCCL instead of MPI in the second\n"
        "                         columns, on the same buffers and stream\n"
        "      --rewrite          host buffers: before each call, untimed,\n"
        "                         write every cache line of the input, as\n"
        "                         a program's new data each step (a peer\n"
        "                         then reads lines its owner just wrote);\n"
        "                         each call is timed on its own\n"
        "  -h, --help             this text\n\n"
        "Sizes as nccl-tests: the buffer of allreduce, broadcast, reduce; the\n"
        "receive buffer of allgather and gather; the send buffer of\n"
        "reduce_scatter and scatter; each buffer of alltoall (v-forms as\n"
        "theirs). busbw = algbw * 2(n-1)/n (allreduce), (n-1)/n (allgather,\n"
        "reduce_scatter, alltoall, gather, scatter), 1 (broadcast, reduce).\n",
        f);
}

static int parse_int(const char *s, long lo, long hi, int *out) {
    char *end;
    errno = 0;
    const long v = strtol(s, &end, 10);
    if (end == s || *end != '\0' || errno != 0 || v < lo || v > hi) return -1;
    *out = (int)v;
    return 0;
}

static void set_defaults(perf_opts_t *o) {
    memset(o, 0, sizeof *o);
    o->coll = PERF_ALLREDUCE;
    o->minbytes = 8;
    o->maxbytes = (size_t)64 << 20;
    o->stepfactor = 2;
    o->iters = 20;
    o->warmup = 5;
    o->check = 1;
    o->dtype = HCOMM_FLOAT32;
    o->op = HCOMM_SUM;
    o->run_hcomm = o->run_mpi = 1;
}

static int set_coll(perf_opts_t *o, int *coll_set, const char *name,
                    char *err) {
    if (*coll_set) {
        snprintf(err, ERRLEN, "more than one collective given ('%s')", name);
        return -1;
    }
    if (LOOKUP(coll_names, name, &o->coll) != 0) {
        snprintf(err, ERRLEN, "unknown collective '%s'", name);
        return -1;
    }
    *coll_set = 1;
    return 0;
}

static int bad_value(const opt_spec_t *spec, const char *v, char *err) {
    if (spec->short_name)
        snprintf(err, ERRLEN, "invalid value '%s' for -%c (--%s)", v,
                 spec->short_name, spec->long_name);
    else
        snprintf(err, ERRLEN, "invalid value '%s' for --%s", v,
                 spec->long_name);
    return -1;
}

static int set_step(perf_opts_t *o, int id, const char *v) {
    int factor;
    if (id == OPT_STEPBYTES) /* the later of -f and -i wins */
        return hcomm_parse_size(v, &o->stepbytes) || o->stepbytes == 0 ? -1 : 0;
    if (parse_int(v, 2, INT_MAX, &factor) != 0) return -1;
    o->stepfactor = (size_t)factor;
    o->stepbytes = 0;
    return 0;
}

/* Options taking a value; -1 when the value is bad. */
static int apply_value(perf_opts_t *o, int id, const char *v) {
    int x;
    switch (id) {
    case OPT_MINBYTES:
        return hcomm_parse_size(v, &o->minbytes);
    case OPT_MAXBYTES:
        return hcomm_parse_size(v, &o->maxbytes);
    case OPT_STEPFACTOR:
    case OPT_STEPBYTES:
        return set_step(o, id, v);
    case OPT_ITERS:
        return parse_int(v, 1, INT_MAX, &o->iters);
    case OPT_WARMUP:
        return parse_int(v, 0, INT_MAX, &o->warmup);
    case OPT_CHECK:
        return parse_int(v, 0, 1, &o->check);
    case OPT_ROOT:
        return parse_int(v, 0, INT_MAX, &o->root);
    case OPT_DEVICE:
        if (strcmp(v, "host") != 0 && strcmp(v, "cuda") != 0) return -1;
        o->device = strcmp(v, "cuda") == 0;
        return 0;
    case OPT_DTYPE:
        if (LOOKUP(dtype_names, v, &x) != 0) return -1;
        o->dtype = (hcomm_dtype_t)x;
        return 0;
    default: /* OPT_OP */
        if (LOOKUP(op_names, v, &x) != 0) return -1;
        o->op = (hcomm_op_t)x;
        return 0;
    }
}

static int apply_opt(perf_opts_t *o, const opt_spec_t *spec, const char *v,
                     int *coll_set, char *err) {
    switch (spec->id) {
    case OPT_INPLACE:
        o->inplace = 1;
        return 0;
    case OPT_REGISTERED:
        o->registered = 1;
        return 0;
    case OPT_JSON:
        o->json = 1;
        return 0;
    case OPT_MPI_ONLY:
        o->run_hcomm = 0;
        return 0;
    case OPT_HCOMM_ONLY:
        o->run_mpi = 0;
        return 0;
    case OPT_PMPI:
        o->pmpi = 1;
        return 0;
    case OPT_STREAM:
        o->stream = 1;
        return 0;
    case OPT_NCCL:
        o->nccl = 1;
        return 0;
    case OPT_REWRITE:
        o->rewrite = 1;
        return 0;
    case OPT_CONSUME:
        o->consume = 1;
        return 0;
    case OPT_COLL:
        return set_coll(o, coll_set, v, err);
    default:
        return apply_value(o, spec->id, v) ? bad_value(spec, v, err) : 0;
    }
}

static const opt_spec_t *find_spec(const char *arg) {
    const char *eq = strchr(arg + 2, '=');
    const size_t len = eq ? (size_t)(eq - arg - 2) : strlen(arg + 2);
    for (size_t i = 0; i < NSPECS; i++) {
        const opt_spec_t *s = &opt_specs[i];
        if (arg[1] != '-' && arg[1] == s->short_name && arg[1] != '\0')
            return s;
        if (arg[1] == '-' && strlen(s->long_name) == len &&
            strncmp(arg + 2, s->long_name, len) == 0)
            return s;
    }
    return NULL;
}

/* The option word argv[*i], with its value from the same word (-b8,
 * --minbytes=8) or the next one (-b 8). */
static const opt_spec_t *match_opt(int argc, char **argv, int *i,
                                   const char **val, char *err) {
    const char *arg = argv[*i];
    const opt_spec_t *spec = find_spec(arg);
    const char *inl = NULL;
    if (spec == NULL) {
        snprintf(err, ERRLEN, "unknown option '%s'", arg);
        return NULL;
    }
    if (arg[1] == '-')
        inl = strchr(arg, '=') ? strchr(arg, '=') + 1 : NULL;
    else if (arg[2] != '\0')
        inl = arg + 2;
    *val = inl;
    if (!spec->has_arg && inl != NULL) {
        snprintf(err, ERRLEN, "option '%s' takes no value", arg);
        return NULL;
    }
    if (spec->has_arg && inl == NULL) {
        if (*i + 1 >= argc) {
            snprintf(err, ERRLEN, "option '%s' needs a value", arg);
            return NULL;
        }
        *val = argv[++*i];
    }
    return spec;
}

static int check_opts(const perf_opts_t *o, int nranks, char *err) {
    if (o->minbytes > o->maxbytes)
        snprintf(err, ERRLEN, "minbytes %zu > maxbytes %zu", o->minbytes,
                 o->maxbytes);
    else if (o->root >= nranks)
        snprintf(err, ERRLEN, "root %d out of range (%d ranks)", o->root,
                 nranks);
    else if (o->pmpi && (!o->run_hcomm || !o->run_mpi || o->registered))
        snprintf(err, ERRLEN,
                 "--pmpi times both sides through MPI: not with "
                 "--mpi-only, --hcomm-only or --registered");
    else if ((o->stream || o->nccl) && !o->device)
        snprintf(err, ERRLEN, "--stream and --nccl need -D cuda");
    else if ((o->rewrite || o->consume) && o->device)
        snprintf(err, ERRLEN, "--rewrite and --consume: host buffers only");
    else if (o->device && o->pmpi)
        snprintf(err, ERRLEN, "-D cuda: not with --pmpi");
#ifndef HAVE_CUDA
    else if (o->device)
        snprintf(err, ERRLEN, "-D cuda: hcomm_perf was built without CUDA");
#endif
    else if (!o->run_hcomm && !o->run_mpi)
        snprintf(err, ERRLEN,
                 "--mpi-only and --hcomm-only exclude each "
                 "other");
    else if (o->registered &&
             (!o->run_hcomm ||
              (o->coll != PERF_ALLREDUCE && o->coll != PERF_ALLGATHER &&
               o->coll != PERF_BROADCAST &&
               (!o->device || o->coll != PERF_REDUCE_SCATTER))))
        snprintf(err, ERRLEN,
                 "--registered needs HCOMM (not --mpi-only) and allreduce, "
                 "allgather or broadcast (with -D cuda, reduce_scatter too)");
    else
        return 0;
    return -1;
}

static int parse_args(int argc, char **argv, int nranks, perf_opts_t *o,
                      char *err) {
    int coll_set = 0, opts_done = 0;
    set_defaults(o);
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *val;
        if (opts_done || arg[0] != '-' || arg[1] == '\0') {
            if (set_coll(o, &coll_set, arg, err) != 0) return PARSE_BAD;
            continue;
        }
        if (strcmp(arg, "--") == 0) {
            opts_done = 1;
            continue;
        }
        const opt_spec_t *spec = match_opt(argc, argv, &i, &val, err);
        if (spec == NULL) return PARSE_BAD;
        if (spec->id == OPT_HELP) return PARSE_HELP;
        if (apply_opt(o, spec, val, &coll_set, err) != 0) return PARSE_BAD;
    }
    o->baseline = o->nccl ? "NCCL" : o->device ? "MPI+copy" : "MPI";
    return check_opts(o, nranks, err) ? PARSE_BAD : PARSE_OK;
}

/* --- calls -------------------------------------------------------------- */

/* Anything but "unsupported" ends the run: the other ranks may be waiting
 * in a collective this rank will never join, so only MPI_Abort is safe. */
_Noreturn static void die_hcomm(const perf_ctx_t *c, const char *what,
                                hcomm_status_t st) {
    fprintf(stderr, "hcomm_perf: rank %d: %s: %s: %s\n", c->rank, what,
            hcomm_strerror(st), hcomm_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

_Noreturn static void die(const perf_ctx_t *c, const char *what) {
    fprintf(stderr, "hcomm_perf: rank %d: %s\n", c->rank, what);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static MPI_Datatype mpi_dtype(hcomm_dtype_t dt) {
    switch (dt) {
    case HCOMM_INT8:
        return MPI_INT8_T;
    case HCOMM_UINT8:
        return MPI_UINT8_T;
    case HCOMM_INT32:
        return MPI_INT32_T;
    case HCOMM_UINT32:
        return MPI_UINT32_T;
    case HCOMM_INT64:
        return MPI_INT64_T;
    case HCOMM_UINT64:
        return MPI_UINT64_T;
    case HCOMM_FLOAT32:
        return MPI_FLOAT;
    case HCOMM_FLOAT64:
        return MPI_DOUBLE;
    default:
        return MPI_UINT16_T; /* 16-bit floats, moved, never reduced */
    }
}

static MPI_Op mpi_op(hcomm_op_t op) {
    switch (op) {
    case HCOMM_PROD:
        return MPI_PROD;
    case HCOMM_MAX:
        return MPI_MAX;
    case HCOMM_MIN:
        return MPI_MIN;
    default:
        return MPI_SUM; /* avg never reaches MPI */
    }
}

/* This rank's block of a buffer of nranks blocks. */
static void *own_block(const perf_layout_t *l, void *buf) {
    const size_t esize = perf_dtypes[l->dtype].size;
    return (char *)buf + (size_t)l->rank * l->count * esize;
}

/* In place, hcomm takes nccl-tests' forms for the collectives whose two
 * buffers differ in size: allgather sends from this rank's block of recv,
 * reduce_scatter writes this rank's block of its input (MPI_IN_PLACE puts
 * it at the start instead; see result_of). */
static hcomm_status_t call_hcomm_stream(const perf_ctx_t *c,
                                        const perf_layout_t *l,
                                        const perf_bufs_t *b) {
    const void *in = l->inplace ? b->recv : b->send;
    void *s = perf_dev_stream();
    switch (l->coll) {
    case PERF_ALLREDUCE:
        return hcomm_allreduce_stream(in, b->recv, l->count, l->dtype, l->op,
                                      c->comm, s);
    case PERF_ALLGATHER:
        if (l->inplace) in = own_block(l, b->recv);
        return hcomm_allgather_stream(in, b->recv, l->count, l->dtype, c->comm,
                                      s);
    case PERF_REDUCE_SCATTER:
        return hcomm_reduce_scatter_stream(
            in, l->inplace ? own_block(l, b->recv) : b->recv, l->count,
            l->dtype, l->op, c->comm, s);
    case PERF_BROADCAST:
        return hcomm_broadcast_stream(b->recv, l->count, l->dtype, l->root,
                                      c->comm, s);
    case PERF_REDUCE:
        return hcomm_reduce_stream(in, b->recv, l->count, l->dtype, l->op,
                                   l->root, c->comm, s);
    case PERF_ALLTOALL:
        return hcomm_alltoall_stream(in, b->recv, l->count, l->dtype, c->comm,
                                     s);
    case PERF_GATHER:
        if (l->inplace) in = own_block(l, b->recv);
        return hcomm_gather_stream(in, b->recv, l->count, l->dtype, l->root,
                                   c->comm, s);
    case PERF_SCATTER:
        return hcomm_scatter_stream(
            in, l->inplace ? own_block(l, b->recv) : b->recv, l->count,
            l->dtype, l->root, c->comm, s);
    default:
        return HCOMM_ERR_UNSUPPORTED; /* no stream-ordered barrier, v-form */
    }
}

static hcomm_status_t call_hcomm(const perf_ctx_t *c, const perf_layout_t *l,
                                 const perf_bufs_t *b) {
    const void *in = l->inplace ? b->recv : b->send;
    if (c->opts.stream) return call_hcomm_stream(c, l, b);
    switch (l->coll) {
    case PERF_ALLREDUCE:
        return hcomm_allreduce(in, b->recv, l->count, l->dtype, l->op, c->comm);
    case PERF_ALLGATHER:
        if (l->inplace) in = own_block(l, b->recv);
        return hcomm_allgather(in, b->recv, l->count, l->dtype, c->comm);
    case PERF_REDUCE_SCATTER:
        return hcomm_reduce_scatter(
            in, l->inplace ? own_block(l, b->recv) : b->recv, l->count,
            l->dtype, l->op, c->comm);
    case PERF_BROADCAST:
        return hcomm_broadcast(b->recv, l->count, l->dtype, l->root, c->comm);
    case PERF_REDUCE:
        return hcomm_reduce(in, b->recv, l->count, l->dtype, l->op, l->root,
                            c->comm);
    case PERF_ALLTOALL:
        return hcomm_alltoall(in, b->recv, l->count, l->dtype, c->comm);
    case PERF_GATHER: /* in place: every rank's block is in recv */
        if (l->inplace) in = own_block(l, b->recv);
        return hcomm_gather(in, b->recv, l->count, l->dtype, l->root, c->comm);
    case PERF_SCATTER: /* in place: every rank receives its block of recv */
        return hcomm_scatter(in, l->inplace ? own_block(l, b->recv) : b->recv,
                             l->count, l->dtype, l->root, c->comm);
    case PERF_ALLGATHERV:
        if (l->inplace) in = own_block(l, b->recv);
        return hcomm_allgatherv(in, b->recv, c->vcounts, c->vdispls, l->dtype,
                                c->comm);
    case PERF_ALLTOALLV:
        return hcomm_alltoallv(in, c->vcounts, c->vdispls, b->recv, c->vcounts,
                               c->vdispls, l->dtype, c->comm);
    case PERF_REDUCE_SCATTERV:
        return hcomm_reduce_scatterv(
            in, l->inplace ? own_block(l, b->recv) : b->recv, c->vcounts,
            l->dtype, l->op, c->comm);
    default:
        return hcomm_barrier(c->comm);
    }
}

/* The MPI calls a side makes: MPI_* (taken by an LD_PRELOAD interposer,
 * if one is loaded) or PMPI_* (MPI itself, whatever is preloaded). */
typedef struct {
    int (*allreduce)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm);
    int (*allgather)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype,
                     MPI_Comm);
    int (*reduce_scatter_block)(const void *, void *, int, MPI_Datatype, MPI_Op,
                                MPI_Comm);
    int (*bcast)(void *, int, MPI_Datatype, int, MPI_Comm);
    int (*reduce)(const void *, void *, int, MPI_Datatype, MPI_Op, int,
                  MPI_Comm);
    int (*alltoall)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype,
                    MPI_Comm);
    int (*barrier)(MPI_Comm);
    int (*gather)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype,
                  int, MPI_Comm);
    int (*scatter)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype,
                   int, MPI_Comm);
    int (*allgatherv)(const void *, int, MPI_Datatype, void *, const int *,
                      const int *, MPI_Datatype, MPI_Comm);
    int (*alltoallv)(const void *, const int *, const int *, MPI_Datatype,
                     void *, const int *, const int *, MPI_Datatype, MPI_Comm);
    int (*reduce_scatter)(const void *, void *, const int *, MPI_Datatype,
                          MPI_Op, MPI_Comm);
} mpi_calls_t;

static const mpi_calls_t via_mpi = {
    MPI_Allreduce,  MPI_Allgather, MPI_Reduce_scatter_block,
    MPI_Bcast,      MPI_Reduce,    MPI_Alltoall,
    MPI_Barrier,    MPI_Gather,    MPI_Scatter,
    MPI_Allgatherv, MPI_Alltoallv, MPI_Reduce_scatter};
static const mpi_calls_t via_pmpi = {
    PMPI_Allreduce,  PMPI_Allgather, PMPI_Reduce_scatter_block,
    PMPI_Bcast,      PMPI_Reduce,    PMPI_Alltoall,
    PMPI_Barrier,    PMPI_Gather,    PMPI_Scatter,
    PMPI_Allgatherv, PMPI_Alltoallv, PMPI_Reduce_scatter};

/* MPI errors abort the job (MPI_ERRORS_ARE_FATAL on MPI_COMM_WORLD). */
static void call_mpi(const perf_ctx_t *c, const mpi_calls_t *m,
                     const perf_layout_t *l, const perf_bufs_t *b) {
    const int n = (int)l->count; /* mpi_side_on checked the range */
    const MPI_Datatype dt = mpi_dtype(l->dtype);
    const MPI_Op op = mpi_op(l->op);
    const MPI_Comm w = MPI_COMM_WORLD;
    const void *in = l->inplace ? MPI_IN_PLACE : b->send;
    switch (l->coll) {
    case PERF_ALLREDUCE:
        m->allreduce(in, b->recv, n, dt, op, w);
        break;
    case PERF_ALLGATHER:
        m->allgather(in, n, dt, b->recv, n, dt, w);
        break;
    case PERF_REDUCE_SCATTER:
        m->reduce_scatter_block(in, b->recv, n, dt, op, w);
        break;
    case PERF_BROADCAST:
        m->bcast(b->recv, n, dt, l->root, w);
        break;
    case PERF_REDUCE: /* MPI_IN_PLACE is for the root only */
        if (l->inplace && l->rank != l->root) in = b->recv;
        m->reduce(in, b->recv, n, dt, op, l->root, w);
        break;
    case PERF_ALLTOALL:
        m->alltoall(in, n, dt, b->recv, n, dt, w);
        break;
    case PERF_GATHER: /* MPI_IN_PLACE is the root's; the rest send their
                         block of recv */
        if (l->inplace && l->rank != l->root) in = own_block(l, b->recv);
        m->gather(in, n, dt, b->recv, n, dt, l->root, w);
        break;
    case PERF_SCATTER:
        if (l->inplace && l->rank == l->root)
            m->scatter(b->recv, n, dt, MPI_IN_PLACE, n, dt, l->root, w);
        else
            m->scatter(b->send, n, dt,
                       l->inplace ? own_block(l, b->recv) : b->recv, n, dt,
                       l->root, w);
        break;
    case PERF_ALLGATHERV:
        m->allgatherv(in, n, dt, b->recv, c->mcounts, c->mdispls, dt, w);
        break;
    case PERF_ALLTOALLV:
        m->alltoallv(in, c->mcounts, c->mdispls, dt, b->recv, c->mcounts,
                     c->mdispls, dt, w);
        break;
    case PERF_REDUCE_SCATTERV:
        m->reduce_scatter(in, b->recv, c->mcounts, dt, op, w);
        break;
    default:
        m->barrier(w);
        break;
    }
}

_Noreturn static void die_call(const perf_ctx_t *c, const perf_layout_t *l,
                               hcomm_status_t st) {
    char what[80];
    snprintf(what, sizeof what, "hcomm_%s of %zu bytes",
             perf_colls[l->coll].name, l->bytes);
    die_hcomm(c, what, st);
}

/* -D cuda without NCCL: what a program without HCOMM does, copy the
 * input to host memory, call MPI there, copy the result back. */
static void call_mpi_staged(const perf_ctx_t *c, const perf_layout_t *l,
                            const perf_bufs_t *b) {
    const size_t esize = perf_dtypes[l->dtype].size;
    int bad = perf_dev_copy(b->hrecv, b->recv, l->recv_elems * esize);
    if (l->send_elems)
        bad |= perf_dev_copy(b->hsend, b->send, l->send_elems * esize);
    perf_bufs_t host = {b->hsend, b->hrecv, NULL, NULL};
    call_mpi(c, &via_mpi, l, &host);
    bad |= perf_dev_copy(b->recv, b->hrecv, l->recv_elems * esize);
    if (bad) die(c, "a copy between host and GPU failed");
}

/* One call. hcomm failing here is fatal: "unsupported" was settled by the
 * probe, so any error now is a real one. */
static void run_side(const perf_ctx_t *c, const perf_layout_t *l,
                     const perf_bufs_t *b, int side) {
    if (side == SIDE_MPI && c->opts.nccl) {
        if (perf_nccl_call(l, b->send ? b->send : b->recv, b->recv) != 0)
            die(c, "an NCCL call failed");
        return;
    }
    if (side == SIDE_MPI && c->opts.device) {
        call_mpi_staged(c, l, b);
        return;
    }
    if (side == SIDE_MPI || c->opts.pmpi) {
        call_mpi(c, side == SIDE_MPI && c->opts.pmpi ? &via_pmpi : &via_mpi, l,
                 b);
        return;
    }
    const hcomm_status_t st = call_hcomm(c, l, b);
    if (st != HCOMM_SUCCESS) die_call(c, l, st);
}

/* --rewrite: every cache line of this rank's input written again (the
 * same bytes), so that it is modified in this core's cache, as a step's
 * new gradients are, when the call starts. */
static void rewrite_input(const perf_layout_t *l, const perf_bufs_t *b) {
    size_t esize = perf_dtypes[l->dtype].size;
    volatile char *p = b->send ? b->send : b->recv;
    size_t bytes = (b->send ? l->send_elems : l->recv_elems) * esize;
    for (size_t i = 0; p && i < bytes; i += 64)
        p[i] = p[i];
}

/* --consume: every cache line of this rank's output read (the input's,
 * in place or where it has no output of its own). */
static void consume_output(const perf_layout_t *l, const perf_bufs_t *b) {
    size_t esize = perf_dtypes[l->dtype].size;
    const volatile char *p = b->recv ? b->recv : b->send;
    size_t bytes = (b->recv ? l->recv_elems : l->send_elems) * esize;
    for (size_t i = 0; p && i < bytes; i += 64)
        (void)p[i];
}

/* Seconds per call on this rank; the barrier lines the ranks up so that
 * no rank's trial includes waiting for the others to arrive. */
static double timed_batch(const perf_ctx_t *c, const perf_layout_t *l,
                          const perf_bufs_t *b, int side, int iters) {
    MPI_Barrier(MPI_COMM_WORLD);
    if (c->opts.rewrite || c->opts.consume) {
        double sum = 0;
        for (int k = 0; k < iters; k++) {
            if (c->opts.rewrite) rewrite_input(l, b);
            const double t = now_s();
            run_side(c, l, b, side);
            sum += now_s() - t;
            if (c->opts.consume) consume_output(l, b);
        }
        return sum / iters;
    }
    const double t0 = now_s();
    for (int k = 0; k < iters; k++)
        run_side(c, l, b, side);
    if (c->opts.device && perf_dev_sync() != 0) /* stream-ordered calls */
        die(c, "the GPU stream failed");
    return (now_s() - t0) / iters;
}

/* --- one size ----------------------------------------------------------- */

/* nccl-tests' shapes: bytes is the buffer of allreduce, broadcast and
 * reduce, the receive buffer of allgather, the send buffer of
 * reduce_scatter, each buffer of alltoall; per-rank counts round down. */
static perf_layout_t make_layout(const perf_ctx_t *c, perf_coll_t coll,
                                 size_t bytes) {
    const perf_opts_t *o = &c->opts;
    const size_t esize = perf_dtypes[o->dtype].size, n = (size_t)c->nranks;
    perf_layout_t l = {.coll = coll,
                       .dtype = o->dtype,
                       .op = o->op,
                       .rank = c->rank,
                       .nranks = c->nranks,
                       .root = o->root,
                       .inplace = o->inplace};
    size_t send, recv;
    if (coll == PERF_BARRIER) return l; /* no data at all */
    l.count = bytes / esize / (perf_colls[coll].per_rank ? n : 1);
    switch (perf_base(coll)) {
    case PERF_ALLGATHER:
    case PERF_GATHER: /* every rank allocates the root's */
        send = l.count;
        recv = l.count * n;
        break;
    case PERF_REDUCE_SCATTER:
    case PERF_SCATTER:
        send = l.count * n;
        recv = l.count;
        break;
    case PERF_ALLTOALL:
        send = recv = l.count * n;
        break;
    default:
        send = recv = l.count;
        break;
    }
    l.bytes = (send > recv ? send : recv) * esize;
    l.send_elems = o->inplace || coll == PERF_BROADCAST ? 0 : send;
    /* in place, recv holds the input too (all of it for reduce_scatter) */
    l.recv_elems = o->inplace ? l.bytes / esize : recv;
    return l;
}

/* Every rank allocates the same sizes for the collectives -R allows, as
 * hcomm_mem_alloc requires. */
static void *alloc_elems(const perf_ctx_t *c, size_t elems, size_t esize,
                         int on_device) {
    void *p = NULL;
    if (elems == 0) return NULL;
    if (on_device && c->opts.registered) {
        hcomm_status_t st = hcomm_mem_alloc_device(c->comm, elems * esize, &p);
        if (st != HCOMM_SUCCESS) die_hcomm(c, "hcomm_mem_alloc_device", st);
    } else if (on_device) {
        if (!(p = perf_dev_alloc(elems * esize)))
            die(c, "out of GPU memory for the buffers");
    } else if (c->opts.registered) {
        hcomm_status_t st = hcomm_mem_alloc(c->comm, elems * esize, &p);
        if (st != HCOMM_SUCCESS) die_hcomm(c, "hcomm_mem_alloc", st);
    } else if (posix_memalign(&p, 64, elems * esize) != 0) {
        die(c, "out of memory for the buffers");
    }
    return p;
}

static void free_elems(const perf_ctx_t *c, void *p, int on_device) {
    if (c->opts.registered)
        hcomm_mem_free(c->comm, p);
    else if (on_device)
        perf_dev_free(p);
    else
        free(p);
}

static const char *mpi_na_reason(const perf_ctx_t *c, perf_coll_t coll) {
    const perf_opts_t *o = &c->opts;
    if (!o->run_mpi) return "--hcomm-only";
    if (o->nccl && c->nccl_na[0]) return c->nccl_na;
    if (o->nccl && coll >= PERF_BARRIER) return "NCCL has no such call";
    if (!perf_colls[coll].reduces) return NULL;
    if (o->op == HCOMM_AVG) return "MPI has no avg op";
    if (o->dtype == HCOMM_FLOAT16) return "MPI has no float16 type";
    if (o->dtype == HCOMM_BFLOAT16) return "MPI has no bfloat16 type";
    return NULL;
}

static int mpi_side_on(perf_ctx_t *c, const perf_layout_t *l) {
    if (mpi_na_reason(c, l->coll) != NULL) return 0;
    if (c->opts.nccl) return 1; /* counts are size_t there */
    /* the v-forms' displacements reach (nranks - 1) * count */
    int displaced = l->coll == PERF_ALLGATHERV || l->coll == PERF_ALLTOALLV;
    if (l->count <= INT_MAX &&
        (!displaced || l->count * (size_t)l->nranks <= INT_MAX))
        return 1;
    if (c->rank == 0 && !c->warned_mpi_count)
        fprintf(stderr, "hcomm_perf: counts past INT_MAX: MPI columns n/a\n");
    c->warned_mpi_count = 1;
    return 0;
}

/* The first call of a size, untimed. The ranks agree on "unsupported" so
 * that all of them skip hcomm for this size, or none. */
static int probe_hcomm(perf_ctx_t *c, const perf_layout_t *l,
                       const perf_bufs_t *b) {
    const hcomm_status_t st = call_hcomm(c, l, b);
    const unsigned bit = 1u << l->coll;
    int unsupported = st == HCOMM_ERR_UNSUPPORTED;
    if (st != HCOMM_SUCCESS && !unsupported) die_call(c, l, st);
    MPI_Allreduce(MPI_IN_PLACE, &unsupported, 1, MPI_INT, MPI_MAX,
                  MPI_COMM_WORLD);
    if (unsupported && c->rank == 0 && !(c->warned & bit))
        fprintf(stderr,
                "hcomm_perf: hcomm_%s unsupported (%s): hcomm "
                "columns n/a\n",
                perf_colls[l->coll].name,
                st == HCOMM_ERR_UNSUPPORTED ? hcomm_last_error() : "");
    if (unsupported) c->warned |= bit;
    return !unsupported;
}

/* Warmup, timed, also sets how many calls a trial needs to last
 * PERF_MIN_TRIAL_S (never fewer than -n). The slowest rank's estimate
 * decides, so every rank runs the same count. */
static double warmup(const perf_ctx_t *c, const perf_layout_t *l,
                     const perf_bufs_t *b, const int on[2], int iters[2]) {
    double est[2] = {0, 0};
    for (int side = 0; side < 2; side++)
        if (on[side] && c->opts.warmup > 0)
            est[side] = timed_batch(c, l, b, side, c->opts.warmup);
    MPI_Allreduce(MPI_IN_PLACE, est, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    for (int side = 0; side < 2; side++) {
        const double want = est[side] > 0 ? PERF_MIN_TRIAL_S / est[side] : 0;
        iters[side] = c->opts.iters;
        if (want >= MAX_ITERS)
            iters[side] = MAX_ITERS;
        else if (want > c->opts.iters)
            iters[side] = (int)want + 1;
    }
    return (est[0] + est[1]) * c->opts.warmup; /* seconds, the slowest's */
}

/* Warmup, and for the run's first size more of it: that size also pays
 * for what warms up once (connections, caches, the cores' clocks; on the
 * GPU machine's host a sweep from 1 KiB gave 4.8 us at 1 KiB and 1.9 at
 * 2 KiB), so it goes on for FIRST_WARMUP_S. Every rank agrees when to stop
 * (warmup's estimates are the slowest rank's). */
#define FIRST_WARMUP_S 0.05
static void warm(perf_ctx_t *c, const perf_layout_t *l, const perf_bufs_t *b,
                 const int on[2], int iters[2]) {
    double spent = 0, step;
    do {
        step = warmup(c, l, b, on, iters);
        spent += step;
    } while (!c->warmed && step > 0 && spent < FIRST_WARMUP_S);
    c->warmed = 1;
}

/* Trials alternate sides so that a burst of noise lands on both; a trial
 * is as slow as its slowest rank; the median drops outliers either way. */
static void run_trials(const perf_ctx_t *c, const perf_layout_t *l,
                       const perf_bufs_t *b, const int on[2],
                       const int iters[2], double median_us[2]) {
    double t[2][PERF_TRIALS] = {{0}};
    for (int k = 0; k < PERF_TRIALS; k++)
        for (int side = 0; side < 2; side++)
            if (on[side]) t[side][k] = timed_batch(c, l, b, side, iters[side]);
    MPI_Allreduce(MPI_IN_PLACE, t, 2 * PERF_TRIALS, MPI_DOUBLE, MPI_MAX,
                  MPI_COMM_WORLD);
    for (int side = 0; side < 2; side++)
        median_us[side] = perf_median(t[side], PERF_TRIALS) * 1e6;
}

/* Wrong elements over all ranks, on data the timed runs never saw. */
/* Where a side's result starts. */
static const void *result_of(const perf_ctx_t *c, const perf_layout_t *l,
                             const perf_bufs_t *b, int side) {
    if (side == SIDE_HCOMM && !c->opts.pmpi && l->inplace &&
        perf_base(l->coll) == PERF_REDUCE_SCATTER)
        return own_block(l, b->recv);
    if (l->inplace && l->coll == PERF_SCATTER) /* both sides, every rank */
        return own_block(l, b->recv);
    return b->recv;
}

/* -D cuda: the host copies are filled, then copied to the GPU. */
static void fill(const perf_ctx_t *c, const perf_layout_t *l,
                 const perf_bufs_t *b, unsigned seed) {
    const size_t esize = perf_dtypes[l->dtype].size;
    if (!c->opts.device) {
        perf_data_fill(l, seed, b->send, b->recv);
        return;
    }
    perf_data_fill(l, seed, b->hsend, b->hrecv);
    if (perf_dev_copy(b->send, b->hsend, l->send_elems * esize) ||
        perf_dev_copy(b->recv, b->hrecv, l->recv_elems * esize))
        die(c, "copying test data to the GPU failed");
}

static long long check_side(const perf_ctx_t *c, const perf_layout_t *l,
                            const perf_bufs_t *b, int side) {
    fill(c, l, b, PERF_SEED_CHECK);
    run_side(c, l, b, side);
    const void *result = result_of(c, l, b, side);
    if (c->opts.device) {
        const size_t esize = perf_dtypes[l->dtype].size;
        const size_t off = (size_t)((const char *)result - (char *)b->recv);
        if (perf_dev_sync() ||
            perf_dev_copy(b->hrecv, b->recv, l->recv_elems * esize))
            die(c, "copying results from the GPU failed");
        result = (const char *)b->hrecv + off;
    }
    long long wrong = perf_data_wrong(l, PERF_SEED_CHECK, result);
    MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_LONG_LONG, MPI_SUM,
                  MPI_COMM_WORLD);
    return wrong;
}

static void measure(perf_ctx_t *c, const perf_layout_t *l, const perf_bufs_t *b,
                    perf_row_t *row) {
    perf_side_t *sides[2] = {&row->hc, &row->mpi};
    int on[2] = {c->comm != HCOMM_COMM_NULL, mpi_side_on(c, l)};
    int iters[2];
    double median_us[2];
    if (c->opts.pmpi) /* both sides are MPI calls: no probe, one call each */
        on[SIDE_HCOMM] = on[SIDE_MPI];
    else if (on[SIDE_HCOMM])
        on[SIDE_HCOMM] = probe_hcomm(c, l, b);
    if (c->opts.pmpi && on[SIDE_HCOMM]) run_side(c, l, b, SIDE_HCOMM);
    if (on[SIDE_MPI])
        run_side(c, l, b, SIDE_MPI); /* the same one-off costs as the probe */
    warm(c, l, b, on, iters);
    run_trials(c, l, b, on, iters, median_us);
    for (int side = 0; side < 2; side++) {
        const int check = c->opts.check && l->coll != PERF_BARRIER;
        if (on[side])
            perf_side_set(sides[side], row, c->nranks, median_us[side],
                          check ? check_side(c, l, b, side) : -1);
    }
}

/* Returns 0 when nothing was run: the count rounds to 0 at this size. */
static int bench_size(perf_ctx_t *c, perf_coll_t coll, size_t bytes,
                      perf_row_t *row) {
    const perf_layout_t l = make_layout(c, coll, bytes);
    const size_t esize = perf_dtypes[l.dtype].size;
    if (l.count == 0 && coll != PERF_BARRIER) return 0;
    memset(row, 0, sizeof *row);
    row->coll = coll;
    row->bytes = l.bytes;
    row->count = l.count;
    row->root = perf_colls[coll].rooted ? l.root : -1;
    for (int i = 0; i < c->nranks; i++) { /* the v-forms: equal blocks */
        c->vcounts[i] = l.count;
        c->vdispls[i] = (size_t)i * l.count;
        c->mcounts[i] = (int)(l.count <= INT_MAX ? l.count : 0);
        c->mdispls[i] = (int)((size_t)i * l.count <= INT_MAX ? i * l.count : 0);
    }
    const int dev = c->opts.device;
    const perf_bufs_t b = {alloc_elems(c, l.send_elems, esize, dev),
                           alloc_elems(c, l.recv_elems, esize, dev),
                           dev ? alloc_elems(c, l.send_elems, esize, 0) : NULL,
                           dev ? alloc_elems(c, l.recv_elems, esize, 0) : NULL};
    fill(c, &l, &b, PERF_SEED_TIMING); /* touches pages */
    measure(c, &l, &b, row);
    free_elems(c, b.send, dev);
    free_elems(c, b.recv, dev);
    free_elems(c, b.hsend, 0);
    free_elems(c, b.hrecv, 0);
    return 1;
}

/* --- driver ------------------------------------------------------------- */

/* The size after bytes, as nccl-tests steps; 0 past maxbytes. */
static int next_size(const perf_opts_t *o, size_t *bytes) {
    const size_t s = *bytes;
    size_t n;
    if (o->stepbytes)
        n = s > SIZE_MAX - o->stepbytes ? 0 : s + o->stepbytes;
    else if (s == 0)
        n = 1;
    else
        n = s > SIZE_MAX / o->stepfactor ? 0 : s * o->stepfactor;
    if (n <= s || n > o->maxbytes) return 0;
    *bytes = n;
    return 1;
}

static void add_wrong(long long total[2], const perf_row_t *row) {
    if (row->hc.valid && row->hc.wrong > 0) total[0] += row->hc.wrong;
    if (row->mpi.valid && row->mpi.wrong > 0) total[1] += row->mpi.wrong;
}

/* Every rank runs every size; rank 0 alone prints. */
static void run_coll(perf_ctx_t *c, perf_coll_t coll, long long wrong[2]) {
    const perf_opts_t *o = &c->opts;
    perf_summary_t summary = {{0, 0}, {0, 0}, {0, 0}, 0, NULL, 0, 0, {-1, -1}};
    size_t bytes = coll == PERF_BARRIER ? 0 : o->minbytes;
    perf_row_t row;
    if (c->rank == 0)
        perf_print_header(o, coll, c->nranks, mpi_na_reason(c, coll));
    summary.round_trip_ns[0] = perf_placement_round_trip_ns(c->placement);
    do {
        if (!bench_size(c, coll, bytes, &row)) continue;
        add_wrong(wrong, &row); /* the counts are global: all ranks agree */
        if (c->rank == 0) {
            perf_print_row(o, &row, c->nranks);
            perf_summary_add(&summary, &row);
        }
    } while (coll != PERF_BARRIER && next_size(o, &bytes));
    summary.round_trip_ns[1] = perf_placement_round_trip_ns(c->placement);
    if (c->rank == 0) perf_print_summary(o, &summary);
    perf_summary_free(&summary);
}

static void print_env(const perf_ctx_t *c) {
    char lib[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int len;
    MPI_Get_library_version(lib, &len);
    lib[strcspn(lib, ",\n")] = '\0'; /* "Open MPI v4.1.4", not the build */
    if (c->rank == 0 && !c->opts.json)
        perf_print_env(c->nranks, lib, c->opts.baseline);
}

/* Exit status: 0, or 1 when any result was wrong. */
static int run_all(perf_ctx_t *c) {
    const int all = c->opts.coll == PERF_COLL_ALL;
    const int first = all ? 0 : c->opts.coll;
    const int last = all ? PERF_COLL_COUNT - 1 : c->opts.coll;
    long long wrong[2] = {0, 0};
    if (c->opts.run_hcomm && !c->opts.pmpi) {
        const hcomm_status_t st = hcomm_comm_create(MPI_COMM_WORLD, &c->comm);
        if (st != HCOMM_SUCCESS) die_hcomm(c, "hcomm_comm_create", st);
    }
    print_env(c);
    /* --json prints no summary, where the round trip goes */
    c->placement = c->opts.json ? NULL : perf_placement_create();
    for (int coll = first; coll <= last; coll++)
        run_coll(c, (perf_coll_t)coll, wrong);
    perf_placement_free(c->placement);
    if (c->comm != HCOMM_COMM_NULL && hcomm_comm_free(&c->comm) != 0)
        fprintf(stderr, "hcomm_perf: rank %d: hcomm_comm_free: %s\n", c->rank,
                hcomm_last_error());
    if (wrong[0] == 0 && wrong[1] == 0) return 0;
    if (c->rank == 0)
        fprintf(stderr,
                "hcomm_perf: wrong results: hcomm %lld, MPI %lld "
                "elements\n",
                wrong[0], wrong[1]);
    return 1;
}

int main(int argc, char **argv) {
    perf_ctx_t c;
    char err[ERRLEN] = "";
    memset(&c, 0, sizeof c);
    /* Stream-ordered calls on the plans run on HCOMM's own thread, which
     * MPI's transport may use only at MPI_THREAD_MULTIPLE; other runs keep
     * MPI's default level. */
    int want_threads = 0, provided;
    for (int i = 1; i < argc; i++)
        want_threads |= !strcmp(argv[i], "-S") || !strcmp(argv[i], "--stream");
    if (want_threads)
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    else
        MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &c.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &c.nranks);
    c.vcounts = malloc((size_t)c.nranks * sizeof(size_t));
    c.vdispls = malloc((size_t)c.nranks * sizeof(size_t));
    c.mcounts = malloc((size_t)c.nranks * sizeof(int));
    c.mdispls = malloc((size_t)c.nranks * sizeof(int));
    if (!c.vcounts || !c.vdispls || !c.mcounts || !c.mdispls)
        die(&c, "out of memory");
    const hcomm_status_t st = hcomm_init(&argc, &argv);
    if (st != HCOMM_SUCCESS) die_hcomm(&c, "hcomm_init", st);
    int rc = parse_args(argc, argv, c.nranks, &c.opts, err);
    if (rc == PARSE_HELP && c.rank == 0) print_usage(stdout);
    if (rc == PARSE_BAD && c.rank == 0)
        fprintf(stderr, "hcomm_perf: %s\nTry 'hcomm_perf -h' for help.\n", err);
    if (rc == PARSE_OK && c.opts.device &&
        perf_dev_init(MPI_COMM_WORLD, err, sizeof err) != 0)
        die(&c, err);
    if (rc == PARSE_OK && c.opts.nccl) {
        int v = perf_nccl_init(MPI_COMM_WORLD, c.rank, c.nranks, c.nccl_na,
                               sizeof c.nccl_na);
        if (v > 0 && c.rank == 0 && !c.opts.json)
            printf("# NCCL %d.%d.%d on the same buffers and stream\n",
                   v / 10000, v / 100 % 100, v % 100);
    }
    if (rc == PARSE_OK) rc = run_all(&c);
    if (c.opts.nccl)
        perf_nccl_finalize();
    else if (rc == PARSE_HELP)
        rc = 0;
    hcomm_finalize();
    MPI_Finalize();
    free(c.vcounts);
    free(c.vdispls);
    free(c.mcounts);
    free(c.mdispls);
    return rc;
}
