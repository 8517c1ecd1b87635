/* hcomm_check's measurements: every collective with exact results and a
 * bandwidth, every pair of ranks, every rank's memory. Ranks far below
 * the rest are flagged against the upper quartile (not the median: with
 * three ranks and one slow, two of the three links are slow). */
#include "hcomm_check.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum {
    C_ALLREDUCE,
    C_REDUCE_SCATTER,
    C_ALLGATHER,
    C_BROADCAST,
    C_REDUCE,
    C_ALLTOALL,
    C_GATHER,
    C_SCATTER,
    C_BARRIER,
    C_COUNT
};
static const char *names[C_COUNT] = {"allreduce", "reduce_scatter", "allgather",
                                     "broadcast", "reduce",         "alltoall",
                                     "gather",    "scatter",        "barrier"};

typedef struct {
    int rank, size, root;
    size_t count;   /* elements: whole message, or per-rank block */
    int32_t *s, *r; /* send and receive buffers, size * count each */
} call_t;

static int32_t value(int r, size_t i) {
    return (int32_t)((i * 13 + (size_t)r * 7) % 1000);
}

static int32_t sum_of(int n, size_t i) {
    int32_t s = 0;
    for (int r = 0; r < n; r++)
        s += value(r, i);
    return s;
}

/* Whether the collective's count is a per-rank block. */
static int blocked(int c) {
    return c == C_REDUCE_SCATTER || c == C_ALLGATHER || c == C_ALLTOALL ||
           c == C_GATHER || c == C_SCATTER;
}

static void fill(int c, call_t *k) {
    size_t n = k->count * (size_t)k->size;
    for (size_t i = 0; i < n; i++) {
        k->s[i] = value(k->rank, i);
        k->r[i] = -1;
    }
    if (c == C_BROADCAST && k->rank != k->root)
        for (size_t i = 0; i < k->count; i++)
            k->s[i] = -1;
}

static hcomm_status_t run(int c, call_t *k, hcomm_comm_t comm) {
    const hcomm_dtype_t t = HCOMM_INT32;
    switch (c) {
    case C_ALLREDUCE:
        return hcomm_allreduce(k->s, k->r, k->count, t, HCOMM_SUM, comm);
    case C_REDUCE_SCATTER:
        return hcomm_reduce_scatter(k->s, k->r, k->count, t, HCOMM_SUM, comm);
    case C_ALLGATHER:
        return hcomm_allgather(k->s, k->r, k->count, t, comm);
    case C_BROADCAST:
        return hcomm_broadcast(k->s, k->count, t, k->root, comm);
    case C_REDUCE:
        return hcomm_reduce(k->s, k->r, k->count, t, HCOMM_SUM, k->root, comm);
    case C_ALLTOALL:
        return hcomm_alltoall(k->s, k->r, k->count, t, comm);
    case C_GATHER:
        return hcomm_gather(k->s, k->r, k->count, t, k->root, comm);
    case C_SCATTER:
        return hcomm_scatter(k->s, k->r, k->count, t, k->root, comm);
    default:
        return hcomm_barrier(comm);
    }
}

/* Elements that differ from what the collective must give. */
static size_t wrong(int c, const call_t *k) {
    size_t bad = 0, m = k->count;
    int n = k->size, me = k->rank;
    switch (c) {
    case C_ALLREDUCE:
        for (size_t i = 0; i < m; i++)
            bad += k->r[i] != sum_of(n, i);
        break;
    case C_REDUCE_SCATTER:
        for (size_t i = 0; i < m; i++)
            bad += k->r[i] != sum_of(n, (size_t)me * m + i);
        break;
    case C_ALLGATHER:
        for (size_t i = 0; i < m * (size_t)n; i++)
            bad += k->r[i] != value((int)(i / m), i % m);
        break;
    case C_BROADCAST:
        for (size_t i = 0; i < m; i++)
            bad += k->s[i] != value(k->root, i);
        break;
    case C_REDUCE:
        for (size_t i = 0; me == k->root && i < m; i++)
            bad += k->r[i] != sum_of(n, i);
        break;
    case C_ALLTOALL:
        for (size_t i = 0; i < m * (size_t)n; i++)
            bad += k->r[i] != value((int)(i / m), (size_t)me * m + i % m);
        break;
    case C_GATHER:
        for (size_t i = 0; me == k->root && i < m * (size_t)n; i++)
            bad += k->r[i] != value((int)(i / m), i % m);
        break;
    case C_SCATTER:
        for (size_t i = 0; i < m; i++)
            bad += k->r[i] != value(k->root, (size_t)me * m + i);
        break;
    default:
        break;
    }
    return bad;
}

/* The bus bandwidth factor (as hcomm_perf and nccl-tests count it). */
static double bus_factor(int c, int n) {
    if (n < 2) return 1;
    if (c == C_ALLREDUCE) return 2.0 * (n - 1) / n;
    return blocked(c) ? (double)(n - 1) / n : 1;
}

/* One collective at one size: checked, then timed, then checked again.
 * Returns 1 on a problem (on every rank). */
static int one(int c, size_t elems, hcomm_comm_t comm, call_t *k,
               const check_opts_t *o) {
    k->count = blocked(c)
                   ? (elems / (size_t)k->size ? elems / (size_t)k->size : 1)
                   : elems;
    k->root = k->size - 1; /* not 0: a root other than rank 0 is tested */
    fill(c, k);
    hcomm_status_t st = run(c, k, comm);
    size_t bad = st == HCOMM_SUCCESS ? wrong(c, k) : 0;
    double t = 0;
    if (st == HCOMM_SUCCESS) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int i = 0; i < o->iters && st == HCOMM_SUCCESS; i++)
            st = run(c, k, comm);
        t = (MPI_Wtime() - t0) / o->iters;
        if (st == HCOMM_SUCCESS) bad += wrong(c, k);
    }
    char why[256];
    snprintf(why, sizeof(why), "%s", hcomm_last_error());
    double mine[3] = {t, (double)bad, st != HCOMM_SUCCESS}, all[3];
    MPI_Allreduce(mine, all, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    /* The first failing rank's message. */
    int first = st != HCOMM_SUCCESS ? k->rank : k->size, who;
    MPI_Allreduce(&first, &who, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (who < k->size)
        MPI_Bcast(why, sizeof(why), MPI_CHAR, who, MPI_COMM_WORLD);
    if (k->rank != 0) return all[1] > 0 || all[2] > 0;
    size_t bytes = (c == C_BARRIER ? 0 : k->count * sizeof(int32_t)) *
                   (blocked(c) ? (size_t)k->size : 1);
    double algbw = all[0] > 0 ? (double)bytes / all[0] / 1e9 : 0;
    printf("  %-15s %10zu B %11.1f us %8.2f GB/s %8.2f GB/s  ", names[c], bytes,
           all[0] * 1e6, algbw, algbw * bus_factor(c, k->size));
    if (all[2] > 0)
        printf("FAILED on rank %d: %s\n", who, why);
    else if (all[1] > 0)
        printf("WRONG: %.0f elements differ on some rank\n", all[1]);
    else
        printf("exact\n");
    return all[1] > 0 || all[2] > 0;
}

int check_collectives(hcomm_comm_t comm, const check_opts_t *o) {
    call_t k;
    MPI_Comm_rank(MPI_COMM_WORLD, &k.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &k.size);
    size_t large = o->bytes / sizeof(int32_t);
    if (large < 1) large = 1;
    size_t cap = (large + (size_t)k.size) * (size_t)k.size;
    k.s = malloc(cap * sizeof(int32_t));
    k.r = malloc(cap * sizeof(int32_t));
    int ok = k.s && k.r, all_ok;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_ok) {
        if (k.rank == 0)
            printf("collectives: not run, no memory for %zu bytes\n",
                   cap * sizeof(int32_t));
        free(k.s);
        free(k.r);
        return 1;
    }
    if (k.rank == 0)
        printf("\ncollectives (int32 sums, exact results required; time: "
               "slowest rank, mean of %d calls):\n"
               "  %-15s %12s %14s %13s %13s  result\n",
               o->iters, "collective", "bytes", "time", "algbw", "busbw");
    int problems = 0;
    for (int c = 0; c < C_COUNT; c++) {
        problems += one(c, 256, comm, &k, o);
        if (c != C_BARRIER) problems += one(c, large, comm, &k, o);
    }
    free(k.s);
    free(k.r);
    return problems;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The upper quartile of v[0..n-1] (sorted in place). */
static double upper_quartile(double *v, int n) {
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return v[(3 * n) / 4 < n ? (3 * n) / 4 : n - 1];
}

/* The slow-rank test hook stretches this rank's timed work. */
static void maybe_slow(const check_opts_t *o, int rank) {
    if (rank == o->slow_rank) usleep(20000);
}

/* Ping-pong of o->link_bytes between a and b, best of 5: bytes/s. */
static double ping_pong(hcomm_comm_t comm, int a, int b, int rank, char *buf,
                        const check_opts_t *o, hcomm_status_t *st) {
    double best = 1e30;
    size_t n = o->link_bytes;
    for (int rep = 0; rep < 5 && *st == HCOMM_SUCCESS; rep++) {
        double t0 = MPI_Wtime();
        if (rank == a) {
            *st = hcomm_send(buf, n, HCOMM_UINT8, b, 7, comm);
            if (*st == HCOMM_SUCCESS)
                *st = hcomm_recv(buf, n, HCOMM_UINT8, b, 7, comm);
        } else {
            *st = hcomm_recv(buf, n, HCOMM_UINT8, a, 7, comm);
            maybe_slow(o, rank);
            if (*st == HCOMM_SUCCESS)
                *st = hcomm_send(buf, n, HCOMM_UINT8, a, 7, comm);
        }
        double t = MPI_Wtime() - t0;
        if (t < best) best = t;
    }
    return 2.0 * (double)n / best;
}

/* This rank's copy bandwidth (16 MiB, best of 3), bytes/s. */
static double memory_bw(const check_opts_t *o, int rank) {
    size_t n = 16u << 20;
    char *a = malloc(n), *b = malloc(n);
    double best = 1e30;
    if (!a || !b) {
        free(a);
        free(b);
        return 0;
    }
    memset(a, 1, n);
    memset(b, 2, n);
    for (int rep = 0; rep < 3; rep++) {
        double t0 = MPI_Wtime();
        memcpy(b, a, n);
        maybe_slow(o, rank);
        double t = MPI_Wtime() - t0;
        if (t < best) best = t;
        a[rep] = b[n - 1 - (size_t)rep]; /* keeps the copies */
    }
    free(a);
    free(b);
    return (double)n / best;
}

/* Marks in slow[] the links (first npairs) and memories (next n) below
 * o->slow_factor times the upper quartile of their kind; returns how many. */
static int flag_slow(const double *bw, size_t npairs, int n,
                     const check_opts_t *o, double *sorted, double ref[2],
                     char *slow) {
    int count = 0;
    memcpy(sorted, bw, npairs * sizeof(double));
    ref[0] = npairs ? upper_quartile(sorted, (int)npairs) : 0;
    memcpy(sorted, bw + npairs, (size_t)n * sizeof(double));
    ref[1] = upper_quartile(sorted, n);
    for (size_t i = 0; i < npairs + (size_t)n; i++) {
        slow[i] = bw[i] < o->slow_factor * ref[i < npairs ? 0 : 1];
        count += slow[i];
    }
    return count;
}

/* Each link and memory in want[] measured once more (one pair, then one
 * rank, at a time, every other rank idle: on a machine with fewer cores
 * than ranks, concurrent pairs would measure the scheduler); bw[] keeps
 * the best figure of every pass. */
static void measure(hcomm_comm_t comm, const check_opts_t *o, int rank, int n,
                    const char *want, double *bw, char *buf,
                    hcomm_status_t *st) {
    size_t p = 0, npairs = (size_t)n * (size_t)(n - 1) / 2;
    for (int a = 0; a < n; a++)
        for (int b = a + 1; b < n; b++, p++) {
            if (!want[p]) continue;
            if ((rank == a || rank == b) && *st == HCOMM_SUCCESS) {
                double got = ping_pong(comm, a, b, rank, buf, o, st);
                if (got > bw[p]) bw[p] = got;
            }
            MPI_Barrier(MPI_COMM_WORLD);
        }
    for (int r = 0; r < n; r++) {
        if (!want[npairs + (size_t)r]) continue;
        if (r == rank) {
            double got = memory_bw(o, rank);
            if (got > bw[npairs + (size_t)r]) bw[npairs + (size_t)r] = got;
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
}

/* What looks slow is measured again, up to three more times, before it is
 * flagged: on a loaded machine a whole measurement can land in another
 * process's time slices, and a slow link or rank stays slow every time. */
int check_links(hcomm_comm_t comm, const check_opts_t *o) {
    enum { PASSES = 4 };
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    size_t npairs = (size_t)n * (size_t)(n - 1) / 2, items = npairs + (size_t)n;
    double *bw = calloc(items, sizeof(double));
    double *all = calloc(items, sizeof(double));
    double *sorted = calloc(items, sizeof(double));
    char *slow = malloc(items);
    char *buf = calloc(o->link_bytes ? o->link_bytes : 1, 1);
    if (!bw || !all || !sorted || !slow || !buf) {
        fprintf(stderr, "hcomm_check: no memory for the link tests\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    memset(slow, 1, items); /* the first pass measures everything */
    hcomm_status_t st = HCOMM_SUCCESS;
    int any_failed = 0, flagged = 0, passes = 0;
    double ref[2] = {0, 0};
    while (passes < PASSES) {
        measure(comm, o, rank, n, slow, bw, buf, &st);
        passes++;
        int failed = st != HCOMM_SUCCESS;
        MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX,
                      MPI_COMM_WORLD);
        MPI_Allreduce(bw, all, (int)items, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        /* every rank holds the same figures, so decides alike */
        flagged = flag_slow(all, npairs, n, o, sorted, ref, slow);
        if (any_failed || !flagged) break;
    }
    if (st != HCOMM_SUCCESS)
        fprintf(stderr, "hcomm_check: rank %d: link test failed: %s\n", rank,
                hcomm_last_error());
    if (rank == 0) {
        char again[64] = "";
        if (passes > 1)
            snprintf(again, sizeof(again),
                     "; what looked slow measured %d times", passes);
        printf("\nlinks (ping-pong of %zu bytes, best of 5%s; flagged below "
               "%.2f x the upper quartile, %.2f GB/s):\n",
               o->link_bytes, again, o->slow_factor, ref[0] / 1e9);
        size_t p = 0;
        for (int a = 0; a < n; a++)
            for (int b = a + 1; b < n; b++, p++)
                printf("  %d <-> %d %8.2f GB/s%s\n", a, b, all[p] / 1e9,
                       slow[p] ? "  SLOW" : "");
        printf("\nmemory (copy of 16 MiB, best of 3%s; flagged below %.2f x "
               "the upper quartile, %.2f GB/s):\n",
               again, o->slow_factor, ref[1] / 1e9);
        for (int r = 0; r < n; r++)
            printf("  rank %d %8.2f GB/s%s\n", r, all[npairs + (size_t)r] / 1e9,
                   slow[npairs + (size_t)r] ? "  SLOW" : "");
        if (any_failed) printf("  link tests FAILED (see stderr)\n");
    }
    free(bw);
    free(all);
    free(sorted);
    free(slow);
    free(buf);
    return any_failed + flagged;
}
