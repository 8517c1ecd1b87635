/* Where the bytes of a datatype's element lie, in type-map order: the
 * shape of interpose.h (one strided pattern, a few runs, or only MPI_Pack
 * knows), learned once per datatype.
 *
 * Size == true extent does not make a type contiguous: it may list its
 * items out of memory order (indexed {1, 0}) or read one item twice and
 * skip another. So a type is flattened from its constructor where that is
 * made of simpler pieces (dup, resized, contiguous, vector, indexed,
 * struct and their h- and block forms), and otherwise by packing a probe
 * whose bytes name their own offsets. */
#include "compat_mpi/interpose.h"

#include <stdint.h>
#include <stdlib.h>

/* Types are probed up to this many bytes (read and packed): the probe
 * packs the type once per byte of the largest offset. */
#define PROBE_MAX ((MPI_Count)1 << 20)
/* Constructors are read up to this many blocks, and flattened into at
 * most this many runs before they are called irregular. */
#define DECODE_MAX 4096

/* Runs of consecutive bytes, in type-map order, into a shape. */
typedef struct {
    hcmpi_shape_t *s;
    size_t n, len;      /* runs ended so far; the current one's length */
    MPI_Aint off, prev; /* the current run's start; the previous one's */
    int regular;        /* every run as long, stride apart */
} runs_t;

static void run_end(runs_t *r) {
    hcmpi_shape_t *s = r->s;
    if (r->n == 0) {
        hcmpi_shape_strided(s, 1, r->len, 0, r->off);
        r->regular = 1;
    } else if (r->regular && r->len == s->blen &&
               (r->n == 1 || r->off - r->prev == s->stride)) {
        if (r->n == 1) s->stride = r->off - r->prev;
        s->nblocks++;
    } else {
        r->regular = 0;
    }
    if (r->n < HCMPI_MAX_RUNS) {
        s->off[r->n] = r->off;
        s->len[r->n] = r->len;
    }
    r->prev = r->off;
    r->n++;
}

static void run_add(runs_t *r, MPI_Aint off, size_t len) {
    if (len == 0) return;
    if (r->len && off == r->off + (MPI_Aint)r->len) {
        r->len += len;
        return;
    }
    if (r->len) run_end(r);
    r->off = off;
    r->len = len;
}

static void runs_done(runs_t *r) {
    if (r->len) run_end(r);
    if (r->n && r->regular) return;
    r->s->kind =
        r->n && r->n <= HCMPI_MAX_RUNS ? HCMPI_SHAPE_RUNS : HCMPI_SHAPE_PACK;
    r->s->nruns = (int)r->n;
}

/* Packs one element of t from a probe whose bytes hold, pass by pass, the
 * bytes of their own offsets, and so learns where each packed byte came
 * from. 0 when MPI refuses. */
static int probe(MPI_Datatype t, hcmpi_type_t *ti) {
    size_t n = (size_t)ti->size, span = (size_t)ti->true_extent;
    unsigned char *src = malloc(span ? span : 1), *out = malloc(n ? n : 1);
    uint32_t *from = calloc(n ? n : 1, sizeof(*from));
    int ok = src && out && from;
    /* src - true_lb is the base whose element's data start at src. */
    void *base = (void *)((uintptr_t)src - (uintptr_t)ti->true_lb);
    for (unsigned shift = 0; ok && (shift == 0 || ((span - 1) >> shift));
         shift += 8) {
        int pos = 0;
        for (size_t i = 0; i < span; i++)
            src[i] = (unsigned char)(i >> shift);
        ok = PMPI_Pack(base, 1, t, out, (int)n, &pos, MPI_COMM_SELF) ==
                 MPI_SUCCESS &&
             (size_t)pos == n;
        for (size_t q = 0; ok && q < n; q++)
            from[q] |= (uint32_t)out[q] << shift;
    }
    if (ok) {
        runs_t r = {&ti->shape, 0, 0, 0, 0, 0};
        for (size_t q = 0; q < n; q++)
            run_add(&r, ti->true_lb + (MPI_Aint)from[q], 1);
        runs_done(&r);
    }
    free(src);
    free(out);
    free(from);
    return ok;
}

/* Appends times elements of a type (ti) from at, ext apart; 0 when they
 * take more than *budget runs or only MPI_Pack knows them. */
static int add_elements(runs_t *r, const hcmpi_type_t *ti, MPI_Aint at,
                        size_t times, size_t *budget) {
    const hcmpi_shape_t *s = &ti->shape;
    if (hcmpi_shape_is_run(s) && ti->extent == (MPI_Aint)ti->size) {
        run_add(r, at + s->first, times * (size_t)ti->size);
        return 1;
    }
    if (s->kind == HCMPI_SHAPE_PACK) return 0;
    size_t per = s->kind == HCMPI_SHAPE_RUNS ? (size_t)s->nruns : s->nblocks;
    if (times * per > *budget) return 0;
    *budget -= times * per;
    for (size_t e = 0; e < times; e++) {
        MPI_Aint b = at + (MPI_Aint)e * ti->extent;
        for (size_t k = 0; k < per; k++) {
            if (s->kind == HCMPI_SHAPE_RUNS)
                run_add(r, b + s->off[k], s->len[k]);
            else
                run_add(r, b + s->first + (MPI_Aint)k * s->stride, s->blen);
        }
    }
    return 1;
}

static int is_named(MPI_Datatype t) {
    int ni, na, nd, combiner;
    return PMPI_Type_get_envelope(t, &ni, &na, &nd, &combiner) == MPI_SUCCESS &&
           combiner == MPI_COMBINER_NAMED;
}

/* A constructor's inner type, described: a new handle, which we commit (a
 * probe packs it) and by_constructor frees. */
static int describe_inner(MPI_Datatype *t, hcmpi_type_t *ti) {
    return (is_named(*t) || PMPI_Type_commit(t) == MPI_SUCCESS) &&
           hcmpi_type_describe(*t, ti);
}

/* Contiguous, vector and hvector of a simple inner type: any count, as one
 * strided pattern. 0: not that simple. */
static int strided_of(int combiner, const int *ints, const MPI_Aint *aints,
                      const hcmpi_type_t *in, hcmpi_shape_t *out) {
    const hcmpi_shape_t *s = &in->shape;
    int block = hcmpi_shape_is_run(s);
    size_t bytes = (size_t)in->size;
    if (combiner == MPI_COMBINER_CONTIGUOUS) {
        if (block)
            hcmpi_shape_strided(out, (size_t)ints[0], bytes, in->extent,
                                s->first);
        else if (s->kind == HCMPI_SHAPE_STRIDED &&
                 in->extent == (MPI_Aint)s->nblocks * s->stride)
            hcmpi_shape_strided(out, (size_t)ints[0] * s->nblocks, s->blen,
                                s->stride, s->first);
        else
            return 0;
        return 1;
    }
    /* vector: count, blocklength, stride; hvector: count, blocklength and
     * a stride in bytes. */
    MPI_Aint stride = combiner == MPI_COMBINER_HVECTOR
                          ? aints[0]
                          : (MPI_Aint)ints[2] * in->extent;
    if (!block || (ints[1] > 1 && in->extent != in->size)) return 0;
    hcmpi_shape_strided(out, (size_t)ints[0], (size_t)ints[1] * bytes, stride,
                        s->first);
    return 1;
}

/* The shape from t's constructor: 1, or 0 when it is none of those above
 * or too irregular. */
static int by_constructor(MPI_Datatype t, hcmpi_type_t *ti) {
    int ni, na, nd, combiner, ok = 0;
    if (PMPI_Type_get_envelope(t, &ni, &na, &nd, &combiner) != MPI_SUCCESS ||
        ni > 2 * DECODE_MAX + 2 || na > DECODE_MAX || nd > DECODE_MAX || nd < 1)
        return 0;
    int *ints = malloc(sizeof(int) * (size_t)(ni + 3));
    MPI_Aint *aints = malloc(sizeof(MPI_Aint) * (size_t)(na + 1));
    MPI_Datatype *types = malloc(sizeof(MPI_Datatype) * (size_t)nd);
    hcmpi_type_t in;
    if (!ints || !aints || !types ||
        PMPI_Type_get_contents(t, ni, na, nd, ints, aints, types) !=
            MPI_SUCCESS) {
        nd = 0; /* nothing to free */
        goto out;
    }
    size_t budget = DECODE_MAX;
    runs_t r = {&ti->shape, 0, 0, 0, 0, 0};
    switch (combiner) {
    case MPI_COMBINER_DUP:
    case MPI_COMBINER_RESIZED: /* the same bytes, another extent */
        if ((ok = describe_inner(&types[0], &in))) ti->shape = in.shape;
        break;
    case MPI_COMBINER_CONTIGUOUS:
    case MPI_COMBINER_VECTOR:
    case MPI_COMBINER_HVECTOR:
        ok = describe_inner(&types[0], &in) &&
             strided_of(combiner, ints, aints, &in, &ti->shape);
        break;
    case MPI_COMBINER_INDEXED:        /* count, lengths, displacements */
    case MPI_COMBINER_HINDEXED:       /* count, lengths; displacements */
    case MPI_COMBINER_INDEXED_BLOCK:  /* count, length, displacements */
    case MPI_COMBINER_HINDEXED_BLOCK: /* count, length; displacements */
    case MPI_COMBINER_STRUCT: {       /* count, lengths; displacements */
        int n = ints[0], blocky = combiner == MPI_COMBINER_INDEXED_BLOCK ||
                                  combiner == MPI_COMBINER_HINDEXED_BLOCK;
        ok = 1;
        for (int i = 0; ok && i < n; i++) {
            if (i == 0 || combiner == MPI_COMBINER_STRUCT)
                ok = describe_inner(
                    &types[combiner == MPI_COMBINER_STRUCT ? i : 0], &in);
            int len = blocky ? ints[1] : ints[1 + i];
            MPI_Aint at = combiner == MPI_COMBINER_INDEXED
                              ? ints[1 + n + i] * in.extent
                          : combiner == MPI_COMBINER_INDEXED_BLOCK
                              ? ints[2 + i] * in.extent
                              : aints[i];
            ok = ok && len >= 0 &&
                 add_elements(&r, &in, at, (size_t)len, &budget);
        }
        if (ok) runs_done(&r);
        break;
    }
    default:
        break;
    }
out:
    for (int i = 0; i < nd; i++)
        if (!is_named(types[i])) PMPI_Type_free(&types[i]);
    free(ints);
    free(aints);
    free(types);
    return ok && ti->shape.kind != HCMPI_SHAPE_PACK;
}

int hcmpi_type_describe(MPI_Datatype t, hcmpi_type_t *ti) {
    int ni, na, nd, combiner;
    MPI_Aint lb;
    if (PMPI_Type_size_x(t, &ti->size) != MPI_SUCCESS || ti->size < 0 ||
        PMPI_Type_get_extent(t, &lb, &ti->extent) != MPI_SUCCESS ||
        PMPI_Type_get_true_extent(t, &ti->true_lb, &ti->true_extent) !=
            MPI_SUCCESS ||
        PMPI_Type_get_envelope(t, &ni, &na, &nd, &combiner) != MPI_SUCCESS)
        return 0;
    ti->shape.kind = HCMPI_SHAPE_PACK;
    /* A predefined type lists its bytes in order, padding aside. */
    if (combiner == MPI_COMBINER_NAMED) {
        if (ti->size == ti->true_extent)
            hcmpi_shape_strided(&ti->shape, 1, (size_t)ti->size, 0,
                                ti->true_lb);
        return 1;
    }
    if (by_constructor(t, ti)) return 1;
    ti->shape.kind = HCMPI_SHAPE_PACK;
    if (ti->size <= PROBE_MAX && ti->true_extent <= PROBE_MAX && !probe(t, ti))
        ti->shape.kind = HCMPI_SHAPE_PACK;
    return 1;
}
