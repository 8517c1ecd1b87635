/* The direct shared-memory algorithms, with ranks as threads of one process
 * over one zeroed segment (cross-memory reads of the own pid work like a
 * peer's). Each rank thread runs the same long sequence of calls, never
 * synchronising outside the algorithms, so the flags alone must keep rounds
 * apart: every dtype x op, one-shot, two-shot and CMA (allreduce; slots and
 * CMA for reduce_scatter), counts from 1 to past many slots, in place and
 * not, allgather, every broadcast root (direct reads at 2 ranks), reduce
 * (every dtype x op, rotating roots), gather and scatter at every root and
 * alltoall, in place and not, on the slots and by direct reads,
 * allgatherv and reduce_scatterv (every dtype x op) with per-rank counts
 * (some empty), alltoallv by every route, barrier, and
 * two non-blocking calls driven in reverse order. Results are compared element
 * by element with a reference reduced here in rank order (inputs are small
 * integers, so every order gives the same exact value). Ranks that pass
 * different counts all fail, before writing anything, and so do later
 * calls. */
#include "core/config.h"
#include "shm_tp/shm.h"

#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#define MAXP 8
#define SLOT 192 /* bytes: a 1009-element call takes many rounds */

static const size_t counts[] = {1, 2, 3, 5, 7, 8, 9, 61, 1009, 4099};
#define NCOUNTS (sizeof(counts) / sizeof(counts[0]))

typedef struct {
    int rank, size;
    hcomm_shm_t *shm;
    int failures;
    char first_failure[256];
} rank_t;

/* Small integers: sums of 8 ranks and products of 2s stay exact in every
 * type, float16 and bfloat16 included. */
static double input(int r, size_t i, hcomm_op_t op) {
    if (op == HCOMM_PROD) return 1 + (double)((r + 3 * i) % 2);
    return (double)((r + 3 * i) % 5) - (op == HCOMM_MIN ? 2 : 0);
}

static void fill(void *buf, hcomm_dtype_t dt, size_t n, int r, hcomm_op_t op) {
    for (size_t i = 0; i < n; i++) {
        double v = input(r, i, op);
        switch (dt) {
        case HCOMM_INT8:
            ((int8_t *)buf)[i] = (int8_t)v;
            break;
        case HCOMM_UINT8:
            ((uint8_t *)buf)[i] = (uint8_t)(v < 0 ? 0 : v);
            break;
        case HCOMM_INT32:
            ((int32_t *)buf)[i] = (int32_t)v;
            break;
        case HCOMM_UINT32:
            ((uint32_t *)buf)[i] = (uint32_t)(v < 0 ? 0 : v);
            break;
        case HCOMM_INT64:
            ((int64_t *)buf)[i] = (int64_t)v;
            break;
        case HCOMM_UINT64:
            ((uint64_t *)buf)[i] = (uint64_t)(v < 0 ? 0 : v);
            break;
        case HCOMM_FLOAT16:
            ((uint16_t *)buf)[i] = hcomm_float_to_half((float)v);
            break;
        case HCOMM_BFLOAT16:
            ((uint16_t *)buf)[i] = hcomm_float_to_bf16((float)v);
            break;
        case HCOMM_FLOAT32:
            ((float *)buf)[i] = (float)v;
            break;
        case HCOMM_FLOAT64:
            ((double *)buf)[i] = v;
            break;
        default:
            break;
        }
    }
}

static void note_failure(rank_t *rk, const char *fmt, ...) {
    if (rk->failures++) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rk->first_failure, sizeof(rk->first_failure), fmt, ap);
    va_end(ap);
}

/* Drives one or two calls to completion, the second first, for at most
 * 30 s: a call that waits for something that never comes times out. */
static hcomm_status_t drive(hcomm_shm_op_t *a, hcomm_shm_op_t *b) {
    hcomm_status_t sa = HCOMM_ERR_IN_PROGRESS, sb = b ? sa : HCOMM_SUCCESS;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long polls = 1;
         sa == HCOMM_ERR_IN_PROGRESS || sb == HCOMM_ERR_IN_PROGRESS; polls++) {
        if (sb == HCOMM_ERR_IN_PROGRESS) sb = hcomm_shm_op_progress(b);
        if (sa == HCOMM_ERR_IN_PROGRESS) sa = hcomm_shm_op_progress(a);
        if (polls % 1024 == 0) {
            clock_gettime(CLOCK_MONOTONIC, &t);
            if (t.tv_sec - t0.tv_sec > 30) return HCOMM_ERR_TIMEOUT;
        }
        sched_yield();
    }
    return sa != HCOMM_SUCCESS ? sa : sb;
}

static const char *algo_name(hcomm_shm_algo_t a) {
    return a == HCOMM_SHM_ONESHOT   ? "oneshot"
           : a == HCOMM_SHM_TWOSHOT ? "twoshot"
                                    : "cma";
}

/* want: every rank's input of n reduced in rank order (averaged for AVG). */
static void reference(char *want, hcomm_dtype_t dt, hcomm_op_t op, size_t n,
                      int size) {
    char *peer = malloc(n * hcomm_dtype_size(dt));
    fill(want, dt, n, 0, op);
    for (int r = 1; r < size; r++) {
        fill(peer, dt, n, r, op);
        hcomm_kernel_reduce(dt, op)(want, want, peer, n);
    }
    if (op == HCOMM_AVG) hcomm_kernel_scale(dt)(want, n, size);
    free(peer);
}

/* One allreduce (or two at once, when pair is set), checked. */
static void allreduce_case(rank_t *rk, hcomm_shm_algo_t algo, hcomm_dtype_t dt,
                           hcomm_op_t op, size_t n, int inplace, int pair) {
    size_t es = hcomm_dtype_size(dt);
    char *send = malloc(n * es), *recv = malloc(n * es);
    char *want = malloc(n * es), *recv2 = malloc(n * es);
    fill(send, dt, n, rk->rank, op);
    reference(want, dt, op, n, rk->size);
    if (inplace) memcpy(recv, send, n * es);
    memset(recv2, 0x5a, n * es);
    hcomm_shm_op_t a, b;
    hcomm_status_t st =
        hcomm_shm_op_start(&a, rk->shm, algo, HCOMM_COLL_ALLREDUCE,
                           inplace ? recv : send, recv, n, dt, op, 0);
    if (st == HCOMM_SUCCESS && pair)
        st = hcomm_shm_op_start(&b, rk->shm, algo, HCOMM_COLL_ALLREDUCE, send,
                                recv2, n, dt, op, 0);
    if (st == HCOMM_SUCCESS) st = drive(&a, pair ? &b : NULL);
    if (st != HCOMM_SUCCESS)
        note_failure(rk, "allreduce %s failed: %s", algo_name(algo),
                     hcomm_strerror(st));
    else if (memcmp(recv, want, n * es) ||
             (pair && memcmp(recv2, want, n * es)))
        note_failure(
            rk,
            "allreduce %s dtype %d op %d count %zu inplace %d pair %d: "
            "wrong result on rank %d of %d",
            algo_name(algo), (int)dt, (int)op, n, inplace, pair, rk->rank,
            rk->size);
    free(send);
    free(recv);
    free(want);
    free(recv2);
}

/* reduce_scatter: this rank's block of n of every rank's size * n. */
static void reduce_scatter_case(rank_t *rk, hcomm_shm_algo_t algo,
                                hcomm_dtype_t dt, hcomm_op_t op, size_t n,
                                int inplace) {
    size_t es = hcomm_dtype_size(dt), total = n * (size_t)rk->size;
    size_t mine = (size_t)rk->rank * n * es;
    char *send = malloc(total * es), *recv = malloc(n * es);
    char *want = malloc(total * es);
    fill(send, dt, total, rk->rank, op);
    reference(want, dt, op, total, rk->size);
    memset(recv, 0x5a, n * es);
    char *out = inplace ? send + mine : recv; /* hcomm.h's in-place form */
    hcomm_shm_op_t a;
    hcomm_status_t st = hcomm_shm_op_start(
        &a, rk->shm, algo, HCOMM_COLL_REDUCE_SCATTER, send, out, n, dt, op, 0);
    if (st == HCOMM_SUCCESS) st = drive(&a, NULL);
    if (st != HCOMM_SUCCESS)
        note_failure(rk, "reduce_scatter %s failed: %s", algo_name(algo),
                     hcomm_strerror(st));
    else if (memcmp(out, want + mine, n * es))
        note_failure(rk,
                     "reduce_scatter %s dtype %d op %d count %zu inplace %d: "
                     "wrong result on rank %d of %d",
                     algo_name(algo), (int)dt, (int)op, n, inplace, rk->rank,
                     rk->size);
    free(send);
    free(recv);
    free(want);
}

static unsigned char byte_of(int r, size_t i) {
    return (unsigned char)(r * 31 + i * 7 + 1);
}

static void allgather_case(rank_t *rk, hcomm_shm_algo_t algo, size_t n,
                           int inplace) {
    int P = rk->size;
    unsigned char *recv = malloc(n * (size_t)P), *send = malloc(n);
    memset(recv, 0, n * (size_t)P);
    unsigned char *mine = inplace ? recv + (size_t)rk->rank * n : send;
    for (size_t i = 0; i < n; i++)
        mine[i] = byte_of(rk->rank, i);
    hcomm_shm_op_t op;
    hcomm_status_t st =
        hcomm_shm_op_start(&op, rk->shm, algo, HCOMM_COLL_ALLGATHER, mine, recv,
                           n, HCOMM_UINT8, HCOMM_SUM, 0);
    if (st == HCOMM_SUCCESS) st = drive(&op, NULL);
    for (int r = 0; r < P && st == HCOMM_SUCCESS; r++)
        for (size_t i = 0; i < n; i++)
            if (recv[(size_t)r * n + i] != byte_of(r, i)) {
                note_failure(
                    rk,
                    "allgather %s count %zu inplace %d: rank %d block %d "
                    "element %zu wrong",
                    algo_name(algo), n, inplace, rk->rank, r, i);
                r = P;
                break;
            }
    if (st != HCOMM_SUCCESS)
        note_failure(rk, "allgather failed: %s", hcomm_strerror(st));
    free(recv);
    free(send);
}

static void bcast_case(rank_t *rk, hcomm_shm_algo_t algo, size_t n, int root) {
    if (algo == HCOMM_SHM_CMA && rk->size != 2) {
        /* above two ranks a broadcast stays on the slots */
        hcomm_shm_op_t op;
        if (hcomm_shm_op_start(&op, rk->shm, algo, HCOMM_COLL_BCAST, NULL, NULL,
                               n, HCOMM_UINT8, HCOMM_SUM,
                               root) != HCOMM_ERR_INTERNAL)
            note_failure(rk, "direct-read bcast accepted at %d ranks",
                         rk->size);
        return;
    }
    unsigned char *buf = malloc(n);
    for (size_t i = 0; i < n; i++)
        buf[i] = rk->rank == root ? byte_of(root, i) : 0;
    hcomm_shm_op_t op;
    hcomm_status_t st =
        hcomm_shm_op_start(&op, rk->shm, algo, HCOMM_COLL_BCAST, buf, buf, n,
                           HCOMM_UINT8, HCOMM_SUM, root);
    if (st == HCOMM_SUCCESS) st = drive(&op, NULL);
    if (st != HCOMM_SUCCESS)
        note_failure(rk, "bcast failed: %s", hcomm_strerror(st));
    for (size_t i = 0; i < n && st == HCOMM_SUCCESS; i++)
        if (buf[i] != byte_of(root, i)) {
            note_failure(
                rk, "bcast %s count %zu root %d: rank %d element %zu wrong",
                algo_name(algo), n, root, rk->rank, i);
            break;
        }
    free(buf);
}

/* reduce to root: only the root's receive buffer is written. */
static void reduce_case(rank_t *rk, hcomm_dtype_t dt, hcomm_op_t op, size_t n,
                        int root, int inplace) {
    size_t es = hcomm_dtype_size(dt);
    int at_root = rk->rank == root;
    char *send = malloc(n * es), *recv = malloc(n * es), *want = malloc(n * es);
    fill(send, dt, n, rk->rank, op);
    reference(want, dt, op, n, rk->size);
    memset(recv, 0x5a, n * es);
    if (inplace && at_root) memcpy(recv, send, n * es);
    hcomm_shm_op_t a;
    hcomm_status_t st =
        hcomm_shm_op_start(&a, rk->shm, HCOMM_SHM_ONESHOT, HCOMM_COLL_REDUCE,
                           inplace && at_root ? recv : send,
                           at_root ? recv : NULL, n, dt, op, root);
    if (st == HCOMM_SUCCESS) st = drive(&a, NULL);
    if (st != HCOMM_SUCCESS)
        note_failure(rk, "reduce failed: %s", hcomm_strerror(st));
    else if (at_root && memcmp(recv, want, n * es))
        note_failure(rk,
                     "reduce dtype %d op %d count %zu root %d inplace %d: "
                     "wrong result",
                     (int)dt, (int)op, n, root, inplace);
    free(send);
    free(recv);
    free(want);
}

/* gather, scatter or alltoall of n bytes a block; in place as hcomm.h
 * says; every byte checked, and what a rank does not receive untouched. */
static void move_case(rank_t *rk, hcomm_shm_algo_t algo, hcomm_coll_t coll,
                      size_t n, int root, int inplace) {
    int P = rk->size, me = rk->rank, at_root = me == root;
    size_t all = n * (size_t)P;
    unsigned char *send = malloc(all), *recv = malloc(all);
    memset(recv, 0xee, all);
    const unsigned char *s = send;
    unsigned char *r = recv;
    /* send: byte i of block b of rank q is byte_of(q * 8 + b, i) */
    for (int b = 0; b < P; b++)
        for (size_t i = 0; i < n; i++)
            send[(size_t)b * n + i] = byte_of(me * 8 + b, i);
    if (coll == HCOMM_COLL_GATHER && inplace && at_root) {
        memcpy(recv + (size_t)me * n, send, n);
        s = recv + (size_t)me * n;
    } else if (coll == HCOMM_COLL_SCATTER && inplace && at_root) {
        r = send + (size_t)me * n;
    } else if (coll == HCOMM_COLL_ALLTOALL && inplace) {
        memcpy(recv, send, all);
        s = recv;
    }
    hcomm_shm_op_t op;
    hcomm_status_t st = hcomm_shm_op_start(&op, rk->shm, algo, coll, s, r, n,
                                           HCOMM_UINT8, HCOMM_SUM, root);
    if (st == HCOMM_SUCCESS) st = drive(&op, NULL);
    size_t bad = 0;
    for (size_t k = 0; k < all && st == HCOMM_SUCCESS; k++) {
        int b = (int)(k / n);
        size_t i = k % n;
        int want;
        if (coll == HCOMM_COLL_GATHER)
            want = at_root ? byte_of(b * 8, i) : 0xee;
        else if (coll == HCOMM_COLL_ALLTOALL)
            want = byte_of(b * 8 + me, i);
        else /* scatter: block 0 of recv, or in place the root's own */
            want = k < n ? byte_of(root * 8 + me, i) : 0xee;
        unsigned char got = coll == HCOMM_COLL_SCATTER && inplace && at_root
                                ? (k < n ? r[k] : 0xee)
                                : recv[k];
        bad += got != want;
    }
    if (st != HCOMM_SUCCESS || bad)
        note_failure(rk, "%s %s count %zu root %d inplace %d: %s, %zu wrong",
                     hcomm_coll_name(coll), algo_name(algo), n, root, inplace,
                     hcomm_strerror(st), bad);
    free(send);
    free(recv);
}

/* allgatherv: rank q's block is (q * 3 + n) % 7 * n / 3 bytes (some
 * empty), placed in reverse rank order with a gap before each; gaps keep
 * their bytes. */
static void allgatherv_case(rank_t *rk, hcomm_shm_algo_t algo, size_t n,
                            int inplace) {
    int P = rk->size, me = rk->rank;
    size_t counts[MAXP], displs[MAXP], at = 0;
    for (int q = P - 1; q >= 0; q--) {
        counts[q] = (size_t)((q * 3 + (int)n) % 7) * n / 3;
        displs[q] = at + 1;
        at += counts[q] + 1;
    }
    unsigned char *recv = malloc(at + 1), *send = malloc(counts[me] + 1);
    memset(recv, 0xee, at + 1);
    unsigned char *mine = inplace ? recv + displs[me] : send;
    for (size_t i = 0; i < counts[me]; i++)
        mine[i] = byte_of(me, i);
    hcomm_shm_op_t op;
    hcomm_status_t st = hcomm_shm_op_start_v(&op, rk->shm, algo, mine, recv,
                                             counts, displs, HCOMM_UINT8);
    if (st == HCOMM_SUCCESS) st = drive(&op, NULL);
    size_t bad = 0;
    for (size_t k = 0; k < at && st == HCOMM_SUCCESS; k++) {
        int want = 0xee;
        for (int q = 0; q < P; q++)
            if (k >= displs[q] && k < displs[q] + counts[q])
                want = byte_of(q, k - displs[q]);
        bad += recv[k] != want;
    }
    if (st != HCOMM_SUCCESS || bad)
        note_failure(rk, "allgatherv n %zu inplace %d: %s, %zu wrong", n,
                     inplace, hcomm_strerror(st), bad);
    free(recv);
    free(send);
}

/* reduce_scatterv: rank q's block is (q * 5 + n) % 4 * n / 2 elements
 * (some empty), packed in rank order in every send buffer. */
static void reduce_scatterv_case(rank_t *rk, hcomm_dtype_t dt, hcomm_op_t op,
                                 size_t n, int inplace) {
    int P = rk->size, me = rk->rank;
    size_t es = hcomm_dtype_size(dt), counts[MAXP], total = 0, before = 0;
    for (int q = 0; q < P; q++) {
        counts[q] = (size_t)((q * 5 + (int)n) % 4) * n / 2;
        if (q < me) before += counts[q];
        total += counts[q];
    }
    char *send = malloc(total * es + 1), *want = malloc(total * es + 1);
    char *recv = malloc(counts[me] * es + 1);
    fill(send, dt, total, me, op);
    reference(want, dt, op, total, P);
    char *out = inplace ? send + before * es : recv;
    hcomm_shm_op_t a;
    hcomm_status_t st =
        hcomm_shm_op_start_rv(&a, rk->shm, send, out, counts, dt, op);
    if (st == HCOMM_SUCCESS) st = drive(&a, NULL);
    if (st != HCOMM_SUCCESS || memcmp(out, want + before * es, counts[me] * es))
        note_failure(rk,
                     "reduce_scatterv dtype %d op %d n %zu inplace %d: %s%s",
                     (int)dt, (int)op, n, inplace, hcomm_strerror(st),
                     st == HCOMM_SUCCESS ? ", wrong result" : "");
    free(send);
    free(want);
    free(recv);
}

static void *rank_main(void *arg) {
    rank_t *rk = arg;
    static const hcomm_shm_algo_t algos[] = {HCOMM_SHM_ONESHOT,
                                             HCOMM_SHM_TWOSHOT, HCOMM_SHM_CMA};
    for (int a = 0; a < 3; a++)
        for (size_t c = 0; c < NCOUNTS; c++) {
            for (int dt = 0; dt < HCOMM_DTYPE_COUNT; dt++)
                for (int op = 0; op < HCOMM_OP_COUNT; op++)
                    allreduce_case(rk, algos[a], (hcomm_dtype_t)dt,
                                   (hcomm_op_t)op, counts[c],
                                   (int)((c + (size_t)op) % 2), 0);
            allreduce_case(rk, algos[a], HCOMM_INT32, HCOMM_SUM, counts[c], 0,
                           1);
            if (algos[a] == HCOMM_SHM_TWOSHOT) continue;
            for (int dt = 0; dt < HCOMM_DTYPE_COUNT; dt++)
                for (int op = 0; op < HCOMM_OP_COUNT; op++)
                    reduce_scatter_case(rk, algos[a], (hcomm_dtype_t)dt,
                                        (hcomm_op_t)op, counts[c],
                                        (int)((c + (size_t)op) % 2));
            allgather_case(rk, algos[a], counts[c], 0);
            allgather_case(rk, algos[a], counts[c], 1);
            for (int root = 0; root < rk->size; root++)
                bcast_case(rk, algos[a], counts[c], root);
            /* gather, scatter, alltoall: slots and direct reads */
            for (int root = 0; root < rk->size; root++)
                for (int ip = 0; ip < 2; ip++) {
                    move_case(rk, algos[a], HCOMM_COLL_GATHER, counts[c], root,
                              ip);
                    move_case(rk, algos[a], HCOMM_COLL_SCATTER, counts[c], root,
                              ip);
                }
            move_case(rk, algos[a], HCOMM_COLL_ALLTOALL, counts[c], 0, 0);
            move_case(rk, algos[a], HCOMM_COLL_ALLTOALL, counts[c], 0, 1);
            allgatherv_case(rk, algos[a], counts[c], (int)(c % 2));
            if (algos[a] != HCOMM_SHM_ONESHOT) continue;
            /* reduce_scatterv, reduce and barrier: slots only */
            for (int dt = 0; dt < HCOMM_DTYPE_COUNT; dt++)
                for (int op = 0; op < HCOMM_OP_COUNT; op++)
                    reduce_scatterv_case(rk, (hcomm_dtype_t)dt, (hcomm_op_t)op,
                                         counts[c],
                                         (int)((c + (size_t)op) % 2));
            for (int dt = 0; dt < HCOMM_DTYPE_COUNT; dt++)
                for (int op = 0; op < HCOMM_OP_COUNT; op++)
                    reduce_case(rk, (hcomm_dtype_t)dt, (hcomm_op_t)op,
                                counts[c],
                                (int)((c + (size_t)op) % 8) % rk->size,
                                (int)((c + (size_t)dt) % 2));
            hcomm_shm_op_t b;
            hcomm_status_t st = hcomm_shm_op_start(
                &b, rk->shm, HCOMM_SHM_ONESHOT, HCOMM_COLL_BARRIER, NULL, NULL,
                0, HCOMM_UINT8, HCOMM_SUM, 0);
            if (st == HCOMM_SUCCESS) st = drive(&b, NULL);
            if (st != HCOMM_SUCCESS)
                note_failure(rk, "barrier failed: %s", hcomm_strerror(st));
        }
    return NULL;
}

static void run_ranks(int P) {
    size_t bytes = hcomm_shm_segment_bytes(P, SLOT);
    void *base = aligned_alloc(4096, bytes);
    assert_non_null(base);
    memset(base, 0, bytes);
    rank_t rk[MAXP];
    pthread_t th[MAXP];
    for (int r = 0; r < P; r++) {
        rk[r] = (rank_t){.rank = r, .size = P};
        assert_int_equal(
            hcomm_shm_attach(base, bytes, r, P, SLOT, 1, &rk[r].shm),
            HCOMM_SUCCESS);
    }
    for (int r = 0; r < P; r++)
        assert_int_equal(pthread_create(&th[r], NULL, rank_main, &rk[r]), 0);
    for (int r = 0; r < P; r++)
        pthread_join(th[r], NULL);
    for (int r = 0; r < P; r++) {
        if (rk[r].failures)
            fail_msg("P=%d rank %d: %d failures, first: %s", P, r,
                     rk[r].failures, rk[r].first_failure);
        hcomm_shm_destroy(rk[r].shm);
    }
    free(base);
}

/* The slot size of run_threads' segments. */
static size_t threads_slot = SLOT;

/* P ranks as threads over one segment: rank r runs fn on the r-th of the
 * args (each size bytes), whose rank_t is rk[r]; the segment is gone
 * after. */
static void run_threads(int P, rank_t *rk, void *(*fn)(void *), void *args,
                        size_t size) {
    size_t bytes = hcomm_shm_segment_bytes(P, threads_slot);
    void *base = aligned_alloc(4096, bytes);
    pthread_t th[MAXP];
    assert_non_null(base);
    memset(base, 0, bytes);
    for (int r = 0; r < P; r++) {
        rk[r] = (rank_t){.rank = r, .size = P};
        assert_int_equal(
            hcomm_shm_attach(base, bytes, r, P, threads_slot, 1, &rk[r].shm),
            HCOMM_SUCCESS);
    }
    for (int r = 0; r < P; r++)
        assert_int_equal(
            pthread_create(&th[r], NULL, fn, (char *)args + (size_t)r * size),
            0);
    for (int r = 0; r < P; r++)
        pthread_join(th[r], NULL);
    for (int r = 0; r < P; r++)
        hcomm_shm_destroy(rk[r].shm);
    free(base);
}

/* Ranks that pass different counts (and, second, operations): every rank
 * fails with HCOMM_ERR_MISMATCH in the call's first round, before it
 * touches any peer's data, and so does the next call on the segment. */
typedef struct {
    rank_t *rk;
    hcomm_status_t first, second, third;
    float out[64];
} mismatch_rank_t;

static void *mismatch_main(void *arg) {
    mismatch_rank_t *m = arg;
    rank_t *rk = m->rk;
    float in[64] = {0};
    hcomm_shm_op_t op;
    /* agreed: it runs */
    m->first = hcomm_shm_op_start(&op, rk->shm, HCOMM_SHM_ONESHOT,
                                  HCOMM_COLL_ALLREDUCE, in, m->out, 8,
                                  HCOMM_FLOAT32, HCOMM_SUM, 0);
    if (m->first == HCOMM_SUCCESS) m->first = drive(&op, NULL);
    size_t n = rk->rank == rk->size - 1 ? 64 : 32;
    memset(m->out, 0x5a, sizeof(m->out));
    m->second = hcomm_shm_op_start(&op, rk->shm, HCOMM_SHM_ONESHOT,
                                   HCOMM_COLL_ALLREDUCE, in, m->out, n,
                                   HCOMM_FLOAT32, HCOMM_SUM, 0);
    if (m->second == HCOMM_SUCCESS) m->second = drive(&op, NULL);
    m->third = hcomm_shm_op_start(&op, rk->shm, HCOMM_SHM_ONESHOT,
                                  HCOMM_COLL_ALLREDUCE, in, m->out, 8,
                                  HCOMM_FLOAT32, HCOMM_SUM, 0);
    if (m->third == HCOMM_SUCCESS) m->third = drive(&op, NULL);
    return NULL;
}

/* A call on GPU memory agrees on the segment first: ranks that all agree
 * pass; a rank that passed host memory to the same call makes every rank
 * fail, the message saying so. */
typedef struct {
    rank_t *rk;
    hcomm_status_t all_gpu, mixed;
    char why[256];
} agree_rank_t;

static void *agree_main(void *arg) {
    agree_rank_t *a = arg;
    rank_t *rk = a->rk;
    static float in[1000], out[1000];
    hcomm_shm_op_t op;
    a->all_gpu = hcomm_shm_op_agree(&op, rk->shm, HCOMM_COLL_ALLREDUCE, 1000,
                                    HCOMM_FLOAT32, HCOMM_SUM, 0);
    if (a->all_gpu == HCOMM_SUCCESS) a->all_gpu = drive(&op, NULL);
    if (rk->rank == rk->size - 1)
        a->mixed = hcomm_shm_op_start(&op, rk->shm, HCOMM_SHM_ONESHOT,
                                      HCOMM_COLL_ALLREDUCE, in, out, 1000,
                                      HCOMM_FLOAT32, HCOMM_SUM, 0);
    else
        a->mixed = hcomm_shm_op_agree(&op, rk->shm, HCOMM_COLL_ALLREDUCE, 1000,
                                      HCOMM_FLOAT32, HCOMM_SUM, 0);
    if (a->mixed == HCOMM_SUCCESS) a->mixed = drive(&op, NULL);
    snprintf(a->why, sizeof(a->why), "%s", hcomm_last_error());
    return NULL;
}

/* alltoallv on GPU memory agrees on the segment too (api.c): every rank
 * agreeing passes; one rank on host memory, in its round, makes every
 * rank fail. */
static void *a2av_agree_main(void *arg) {
    agree_rank_t *a = arg;
    rank_t *rk = a->rk;
    size_t zero[MAXP] = {0};
    int32_t buf[1];
    hcomm_shm_op_t op;
    a->all_gpu = hcomm_shm_op_agree(&op, rk->shm, HCOMM_COLL_ALLTOALLV, 0,
                                    HCOMM_INT32, HCOMM_SUM, 0);
    if (a->all_gpu == HCOMM_SUCCESS) a->all_gpu = drive(&op, NULL);
    if (rk->rank == 0)
        a->mixed = hcomm_shm_op_start_a2av(&op, rk->shm, buf, buf + 1, zero,
                                           zero, zero, zero, HCOMM_INT32);
    else
        a->mixed = hcomm_shm_op_agree(&op, rk->shm, HCOMM_COLL_ALLTOALLV, 0,
                                      HCOMM_INT32, HCOMM_SUM, 0);
    if (a->mixed == HCOMM_SUCCESS) a->mixed = drive(&op, NULL);
    snprintf(a->why, sizeof(a->why), "%s", hcomm_last_error());
    return NULL;
}

static void test_gpu_agreement(void **state) {
    (void)state;
    void *(*mains[])(void *) = {agree_main, a2av_agree_main};
    for (int m = 0; m < 2; m++)
        for (int P = 2; P <= 4; P++) {
            rank_t rk[MAXP];
            agree_rank_t a[MAXP];
            for (int r = 0; r < P; r++)
                a[r] = (agree_rank_t){.rk = &rk[r]};
            run_threads(P, rk, mains[m], a, sizeof(a[0]));
            for (int r = 0; r < P; r++) {
                assert_int_equal(a[r].all_gpu, HCOMM_SUCCESS);
                assert_int_equal(a[r].mixed, HCOMM_ERR_MISMATCH);
                assert_non_null(strstr(a[r].why, "memory differs"));
            }
        }
}

static void test_mismatch(void **state) {
    (void)state;
    for (int P = 2; P <= 4; P++) {
        rank_t rk[MAXP];
        mismatch_rank_t m[MAXP];
        for (int r = 0; r < P; r++)
            m[r] = (mismatch_rank_t){.rk = &rk[r]};
        run_threads(P, rk, mismatch_main, m, sizeof(m[0]));
        for (int r = 0; r < P; r++) {
            assert_int_equal(m[r].first, HCOMM_SUCCESS);
            assert_int_equal(m[r].second, HCOMM_ERR_MISMATCH);
            assert_int_equal(m[r].third, HCOMM_ERR_MISMATCH);
            /* nothing was written: the check comes before any data */
            unsigned char *o = (unsigned char *)m[r].out;
            for (size_t i = 0; i < sizeof(m[r].out); i++)
                assert_int_equal(o[i], 0x5a);
        }
    }
}

/* Rooted calls back to back, whose senders run ahead of their readers
 * (shm.h): every root, counts through the ring entries, the sub-slots,
 * the slots and many rounds, each call's bytes its own, so that a read of
 * a stale or a rewritten entry or sub-slot shows. Then a broadcast whose last
 * rank passes another count, or (roots_differ) one where every rank names
 * itself the root, so that no rank reads and only the later comparisons
 * (shm.h) can tell: every rank fails with HCOMM_ERR_MISMATCH within
 * as many calls more as a rank may leave unchecked, and the readers'
 * buffers stay untouched. At 2 ranks the calls that ran ahead were checked
 * by the peer's word that it compared them (shm_layout.h's done line),
 * not by comparing descriptors again. Then the same with gathers, whose
 * leaves run ahead of the root: the last rank passes
 * another count (the root stops; the other leaves learn it from the root's
 * done line), or every rank names the next one the root, so that no rank
 * reads. */
typedef enum {
    MISMATCH_BCAST_COUNT,
    MISMATCH_BCAST_ROOTS,
    MISMATCH_GATHER_COUNT,
    MISMATCH_GATHER_ROOTS,
    MISMATCH_KINDS
} ahead_mismatch_t;
#define AHEAD_CALLS 168
typedef struct {
    rank_t *rk;
    ahead_mismatch_t kind;
    int wrong, calls_failed;
    unsigned long compared_later; /* after the calls that match */
    int receiver_kept; /* a 2-rank receiver's calls kept to compare later */
    hcomm_status_t mismatch;
    int mismatch_calls;
    unsigned char untouched[64];
} ahead_rank_t;

static unsigned char ahead_byte(int call, int r, size_t i) {
    return (unsigned char)(call * 31 + r * 7 + (int)i);
}

static void *ahead_main(void *arg) {
    static const size_t ns[] = {0, 1, 3, 7, 61, 400, 1500};
    static const hcomm_coll_t colls[] = {HCOMM_COLL_BCAST, HCOMM_COLL_SCATTER,
                                         HCOMM_COLL_GATHER, HCOMM_COLL_REDUCE};
    ahead_rank_t *a = arg;
    rank_t *rk = a->rk;
    int me = rk->rank, P = rk->size;
    unsigned char send[1500 * MAXP], recv[1500 * MAXP];
    for (int call = 0; call < AHEAD_CALLS; call++) {
        /* each collective twice in a row: a root's sub-slots in use */
        hcomm_coll_t coll = colls[(call / 2) % 4];
        size_t n = ns[(call / 8) % 7];
        int root = (call / 8) % P, is_root = me == root;
        size_t all = n * (size_t)P;
        memset(recv, 0xee, sizeof(recv));
        for (size_t i = 0; i < all; i++)
            send[i] = coll == HCOMM_COLL_SCATTER
                          ? ahead_byte(call, (int)(i / n), i % n)
                          : ahead_byte(call, me, i);
        if (coll == HCOMM_COLL_BCAST && is_root) memcpy(recv, send, n);
        /* a slow reader, so that the roots do run as far ahead as the
         * entries and sub-slots let them */
        if (me == P - 1 && !is_root)
            nanosleep(&(struct timespec){0, 300000}, NULL);
        hcomm_shm_op_t op;
        int kept = rk->shm->nunchecked;
        hcomm_status_t st =
            hcomm_shm_op_start(&op, rk->shm, HCOMM_SHM_ONESHOT, coll,
                               coll == HCOMM_COLL_BCAST ? recv : send, recv, n,
                               HCOMM_UINT8, HCOMM_SUM, root);
        if (st == HCOMM_SUCCESS) st = drive(&op, NULL);
        if (st != HCOMM_SUCCESS) {
            a->calls_failed++;
            continue;
        }
        /* it compared the root's descriptor, its one peer's, before it
         * read: nothing is left to compare */
        if (P == 2 && !is_root &&
            (coll == HCOMM_COLL_BCAST || coll == HCOMM_COLL_SCATTER))
            a->receiver_kept += rk->shm->nunchecked > kept;
        for (size_t i = 0; i < n; i++) {
            switch (coll) {
            case HCOMM_COLL_BCAST:
                a->wrong += recv[i] != ahead_byte(call, root, i);
                break;
            case HCOMM_COLL_SCATTER:
                a->wrong += recv[i] != ahead_byte(call, me, i);
                break;
            case HCOMM_COLL_GATHER:
                for (int r = 0; is_root && r < P; r++)
                    a->wrong +=
                        recv[(size_t)r * n + i] != ahead_byte(call, r, i);
                break;
            default: {
                unsigned sum = 0;
                for (int r = 0; r < P; r++)
                    sum += ahead_byte(call, r, i);
                a->wrong += is_root && recv[i] != (unsigned char)sum;
            }
            }
        }
    }
    a->compared_later = rk->shm->compared_later;
    /* the mismatch */
    int gather = a->kind >= MISMATCH_GATHER_COUNT;
    int root = a->kind == MISMATCH_BCAST_ROOTS    ? me
               : a->kind == MISMATCH_GATHER_ROOTS ? (me + 1) % P
                                                  : 0;
    size_t n = me == P - 1 && (a->kind == MISMATCH_BCAST_COUNT ||
                               a->kind == MISMATCH_GATHER_COUNT)
                   ? 9
                   : 5;
    memset(a->untouched, 0x5a, sizeof(a->untouched));
    a->mismatch = HCOMM_SUCCESS;
    for (a->mismatch_calls = 0;
         a->mismatch == HCOMM_SUCCESS && a->mismatch_calls <= HCOMM_SHM_LAG_MAX;
         a->mismatch_calls++) {
        hcomm_shm_op_t op;
        if (me == root && !gather)
            memset(a->untouched, 0x33, sizeof(a->untouched));
        a->mismatch =
            hcomm_shm_op_start(&op, rk->shm, HCOMM_SHM_ONESHOT,
                               gather ? HCOMM_COLL_GATHER : HCOMM_COLL_BCAST,
                               gather ? send : a->untouched, a->untouched, n,
                               HCOMM_UINT8, HCOMM_SUM, root);
        if (a->mismatch == HCOMM_SUCCESS) a->mismatch = drive(&op, NULL);
    }
    return NULL;
}

/* A failed assertion leaves a test at once: the slot size it set must not
 * outlive it into the next test. */
static int default_slot(void **state) {
    (void)state;
    threads_slot = SLOT;
    return 0;
}

static void test_run_ahead(void **state) {
    (void)state;
    threads_slot = 8192; /* rounds in entries, sub-slots and slots */
    for (int P = 2; P <= 5; P++)
        for (int kind = 0; kind < MISMATCH_KINDS; kind++) {
            rank_t rk[MAXP];
            ahead_rank_t a[MAXP];
            for (int r = 0; r < P; r++)
                a[r] = (ahead_rank_t){.rk = &rk[r],
                                      .kind = (ahead_mismatch_t)kind};
            run_threads(P, rk, ahead_main, a, sizeof(a[0]));
            for (int r = 0; r < P; r++) {
                assert_int_equal(a[r].calls_failed, 0);
                assert_int_equal(a[r].wrong, 0);
                assert_int_equal(a[r].receiver_kept, 0);
                assert_int_equal(a[r].compared_later, 0);
                assert_int_equal(a[r].mismatch, HCOMM_ERR_MISMATCH);
                assert_true(a[r].mismatch_calls <=
                            (P == 2 ? HCOMM_SHM_LAG_2 : HCOMM_SHM_LAG) + 1);
                /* a reader of another count copied nothing, nor did a
                 * gather's root */
                int reader = (kind == MISMATCH_BCAST_COUNT && r == P - 1) ||
                             kind >= MISMATCH_GATHER_COUNT;
                for (size_t i = 0; reader && i < sizeof(a[r].untouched); i++)
                    assert_int_equal(a[r].untouched[i], 0x5a);
            }
        }
}

/* A blocking call waits for its peers' part in it, never for their next
 * call: a broadcast from rank 0 (every receiver keeps it to check later,
 * above 2 ranks), then a gather to rank 1, which must check the broadcast
 * before it starts (shm.h) while rank 0, a leaf that ran ahead, waits for
 * rank 1 to finish its gather before it calls again (as a program whose
 * rank 0 then waits for a message from rank 1 would), then a barrier. */
typedef struct {
    rank_t *rk;
    hcomm_status_t bcast, gather, barrier;
    int wrong, waited_in_vain;
    _Atomic int *gathered; /* rank 1's gather returned */
} next_call_rank_t;

static void *next_call_main(void *arg) {
    next_call_rank_t *a = arg;
    hcomm_shm_t *shm = a->rk->shm;
    int me = a->rk->rank, P = a->rk->size;
    unsigned char buf[5], block[3] = {(unsigned char)me, 7, 9}, all[3 * MAXP];
    hcomm_shm_op_t op;
    memset(buf, me ? 0 : 0x42, sizeof(buf));
    memset(all, 0xee, sizeof(all));
    a->bcast =
        hcomm_shm_op_start(&op, shm, HCOMM_SHM_ONESHOT, HCOMM_COLL_BCAST, buf,
                           buf, sizeof(buf), HCOMM_UINT8, HCOMM_SUM, 0);
    if (a->bcast == HCOMM_SUCCESS) a->bcast = drive(&op, NULL);
    a->gather =
        hcomm_shm_op_start(&op, shm, HCOMM_SHM_ONESHOT, HCOMM_COLL_GATHER,
                           block, all, 3, HCOMM_UINT8, HCOMM_SUM, 1);
    if (a->gather == HCOMM_SUCCESS) a->gather = drive(&op, NULL);
    if (me == 1) atomic_store(a->gathered, 1);
    for (int i = 0; me == 0 && !atomic_load(a->gathered); i++) {
        if (i == 10000) {
            a->waited_in_vain = 1;
            break;
        }
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
    a->barrier =
        hcomm_shm_op_start(&op, shm, HCOMM_SHM_ONESHOT, HCOMM_COLL_BARRIER,
                           NULL, NULL, 0, HCOMM_UINT8, HCOMM_SUM, 0);
    if (a->barrier == HCOMM_SUCCESS) a->barrier = drive(&op, NULL);
    for (size_t i = 0; i < sizeof(buf); i++)
        a->wrong += buf[i] != 0x42;
    for (int r = 0; me == 1 && r < P; r++)
        a->wrong +=
            all[3 * r] != r || all[3 * r + 1] != 7 || all[3 * r + 2] != 9;
    return NULL;
}

static void test_no_wait_for_next_call(void **state) {
    (void)state;
    for (int P = 2; P <= 5; P++) {
        rank_t rk[MAXP];
        next_call_rank_t a[MAXP];
        _Atomic int gathered = 0;
        for (int r = 0; r < P; r++)
            a[r] = (next_call_rank_t){.rk = &rk[r], .gathered = &gathered};
        run_threads(P, rk, next_call_main, a, sizeof(a[0]));
        for (int r = 0; r < P; r++) {
            assert_int_equal(a[r].bcast, HCOMM_SUCCESS);
            assert_int_equal(a[r].gather, HCOMM_SUCCESS);
            assert_int_equal(a[r].barrier, HCOMM_SUCCESS);
            assert_int_equal(a[r].wrong, 0);
            assert_int_equal(a[r].waited_in_vain, 0);
        }
    }
}

/* alltoallv (shm.h, shm_alltoallv.c): int32 blocks whose counts take
 * every route: every record whole (blocks from the records), some or all
 * not (more rounds through the slots), blocks past what the slots move
 * (direct reads of the send buffers; in place, declined, nothing moved),
 * blocks of 64 KiB (at 2 ranks direct reads; in place, and at 3 ranks,
 * rounds; from 4 ranks as the next), blocks of 256 KiB in all (direct reads
 * where the tables can be read; in place rounds), then a rank that sends one
 * element more than its receiver expects: every rank fails, nothing written
 * (last: the segment is failed after it). Counts: what rank i sends rank j,
 * alike both ways for in place. */
enum {
    A2AV_SMALL,
    A2AV_MIXED,
    A2AV_LARGE,
    A2AV_HUGE,
    A2AV_MID,
    A2AV_SPREAD,
    A2AV_MISMATCH,
    A2AV_SHAPES
};
/* direct: read where a record's table fits, else (none) declined */
typedef enum {
    ROUTE_RECORDS,
    ROUTE_ROUNDS,
    ROUTE_DIRECT,
    ROUTE_NONE
} a2av_route_t;
typedef struct {
    rank_t *rk;
    int wrong[A2AV_SHAPES][2];
    hcomm_status_t st[A2AV_SHAPES][2];
    int declined[A2AV_SHAPES][2], direct[A2AV_SHAPES][2];
    size_t rounds[A2AV_SHAPES][2];
} a2av_rank_t;

static size_t a2av_count(int shape, int P, int i, int j) {
    switch (shape) {
    case A2AV_SMALL:
        return (size_t)(i + j) % 2;
    case A2AV_MIXED: /* rank 0's and the last rank's pair do not fit */
        return i + j == P - 1 && i * j == 0 ? 40 : (size_t)(i + j) % 2;
    case A2AV_HUGE: /* all blocks past 2 MiB */
        return (2u << 20) / 4 / (size_t)P + (size_t)(i + j) % 3;
    case A2AV_MID: /* HCOMM_SHM_DIRECT_MIN_2 and a little more */
        return (64u << 10) / 4 + (size_t)(i + j) % 3;
    case A2AV_SPREAD: /* HCOMM_SHM_DIRECT_MIN_SPREAD in all, a little more */
        return (256u << 10) / 4 / (size_t)P + (size_t)(i + j) % 3;
    default:
        return (size_t)(i + j) % 5 + 36;
    }
}

/* A record's head and table: an entry for each peer. */
static size_t a2av_table_bytes(int P) {
    return 40 + 24 * (size_t)(P - 1);
}

/* Whether rank i's record (head, table, a block for each peer) fits a
 * slot. */
static int a2av_whole(int shape, int P, int i) {
    size_t bytes = a2av_table_bytes(P);
    for (int j = 0; j < P; j++)
        if (j != i) bytes += 4 * a2av_count(shape, P, i, j);
    return bytes <= SLOT;
}

/* Whether a record's head and table fit a slot: direct reads need them. */
static int a2av_table_fits(int P) {
    return a2av_table_bytes(P) <= SLOT;
}

/* The route of a call, in place (ip) or not: a buffer written in place
 * cannot be read directly. */
static a2av_route_t a2av_route(int shape, int P, int ip) {
    int whole = 1;
    for (int r = 0; r < P; r++)
        whole &= a2av_whole(shape, P, r);
    if (whole) return ROUTE_RECORDS;
    if (shape == A2AV_MID && P == 2) return ip ? ROUTE_ROUNDS : ROUTE_DIRECT;
    /* from HCOMM_SHM_DIRECT_MIN_SPREAD in all; the tables must be read
     * too */
    if (shape == A2AV_SPREAD || (shape == A2AV_MID && P >= 4))
        return a2av_table_fits(P) && !ip ? ROUTE_DIRECT : ROUTE_ROUNDS;
    if (shape != A2AV_HUGE) return ROUTE_ROUNDS;
    return a2av_table_fits(P) && !ip ? ROUTE_DIRECT : ROUTE_NONE;
}

static int32_t a2av_value(int from, int to, size_t k) {
    return from * 10000000 + to * 1000000 + (int32_t)k;
}

static void a2av_case(a2av_rank_t *a, int shape, int ip) {
    int me = a->rk->rank, P = a->rk->size;
    /* in place, a block's count each way must match: symmetric */
    size_t sc[MAXP], sd[MAXP], rc[MAXP], rd[MAXP], at = 0, rat = 0;
    for (int j = 0; j < P; j++) {
        sc[j] = a2av_count(shape, P, ip ? j : me, ip ? me : j);
        rc[j] = a2av_count(shape, P, j, me);
        if (shape == A2AV_MISMATCH && me == 0 && j == P - 1) sc[j]++;
        sd[j] = at;
        rd[j] = rat + 1; /* a gap before each block */
        at += sc[j];
        rat += rc[j] + 1;
    }
    int32_t *send = malloc((at + 1) * 4), *recv = malloc((rat + 1) * 4);
    assert_non_null(send);
    assert_non_null(recv);
    for (int j = 0; j < P; j++)
        for (size_t k = 0; k < sc[j]; k++)
            send[sd[j] + k] = a2av_value(me, j, k);
    for (size_t k = 0; k < rat; k++)
        recv[k] = -1;
    for (int j = 0; ip && j < P; j++)
        for (size_t k = 0; k < rc[j]; k++)
            recv[rd[j] + k] = a2av_value(me, j, k);
    hcomm_shm_op_t op;
    hcomm_status_t st = hcomm_shm_op_start_a2av(
        &op, a->rk->shm, ip ? recv : send, recv, ip ? rc : sc, ip ? rd : sd, rc,
        rd, HCOMM_INT32);
    if (st == HCOMM_SUCCESS) st = drive(&op, NULL);
    a->st[shape][ip] = st;
    a->declined[shape][ip] = op.declined;
    a->direct[shape][ip] = op.algo == HCOMM_SHM_CMA;
    a->rounds[shape][ip] = op.rounds;
    /* what moved, or nothing (declined in place leaves the own blocks;
     * otherwise -1 everywhere) */
    int moved = st == HCOMM_SUCCESS && !op.declined;
    for (int j = 0; j < P; j++) {
        a->wrong[shape][ip] += recv[rd[j] - 1] != -1;
        for (size_t k = 0; k < rc[j]; k++)
            a->wrong[shape][ip] +=
                recv[rd[j] + k] != (moved ? a2av_value(j, me, k)
                                    : ip  ? a2av_value(me, j, k)
                                          : -1);
    }
    free(send);
    free(recv);
}

static void *a2av_main(void *arg) {
    for (int shape = 0; shape < A2AV_SHAPES; shape++)
        for (int ip = 0; ip < 2 - (shape == A2AV_MISMATCH); ip++)
            a2av_case(arg, shape, ip);
    return NULL;
}

static void test_alltoallv(void **state) {
    (void)state;
    /* 8 ranks: a record whose table does not fit the slot (head only) */
    static const int counts[] = {2, 3, 4, 5, 8};
    for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
        int P = counts[c];
        rank_t rk[MAXP];
        a2av_rank_t a[MAXP];
        for (int r = 0; r < P; r++)
            a[r] = (a2av_rank_t){.rk = &rk[r]};
        run_threads(P, rk, a2av_main, a, sizeof(a[0]));
        for (int shape = 0; shape < A2AV_SHAPES; shape++)
            for (int ip = 0; ip < 2 - (shape == A2AV_MISMATCH); ip++) {
                a2av_route_t route = a2av_route(shape, P, ip);
                for (int r = 0; r < P; r++) {
                    assert_int_equal(a[r].wrong[shape][ip], 0);
                    if (shape == A2AV_MISMATCH) {
                        assert_int_equal(a[r].st[shape][ip],
                                         HCOMM_ERR_MISMATCH);
                        continue;
                    }
                    assert_int_equal(a[r].st[shape][ip], HCOMM_SUCCESS);
                    assert_int_equal(a[r].declined[shape][ip],
                                     route == ROUTE_NONE);
                    assert_int_equal(a[r].direct[shape][ip],
                                     route == ROUTE_DIRECT);
                    assert_int_equal(a[r].rounds[shape][ip] > 1,
                                     route == ROUTE_ROUNDS);
                }
            }
        /* the routes this test means to cover are covered */
        assert_true(a2av_route(A2AV_SMALL, P, 0) == ROUTE_RECORDS || P > 3);
        assert_int_equal(a2av_route(A2AV_MIXED, P, 0), ROUTE_ROUNDS);
        assert_int_equal(a2av_route(A2AV_HUGE, P, 0),
                         P < 8 ? ROUTE_DIRECT : ROUTE_NONE);
        assert_true(a2av_route(A2AV_MID, P, 0) == ROUTE_DIRECT || P > 2);
        assert_int_equal(a2av_route(A2AV_SPREAD, P, 0),
                         P < 8 ? ROUTE_DIRECT : ROUTE_ROUNDS);
        assert_int_equal(a2av_route(A2AV_SPREAD, P, 1), ROUTE_ROUNDS);
        assert_true(a2av_whole(A2AV_MIXED, P, 1) || P == 2 || P > 3);
    }
}

/* Gather, scatter and alltoall take the slots below a limit in all and
 * direct copies from it: 256 KiB for alltoall, whose copies spread over
 * the ranks, 128 KiB for a 2-rank gather, 2 MiB for scatter and gather
 * above 2 ranks, whose copies all meet the root's memory; at 2 ranks
 * scatter and alltoall read directly from a 64 KiB block. Without direct
 * copies the slots go on to 2 MiB, then the plans. */
static void test_slots_limit(void **state) {
    (void)state;
    static const hcomm_coll_t colls[] = {HCOMM_COLL_GATHER, HCOMM_COLL_SCATTER,
                                         HCOMM_COLL_ALLTOALL};
    const size_t most = 2u << 20;
    for (int P = 2; P <= 17; P++)
        for (int cma = 0; cma < 2; cma++)
            for (size_t c = 0; c < sizeof(colls) / sizeof(colls[0]); c++) {
                hcomm_coll_t coll = colls[c];
                hcomm_shm_t shm = {.size = P, .cma = cma};
                size_t limit = coll == HCOMM_COLL_ALLTOALL ? 256u << 10
                               : coll == HCOMM_COLL_GATHER && P == 2
                                   ? 128u << 10
                                   : most;
                size_t below = (limit - 1) / (size_t)P,
                       from = (limit + (size_t)P - 1) / (size_t)P,
                       past = (most + (size_t)P - 1) / (size_t)P;
                int early = cma && P == 2 && coll != HCOMM_COLL_GATHER;
                assert_int_equal(hcomm_shm_select(&shm, coll, below),
                                 early ? HCOMM_SHM_CMA : HCOMM_SHM_ONESHOT);
                assert_int_equal(hcomm_shm_select(&shm, coll, from),
                                 cma            ? HCOMM_SHM_CMA
                                 : limit < most ? HCOMM_SHM_ONESHOT
                                                : HCOMM_SHM_NONE);
                assert_int_equal(hcomm_shm_select(&shm, coll, past),
                                 cma ? HCOMM_SHM_CMA : HCOMM_SHM_NONE);
                assert_int_equal(hcomm_shm_select(&shm, coll, 8),
                                 HCOMM_SHM_ONESHOT);
            }
}

/* AllGatherV (bytes in all) reads its peers directly from a 64 KiB block
 * on average at 2 to 8 ranks; above 8, where every rank reads many peers,
 * only past what the slots move (2 MiB). Otherwise the slots up to 2 MiB,
 * then the plans. */
static void test_allgatherv_limit(void **state) {
    (void)state;
    const size_t most = 2u << 20;
    for (int P = 2; P <= 17; P++)
        for (int cma = 0; cma < 2; cma++) {
            hcomm_shm_t shm = {.size = P, .cma = cma};
            size_t direct = (64u << 10) * (size_t)P; /* at most 1.1 MiB */
            hcomm_shm_algo_t early =
                cma && P <= 8 ? HCOMM_SHM_CMA : HCOMM_SHM_ONESHOT;
            assert_int_equal(
                hcomm_shm_select(&shm, HCOMM_COLL_ALLGATHERV, direct - 1),
                HCOMM_SHM_ONESHOT);
            assert_int_equal(
                hcomm_shm_select(&shm, HCOMM_COLL_ALLGATHERV, direct), early);
            assert_int_equal(
                hcomm_shm_select(&shm, HCOMM_COLL_ALLGATHERV, most), early);
            assert_int_equal(
                hcomm_shm_select(&shm, HCOMM_COLL_ALLGATHERV, most + 1),
                cma ? HCOMM_SHM_CMA : HCOMM_SHM_NONE);
        }
}

/* AllReduce: one-shot while the n - 1 copies a rank reads fit 16 KiB
 * (HCOMM_FAST_PATH_SMALL_MSG), at 2 ranks below a slot, where two-shot
 * reads as much; direct reads from 128 KiB a rank; two-shot between, and
 * where direct reads do not work; no one-shot at all with a limit of 0. */
static void test_allreduce_limit(void **state) {
    (void)state;
    const size_t slot = 256u << 10;
    unsetenv("HCOMM_FAST_PATH_SMALL_MSG");
    assert_int_equal(hcomm_config_load(), HCOMM_SUCCESS); /* the default */
    for (int P = 2; P <= 17; P++)
        for (int cma = 0; cma < 2; cma++) {
            hcomm_shm_t shm = {.size = P, .cma = cma, .slot_bytes = slot};
            size_t one = P == 2 ? slot - 1 : (16u << 10) / (size_t)(P - 1);
            size_t direct = (128u << 10) * (size_t)P;
            hcomm_shm_algo_t big = cma ? HCOMM_SHM_CMA : HCOMM_SHM_TWOSHOT;
            assert_int_equal(hcomm_shm_select(&shm, HCOMM_COLL_ALLREDUCE, 8),
                             HCOMM_SHM_ONESHOT);
            assert_int_equal(hcomm_shm_select(&shm, HCOMM_COLL_ALLREDUCE, one),
                             HCOMM_SHM_ONESHOT);
            assert_int_equal(
                hcomm_shm_select(&shm, HCOMM_COLL_ALLREDUCE, one + 1),
                P == 2 ? big : HCOMM_SHM_TWOSHOT);
            assert_int_equal(/* at 2 ranks the slot's end: one + 1 */
                             hcomm_shm_select(&shm, HCOMM_COLL_ALLREDUCE,
                                              direct - 1),
                             P == 2 ? HCOMM_SHM_ONESHOT : HCOMM_SHM_TWOSHOT);
            assert_int_equal(
                hcomm_shm_select(&shm, HCOMM_COLL_ALLREDUCE, direct), big);
            assert_int_equal(hcomm_config_set("HCOMM_FAST_PATH_SMALL_MSG", "0"),
                             HCOMM_SUCCESS);
            assert_int_equal(hcomm_shm_select(&shm, HCOMM_COLL_ALLREDUCE, 8),
                             HCOMM_SHM_TWOSHOT);
            assert_int_equal(
                hcomm_config_set("HCOMM_FAST_PATH_SMALL_MSG", "16K"),
                HCOMM_SUCCESS);
        }
}

static void test_2_ranks(void **state) {
    (void)state;
    run_ranks(2);
}
static void test_3_ranks(void **state) {
    (void)state;
    run_ranks(3);
}
static void test_4_ranks(void **state) {
    (void)state;
    run_ranks(4);
}
static void test_5_ranks(void **state) {
    (void)state;
    run_ranks(5);
}
static void test_8_ranks(void **state) {
    (void)state;
    run_ranks(8);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mismatch),
        cmocka_unit_test(test_gpu_agreement),
        cmocka_unit_test_teardown(test_run_ahead, default_slot),
        cmocka_unit_test(test_no_wait_for_next_call),
        cmocka_unit_test(test_2_ranks),
        cmocka_unit_test(test_3_ranks),
        cmocka_unit_test(test_4_ranks),
        cmocka_unit_test(test_5_ranks),
        cmocka_unit_test(test_8_ranks),
        cmocka_unit_test(test_alltoallv),
        cmocka_unit_test(test_slots_limit),
        cmocka_unit_test(test_allgatherv_limit),
        cmocka_unit_test(test_allreduce_limit)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
