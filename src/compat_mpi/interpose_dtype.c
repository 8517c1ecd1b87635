/* Any datatype as the bytes it holds, for the data-movement collectives.
 * MPI lets each rank of a bcast, allgather or alltoall describe its data
 * with its own (count, datatype), as long as the type signatures match, so
 * the ranks agree only on the number of bytes. HCOMM moves those bytes:
 * a rank whose data lie contiguous in type-map order gives HCOMM its
 * buffer, any other packs into or unpacks from pooled scratch.
 *
 * Each derived datatype is flattened once (interpose_shape.c) and its
 * shape kept in an attribute of the type. Packing then is a copy loop,
 * several times faster than MPI_Pack on small blocks; MPI_Pack remains
 * for types of many irregular pieces. */
#include "compat_mpi/interpose.h"
#include "core/gpu.h"
#include "core/context.h"
#include "core/pool.h"

#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int type_keyval = MPI_KEYVAL_INVALID;
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;

static int info_delete(MPI_Datatype t, int keyval, void *value, void *extra) {
    (void)t;
    (void)keyval;
    (void)extra;
    free(value);
    return MPI_SUCCESS;
}

/* t's element, from its attribute (derived types) or computed (named
 * ones, which cost a few queries and cannot carry our attribute on every
 * MPI). */
static int cached_info(MPI_Datatype t, hcmpi_type_t *ti) {
    int ni, na, nd, combiner, flag = 0;
    void *v = NULL;
    if (PMPI_Type_get_envelope(t, &ni, &na, &nd, &combiner) != MPI_SUCCESS)
        return 0;
    if (combiner == MPI_COMBINER_NAMED || type_keyval == MPI_KEYVAL_INVALID)
        return hcmpi_type_describe(t, ti);
    if (PMPI_Type_get_attr(t, type_keyval, &v, &flag) != MPI_SUCCESS) return 0;
    if (flag) {
        *ti = *(hcmpi_type_t *)v;
        return 1;
    }
    /* Set once: a reader never sees its entry replaced and freed. */
    pthread_mutex_lock(&cache_lock);
    int ok = PMPI_Type_get_attr(t, type_keyval, &v, &flag) == MPI_SUCCESS;
    if (ok && flag) {
        *ti = *(hcmpi_type_t *)v;
    } else if (ok && (ok = hcmpi_type_describe(t, ti))) {
        hcmpi_type_t *keep = malloc(sizeof(*keep));
        if (keep) {
            *keep = *ti;
            if (PMPI_Type_set_attr(t, type_keyval, keep) != MPI_SUCCESS)
                free(keep);
        }
    }
    pthread_mutex_unlock(&cache_lock);
    return ok;
}

int hcmpi_layout_derived(const void *buf, size_t count, MPI_Datatype dtype,
                         hcmpi_layout_t *out) {
    hcmpi_type_t ti;
    int device;
    /* The packing below runs on the CPU: a derived type on device memory
     * goes to MPI as it is (README, "Unmodified MPI programs"). */
    if (!hcomm_gpu_all_host(buf, NULL) &&
        hcomm_gpu_memtype(buf, &device) == HCOMM_MEM_DEVICE)
        return 0;
    out->buf = buf;
    out->count = count;
    out->dtype = dtype;
    if (dtype == MPI_DATATYPE_NULL || !cached_info(dtype, &ti)) return 0;
    out->elem = (size_t)ti.size;
    out->extent = ti.extent;
    if (__builtin_mul_overflow(count, out->elem, &out->bytes)) return 0;
    hcmpi_shape_t *s = &out->shape;
    *s = ti.shape;
    out->contiguous =
        hcmpi_shape_is_run(s) && (count <= 1 || ti.extent == (MPI_Aint)ti.size);
    /* MPI_BOTTOM (address 0) with absolute displacements included. */
    out->data = (char *)((uintptr_t)buf + (uintptr_t)s->first);
    /* Elements that continue one strided pattern: one loop over all. */
    if (!out->contiguous && count > 1 && s->kind == HCMPI_SHAPE_STRIDED) {
        if (hcmpi_shape_is_run(s))
            hcmpi_shape_strided(s, count, out->elem, ti.extent, s->first);
        else if (ti.extent == (MPI_Aint)s->nblocks * s->stride)
            hcmpi_shape_strided(s, count * s->nblocks, s->blen, s->stride,
                                s->first);
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

/* MPI_Pack counts in int: whole elements, at most INT_MAX bytes a call.
 * MPICH 4.0 refuses MPI_BOTTOM (NULL) as the buffer: then the same bytes
 * go through the type moved back one byte, from address 1. */
static int mpi_pack(const hcmpi_layout_t *l, char *packed, int unpack) {
    size_t step = l->elem ? HCMPI_MAX_BLOCK / l->elem : l->count;
    MPI_Datatype t = l->dtype, moved = MPI_DATATYPE_NULL;
    uintptr_t base = (uintptr_t)l->buf;
    int rc = MPI_SUCCESS, one = 1;
    MPI_Aint back = -1;
    if (step == 0) return MPI_ERR_COUNT; /* an element over 2 GiB */
    if (step > INT_MAX) step = INT_MAX;
    if (!base) {
        if ((rc = PMPI_Type_create_hindexed(1, &one, &back, t, &moved)) ||
            (rc = PMPI_Type_commit(&moved)))
            return rc;
        t = moved;
        base = 1;
    }
    for (size_t i = 0; !rc && i < l->count; i += step) {
        size_t n = l->count - i < step ? l->count - i : step;
        int pos = 0, bytes = (int)(n * l->elem);
        uintptr_t at = base + (uintptr_t)((MPI_Aint)i * l->extent);
        char *p = packed + i * l->elem;
        if (unpack)
            rc = PMPI_Unpack(p, bytes, &pos, (void *)at, (int)n, t,
                             MPI_COMM_SELF);
        else
            rc = PMPI_Pack((const void *)at, (int)n, t, p, bytes, &pos,
                           MPI_COMM_SELF);
    }
    if (moved != MPI_DATATYPE_NULL) PMPI_Type_free(&moved);
    return rc;
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
