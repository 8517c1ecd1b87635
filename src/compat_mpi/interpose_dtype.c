/* Any datatype as the bytes it holds, for the data-movement collectives.
 * MPI lets each rank of a bcast, allgather or alltoall describe its data
 * with its own (count, datatype), as long as the type signatures match, so
 * the ranks agree only on the number of bytes. HCOMM moves those bytes:
 * a rank whose data lie contiguous in type-map order gives HCOMM its
 * buffer, any other packs into or unpacks from pooled scratch.
 *
 * Contiguous means more than size == true extent: a type may list its
 * items out of memory order (indexed {1, 0}) or read one item twice and
 * skip another, and still fill its true extent. So each derived datatype
 * is flattened once, into the shape of interpose.h: from its constructor
 * (dup, resized, contiguous, vector, hvector of simpler types), or by
 * packing a probe of it whose bytes name their own offsets. The shape is
 * kept in an attribute of the type. Packing then is a copy loop, several
 * times faster than MPI_Pack on small blocks; MPI_Pack remains for shapes
 * with many irregular runs. */
#include "compat_mpi/interpose.h"
#include "core/context.h"
#include "core/pool.h"

#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* What one element of a type is. */
typedef struct {
    MPI_Count size;
    MPI_Aint extent, true_lb, true_extent;
    hcmpi_shape_t shape;
} type_info_t;

/* Types are probed up to this many bytes (read and packed): the probe
 * packs the type once per byte of the largest offset. */
#define PROBE_MAX ((MPI_Count)1 << 20)

static int type_keyval = MPI_KEYVAL_INVALID;
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;

static int info_delete(MPI_Datatype t, int keyval, void *value, void *extra) {
    (void)t;
    (void)keyval;
    (void)extra;
    free(value);
    return MPI_SUCCESS;
}

static int bounds(MPI_Datatype t, type_info_t *ti) {
    MPI_Aint lb;
    return PMPI_Type_size_x(t, &ti->size) == MPI_SUCCESS &&
           PMPI_Type_get_extent(t, &lb, &ti->extent) == MPI_SUCCESS &&
           PMPI_Type_get_true_extent(t, &ti->true_lb, &ti->true_extent) ==
               MPI_SUCCESS &&
           ti->size >= 0;
}

static void set_strided(hcmpi_shape_t *s, size_t nblocks, size_t blen,
                        MPI_Aint stride, MPI_Aint first) {
    s->kind = HCMPI_SHAPE_STRIDED;
    s->nblocks = nblocks;
    s->blen = blen;
    s->stride = stride;
    s->first = first;
}

/* One block, or blocks that follow each other: the bytes are contiguous. */
static int one_run(const hcmpi_shape_t *s) {
    return s->kind == HCMPI_SHAPE_STRIDED &&
           (s->nblocks <= 1 || s->stride == (MPI_Aint)s->blen);
}

/* Runs of consecutive bytes, in packing order, into a shape: one strided
 * pattern, few runs, or MPI_Pack. */
typedef struct {
    hcmpi_shape_t *s;
    size_t n, len;      /* runs so far; the current one's length */
    MPI_Aint off, prev; /* the current run's start; the previous one's */
    int regular;        /* every run blen long, stride apart */
} runs_t;

static void run_end(runs_t *r) {
    hcmpi_shape_t *s = r->s;
    if (r->n == 0) {
        set_strided(s, 1, r->len, 0, r->off);
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

/* Packs one element of t from a probe whose bytes hold, pass by pass, the
 * bytes of their own offsets, and so learns where each packed byte came
 * from. 0 when MPI refuses. */
static int probe(MPI_Datatype t, type_info_t *ti) {
    size_t n = (size_t)ti->size, span = (size_t)ti->true_extent;
    unsigned char *src = malloc(span ? span : 1), *out = malloc(n);
    uint32_t *from = calloc(n, sizeof(*from));
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
        for (size_t q = 0; q < n; q++) {
            MPI_Aint at = ti->true_lb + (MPI_Aint)from[q];
            if (q && at == r.off + (MPI_Aint)r.len) {
                r.len++;
                continue;
            }
            if (q) run_end(&r);
            r.off = at;
            r.len = 1;
        }
        if (n) run_end(&r);
        if (!r.regular) {
            ti->shape.kind =
                r.n <= HCMPI_MAX_RUNS ? HCMPI_SHAPE_RUNS : HCMPI_SHAPE_PACK;
            ti->shape.nruns = (int)r.n;
        }
    }
    free(src);
    free(out);
    free(from);
    return ok;
}

static int info_of(MPI_Datatype t, type_info_t *ti);

/* The shape of a large type from its constructor, when it is made of
 * strided pieces: 1, or 0 (MPI_Pack). Its inner type is a new handle we
 * commit (the probe packs it) and free. */
static int by_constructor(MPI_Datatype t, int combiner, type_info_t *ti) {
    int ni, na, nd, comb, ints[3] = {0}, ic, dummy;
    MPI_Aint aints[2] = {0};
    MPI_Datatype inner;
    type_info_t ii;
    if (PMPI_Type_get_envelope(t, &ni, &na, &nd, &comb) != MPI_SUCCESS ||
        ni > 3 || na > 2 || nd != 1 ||
        PMPI_Type_get_contents(t, ni, na, nd, ints, aints, &inner) !=
            MPI_SUCCESS)
        return 0;
    int named = PMPI_Type_get_envelope(inner, &dummy, &dummy, &dummy, &ic) ==
                    MPI_SUCCESS &&
                ic == MPI_COMBINER_NAMED;
    int ok = (named || PMPI_Type_commit(&inner) == MPI_SUCCESS) &&
             info_of(inner, &ii);
    hcmpi_shape_t *in = &ii.shape;
    /* The inner type as one block, and its elements back to back. */
    int block = ok && one_run(in), packed = block && ii.extent == ii.size;
    size_t bytes = (size_t)ii.size;
    MPI_Aint stride = ints[0] > 1 && combiner == MPI_COMBINER_HVECTOR
                          ? aints[0]
                          : (MPI_Aint)ints[ni > 2 ? 2 : 0] * ii.extent;
    if (ok) {
        switch (combiner) {
        case MPI_COMBINER_DUP:
        case MPI_COMBINER_RESIZED: /* the same bytes, another extent */
            ti->shape = *in;
            break;
        case MPI_COMBINER_CONTIGUOUS: /* count */
            if (block)
                set_strided(&ti->shape, (size_t)ints[0], bytes, ii.extent,
                            in->first);
            else if (in->kind == HCMPI_SHAPE_STRIDED &&
                     ii.extent == (MPI_Aint)in->nblocks * in->stride)
                set_strided(&ti->shape, (size_t)ints[0] * in->nblocks, in->blen,
                            in->stride, in->first);
            else
                ok = 0;
            break;
        case MPI_COMBINER_VECTOR:  /* count, blocklength, stride */
        case MPI_COMBINER_HVECTOR: /* count, blocklength; stride */
            if (packed || (block && ints[1] == 1))
                set_strided(&ti->shape, (size_t)ints[0],
                            (size_t)ints[1] * bytes, stride, in->first);
            else
                ok = 0;
            break;
        default:
            ok = 0;
        }
    }
    if (!named) PMPI_Type_free(&inner);
    return ok;
}

/* t's element, computed. */
static int info_of(MPI_Datatype t, type_info_t *ti) {
    int ni, na, nd, combiner;
    if (!bounds(t, ti) ||
        PMPI_Type_get_envelope(t, &ni, &na, &nd, &combiner) != MPI_SUCCESS)
        return 0;
    ti->shape.kind = HCMPI_SHAPE_PACK;
    /* A predefined type lists its bytes in order, padding aside. */
    if (combiner == MPI_COMBINER_NAMED) {
        if (ti->size == ti->true_extent)
            set_strided(&ti->shape, 1, (size_t)ti->size, 0, ti->true_lb);
        return 1;
    }
    if (ti->size <= PROBE_MAX && ti->true_extent <= PROBE_MAX)
        return probe(t, ti) || (ti->shape.kind = HCMPI_SHAPE_PACK, 1);
    if (!by_constructor(t, combiner, ti)) ti->shape.kind = HCMPI_SHAPE_PACK;
    return 1;
}

/* t's element, from its attribute (derived types) or computed (named
 * ones, which cost a few queries and cannot carry our attribute on every
 * MPI). */
static int cached_info(MPI_Datatype t, type_info_t *ti) {
    int ni, na, nd, combiner, flag = 0;
    void *v = NULL;
    if (PMPI_Type_get_envelope(t, &ni, &na, &nd, &combiner) != MPI_SUCCESS)
        return 0;
    if (combiner == MPI_COMBINER_NAMED || type_keyval == MPI_KEYVAL_INVALID)
        return info_of(t, ti);
    if (PMPI_Type_get_attr(t, type_keyval, &v, &flag) != MPI_SUCCESS) return 0;
    if (flag) {
        *ti = *(type_info_t *)v;
        return 1;
    }
    /* Set once: a reader never sees its entry replaced and freed. */
    pthread_mutex_lock(&cache_lock);
    int ok = PMPI_Type_get_attr(t, type_keyval, &v, &flag) == MPI_SUCCESS;
    if (ok && flag) {
        *ti = *(type_info_t *)v;
    } else if (ok && (ok = info_of(t, ti))) {
        type_info_t *keep = malloc(sizeof(*keep));
        if (keep) {
            *keep = *ti;
            if (PMPI_Type_set_attr(t, type_keyval, keep) != MPI_SUCCESS)
                free(keep);
        }
    }
    pthread_mutex_unlock(&cache_lock);
    return ok;
}

int hcmpi_layout(const void *buf, size_t count, MPI_Datatype dtype,
                 hcmpi_layout_t *out) {
    type_info_t ti;
    out->buf = buf;
    out->count = count;
    out->dtype = dtype;
    size_t size = hcmpi_map_size(dtype);
    if (size) { /* the common case: no MPI query */
        out->elem = size;
        out->extent = (MPI_Aint)size;
        out->data = (char *)(uintptr_t)buf;
        out->contiguous = 1;
        return !__builtin_mul_overflow(count, size, &out->bytes);
    }
    if (dtype == MPI_DATATYPE_NULL || !cached_info(dtype, &ti)) return 0;
    out->elem = (size_t)ti.size;
    out->extent = ti.extent;
    if (__builtin_mul_overflow(count, out->elem, &out->bytes)) return 0;
    hcmpi_shape_t *s = &out->shape;
    *s = ti.shape;
    out->contiguous =
        one_run(s) && (count <= 1 || ti.extent == (MPI_Aint)ti.size);
    /* MPI_BOTTOM (address 0) with absolute displacements included. */
    out->data = (char *)((uintptr_t)buf + (uintptr_t)s->first);
    /* Elements that continue one strided pattern: one loop over all. */
    if (!out->contiguous && count > 1 && s->kind == HCMPI_SHAPE_STRIDED) {
        if (one_run(s))
            set_strided(s, count, out->elem, ti.extent, s->first);
        else if (ti.extent == (MPI_Aint)s->nblocks * s->stride)
            set_strided(s, count * s->nblocks, s->blen, s->stride, s->first);
    }
    return 1;
}

/* n blocks of blen bytes, stride apart from at, to or from packed: the
 * common small blocks as fixed-size copies the compiler inlines. */
static char *strided(char *packed, uintptr_t at, size_t n, size_t blen,
                     MPI_Aint stride, int unpack) {
#define BLOCKS(len)                                                            \
    for (size_t i = 0; i < n; i++, packed += (len), at += (uintptr_t)stride) { \
        if (unpack)                                                            \
            memcpy((void *)at, packed, (len));                                 \
        else                                                                   \
            memcpy(packed, (const void *)at, (len));                           \
    }                                                                          \
    break
    switch (blen) {
    case 4:
        BLOCKS(4);
    case 8:
        BLOCKS(8);
    case 16:
        BLOCKS(16);
    default:
        BLOCKS(blen);
    }
#undef BLOCKS
    return packed;
}

/* MPI_Pack counts in int: whole elements, at most INT_MAX bytes a call. */
static int mpi_pack(const hcmpi_layout_t *l, char *packed, int unpack) {
    size_t step = l->elem ? HCMPI_MAX_BLOCK / l->elem : l->count;
    if (step == 0) return MPI_ERR_COUNT; /* an element over 2 GiB */
    if (step > INT_MAX) step = INT_MAX;
    for (size_t i = 0; i < l->count; i += step) {
        size_t n = l->count - i < step ? l->count - i : step;
        int pos = 0, rc, bytes = (int)(n * l->elem);
        uintptr_t at = (uintptr_t)l->buf + (uintptr_t)((MPI_Aint)i * l->extent);
        char *p = packed + i * l->elem;
        if (unpack)
            rc = PMPI_Unpack(p, bytes, &pos, (void *)at, (int)n, l->dtype,
                             MPI_COMM_SELF);
        else
            rc = PMPI_Pack((const void *)at, (int)n, l->dtype, p, bytes, &pos,
                           MPI_COMM_SELF);
        if (rc != MPI_SUCCESS) return rc;
    }
    return MPI_SUCCESS;
}

static int copy(const hcmpi_layout_t *l, char *packed, int unpack) {
    const hcmpi_shape_t *s = &l->shape;
    uintptr_t base = (uintptr_t)l->buf;
    if (l->contiguous) {
        if (unpack)
            memcpy(l->data, packed, l->bytes);
        else
            memcpy(packed, l->data, l->bytes);
        return MPI_SUCCESS;
    }
    switch (s->kind) {
    case HCMPI_SHAPE_STRIDED:
        /* After hcmpi_layout, one pattern over all elements or per
         * element. */
        if (s->nblocks * s->blen == l->bytes) {
            strided(packed, base + (uintptr_t)s->first, s->nblocks, s->blen,
                    s->stride, unpack);
            return MPI_SUCCESS;
        }
        for (size_t e = 0; e < l->count; e++) {
            uintptr_t at = base + (uintptr_t)((MPI_Aint)e * l->extent);
            packed = strided(packed, at + (uintptr_t)s->first, s->nblocks,
                             s->blen, s->stride, unpack);
        }
        return MPI_SUCCESS;
    case HCMPI_SHAPE_RUNS:
        for (size_t e = 0; e < l->count; e++) {
            uintptr_t at = base + (uintptr_t)((MPI_Aint)e * l->extent);
            for (int r = 0; r < s->nruns; r++)
                packed = strided(packed, at + (uintptr_t)s->off[r], 1,
                                 s->len[r], 0, unpack);
        }
        return MPI_SUCCESS;
    default:
        return mpi_pack(l, packed, unpack);
    }
}

int hcmpi_pack(const hcmpi_layout_t *l, void *dst) {
    return copy(l, dst, 0);
}

int hcmpi_unpack(const hcmpi_layout_t *l, const void *src) {
    return copy(l, (char *)(uintptr_t)src, 1);
}

hcomm_dtype_t hcmpi_unit(size_t unit, size_t *n) {
    if (unit % 8 == 0) return *n = unit / 8, HCOMM_UINT64;
    if (unit % 4 == 0) return *n = unit / 4, HCOMM_UINT32;
    return *n = unit, HCOMM_UINT8;
}

void *hcmpi_scratch(size_t bytes) {
    return hcomm_pool_get(&hcomm_ctx.pool, bytes);
}

void hcmpi_scratch_put(void *p) {
    hcomm_pool_put(&hcomm_ctx.pool, p);
}

/* Every rank must move the same bytes whether it packs or not, so MPI_Pack
 * (the probe, irregular types) must give the raw bytes in type-map order
 * (it may not on a heterogeneous MPI, which could add a header or
 * convert). Three ints of a strided vector tell. */
int hcmpi_dtype_init(void) {
    const int v[5] = {0x01020304, -1, 0x05060708, -1, 0x090a0b0c};
    int want[3] = {v[0], v[2], v[4]}, got[4] = {0}, pos = 0, ok;
    MPI_Datatype t;
    if (PMPI_Type_vector(3, 1, 2, MPI_INT, &t) != MPI_SUCCESS) return 0;
    ok = PMPI_Type_commit(&t) == MPI_SUCCESS &&
         PMPI_Pack(v, 1, t, got, (int)sizeof(got), &pos, MPI_COMM_SELF) ==
             MPI_SUCCESS &&
         pos == (int)sizeof(want) && memcmp(got, want, sizeof(want)) == 0;
    PMPI_Type_free(&t);
    if (ok && type_keyval == MPI_KEYVAL_INVALID &&
        PMPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, info_delete,
                                &type_keyval, NULL) != MPI_SUCCESS)
        type_keyval = MPI_KEYVAL_INVALID; /* every type computed per call */
    return ok;
}
