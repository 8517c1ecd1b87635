/*
 * hcomm_perf: declarations shared by the benchmark's two files.
 *
 *   hcomm_perf.c   options, the timing loop, main
 *   perf_report.c  type and collective tables, test data and its checking,
 *                  text and JSON output
 *   placement.c    how far apart the cores of a node's ranks 0 and 1 are
 *
 * Not part of the library: nothing here is installed.
 */
#ifndef HCOMM_PERF_H
#define HCOMM_PERF_H

#include "hcomm.h"

#include <stddef.h>
#include <stdint.h>

/* Timed trials per size and side; the median is reported. Odd, so the
 * median is one real trial. */
#define PERF_TRIALS 5
/* Small sizes get more iterations than -n so one trial lasts this long:
 * a trial of a few microseconds measures the timer and the scheduler. */
#define PERF_MIN_TRIAL_S 1e-3

typedef enum {
    PERF_ALLREDUCE = 0,
    PERF_ALLGATHER,
    PERF_REDUCE_SCATTER,
    PERF_BROADCAST,
    PERF_REDUCE,
    PERF_ALLTOALL,
    PERF_BARRIER,
    PERF_GATHER,
    PERF_SCATTER,
    /* The variable-count forms, run with every rank's count equal (that of
     * the form without v), so that both libraries move what the fixed
     * form moves, through their v paths. */
    PERF_ALLGATHERV,
    PERF_ALLTOALLV,
    PERF_REDUCE_SCATTERV,
    PERF_COLL_COUNT
} perf_coll_t;

/* The fixed form whose data a collective moves (itself but for v-forms). */
static inline perf_coll_t perf_base(perf_coll_t c) {
    return c == PERF_ALLGATHERV        ? PERF_ALLGATHER
           : c == PERF_ALLTOALLV       ? PERF_ALLTOALL
           : c == PERF_REDUCE_SCATTERV ? PERF_REDUCE_SCATTER
                                       : c;
}

/* -C all: every collective in turn, in the order above. */
#define PERF_COLL_ALL ((int)PERF_COLL_COUNT)

typedef struct {
    const char *name;
    int reduces;  /* takes an op */
    int rooted;   /* takes a root */
    int per_rank; /* count passed is bytes / esize / nranks */
} perf_coll_info_t;

typedef enum {
    PERF_KIND_SIGNED,
    PERF_KIND_UNSIGNED,
    PERF_KIND_FLOAT, /* float32, float64 */
    PERF_KIND_HALF,
    PERF_KIND_BF16
} perf_kind_t;

typedef struct {
    const char *name;  /* as -d spells it; also JSON "type" */
    const char *label; /* as nccl-tests prints it in the table */
    perf_kind_t kind;
    size_t size;
} perf_dtype_info_t;

extern const perf_coll_info_t perf_colls[PERF_COLL_COUNT];
extern const perf_dtype_info_t perf_dtypes[HCOMM_DTYPE_COUNT];
extern const char *const perf_op_names[HCOMM_OP_COUNT];

typedef struct {
    int coll; /* perf_coll_t or PERF_COLL_ALL */
    size_t minbytes, maxbytes;
    size_t stepbytes; /* 0: multiply by stepfactor instead */
    size_t stepfactor;
    int iters, warmup, check, root, inplace, json;
    int registered;         /* buffers from hcomm_mem_alloc */
    int run_hcomm, run_mpi; /* --mpi-only / --hcomm-only clear one */
    int pmpi;    /* the hcomm columns time MPI_*, the MPI columns PMPI_* */
    int device;  /* -D cuda: buffers in GPU memory */
    int stream;  /* -S: hcomm's stream-ordered forms, one sync per trial */
    int nccl;    /* --nccl: the baseline is NCCL, not MPI */
    int rewrite; /* --rewrite: the input written before each call */
    int consume; /* --consume: the output read after each call */
    const char *baseline; /* the second side's name in the table */
    hcomm_dtype_t dtype;
    hcomm_op_t op;
} perf_opts_t;

/* One size of one collective: what each rank passes and allocates, in
 * elements, following nccl-tests (see make_layout in hcomm_perf.c). */
typedef struct {
    perf_coll_t coll;
    hcomm_dtype_t dtype;
    hcomm_op_t op;
    int rank, nranks, root, inplace;
    size_t count;      /* the count argument of the call */
    size_t bytes;      /* the size reported: the larger of send and recv */
    size_t send_elems; /* allocated send buffer; 0 when unused */
    size_t recv_elems; /* allocated recv buffer (holds the input in place) */
} perf_layout_t;

/* Seeds of perf_data_fill: the check runs on data the timed runs never saw,
 * so a stale buffer cannot pass for a result. */
#define PERF_SEED_TIMING 0u
#define PERF_SEED_CHECK 1u

typedef struct {
    int valid;           /* 0: n/a (unsupported, no MPI equivalent, ...) */
    double time_us;      /* median over trials of the max over ranks */
    double algbw, busbw; /* GB/s, 1e9 bytes */
    long long wrong;     /* summed over ranks; -1: not checked */
} perf_side_t;

typedef struct {
    perf_coll_t coll;
    size_t bytes, count;
    int root; /* -1 for collectives without one */
    perf_side_t hc, mpi;
} perf_row_t;

typedef struct {
    double busbw_sum[2]; /* [0] hcomm, [1] MPI */
    int busbw_n[2];
    long long wrong[2];
    int checked; /* some row had its results checked */
    double *ratios;
    size_t nratios, cap;
    double round_trip_ns[2]; /* before and after (placement.c); < 0: n/a */
} perf_summary_t;

/* --- perf_report.c: data ------------------------------------------------ */

/* Fills the input of this rank (send, or recv when in place) from a
 * formula every rank can evaluate for every rank, and poisons the rest of
 * recv. */
void perf_data_fill(const perf_layout_t *l, unsigned seed, void *send,
                    void *recv);
/* Elements of the result, which starts at recv (for an in-place
 * reduce_scatter, where the side put it), that differ from what this rank
 * expects. */
long long perf_data_wrong(const perf_layout_t *l, unsigned seed,
                          const void *recv);

/* --- perf_report.c: output ---------------------------------------------- */

double perf_busbw_factor(perf_coll_t coll, int nranks);
/* Sets time, algbw and busbw from the time in microseconds. */
void perf_side_set(perf_side_t *s, const perf_row_t *row, int nranks,
                   double time_us, long long wrong);

void perf_print_env(int nranks, const char *mpi_library, const char *baseline);
/* mpi_na: why the MPI columns are n/a for the whole table, or NULL. */
void perf_print_header(const perf_opts_t *o, perf_coll_t coll, int nranks,
                       const char *mpi_na);
void perf_print_row(const perf_opts_t *o, const perf_row_t *row, int nranks);
void perf_summary_add(perf_summary_t *s, const perf_row_t *row);
void perf_print_summary(const perf_opts_t *o, perf_summary_t *s);
void perf_summary_free(perf_summary_t *s);
/* The median of n values, which it sorts. */
double perf_median(double *v, size_t n);

/* --- placement.c -------------------------------------------------------- */

typedef struct perf_placement perf_placement_t;
/* NULL where MPI could not make the shared window: no figure is printed. */
perf_placement_t *perf_placement_create(void);
/* Collective over each node's ranks; node ranks 0 and 1 get the median
 * round trip in ns (rank 0's is printed), the others and a stopped or
 * switched-off probe -1. */
double perf_placement_round_trip_ns(perf_placement_t *p);
void perf_placement_free(perf_placement_t *p);

/* --- perf_cuda.c (built with CUDA) ------------------------------------- */

#include <mpi.h>

/* Picks this rank's GPU (local rank modulo the GPUs) and a stream. */
int perf_dev_init(MPI_Comm world, char *err, size_t len);
void *perf_dev_stream(void);
void *perf_dev_alloc(size_t bytes);
void perf_dev_free(void *p);
int perf_dev_copy(void *dst, const void *src, size_t bytes);
int perf_dev_sync(void);
/* NCCL's version (> 0), or -1 with why (the same answer on every rank). */
int perf_nccl_init(MPI_Comm world, int rank, int nranks, char *why, size_t len);
void perf_nccl_finalize(void);
int perf_nccl_call(const perf_layout_t *l, const void *send, void *recv);

#endif /* HCOMM_PERF_H */
