/* Any datatype as the bytes it holds, for the data-movement collectives.
 * MPI lets each rank of a bcast, allgather or alltoall describe its data
 * with its own (count, datatype), as long as the type signatures match, so
 * the ranks agree only on the number of bytes. HCOMM moves those bytes:
 * a rank whose data lie contiguous in type-map order gives HCOMM its
 * buffer, any other packs into or unpacks from pooled scratch with
 * PMPI_Pack and PMPI_Unpack.
 *
 * Contiguous means more than size == true extent: a type may list its
 * items out of memory order (indexed {1, 0}) or read one item twice and
 * skip another, and still fill its true extent. A derived type is taken
 * as contiguous when its constructor proves it (dup, contiguous, vector
 * and resized of a contiguous type) or when packing a probe of it returns
 * the probe's bytes in order; what we learn is kept in an attribute of the
 * type, so each datatype is examined once. */
#include "compat_mpi/interpose.h"
#include "core/context.h"
#include "core/pool.h"

#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* What one element of a type is: its size, extent and bounds, and whether
 * its bytes lie in type-map order from its true lower bound. */
typedef struct {
    MPI_Count size;
    MPI_Aint extent, true_lb, true_extent;
    int in_order;
} type_info_t;

/* Types whose constructor proves nothing are probed up to this size: the
 * probe packs the type once per byte of an offset (3 times at 1 MiB). */
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

/* Whether packing one element of t gives its bytes in memory order: each
 * byte of the true extent holds one byte of its offset, once per byte of
 * the largest offset, so that no two bytes can trade places unseen. */
static int probe(MPI_Datatype t, const type_info_t *ti) {
    size_t n = (size_t)ti->size;
    unsigned char *src = malloc(n), *out = malloc(n);
    int ok = src && out;
    for (unsigned shift = 0; ok && (shift == 0 || ((n - 1) >> shift));
         shift += 8) {
        int pos = 0;
        for (size_t i = 0; i < n; i++)
            src[i] = (unsigned char)(i >> shift);
        /* src - true_lb is the base whose element's data start at src. */
        void *base = (void *)((uintptr_t)src - (uintptr_t)ti->true_lb);
        ok = PMPI_Pack(base, 1, t, out, (int)n, &pos, MPI_COMM_SELF) ==
                 MPI_SUCCESS &&
             (size_t)pos == n && memcmp(src, out, n) == 0;
    }
    free(src);
    free(out);
    return ok;
}

static int info_of(MPI_Datatype t, type_info_t *ti);

/* The constructors that keep an inner type's order: 1 in order, 0 not,
 * -1 unknown. Their inner types are new handles we free. */
static int by_constructor(MPI_Datatype t, int combiner) {
    int ni, na, nd, comb, ints[3];
    MPI_Aint aints[2];
    MPI_Datatype inner;
    type_info_t ii;
    if (PMPI_Type_get_envelope(t, &ni, &na, &nd, &comb) != MPI_SUCCESS ||
        ni > 3 || na > 2 || nd != 1)
        return -1;
    if (PMPI_Type_get_contents(t, ni, na, nd, ints, aints, &inner) !=
        MPI_SUCCESS)
        return -1;
    int r = -1, ic, dummy;
    int named = PMPI_Type_get_envelope(inner, &dummy, &dummy, &dummy, &ic) ==
                    MPI_SUCCESS &&
                ic == MPI_COMBINER_NAMED;
    /* A copy is not committed, and the probe packs it. */
    if ((named || PMPI_Type_commit(&inner) == MPI_SUCCESS) &&
        info_of(inner, &ii)) {
        /* Elements of the inner type follow each other without a gap. */
        int packed = ii.in_order && ii.extent == (MPI_Aint)ii.size;
        switch (combiner) {
        case MPI_COMBINER_DUP:
        case MPI_COMBINER_RESIZED: /* the same bytes, another extent */
            r = ii.in_order;
            break;
        case MPI_COMBINER_CONTIGUOUS:
            r = ints[0] <= 1 ? ii.in_order : packed;
            break;
        case MPI_COMBINER_VECTOR: /* count, blocklength, stride */
            r = ints[0] <= 1 ? (ints[1] <= 1 ? ii.in_order : packed)
                             : packed && ints[2] == ints[1];
            break;
        case MPI_COMBINER_HVECTOR:
            r = ints[0] <= 1
                    ? (ints[1] <= 1 ? ii.in_order : packed)
                    : packed && aints[0] == (MPI_Aint)ints[1] * ii.extent;
            break;
        default:
            break;
        }
    }
    if (!named) PMPI_Type_free(&inner);
    return r;
}

/* t's element, computed. */
static int info_of(MPI_Datatype t, type_info_t *ti) {
    int ni, na, nd, combiner;
    if (!bounds(t, ti) ||
        PMPI_Type_get_envelope(t, &ni, &na, &nd, &combiner) != MPI_SUCCESS)
        return 0;
    /* Predefined types list their bytes in order. */
    ti->in_order = ti->size == ti->true_extent;
    if (combiner == MPI_COMBINER_NAMED || !ti->in_order) return 1;
    switch (combiner) {
    case MPI_COMBINER_DUP:
    case MPI_COMBINER_RESIZED:
    case MPI_COMBINER_CONTIGUOUS:
    case MPI_COMBINER_VECTOR:
    case MPI_COMBINER_HVECTOR: {
        int r = by_constructor(t, combiner);
        if (r >= 0) {
            ti->in_order = r;
            return 1;
        }
        break;
    }
    default:
        break;
    }
    ti->in_order = ti->size <= PROBE_MAX && probe(t, ti);
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
    out->contiguous =
        ti.in_order && (count <= 1 || ti.extent == (MPI_Aint)ti.size);
    /* MPI_BOTTOM (address 0) with absolute displacements included. */
    out->data = (char *)((uintptr_t)buf + (uintptr_t)ti.true_lb);
    return 1;
}

/* Packs (unpack = 0) or unpacks whole elements, at most INT_MAX bytes a
 * call: MPI_Pack counts in int. */
static int pack_elements(const hcmpi_layout_t *l, char *packed, int unpack) {
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

int hcmpi_pack(const hcmpi_layout_t *l, void *dst) {
    if (!l->contiguous) return pack_elements(l, dst, 0);
    memcpy(dst, l->data, l->bytes);
    return MPI_SUCCESS;
}

int hcmpi_unpack(const hcmpi_layout_t *l, const void *src) {
    if (!l->contiguous) return pack_elements(l, (char *)(uintptr_t)src, 1);
    memcpy(l->data, src, l->bytes);
    return MPI_SUCCESS;
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

/* Every rank must move the same bytes whether it packs or not, so packing
 * must give the raw bytes in type-map order (it may not on a heterogeneous
 * MPI, which could add a header or convert). Three ints of a strided
 * vector tell. */
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
