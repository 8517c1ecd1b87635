/* MPI datatypes and operations -> HCOMM's, for reductions. Only predefined
 * datatypes whose size and signedness match an HCOMM type exactly are
 * reduced; the sizes are asked of MPI at init, so MPI_LONG, MPI_INTEGER
 * and the like map by what they are on this platform and in this MPI
 * build. The table also gives data movement the size of the common types
 * without asking MPI (interpose_dtype.c handles every other). */
#include "compat_mpi/interpose.h"

#include <limits.h>
#include <stddef.h>

enum { SIGNED, UNSIGNED, FLOATING, MOVED_ONLY };

/* MPI-3 lists MPI_CHAR among no reduction's types; Open MPI and MPICH
 * reduce it as C's char, signed or not as the platform has it. */
#define CHAR_KIND (CHAR_MIN < 0 ? SIGNED : UNSIGNED)

typedef struct {
    MPI_Datatype mpi;
    int kind;
} candidate_t;

typedef struct {
    MPI_Datatype mpi;
    hcomm_dtype_t hc;
    int reducible;
    size_t size;
} entry_t;

/* The most common first: the table is searched linearly on every call. */
static const candidate_t candidates[] = {
    {MPI_DOUBLE, FLOATING},
    {MPI_FLOAT, FLOATING},
    {MPI_INT, SIGNED},
    {MPI_LONG, SIGNED},
    {MPI_UNSIGNED, UNSIGNED},
    {MPI_UNSIGNED_LONG, UNSIGNED},
    {MPI_LONG_LONG, SIGNED},
    {MPI_UNSIGNED_LONG_LONG, UNSIGNED},
    {MPI_BYTE, MOVED_ONLY},
    {MPI_CHAR, CHAR_KIND},
    {MPI_SIGNED_CHAR, SIGNED},
    {MPI_UNSIGNED_CHAR, UNSIGNED},
    {MPI_INT8_T, SIGNED},
    {MPI_UINT8_T, UNSIGNED},
    {MPI_INT32_T, SIGNED},
    {MPI_UINT32_T, UNSIGNED},
    {MPI_INT64_T, SIGNED},
    {MPI_UINT64_T, UNSIGNED},
    /* Fortran's, which C programs may use too. */
    {MPI_DOUBLE_PRECISION, FLOATING},
    {MPI_REAL, FLOATING},
    {MPI_INTEGER, SIGNED},
    {MPI_REAL4, FLOATING},
    {MPI_REAL8, FLOATING},
    {MPI_INTEGER1, SIGNED},
    {MPI_INTEGER4, SIGNED},
    {MPI_INTEGER8, SIGNED},
    {MPI_CHARACTER, MOVED_ONLY},
};
#define NCANDIDATES (sizeof(candidates) / sizeof(candidates[0]))

static entry_t table[NCANDIDATES];
static int ntable;

static int hcomm_type_for(int kind, int size, hcomm_dtype_t *out) {
    switch (kind * 16 + size) {
    case SIGNED * 16 + 1:
        *out = HCOMM_INT8;
        return 1;
    case SIGNED * 16 + 4:
        *out = HCOMM_INT32;
        return 1;
    case SIGNED * 16 + 8:
        *out = HCOMM_INT64;
        return 1;
    case UNSIGNED * 16 + 1:
    case MOVED_ONLY * 16 + 1:
        *out = HCOMM_UINT8;
        return 1;
    case UNSIGNED * 16 + 4:
        *out = HCOMM_UINT32;
        return 1;
    case UNSIGNED * 16 + 8:
        *out = HCOMM_UINT64;
        return 1;
    case FLOATING * 16 + 4:
        *out = HCOMM_FLOAT32;
        return 1;
    case FLOATING * 16 + 8:
        *out = HCOMM_FLOAT64;
        return 1;
    default:
        return 0; /* 2-byte integers, long double, ... */
    }
}

void hcmpi_map_init(void) {
    ntable = 0;
    for (size_t i = 0; i < NCANDIDATES; i++) {
        int size = 0;
        hcomm_dtype_t hc;
        /* An MPI built without Fortran has these as null or empty types. */
        if (candidates[i].mpi == MPI_DATATYPE_NULL ||
            PMPI_Type_size(candidates[i].mpi, &size) != MPI_SUCCESS ||
            !hcomm_type_for(candidates[i].kind, size, &hc))
            continue;
        table[ntable++] =
            (entry_t){candidates[i].mpi, hc, candidates[i].kind != MOVED_ONLY,
                      (size_t)size};
    }
}

/* Derived or predefined: only the statistics need to know. */
static hcmpi_why_t why_dtype(MPI_Datatype dtype) {
    int ni, na, nd, combiner = MPI_COMBINER_NAMED;
    if (hcmpi.stats && dtype != MPI_DATATYPE_NULL)
        PMPI_Type_get_envelope(dtype, &ni, &na, &nd, &combiner);
    return combiner == MPI_COMBINER_NAMED ? HCMPI_WHY_DTYPE : HCMPI_WHY_DERIVED;
}

int hcmpi_map_dtype(MPI_Datatype dtype, int reduced, hcomm_dtype_t *out,
                    hcmpi_why_t *why) {
    for (int i = 0; i < ntable; i++) {
        if (table[i].mpi != dtype) continue;
        if (reduced && !table[i].reducible) break;
        *out = table[i].hc;
        return 1;
    }
    *why = why_dtype(dtype);
    return 0;
}

size_t hcmpi_map_size(MPI_Datatype dtype) {
    for (int i = 0; i < ntable; i++)
        if (table[i].mpi == dtype) return table[i].size;
    return 0;
}

int hcmpi_map_op(MPI_Op op, hcomm_op_t *out, hcmpi_why_t *why) {
    if (op == MPI_SUM)
        *out = HCOMM_SUM;
    else if (op == MPI_MAX)
        *out = HCOMM_MAX;
    else if (op == MPI_MIN)
        *out = HCOMM_MIN;
    else if (op == MPI_PROD)
        *out = HCOMM_PROD;
    else {
        static const MPI_Op predefined[] = {
            MPI_MAXLOC, MPI_MINLOC, MPI_LAND, MPI_LOR,     MPI_LXOR,
            MPI_BAND,   MPI_BOR,    MPI_BXOR, MPI_REPLACE, MPI_NO_OP};
        *why = HCMPI_WHY_USER_OP;
        for (size_t i = 0; i < sizeof(predefined) / sizeof(*predefined); i++)
            if (op == predefined[i]) *why = HCMPI_WHY_OP;
        return 0;
    }
    return 1;
}
