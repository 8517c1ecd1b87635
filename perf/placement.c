/*
 * How far apart the cores of a node's ranks 0 and 1 are: the round trip of
 * one cache line between them through MPI shared memory.
 *
 * Why hcomm_perf reports it: a virtual machine's host may move the vCPUs
 * far apart (another socket or core complex; the guest cannot tell which)
 * for seconds to minutes at a time. On the
 * 2-core machine this benchmark is developed on, the round trip then goes
 * from about 100 ns to about 500 ns, and every copy through shared memory
 * that a peer has just written slows with it: HCOMM's slots most (3x at
 * 16-32 KiB), MPI's single copies out of a send buffer that a benchmark
 * never rewrites least, since the reader keeps those lines in its own
 * cache. A table taken across such a spell is not comparable with one
 * taken outside it; the figure printed beside each collective says which
 * it was.
 */
#include "perf.h"

#include <mpi.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#define LINE 128 /* two cache lines: no false sharing on prefetch */
#define WARMUP_TRIPS 200
#define TIMED_TRIPS 1000    /* per batch: 0.1-0.5 ms */
#define BATCHES 5           /* the median batch is reported */
#define GIVE_UP_SECONDS 1.0 /* a peer that never answers: n/a */
/* Rank 0 stops a probe that takes longer: the two ranks then share their
 * cores with other work, and trips wait for time slices. */
#define BUDGET_SECONDS 0.05
#define STOP (-1L) /* rank 0's word to rank 1: the probe is over */

struct perf_placement {
    MPI_Comm node;
    MPI_Win win;
    int rank; /* in node; only 0 and 1 take part */
    _Atomic long *mine, *theirs;
    long seq;
    int off;     /* the same on every rank of the node: no probes */
    int stopped; /* ranks 0 and 1 only: a probe failed, no more */
};

/* Spins until *line holds want (1), or STOP, or for GIVE_UP_SECONDS (0).
 * The clock only once the line is late: reading it costs a fifth of a
 * round trip. */
static int await(_Atomic long *line, long want) {
    double start = 0;
    for (unsigned polls = 1;; polls++) {
        const long v = atomic_load_explicit(line, memory_order_acquire);
        if (v == want) return 1;
        if (v == STOP) return 0;
        if ((polls & 1023) != 0) continue;
        const double t = MPI_Wtime();
        if (start == 0)
            start = t;
        else if (t - start > GIVE_UP_SECONDS)
            return 0;
    }
}

perf_placement_t *perf_placement_create(void) {
    perf_placement_t *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    int world_rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    /* every node's ranks 0 and 1 measure; rank 0's are the ones printed */
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_rank,
                        MPI_INFO_NULL, &p->node);
    int size;
    MPI_Comm_rank(p->node, &p->rank);
    MPI_Comm_size(p->node, &size);
    char *base = NULL;
    MPI_Aint bytes = p->rank < 2 ? LINE : 0;
    if (MPI_Win_allocate_shared(bytes, 1, MPI_INFO_NULL, p->node, &base,
                                &p->win) != MPI_SUCCESS) {
        MPI_Comm_free(&p->node);
        free(p);
        return NULL;
    }
    /* with more ranks than cores a round trip measures the scheduler's
     * time slices (milliseconds), not the cores */
    p->off = size < 2 || size > sysconf(_SC_NPROCESSORS_ONLN);
    if (!p->off && p->rank < 2) {
        MPI_Aint got;
        int unit;
        char *other;
        MPI_Win_shared_query(p->win, 1 - p->rank, &got, &unit, &other);
        p->mine = (_Atomic long *)(void *)base;
        p->theirs = (_Atomic long *)(void *)other;
        atomic_store(p->mine, 0);
    }
    MPI_Barrier(p->node);
    return p;
}

double perf_placement_round_trip_ns(perf_placement_t *p) {
    /* every rank of the node, or ranks 0 and 1 would wait here for ranks
     * already in the next collective, which waits for them */
    if (!p || p->off) return -1;
    MPI_Barrier(p->node);
    if (p->rank >= 2 || p->stopped) return -1;
    double batch_ns[BATCHES];
    const double start = MPI_Wtime();
    int ok = 1;
    for (int b = -1; b < BATCHES && ok; b++) {
        const int trips = b < 0 ? WARMUP_TRIPS : TIMED_TRIPS;
        const double t0 = MPI_Wtime();
        for (int i = 0; i < trips && ok; i++) {
            const long seq = ++p->seq;
            if (p->rank == 1) {
                ok = await(p->theirs, seq);
                if (ok)
                    atomic_store_explicit(p->mine, seq, memory_order_release);
                continue;
            }
            atomic_store_explicit(p->mine, seq, memory_order_release);
            ok = await(p->theirs, seq) &&
                 ((i & 63) || MPI_Wtime() - start < BUDGET_SECONDS);
            if (!ok) atomic_store_explicit(p->mine, STOP, memory_order_release);
        }
        if (b >= 0) batch_ns[b] = (MPI_Wtime() - t0) / trips * 1e9;
    }
    if (!ok) {
        p->stopped = 1; /* no more: the sequences no longer agree */
        return -1;
    }
    return perf_median(batch_ns, BATCHES);
}

void perf_placement_free(perf_placement_t *p) {
    if (!p) return;
    MPI_Win_free(&p->win);
    MPI_Comm_free(&p->node);
    free(p);
}
