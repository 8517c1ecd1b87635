/* HCOMM's status codes, data types and reduction operations: the part of
 * hcomm.h that needs no MPI header (hcomm.h includes it), so that CUDA
 * sources and other languages' bindings can use the same values. */
#ifndef HCOMM_TYPES_H
#define HCOMM_TYPES_H

typedef enum {
    HCOMM_SUCCESS = 0,
    HCOMM_ERR_INVALID_ARG,     /* a NULL buffer, a bad count, root, ... */
    HCOMM_ERR_INVALID_DTYPE,   /* not a hcomm_dtype_t */
    HCOMM_ERR_INVALID_OP,      /* not a hcomm_op_t, or not valid for the type */
    HCOMM_ERR_INVALID_COMM,    /* NULL, freed or never created */
    HCOMM_ERR_OVERFLOW,        /* count * element size does not fit */
    HCOMM_ERR_NOT_INITIALIZED, /* called before hcomm_init or after finalize */
    HCOMM_ERR_NO_MEMORY,
    HCOMM_ERR_TRANSPORT, /* UCX or MPI reported a failure */
    HCOMM_ERR_TIMEOUT,   /* a peer did not answer within HCOMM_TIMEOUT */
    HCOMM_ERR_UNSUPPORTED,
    HCOMM_ERR_INTERNAL,
    HCOMM_ERR_IN_PROGRESS, /* hcomm_test: the request is not complete yet */
    HCOMM_ERR_MISMATCH,    /* ranks passed different counts, types, operations,
                            * roots or collectives to one call; the
                            * communicator is broken (free it), unless
                            * HCOMM_CHECK=1 caught it before anything moved */
    HCOMM_ERR_ABORTED      /* hcomm_comm_abort stopped it */
} hcomm_status_t;

typedef enum {
    HCOMM_INT8 = 0,
    HCOMM_UINT8,
    HCOMM_INT32,
    HCOMM_UINT32,
    HCOMM_INT64,
    HCOMM_UINT64,
    HCOMM_FLOAT16, /* IEEE binary16, reduced in fp32, rounded to nearest even */
    HCOMM_BFLOAT16,
    HCOMM_FLOAT32,
    HCOMM_FLOAT64,
    HCOMM_DTYPE_COUNT
} hcomm_dtype_t;

/* Integer sums and products wrap around like C unsigned arithmetic.
 * avg is the sum divided by the rank count (integers: truncated). */
typedef enum {
    HCOMM_SUM = 0,
    HCOMM_PROD,
    HCOMM_MAX,
    HCOMM_MIN,
    HCOMM_AVG,
    HCOMM_OP_COUNT
} hcomm_op_t;

#endif /* HCOMM_TYPES_H */
