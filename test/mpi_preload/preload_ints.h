/* Ints as a rank describes them to MPI, where ranks pass the same ints
 * with different datatypes (test_preload_gather.c, test_preload_v.c): as
 * MPI_INT, as 4 x MPI_BYTE each, or as every other int of a strided buffer
 * (pu_strided_t, from pu_every_other_int, which main sets). */
#ifndef HCOMM_TEST_PRELOAD_INTS_H
#define HCOMM_TEST_PRELOAD_INTS_H

#include "preload_util.h"

enum { AS_INT, AS_BYTES, AS_STRIDED, NKINDS };
static const char *kind_names[] = {"int", "bytes", "strided"};
static MPI_Datatype pu_strided_t;

/* A buffer of n ints as a rank of kind k holds them: strided ones take
 * every other slot. */
typedef struct {
    int kind;
    int *mem; /* ints (strided: twice as many slots) */
    size_t n;
} ibuf_t;

/* Every slot, and one past the end, holds fill: what a call must not
 * write keeps it. */
static inline void ibuf_alloc(ibuf_t *b, int kind, size_t n, int fill) {
    b->kind = kind;
    b->n = n;
    size_t slots = kind == AS_STRIDED ? 2 * n + 1 : n + 1;
    b->mem = malloc(slots * sizeof(int));
    for (size_t i = 0; i < slots; i++)
        b->mem[i] = fill;
}
static inline int *ibuf_at(ibuf_t *b, size_t i) {
    return b->kind == AS_STRIDED ? &b->mem[2 * i] : &b->mem[i];
}
static inline MPI_Datatype ibuf_type(const ibuf_t *b) {
    return b->kind == AS_INT     ? MPI_INT
           : b->kind == AS_BYTES ? MPI_BYTE
                                 : pu_strided_t;
}
/* Counts and displacements in ints, in the rank's own unit. */
static inline int ibuf_unit(const ibuf_t *b) {
    return b->kind == AS_BYTES ? (int)sizeof(int) : 1;
}

static inline uint64_t ibuf_hash(ibuf_t *b) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < b->n; i++)
        h = pu_hash(ibuf_at(b, i), sizeof(int), h);
    return h;
}

#endif
