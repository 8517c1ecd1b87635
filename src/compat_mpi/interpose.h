/* libhcomm_mpi.so: the PMPI interposer that hands MPI collectives of
 * unmodified programs to HCOMM (LD_PRELOAD), and everything it cannot serve
 * to the MPI library untouched.
 *
 * Files: interpose.c (init, finalize, the communicator cache, statistics),
 * interpose_agree.c (the settings and communicators all ranks agree on),
 * interpose_map.c (datatypes and operations), interpose_coll.c (the C
 * reductions and barrier, and the C entry points), interpose_move.c (the
 * data-movement collectives), interpose_dtype.c (any datatype as bytes),
 * interpose_shape.c (where a datatype's bytes lie),
 * interpose_ireq.c (non-blocking calls as MPI generalized requests),
 * interpose_fortran.c (the Fortran bindings).
 *
 * The rule that keeps ranks from deadlocking: the decision to take a call
 * must be the same on every rank of the call. It depends only on what MPI
 * requires to match across ranks: the communicator, the collective, the
 * root, the operation, for reductions the datatype and count, and for data
 * movement the bytes moved (each rank may describe them with its own count
 * and datatype). Never on a rank's datatype, count, buffers or
 * MPI_IN_PLACE there. The settings that enter the decision
 * (HCOMM_MPI_INTERCEPT, whether HCOMM started) are combined across
 * MPI_COMM_WORLD at MPI_Init, and whether HCOMM serves a communicator is
 * decided collectively when HCOMM's communicator is made. */
#ifndef HCOMM_COMPAT_MPI_INTERPOSE_H
#define HCOMM_COMPAT_MPI_INTERPOSE_H

#include "hcomm.h"

#include <mpi.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define HCMPI_EXPORT __attribute__((visibility("default")))

typedef enum {
    HCMPI_ALLREDUCE = 0,
    HCMPI_IALLREDUCE,
    HCMPI_ALLGATHER,
    HCMPI_BCAST,
    HCMPI_REDUCE,
    HCMPI_REDUCE_SCATTER_BLOCK,
    HCMPI_ALLTOALL,
    HCMPI_BARRIER,
    HCMPI_ALLGATHERV,
    HCMPI_IALLGATHERV,
    HCMPI_ALLTOALLV,
    HCMPI_IALLTOALLV,
    HCMPI_REDUCE_SCATTER,
    HCMPI_IREDUCE_SCATTER,
    HCMPI_GATHER,
    HCMPI_IGATHER,
    HCMPI_SCATTER,
    HCMPI_ISCATTER,
    HCMPI_IALLGATHER,
    HCMPI_IBCAST,
    HCMPI_IREDUCE,
    HCMPI_IREDUCE_SCATTER_BLOCK,
    HCMPI_IALLTOALL,
    HCMPI_IBARRIER,
    HCMPI_NCOLL
} hcmpi_coll_t;

/* Why a call went to MPI (the statistics name each one). */
typedef enum {
    HCMPI_WHY_DISABLED = 0, /* HCOMM_MPI_INTERCEPT, or HCOMM did not start */
    HCMPI_WHY_REENTRY,      /* called from inside HCOMM */
    HCMPI_WHY_USER_OP,
    HCMPI_WHY_OP,      /* a predefined op HCOMM lacks (MAXLOC, LAND, BOR...) */
    HCMPI_WHY_DERIVED, /* derived datatype in a reduction */
    HCMPI_WHY_DTYPE,   /* a predefined datatype HCOMM cannot reduce */
    HCMPI_WHY_INTERCOMM,
    HCMPI_WHY_WORLDS,      /* a communicator spanning several MPI_COMM_WORLDs */
    HCMPI_WHY_ARGS,        /* MPI will report an error: let it */
    HCMPI_WHY_EMPTY,       /* count 0 */
    HCMPI_WHY_COMM_SETUP,  /* HCOMM could not make a communicator */
    HCMPI_WHY_UNSUPPORTED, /* HCOMM does not implement it (yet) */
    HCMPI_WHY_REFUSED,     /* HCOMM refused the arguments before sending */
    HCMPI_WHY_NO_PROGRESS, /* no way to progress a generalized request */
    HCMPI_WHY_SIZE,        /* outside the HCOMM_MPI_INTERCEPT size window */
    HCMPI_WHY_LARGE,       /* data movement over 2 GiB a block */
    HCMPI_NWHY
} hcmpi_why_t;

/* The value of the communicator-cache attribute. */
typedef struct hcmpi_comm {
    hcomm_comm_t comm; /* HCOMM_COMM_NULL: HCOMM cannot serve it (why) */
    hcmpi_why_t why;
    int rank, size;
    struct hcmpi_comm *next; /* deferred frees */
} hcmpi_comm_t;

typedef struct {
    atomic_uint mask; /* bit per hcmpi_coll_t that HCOMM may take */
    int stats;        /* HCOMM_MPI_STATS */
    int world_rank;
    /* Message sizes HCOMM takes, per collective: the size hcomm_perf
     * reports (allgather: the receive buffer; reduce_scatter_block, the
     * send buffer; alltoall: one buffer). The same on every rank. */
    size_t min_bytes[HCMPI_NCOLL], max_bytes[HCMPI_NCOLL];
} hcmpi_state_t;

extern hcmpi_state_t hcmpi;

/* Non-zero while this thread runs inside HCOMM (or our own setup): any MPI
 * call made from there goes straight to PMPI. initial-exec: the library is
 * loaded at startup, and this is read on every call. */
extern _Thread_local int hcmpi_depth __attribute__((tls_model("initial-exec")));

/* Whether HCOMM may take coll on this thread now. */
static inline int hcmpi_wants(hcmpi_coll_t coll) {
    return !hcmpi_depth &&
           ((atomic_load_explicit(&hcmpi.mask, memory_order_relaxed) >> coll) &
            1u);
}
static inline int hcmpi_in_window(hcmpi_coll_t coll, size_t bytes) {
    return bytes >= hcmpi.min_bytes[coll] && bytes <= hcmpi.max_bytes[coll];
}
static inline hcmpi_why_t hcmpi_why_not(void) {
    return hcmpi_depth ? HCMPI_WHY_REENTRY : HCMPI_WHY_DISABLED;
}

/* --- interpose.c ------------------------------------------------------ */

/* After PMPI_Init*: starts HCOMM unless HCOMM_MPI_INTERCEPT=none.
 * Idempotent. */
void hcmpi_after_init(void);
/* The communicator's cache entry (made on first use: collective over comm),
 * or NULL with *why set. */
hcmpi_comm_t *hcmpi_comm_get(MPI_Comm comm, hcmpi_why_t *why);
/* Frees entries whose HCOMM communicator still had requests running when
 * MPI freed it (called as requests complete). */
void hcmpi_comm_retry_frees(void);

/* After HCOMM ran: 1 and *rc, or 0 where HCOMM refused the call before
 * sending anything and MPI should have it (it then reports errors exactly
 * as without us). */
int hcmpi_finish(hcmpi_coll_t coll, MPI_Comm comm, hcomm_status_t st, int *rc);

/* Statistics (counted only with HCOMM_MPI_STATS). Returns 0, so that a
 * "try" function can `return hcmpi_fallback(...)`. */
int hcmpi_fallback(hcmpi_coll_t coll, hcmpi_why_t why);
void hcmpi_count_taken(hcmpi_coll_t coll);
void hcmpi_count_failed(hcmpi_coll_t coll);
const char *hcmpi_coll_name(hcmpi_coll_t coll);
/* Logs an HCOMM failure that happened after data moved, and passes it to
 * comm's MPI error handler; returns the MPI error code. */
int hcmpi_report_failure(hcmpi_coll_t coll, MPI_Comm comm, hcomm_status_t st);
/* The same for a failure of our own (what, an MPI error code) in a call
 * already taken. */
int hcmpi_report_local(hcmpi_coll_t coll, MPI_Comm comm, int err,
                       const char *what);

/* --- interpose_agree.c -------------------------------------------------- */

/* In MPI_Init, on every rank: combines *mask and the windows in hcmpi with
 * every rank's (what all take), data movement only where every rank packs
 * as raw bytes (packs_raw). Returns the lowest rank whose
 * HCOMM_MPI_INTERCEPT did not parse (bad), or -1. */
int hcmpi_agree_settings(unsigned *mask, int bad, int packs_raw);
/* Then, where HCOMM was to start: clears *mask unless it started (ok) on
 * every rank, and non-blocking calls unless every rank can progress them. */
void hcmpi_agree_started(unsigned *mask, int ok);
/* Whether every process of comm (of size processes) is in this process's
 * MPI_COMM_WORLD; the same answer on every rank of comm. */
int hcmpi_within_world(MPI_Comm comm, int size);

/* --- interpose_map.c -------------------------------------------------- */

void hcmpi_map_init(void);
/* 1 and *out when HCOMM can take dtype (reduced, or only moved); else 0
 * and *why. */
int hcmpi_map_dtype(MPI_Datatype dtype, int reduced, hcomm_dtype_t *out,
                    hcmpi_why_t *why);
int hcmpi_map_op(MPI_Op op, hcomm_op_t *out, hcmpi_why_t *why);
/* The size of a mapped predefined datatype; 0 for any other. */
size_t hcmpi_map_size(MPI_Datatype dtype);

/* --- interpose_dtype.c: any datatype as bytes ---------------------------- */

/* The largest block (bcast: the message) HCOMM moves: MPI_Pack counts in
 * int, and an element is never larger than the block. */
#define HCMPI_MAX_BLOCK ((size_t)2147483647)

/* Where the bytes of one element lie, from its base address (buf + i *
 * extent), in type-map order: nblocks blocks of blen bytes, stride bytes
 * apart, the first at first (one block: contiguous); or up to
 * HCMPI_MAX_RUNS runs; or as only MPI_Pack knows. */
enum { HCMPI_SHAPE_STRIDED, HCMPI_SHAPE_RUNS, HCMPI_SHAPE_PACK };
#define HCMPI_MAX_RUNS 16
typedef struct {
    int kind, nruns;
    size_t nblocks, blen;
    MPI_Aint stride, first;
    MPI_Aint off[HCMPI_MAX_RUNS];
    size_t len[HCMPI_MAX_RUNS];
} hcmpi_shape_t;

static inline void hcmpi_shape_strided(hcmpi_shape_t *s, size_t nblocks,
                                       size_t blen, MPI_Aint stride,
                                       MPI_Aint first) {
    s->kind = HCMPI_SHAPE_STRIDED;
    s->nblocks = nblocks;
    s->blen = blen;
    s->stride = stride;
    s->first = first;
}
/* One block, or blocks that follow each other: the bytes are contiguous. */
static inline int hcmpi_shape_is_run(const hcmpi_shape_t *s) {
    return s->kind == HCMPI_SHAPE_STRIDED &&
           (s->nblocks <= 1 || s->stride == (MPI_Aint)s->blen);
}

/* One element of a datatype: its size, bounds and shape. */
typedef struct {
    MPI_Count size;
    MPI_Aint extent, true_lb, true_extent;
    hcmpi_shape_t shape;
} hcmpi_type_t;

/* count elements of dtype at buf, as the bytes they hold. */
typedef struct {
    const void *buf;
    size_t count;
    MPI_Datatype dtype;
    size_t bytes; /* the type signature's size: what all ranks agree on */
    size_t elem;  /* bytes of one element */
    MPI_Aint extent;
    char *data;          /* contiguous only: where the bytes start */
    int contiguous;      /* the bytes lie at data, in type-map order */
    hcmpi_shape_t shape; /* otherwise: of one element, or of all at once */
} hcmpi_layout_t;

/* Before the settings are combined: 1 when this MPI packs data as the raw
 * bytes in type-map order, which moving packed bytes to an unpacking or
 * contiguous peer needs. Sets up the datatype cache. */
int hcmpi_dtype_init(void);
/* hcmpi_layout for a datatype that is not a mapped predefined one. */
int hcmpi_layout_derived(const void *buf, size_t count, MPI_Datatype dtype,
                         hcmpi_layout_t *out);
/* Describes count elements of dtype at buf; 0 when MPI cannot say (a
 * null or invalid datatype, sizes that overflow). Inline, as the
 * functions below: every data-movement call runs them. */
static inline int hcmpi_layout(const void *buf, size_t count,
                               MPI_Datatype dtype, hcmpi_layout_t *out) {
    size_t size = hcmpi_map_size(dtype);
    if (!size) return hcmpi_layout_derived(buf, count, dtype, out);
    out->buf = buf; /* the common case: no MPI query */
    out->count = count;
    out->dtype = dtype;
    out->elem = size;
    out->extent = (MPI_Aint)size;
    out->data = (char *)(uintptr_t)buf;
    out->contiguous = 1;
    return !__builtin_mul_overflow(count, size, &out->bytes);
}
/* l's count and datatype at buf, in *to. */
static inline void hcmpi_layout_at(hcmpi_layout_t *to, const hcmpi_layout_t *l,
                                   const void *buf) {
    if (l->contiguous) { /* its shape is never read: copied field by field */
        to->count = l->count;
        to->dtype = l->dtype;
        to->bytes = l->bytes;
        to->elem = l->elem;
        to->extent = l->extent;
        to->contiguous = 1;
    } else {
        *to = *l;
    }
    to->data =
        (char *)((uintptr_t)buf + ((uintptr_t)l->data - (uintptr_t)l->buf));
    to->buf = buf;
}
/* l for times as many elements (from the same buffer). */
static inline int hcmpi_layout_times(hcmpi_layout_t *l, size_t times) {
    if (l->contiguous && l->extent == (MPI_Aint)l->elem) {
        l->count *= times; /* elements back to back: no MPI query */
        return !__builtin_mul_overflow(l->bytes, times, &l->bytes);
    }
    return hcmpi_layout(l->buf, l->count * times, l->dtype, l);
}
/* Copies the bytes of l to or from dst/src (l->bytes of them); an MPI
 * error code. */
int hcmpi_pack(const hcmpi_layout_t *l, void *dst);
int hcmpi_unpack(const hcmpi_layout_t *l, const void *src);
/* HCOMM's view of unit bytes that every rank moves: *n elements of the
 * widest unsigned type that divides them. The same on every rank. */
hcomm_dtype_t hcmpi_unit(size_t unit, size_t *n);
/* Scratch from HCOMM's pool (NULL when out of memory), and back. */
void *hcmpi_scratch(size_t bytes);
void hcmpi_scratch_put(void *p);

/* --- interpose_shape.c ------------------------------------------------- */

/* Describes one element of t, its shape included (interpose_dtype.c keeps
 * the answer in an attribute of t); 0 when MPI cannot describe t. */
int hcmpi_type_describe(MPI_Datatype t, hcmpi_type_t *ti);

/* --- interpose_coll.c: the calls, for the C and Fortran entry points ---
 * Each returns 1 when HCOMM ran the call (its MPI return code in *rc), 0
 * when the caller must hand the call, untouched, to MPI. Buffers use C's
 * MPI_IN_PLACE. */
int hcmpi_try_allreduce(const void *sendbuf, void *recvbuf, int count,
                        MPI_Datatype dtype, MPI_Op op, MPI_Comm comm, int *rc);
int hcmpi_try_iallreduce(const void *sendbuf, void *recvbuf, int count,
                         MPI_Datatype dtype, MPI_Op op, MPI_Comm comm,
                         MPI_Request *request, int *rc);
int hcmpi_try_allgather(const void *sendbuf, int sendcount,
                        MPI_Datatype sendtype, void *recvbuf, int recvcount,
                        MPI_Datatype recvtype, MPI_Comm comm, int *rc);
int hcmpi_try_bcast(void *buf, int count, MPI_Datatype dtype, int root,
                    MPI_Comm comm, int *rc);
int hcmpi_try_reduce(const void *sendbuf, void *recvbuf, int count,
                     MPI_Datatype dtype, MPI_Op op, int root, MPI_Comm comm,
                     int *rc);
int hcmpi_try_reduce_scatter_block(const void *sendbuf, void *recvbuf,
                                   int recvcount, MPI_Datatype dtype, MPI_Op op,
                                   MPI_Comm comm, int *rc);
int hcmpi_try_alltoall(const void *sendbuf, int sendcount,
                       MPI_Datatype sendtype, void *recvbuf, int recvcount,
                       MPI_Datatype recvtype, MPI_Comm comm, int *rc);
int hcmpi_try_barrier(MPI_Comm comm, int *rc);
/* The non-blocking forms (Open MPI's progress hook, interpose_ireq.c). */
int hcmpi_try_ibcast(void *buf, int count, MPI_Datatype dtype, int root,
                     MPI_Comm comm, MPI_Request *request, int *rc);
int hcmpi_try_iallgather(const void *sendbuf, int sendcount,
                         MPI_Datatype sendtype, void *recvbuf, int recvcount,
                         MPI_Datatype recvtype, MPI_Comm comm,
                         MPI_Request *request, int *rc);
int hcmpi_try_ialltoall(const void *sendbuf, int sendcount,
                        MPI_Datatype sendtype, void *recvbuf, int recvcount,
                        MPI_Datatype recvtype, MPI_Comm comm,
                        MPI_Request *request, int *rc);
int hcmpi_try_ireduce(const void *sendbuf, void *recvbuf, int count,
                      MPI_Datatype dtype, MPI_Op op, int root, MPI_Comm comm,
                      MPI_Request *request, int *rc);
int hcmpi_try_ireduce_scatter_block(const void *sendbuf, void *recvbuf,
                                    int recvcount, MPI_Datatype dtype,
                                    MPI_Op op, MPI_Comm comm,
                                    MPI_Request *request, int *rc);
int hcmpi_try_ibarrier(MPI_Comm comm, MPI_Request *request, int *rc);

/* --- interpose_gather.c: request NULL for the blocking form. */
int hcmpi_try_gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                     void *recvbuf, int recvcount, MPI_Datatype recvtype,
                     int root, MPI_Comm comm, MPI_Request *request, int *rc);
int hcmpi_try_scatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                      void *recvbuf, int recvcount, MPI_Datatype recvtype,
                      int root, MPI_Comm comm, MPI_Request *request, int *rc);

/* --- interpose_vmove.c: the variable-count calls; request NULL for the
 * blocking form. */
int hcmpi_try_allgatherv(const void *sendbuf, int sendcount,
                         MPI_Datatype sendtype, void *recvbuf,
                         const int *recvcounts, const int *displs,
                         MPI_Datatype recvtype, MPI_Comm comm,
                         MPI_Request *request, int *rc);
int hcmpi_try_alltoallv(const void *sendbuf, const int *sendcounts,
                        const int *sdispls, MPI_Datatype sendtype,
                        void *recvbuf, const int *recvcounts,
                        const int *rdispls, MPI_Datatype recvtype,
                        MPI_Comm comm, MPI_Request *request, int *rc);
int hcmpi_try_reduce_scatter(const void *sendbuf, void *recvbuf,
                             const int *recvcounts, MPI_Datatype dtype,
                             MPI_Op op, MPI_Comm comm, MPI_Request *request,
                             int *rc);

/* --- interpose_ireq.c ------------------------------------------------- */

/* Whether this MPI lets us progress generalized requests (decided once at
 * init, the same on every rank). */
int hcmpi_ireq_available(void);
void hcmpi_ireq_init(void);
void hcmpi_ireq_finalize(void);
/* Wraps a running HCOMM request into an MPI request that MPI_Wait/Test
 * complete. */
int hcmpi_ireq_wrap(hcomm_request_t hreq, MPI_Comm comm, MPI_Request *out);
/* What a taken data-movement call does once HCOMM has finished it, on
 * success: unpack (when from is set) from scratch, move move_bytes from
 * move_from to move_to; then, always, free the scratch, and d itself
 * where it is on the heap (hcmpi_done_new). */
typedef struct {
    char *from;
    char *scratch[2];
    char *move_from, *move_to;
    size_t move_bytes;
    int on_heap; /* freed by hcmpi_done_run */
    /* Last: read only where from is set, and large (a derived type's
     * runs), so that a blocking call zeroes only what comes before it. */
    hcmpi_layout_t unpack;
} hcmpi_done_t;
hcmpi_done_t *hcmpi_done_new(void); /* on the heap; NULL without memory */
/* What finishes a call: local (zeroed up to unpack) for a blocking one,
 * request NULL, so that the small-message path allocates nothing; else
 * hcmpi_done_new. */
hcmpi_done_t *hcmpi_done_for(MPI_Request *request, hcmpi_done_t *local);
int hcmpi_done_run(void *d, hcomm_status_t st); /* an MPI error code */
/* Ends a taken call started as hreq (st: how it started, or for a blocking
 * call, request NULL, how it ended): a generalized request that runs d
 * when HCOMM is done, or d now and the call's MPI return code. */
int hcmpi_complete(hcmpi_coll_t coll, MPI_Comm comm, hcomm_status_t st,
                   hcomm_request_t hreq, hcmpi_done_t *d, MPI_Request *request,
                   int *rc);
/* The same for coll, running then(arg, status) once HCOMM has finished the
 * call and before MPI learns that it completed (unpacking, freeing
 * scratch); then returns an MPI error code. */
int hcmpi_ireq_wrap_then(hcomm_request_t hreq, MPI_Comm comm, MPI_Request *out,
                         hcmpi_coll_t coll, int (*then)(void *, hcomm_status_t),
                         void *arg);

#endif
