/*
 * hcomm_perf: what the benchmark knows about its data and its output.
 *
 * Test data are small integers from a formula of (rank, index), exact in
 * every type (int8 and bfloat16 included), so every rank can compute the
 * result of any collective on its own and compare bit for bit: no
 * tolerance, no exchange of reference data.
 */
#define _POSIX_C_SOURCE 200809L

#include "perf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const perf_coll_info_t perf_colls[PERF_COLL_COUNT] = {
    [PERF_ALLREDUCE] = {"allreduce", 1, 0, 0},
    [PERF_ALLGATHER] = {"allgather", 0, 0, 1},
    [PERF_REDUCE_SCATTER] = {"reduce_scatter", 1, 0, 1},
    [PERF_BROADCAST] = {"broadcast", 0, 1, 0},
    [PERF_REDUCE] = {"reduce", 1, 1, 0},
    [PERF_ALLTOALL] = {"alltoall", 0, 0, 1},
    [PERF_BARRIER] = {"barrier", 0, 0, 0},
    [PERF_GATHER] = {"gather", 0, 1, 1},
    [PERF_SCATTER] = {"scatter", 0, 1, 1},
    [PERF_ALLGATHERV] = {"allgatherv", 0, 0, 1},
    [PERF_ALLTOALLV] = {"alltoallv", 0, 0, 1},
    [PERF_REDUCE_SCATTERV] = {"reduce_scatterv", 1, 0, 1},
};

const perf_dtype_info_t perf_dtypes[HCOMM_DTYPE_COUNT] = {
    [HCOMM_INT8] = {"int8", "int8", PERF_KIND_SIGNED, 1},
    [HCOMM_UINT8] = {"uint8", "uint8", PERF_KIND_UNSIGNED, 1},
    [HCOMM_INT32] = {"int32", "int32", PERF_KIND_SIGNED, 4},
    [HCOMM_UINT32] = {"uint32", "uint32", PERF_KIND_UNSIGNED, 4},
    [HCOMM_INT64] = {"int64", "int64", PERF_KIND_SIGNED, 8},
    [HCOMM_UINT64] = {"uint64", "uint64", PERF_KIND_UNSIGNED, 8},
    [HCOMM_FLOAT16] = {"float16", "half", PERF_KIND_HALF, 2},
    [HCOMM_BFLOAT16] = {"bfloat16", "bfloat16", PERF_KIND_BF16, 2},
    [HCOMM_FLOAT32] = {"float32", "float", PERF_KIND_FLOAT, 4},
    [HCOMM_FLOAT64] = {"float64", "double", PERF_KIND_FLOAT, 8},
};

const char *const perf_op_names[HCOMM_OP_COUNT] = {
    [HCOMM_SUM] = "sum", [HCOMM_PROD] = "prod", [HCOMM_MAX] = "max",
    [HCOMM_MIN] = "min", [HCOMM_AVG] = "avg",
};

/* Byte written over recv before a check. In every type it is far from any
 * value the data below produce (int8 -128, tiny negative floats), so an
 * element the collective forgot to write counts as wrong. */
#define POISON_BYTE 0x80

/* --- float16 and bfloat16, round to nearest even ------------------------ */

/* Our own conversions, not the library's: the checker must not share the
 * code it checks. */
static uint16_t half_round(uint32_t absx) {
    if (absx < 0x38800000u) { /* below 2^-14: subnormal half, or zero */
        if (absx < 0x33000000u)
            return 0; /* below 2^-25: rounds to zero (2^-25 ties to 0) */
        const uint32_t m = (absx & 0x7fffffu) | 0x800000u;
        const unsigned shift = 126u - (absx >> 23);
        const uint32_t rem = m & ((1u << shift) - 1);
        const uint32_t halfway = 1u << (shift - 1);
        uint32_t h = m >> shift;
        if (rem > halfway || (rem == halfway && (h & 1))) h++;
        return (uint16_t)h;
    }
    if (absx >= 0x47800000u) return 0x7c00; /* 65536 and up: infinity */
    const uint32_t r = absx - 0x38000000u;  /* rebias 127 -> 15 */
    uint32_t h = r >> 13;
    const uint32_t rem = r & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1)))
        h++; /* may carry into the exponent, up to infinity: correct */
    return (uint16_t)h;
}

static uint16_t half_from_float(float f) {
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    const uint32_t absx = x & 0x7fffffffu;
    if (absx > 0x7f800000u) /* NaN: keep it quiet and a NaN */
        return (uint16_t)(sign | 0x7e00u | ((absx >> 13) & 0x3ffu));
    if (absx == 0x7f800000u) return (uint16_t)(sign | 0x7c00u);
    return (uint16_t)(sign | half_round(absx));
}

static float half_to_float(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    uint32_t x;
    if (e == 0x1f) {
        x = sign | 0x7f800000u | (m << 13);
    } else if (e == 0) { /* zero or subnormal: m * 2^-24, exact in float */
        const float v = (float)m * 0x1p-24f;
        return sign ? -v : v;
    } else {
        x = sign | ((e + 112u) << 23) | (m << 13);
    }
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

static uint16_t bf16_from_float(float f) {
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40u); /* NaN stays a (quiet) NaN */
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

static float bf16_to_float(uint16_t b) {
    const uint32_t x = (uint32_t)b << 16;
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

/* --- element access ----------------------------------------------------- */

static int is_real(hcomm_dtype_t dt) {
    const perf_kind_t k = perf_dtypes[dt].kind;
    return k != PERF_KIND_SIGNED && k != PERF_KIND_UNSIGNED;
}

static uint64_t mask_bits(int bits) {
    return bits >= 64 ? UINT64_MAX : (UINT64_C(1) << bits) - 1;
}

/* The two's complement value of the low bits of x, without relying on
 * implementation-defined conversions. */
static int64_t sign_extend(uint64_t x, int bits) {
    if (bits >= 64) return x <= INT64_MAX ? (int64_t)x : -(int64_t)~x - 1;
    const uint64_t top = UINT64_C(1) << (bits - 1);
    x &= mask_bits(bits);
    return (int64_t)(x ^ top) - (int64_t)top;
}

/* Integers are stored as their low bits: two's complement for the signed
 * types is guaranteed by <stdint.h>. */
static void store_bits(hcomm_dtype_t dt, void *buf, size_t i, uint64_t v) {
    switch (perf_dtypes[dt].size) {
    case 1:
        ((uint8_t *)buf)[i] = (uint8_t)v;
        break;
    case 4:
        ((uint32_t *)buf)[i] = (uint32_t)v;
        break;
    default:
        ((uint64_t *)buf)[i] = v;
        break;
    }
}

static uint64_t load_bits(hcomm_dtype_t dt, const void *buf, size_t i) {
    switch (perf_dtypes[dt].size) {
    case 1:
        return ((const uint8_t *)buf)[i];
    case 4:
        return ((const uint32_t *)buf)[i];
    default:
        return ((const uint64_t *)buf)[i];
    }
}

static void store_real(hcomm_dtype_t dt, void *buf, size_t i, double v) {
    switch (dt) {
    case HCOMM_FLOAT16:
        ((uint16_t *)buf)[i] = half_from_float((float)v);
        break;
    case HCOMM_BFLOAT16:
        ((uint16_t *)buf)[i] = bf16_from_float((float)v);
        break;
    case HCOMM_FLOAT32:
        ((float *)buf)[i] = (float)v;
        break;
    default:
        ((double *)buf)[i] = v;
        break;
    }
}

static double load_real(hcomm_dtype_t dt, const void *buf, size_t i) {
    switch (dt) {
    case HCOMM_FLOAT16:
        return half_to_float(((const uint16_t *)buf)[i]);
    case HCOMM_BFLOAT16:
        return bf16_to_float(((const uint16_t *)buf)[i]);
    case HCOMM_FLOAT32:
        return ((const float *)buf)[i];
    default:
        return ((const double *)buf)[i];
    }
}

/* v as the element type would hold it. */
static double round_real(hcomm_dtype_t dt, double v) {
    switch (dt) {
    case HCOMM_FLOAT16:
        return half_to_float(half_from_float((float)v));
    case HCOMM_BFLOAT16:
        return bf16_to_float(bf16_from_float((float)v));
    case HCOMM_FLOAT32:
        return (float)v;
    default:
        return v;
    }
}

/* --- test data ---------------------------------------------------------- */

typedef enum { PAT_MOVE, PAT_SMALL, PAT_PROD } pattern_t;

static pattern_t pattern_of(const perf_layout_t *l) {
    if (!perf_colls[l->coll].reduces) return PAT_MOVE;
    return l->op == HCOMM_PROD ? PAT_PROD : PAT_SMALL;
}

/* What rank r holds at input element j (seed already added to j). */
static int64_t input_value(pattern_t p, int nranks, int r, size_t j) {
    const size_t ur = (size_t)r;
    switch (p) {
    case PAT_MOVE: /* differs between ranks and neighbours; |v| <= 100 */
        return (int64_t)((ur * 37 + j * 11) % 201) - 100;
    case PAT_SMALL: /* |sum| <= 3 * nranks: exact in int8 up to 42 ranks,
                       in bfloat16 up to 85 */
        return (int64_t)((ur + j) % 7) - 3;
    default: { /* one rank per element holds +-2, the rest +-1: the product
                  is +-1 or +-2 at any rank count, exact in every type */
        const int64_t mag = (j + ur) % (size_t)nranks == 0 ? 2 : 1;
        return (j + 2 * ur) % 3 == 0 ? -mag : mag;
    }
    }
}

static void store_value(hcomm_dtype_t dt, void *buf, size_t i, int64_t v) {
    if (is_real(dt))
        store_real(dt, buf, i, (double)v);
    else
        store_bits(dt, buf, i, (uint64_t)v); /* unsigned: wraps, as meant */
}

/* Elements of input each rank provides. */
static size_t input_elems(const perf_layout_t *l) {
    switch (perf_base(l->coll)) {
    case PERF_SCATTER:
        return l->rank == l->root ? l->count * (size_t)l->nranks : 0;
    case PERF_REDUCE_SCATTER:
    case PERF_ALLTOALL:
        return l->count * (size_t)l->nranks;
    case PERF_BARRIER:
        return 0;
    default:
        return l->count;
    }
}

static void *input_buffer(const perf_layout_t *l, void *send, void *recv) {
    const size_t esize = perf_dtypes[l->dtype].size;
    if (l->coll == PERF_BROADCAST) return recv;
    if (!l->inplace) return send;
    /* in place: own block of recv (gather: on every rank, see
     * hcomm_perf.c) */
    if (perf_base(l->coll) == PERF_ALLGATHER || l->coll == PERF_GATHER)
        return (char *)recv + (size_t)l->rank * l->count * esize;
    return recv;
}

static void fill_from(const perf_layout_t *l, unsigned seed, int r, void *buf,
                      size_t n) {
    const pattern_t p = pattern_of(l);
    for (size_t j = 0; j < n; j++)
        store_value(l->dtype, buf, j, input_value(p, l->nranks, r, j + seed));
}

void perf_data_fill(const perf_layout_t *l, unsigned seed, void *send,
                    void *recv) {
    if (recv != NULL)
        memset(recv, POISON_BYTE, l->recv_elems * perf_dtypes[l->dtype].size);
    if (l->coll == PERF_BARRIER) return;
    if ((l->coll == PERF_BROADCAST || l->coll == PERF_SCATTER) &&
        l->rank != l->root)
        return; /* receives only */
    const int owner = l->coll == PERF_BROADCAST ? l->root : l->rank;
    fill_from(l, seed, owner, input_buffer(l, send, recv), input_elems(l));
}

/* --- expected results --------------------------------------------------- */

static int less_bits(uint64_t a, uint64_t b, int bits, int is_signed) {
    if (is_signed) return sign_extend(a, bits) < sign_extend(b, bits);
    return (a & mask_bits(bits)) < (b & mask_bits(bits));
}

/* Integer ops in uint64: sums and products wrap, and their low bits are
 * those of the type's own wrapping arithmetic (the library's contract). */
static uint64_t combine_bits(hcomm_op_t op, uint64_t a, uint64_t b, int bits,
                             int is_signed) {
    switch (op) {
    case HCOMM_PROD:
        return a * b;
    case HCOMM_MAX:
        return less_bits(a, b, bits, is_signed) ? b : a;
    case HCOMM_MIN:
        return less_bits(b, a, bits, is_signed) ? b : a;
    default:
        return a + b; /* sum, avg */
    }
}

static uint64_t expect_bits(const perf_layout_t *l, size_t j) {
    const perf_dtype_info_t *t = &perf_dtypes[l->dtype];
    const int bits = (int)t->size * 8;
    const int sgn = t->kind == PERF_KIND_SIGNED;
    const pattern_t p = pattern_of(l);
    uint64_t acc = (uint64_t)input_value(p, l->nranks, 0, j);
    for (int r = 1; r < l->nranks; r++)
        acc = combine_bits(
            l->op, acc, (uint64_t)input_value(p, l->nranks, r, j), bits, sgn);
    if (l->op == HCOMM_AVG) /* the wrapped sum, divided, truncated */
        acc = sgn ? (uint64_t)(sign_extend(acc, bits) / l->nranks)
                  : (acc & mask_bits(bits)) / (uint64_t)l->nranks;
    return acc & mask_bits(bits);
}

/* As the library specifies avg: float64 divides in double, the others in
 * float (float16 and bfloat16 reduce in fp32), then round to the type. */
static double avg_real(hcomm_dtype_t dt, double sum, int nranks) {
    if (dt == HCOMM_FLOAT64) return sum / nranks;
    return (double)((float)sum / (float)nranks);
}

/* Sums of these small integers are exact in any order, so the order the
 * library reduces in cannot matter. */
static double expect_real(const perf_layout_t *l, size_t j) {
    const pattern_t p = pattern_of(l);
    double acc = (double)input_value(p, l->nranks, 0, j);
    for (int r = 1; r < l->nranks; r++) {
        const double v = (double)input_value(p, l->nranks, r, j);
        switch (l->op) {
        case HCOMM_PROD:
            acc *= v;
            break;
        case HCOMM_MAX:
            acc = v > acc ? v : acc;
            break;
        case HCOMM_MIN:
            acc = v < acc ? v : acc;
            break;
        default:
            acc += v;
            break;
        }
    }
    if (l->op == HCOMM_AVG) acc = avg_real(l->dtype, acc, l->nranks);
    return round_real(l->dtype, acc);
}

/* Where recv element k comes from: the reduction over all ranks of input
 * element *j (returns 1), or rank *src's input element *j (returns 0). */
static int source_of(const perf_layout_t *l, size_t k, int *src, size_t *j) {
    const size_t me = (size_t)l->rank;
    *src = l->root;
    *j = k;
    switch (perf_base(l->coll)) {
    case PERF_GATHER:
        *src = (int)(k / l->count);
        *j = k % l->count;
        return 0;
    case PERF_SCATTER:
        *j = me * l->count + k;
        return 0;
    case PERF_ALLREDUCE:
    case PERF_REDUCE:
        return 1;
    case PERF_REDUCE_SCATTER:
        *j = me * l->count + k;
        return 1;
    case PERF_ALLGATHER:
        *src = (int)(k / l->count);
        *j = k % l->count;
        return 0;
    case PERF_ALLTOALL:
        *src = (int)(k / l->count);
        *j = me * l->count + k % l->count;
        return 0;
    default:
        return 0; /* broadcast: the root's input */
    }
}

static size_t checked_elems(const perf_layout_t *l) {
    switch (perf_base(l->coll)) {
    case PERF_GATHER:
        return l->rank == l->root ? l->count * (size_t)l->nranks : 0;
    case PERF_ALLGATHER:
    case PERF_ALLTOALL:
        return l->count * (size_t)l->nranks;
    case PERF_REDUCE:
        return l->rank == l->root ? l->count : 0;
    case PERF_BARRIER:
        return 0;
    default:
        return l->count;
    }
}

static int elem_ok(const perf_layout_t *l, unsigned seed, const void *recv,
                   size_t k) {
    int src;
    size_t j;
    const int reduced = source_of(l, k, &src, &j);
    j += seed;
    if (is_real(l->dtype)) {
        const double want =
            reduced
                ? expect_real(l, j)
                : round_real(l->dtype,
                             (double)input_value(PAT_MOVE, l->nranks, src, j));
        return load_real(l->dtype, recv, k) == want;
    }
    const int bits = (int)perf_dtypes[l->dtype].size * 8;
    const uint64_t want =
        reduced ? expect_bits(l, j)
                : (uint64_t)input_value(PAT_MOVE, l->nranks, src, j);
    return load_bits(l->dtype, recv, k) == (want & mask_bits(bits));
}

long long perf_data_wrong(const perf_layout_t *l, unsigned seed,
                          const void *recv) {
    const size_t n = checked_elems(l);
    long long wrong = 0;
    for (size_t k = 0; k < n; k++)
        wrong += !elem_ok(l, seed, recv, k);
    return wrong;
}

/* --- results ------------------------------------------------------------ */

/* nccl-tests' factors: what each rank's link must carry relative to the
 * data size for the best algorithm, so busbw compares with link speed. */
double perf_busbw_factor(perf_coll_t coll, int nranks) {
    const double n = nranks;
    switch (perf_base(coll)) {
    case PERF_ALLREDUCE:
        return 2.0 * (n - 1) / n;
    case PERF_GATHER: /* the root's link carries n - 1 blocks of n */
    case PERF_SCATTER:
    case PERF_ALLGATHER:
    case PERF_REDUCE_SCATTER:
    case PERF_ALLTOALL:
        return (n - 1) / n;
    default:
        return 1.0;
    }
}

void perf_side_set(perf_side_t *s, const perf_row_t *row, int nranks,
                   double time_us, long long wrong) {
    s->valid = 1;
    s->time_us = time_us;
    /* bytes / (us * 1e-6) / 1e9 */
    s->algbw = time_us > 0 ? (double)row->bytes / (time_us * 1e3) : 0.0;
    s->busbw = s->algbw * perf_busbw_factor(row->coll, nranks);
    s->wrong = wrong;
}

static int row_ratio(const perf_row_t *row, double *ratio) {
    if (!row->hc.valid || !row->mpi.valid || row->hc.time_us <= 0) return 0;
    *ratio = row->mpi.time_us / row->hc.time_us;
    return 1;
}

static const char *row_type(const perf_opts_t *o, perf_coll_t coll, int json) {
    if (coll == PERF_BARRIER) return "none";
    return json ? perf_dtypes[o->dtype].name : perf_dtypes[o->dtype].label;
}

static const char *row_op(const perf_opts_t *o, perf_coll_t coll) {
    return perf_colls[coll].reduces ? perf_op_names[o->op] : "none";
}

/* --- text output -------------------------------------------------------- */

void perf_print_env(int nranks, const char *mpi_library, const char *baseline) {
    printf("# hcomm %s, %s, %d ranks\n", hcomm_version(), mpi_library, nranks);
    printf("# count: elements per call (allgather, reduce_scatter, alltoall: "
           "per-rank block)\n");
    printf("# ratio = %s time / hcomm time = hcomm busbw / %s busbw "
           "(> 1: hcomm faster)\n#\n",
           baseline, baseline);
}

static void print_title(const perf_opts_t *o, perf_coll_t coll, int nranks) {
    printf("# hcomm_perf: %s, %d ranks", perf_colls[coll].name, nranks);
    if (coll != PERF_BARRIER) printf(", %s", perf_dtypes[o->dtype].name);
    if (perf_colls[coll].reduces) printf(" %s", perf_op_names[o->op]);
    if (perf_colls[coll].rooted) printf(", root %d", o->root);
    printf(", iters %d, warmup %d, trials %d (median of per-trial max over "
           "ranks)\n",
           o->iters, o->warmup, PERF_TRIALS);
}

static void print_notes(const perf_opts_t *o, perf_coll_t coll,
                        const char *mpi_na) {
    printf("# ");
    if (coll != PERF_BARRIER)
        printf("%s, check %s; ", o->inplace ? "in place" : "out of place",
               o->check ? "on" : "off");
    printf("iters is a minimum: raised so a trial lasts >= %.0f ms\n",
           PERF_MIN_TRIAL_S * 1e3);
    if (!o->run_hcomm) printf("# hcomm columns: n/a (--mpi-only)\n");
    if (o->pmpi)
        printf("# --pmpi: hcomm columns: MPI_* calls (an LD_PRELOAD "
               "interposer's, if loaded); MPI columns: PMPI_* (MPI itself)\n");
    if (o->device)
        printf("# buffers in GPU memory%s; %s columns: %s\n",
               o->stream ? ", hcomm stream-ordered (one sync per trial)" : "",
               o->baseline,
               o->nccl ? "NCCL on the same buffers and stream"
                       : "copy to host, MPI, copy back");
    if (mpi_na != NULL) printf("# %s columns: n/a (%s)\n", o->baseline, mpi_na);
}

/* "------ title ------" over one side's 30 columns. */
static void print_banner(const char *title) {
    const int width = 30, len = (int)strlen(title) + 2;
    const int left = (width - len) / 2;
    printf("  %.*s %s %.*s", left, "------------------------------", title,
           width - len - left, "------------------------------");
}

/* Widths follow nccl-tests so scripts written for its tables still cut the
 * right columns: 52 for the prefix, 32 per side, 8 for the ratio. */
static void print_columns(const perf_opts_t *o) {
    printf("#%51s", "");
    print_banner("hcomm");
    print_banner(o->baseline);
    printf("\n#%11s  %12s  %8s  %6s  %6s", "size", "count", "type", "redop",
           "root");
    for (int side = 0; side < 2; side++)
        printf("  %7s  %6s  %6s %6s", "time", "algbw", "busbw", "#wrong");
    printf("  %6s\n#%11s  %12s  %8s  %6s  %6s", "ratio", "(B)", "(elements)",
           "", "", "");
    for (int side = 0; side < 2; side++)
        printf("  %7s  %6s  %6s %6s", "(us)", "(GB/s)", "(GB/s)", "");
    printf("  %6s\n", "(x)");
}

void perf_print_header(const perf_opts_t *o, perf_coll_t coll, int nranks,
                       const char *mpi_na) {
    if (o->json) return;
    print_title(o, coll, nranks);
    print_notes(o, coll, mpi_na);
    print_columns(o);
}

/* nccl-tests' time format: at most 7 characters. */
static void format_time(char *buf, size_t len, double us) {
    if (us >= 10000.0)
        snprintf(buf, len, "%.0f", us);
    else if (us >= 100.0)
        snprintf(buf, len, "%.1f", us);
    else
        snprintf(buf, len, "%.2f", us);
}

static void print_side_text(const perf_side_t *s) {
    char t[32], a[32], b[32], w[32];
    if (!s->valid) {
        printf("  %7s  %6s  %6s  %5s", "n/a", "n/a", "n/a", "n/a");
        return;
    }
    format_time(t, sizeof t, s->time_us);
    snprintf(a, sizeof a, "%.2f", s->algbw);
    snprintf(b, sizeof b, "%.2f", s->busbw);
    if (s->wrong < 0)
        snprintf(w, sizeof w, "-");
    else
        snprintf(w, sizeof w, "%lld", s->wrong);
    printf("  %7s  %6s  %6s  %5s", t, a, b, w);
}

static void print_row_text(const perf_opts_t *o, const perf_row_t *row) {
    double ratio;
    printf("%12zu  %12zu  %8s  %6s  %6d", row->bytes, row->count,
           row_type(o, row->coll, 0), row_op(o, row->coll), row->root);
    print_side_text(&row->hc);
    print_side_text(&row->mpi);
    if (row_ratio(row, &ratio))
        printf("  %6.2f\n", ratio);
    else
        printf("  %6s\n", "n/a");
}

/* --- JSON output -------------------------------------------------------- */

static void print_side_json(const char *name, const perf_side_t *s) {
    printf("\"%s\":", name);
    if (!s->valid) {
        printf("{\"time_us\":null,\"algbw\":null,\"busbw\":null,"
               "\"wrong\":null}");
        return;
    }
    printf("{\"time_us\":%.3f,\"algbw\":%.6g,\"busbw\":%.6g,\"wrong\":",
           s->time_us, s->algbw, s->busbw);
    if (s->wrong < 0)
        printf("null}");
    else
        printf("%lld}", s->wrong);
}

/* One object per line (JSON Lines): a consumer can read rows as they come
 * and a killed run still leaves valid lines. Names are fixed identifiers,
 * so no string needs escaping. */
static void print_row_json(const perf_opts_t *o, const perf_row_t *row,
                           int nranks) {
    double ratio;
    printf("{\"collective\":\"%s\",\"size\":%zu,\"count\":%zu,"
           "\"type\":\"%s\",\"redop\":\"%s\",\"root\":%d,\"nranks\":%d,",
           perf_colls[row->coll].name, row->bytes, row->count,
           row_type(o, row->coll, 1), row_op(o, row->coll), row->root, nranks);
    print_side_json("hcomm", &row->hc);
    printf(",");
    print_side_json(o->nccl ? "nccl" : "mpi", &row->mpi);
    if (row_ratio(row, &ratio))
        printf(",\"ratio\":%.6g}\n", ratio);
    else
        printf(",\"ratio\":null}\n");
}

void perf_print_row(const perf_opts_t *o, const perf_row_t *row, int nranks) {
    if (o->json)
        print_row_json(o, row, nranks);
    else
        print_row_text(o, row);
    fflush(stdout); /* rows as they come, also through mpirun's pipe */
}

/* --- summary ------------------------------------------------------------ */

void perf_summary_add(perf_summary_t *s, const perf_row_t *row) {
    const perf_side_t *sides[2] = {&row->hc, &row->mpi};
    double ratio;
    for (int i = 0; i < 2; i++) {
        if (!sides[i]->valid) continue;
        s->busbw_sum[i] += sides[i]->busbw;
        s->busbw_n[i]++;
        if (sides[i]->wrong >= 0) s->checked = 1;
        if (sides[i]->wrong > 0) s->wrong[i] += sides[i]->wrong;
    }
    if (!row_ratio(row, &ratio)) return;
    if (s->nratios == s->cap) {
        const size_t cap = s->cap ? 2 * s->cap : 64;
        double *p = realloc(s->ratios, cap * sizeof *p);
        if (p == NULL)
            return; /* the median then covers fewer rows; not worth dying */
        s->ratios = p;
        s->cap = cap;
    }
    s->ratios[s->nratios++] = ratio;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double perf_median(double *v, size_t n) {
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void print_avg_busbw(const perf_opts_t *o, const perf_summary_t *s) {
    const char *names[2] = {"hcomm", o->baseline};
    printf("# Avg bus bandwidth:");
    for (int i = 0; i < 2; i++) {
        printf("%s %s ", i ? "," : "", names[i]);
        if (s->busbw_n[i] > 0)
            printf("%.3f GB/s", s->busbw_sum[i] / s->busbw_n[i]);
        else
            printf("n/a");
    }
    printf("\n");
}

/* placement.c says why: a table taken while the cores were far apart is
 * not comparable with one taken while they were near. */
static void print_round_trip(const perf_summary_t *s) {
    if (s->round_trip_ns[0] < 0 && s->round_trip_ns[1] < 0) return;
    printf("# Core round trip, node ranks 0-1:");
    for (int i = 0; i < 2; i++) {
        printf("%s ", i ? "," : "");
        if (s->round_trip_ns[i] < 0)
            printf("n/a");
        else
            printf("%.0f ns", s->round_trip_ns[i]);
        printf(i ? " after" : " before");
    }
    printf("\n");
}

void perf_print_summary(const perf_opts_t *o, perf_summary_t *s) {
    if (o->json) return;
    print_avg_busbw(o, s);
    if (s->nratios == 0) {
        printf("# Median ratio: n/a\n");
    } else {
        printf("# Median ratio: %.2f\n", perf_median(s->ratios, s->nratios));
    }
    if (s->checked)
        printf("# Wrong elements: hcomm %lld, %s %lld %s\n", s->wrong[0],
               o->baseline, s->wrong[1],
               s->wrong[0] || s->wrong[1] ? "FAILED" : "OK");
    print_round_trip(s);
    printf("#\n");
}

void perf_summary_free(perf_summary_t *s) {
    free(s->ratios);
    memset(s, 0, sizeof *s);
}
