/* Integration test of the UCX transport (src/ucx_tp): an MPI program, run
 * with any number of ranks, e.g. mpirun -np 3 test_ucx_tp.
 *
 * Ring exchanges of 0, 1, 8, 4096 and 1 MiB + 3 bytes over MPI_COMM_WORLD, a
 * split and a duplicate communicator, several messages in flight with
 * different kinds, sequence numbers and steps (including values that only
 * agree modulo the tag field widths), messages to self, ordering of messages
 * with one tag, errors (truncation, short message, cancel, bad peer), and the
 * endpoint cache. Rank 0 prints "ucx_tp: N passed, M failed"; the exit
 * status is non-zero on failure.
 *
 * HCOMM_TEST_MT=1: MPI_THREAD_MULTIPLE, a MULTI worker, and the ring tests
 * of two communicators run concurrently from two threads.
 * HCOMM_UCX_BENCH=1 (2 or more ranks): ranks 0 and 1 measure the 8-byte
 * ping-pong latency and the 1 MiB / 16 MiB bandwidth; rank 0 prints them
 * and the endpoint's UCX configuration.
 */
#define _POSIX_C_SOURCE 200809L

#include "ucx_tp/ucx_tp.h"
#include "core/log.h"

#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NMSG 7
#define TIMEOUT_S 30.0

static int g_rank;
static long g_pass, g_fail;

#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (cond) {                                                            \
            __atomic_add_fetch(&g_pass, 1, __ATOMIC_RELAXED);                  \
        } else {                                                               \
            __atomic_add_fetch(&g_fail, 1, __ATOMIC_RELAXED);                  \
            fprintf(stderr, "[rank %d] FAIL %s:%d: ", g_rank, __FILE__,        \
                    __LINE__);                                                 \
            fprintf(stderr, __VA_ARGS__);                                      \
            fputc('\n', stderr);                                               \
        }                                                                      \
    } while (0)

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Waits for req; on timeout cancels it and returns HCOMM_ERR_TIMEOUT. */
static hcomm_status_t wait_req(hcomm_tp_t *tp, hcomm_tp_req_t *req) {
    double t0 = now_s();
    unsigned i = 0;
    while (!req->done) {
        tp->ops->progress(tp); /* the executor's order: progress, then test */
        tp->ops->test(tp, req);
        if ((++i & 4095) == 0 && now_s() - t0 > TIMEOUT_S) {
            tp->ops->cancel(tp, req);
            return HCOMM_ERR_TIMEOUT;
        }
    }
    return req->status;
}

static uint8_t pat(int src, int dst, size_t size, int idx, size_t i) {
    return (uint8_t)(i * 131u + (i >> 8) * 7u + (unsigned)src * 17u +
                     (unsigned)dst * 29u + (unsigned)idx * 53u + size * 3u +
                     1u);
}

static void fill(uint8_t *b, int src, int dst, size_t size, int idx) {
    for (size_t i = 0; i < size; i++)
        b[i] = pat(src, dst, size, idx, i);
}

/* Number of wrong bytes in b. */
static size_t verify(const uint8_t *b, int src, int dst, size_t size, int idx) {
    size_t bad = 0;
    for (size_t i = 0; i < size; i++)
        bad += b[i] != pat(src, dst, size, idx, i);
    return bad;
}

/* The send and receive tags of message j in round s. Messages 5 and 6 have
 * one tag (ordering); message 4 sends with seq and step beyond their field
 * widths and receives with the truncated values. */
static void tags_of(int j, uint32_t s, hcomm_tag_t *st, hcomm_tag_t *rt) {
    static const struct {
        uint8_t kind;
        uint32_t dseq, step;
    } t[NMSG] = {
        {HCOMM_TAG_COLL, 0, 0}, {HCOMM_TAG_COLL, 0, 1}, {HCOMM_TAG_COLL, 1, 0},
        {HCOMM_TAG_P2P, 0, 0},  {HCOMM_TAG_COLL, 0, 5}, {HCOMM_TAG_P2P, 3, 9},
        {HCOMM_TAG_P2P, 3, 9},
    };
    rt->kind = st->kind = t[j].kind;
    rt->seq = st->seq = s + t[j].dseq;
    rt->step = st->step = t[j].step;
    if (j == 4) {
        st->seq += 3u << 11;  /* same seq modulo 2^11 */
        st->step += 7u << 16; /* same step modulo 2^16 */
        rt->seq &= (1u << 11) - 1;
    }
}

/* One round: every rank sends NMSG messages of `size` to dst and receives
 * NMSG from src; half the receives are posted before the sends. */
static void exchange(hcomm_tp_t *tp, const char *what, int dst, int src,
                     size_t size, uint32_t s) {
    hcomm_tp_req_t sreq[NMSG] = {0}, rreq[NMSG] = {0};
    uint8_t *sb[NMSG] = {0}, *rb[NMSG] = {0};
    hcomm_tag_t st[NMSG], rt[NMSG];
    const int early[NMSG] = {0, 1, 0, 1, 1, 1, 1}; /* posted before sends */
    int j;

    for (j = 0; j < NMSG; j++) {
        tags_of(j, s, &st[j], &rt[j]);
        if (size > 0 || j % 2) { /* size 0: also try non-NULL buffers */
            sb[j] = malloc(size ? size : 1);
            rb[j] = malloc(size ? size : 1);
            if (sb[j] == NULL || rb[j] == NULL) {
                fprintf(stderr, "out of memory\n");
                MPI_Abort(MPI_COMM_WORLD, 2);
            }
            fill(sb[j], tp->rank, dst, size, j);
            memset(rb[j], 0xee, size);
        }
    }
    /* receives posted in reverse order, except the same-tag pair 5, 6 */
    for (j = NMSG - 1; j >= 0; j--) {
        int k = j == 6 ? 5 : j == 5 ? 6 : j;
        if (early[k])
            CHECK(tp->ops->irecv(tp, src, rb[k], size, rt[k], &rreq[k]) == 0,
                  "%s: irecv %zu #%d", what, size, k);
    }
    for (j = 0; j < NMSG; j++)
        CHECK(tp->ops->isend(tp, dst, sb[j], size, st[j], &sreq[j]) == 0,
              "%s: isend %zu #%d", what, size, j);
    for (j = 0; j < NMSG; j++)
        if (!early[j])
            CHECK(tp->ops->irecv(tp, src, rb[j], size, rt[j], &rreq[j]) == 0,
                  "%s: late irecv %zu #%d", what, size, j);
    for (j = 0; j < NMSG; j++) {
        hcomm_status_t r = wait_req(tp, &rreq[j]);
        CHECK(r == HCOMM_SUCCESS, "%s: recv %zu #%d from %d: status %d", what,
              size, j, src, r);
        if (r == HCOMM_SUCCESS && size > 0) {
            size_t bad = verify(rb[j], src, tp->rank, size, j);
            CHECK(bad == 0, "%s: recv %zu #%d from %d: %zu bad bytes", what,
                  size, j, src, bad);
        }
    }
    for (j = 0; j < NMSG; j++) {
        hcomm_status_t r = wait_req(tp, &sreq[j]);
        CHECK(r == HCOMM_SUCCESS, "%s: send %zu #%d: status %d", what, size, j,
              r);
        free(sb[j]);
        free(rb[j]);
    }
}

static const size_t sizes[] = {0, 1, 8, 4096, (1u << 20) + 3};
#define NSIZES (sizeof sizes / sizeof sizes[0])

static void *ring_test(void *arg) {
    hcomm_tp_t *tp = arg;
    int n = tp->size, r = tp->rank;
    uint32_t s = 100;
    for (size_t k = 0; k < NSIZES; k++) {
        exchange(tp, "ring", (r + 1) % n, (r + n - 1) % n, sizes[k], s++);
        exchange(tp, "ring-back", (r + n - 1) % n, (r + 1) % n, sizes[k], s++);
        exchange(tp, "self", r, r, sizes[k], s++);
    }
    /* sequence numbers that wrap around the 11-bit field */
    for (s = 2040; s < 2060; s++)
        exchange(tp, "seq-wrap", (r + 1) % n, (r + n - 1) % n, 8, s);
    return NULL;
}

static void error_tests(hcomm_tp_t *tp) {
    hcomm_tp_req_t sq = {0}, rq = {0};
    hcomm_tag_t t = {HCOMM_TAG_P2P, 1234, 4321};
    char sbuf[64] = "0123456789abcdef", rbuf[64];
    int me = tp->rank;
    hcomm_status_t r;
    int level = hcomm_log_level;

    hcomm_log_level = HCOMM_LOG_NONE; /* the errors below are expected */

    /* truncation: 16 bytes into 8 (the ranks passed different counts) */
    CHECK(tp->ops->isend(tp, me, sbuf, 16, t, &sq) == 0, "trunc isend");
    r = tp->ops->irecv(tp, me, rbuf, 8, t, &rq);
    CHECK(r == 0 || (rq.done && r == rq.status), "trunc irecv return %d", r);
    CHECK(wait_req(tp, &rq) == HCOMM_ERR_MISMATCH, "truncation detected");
    CHECK(rq.arrived == 16 || rq.arrived == HCOMM_TP_LONGER,
          "truncation: arrived %zu", rq.arrived);
    CHECK(wait_req(tp, &sq) == HCOMM_SUCCESS, "trunc send");

    /* a shorter message than posted: 4 bytes into 8 */
    t.step++;
    CHECK(tp->ops->isend(tp, me, sbuf, 4, t, &sq) == 0, "short isend");
    tp->ops->irecv(tp, me, rbuf, 8, t, &rq);
    CHECK(wait_req(tp, &rq) == HCOMM_ERR_MISMATCH, "short message detected");
    CHECK(rq.arrived == 4, "short message: arrived %zu", rq.arrived);
    CHECK(wait_req(tp, &sq) == HCOMM_SUCCESS, "short send");

    /* the same with the receive posted first (callback path) */
    t.step++;
    tp->ops->irecv(tp, me, rbuf, 8, t, &rq);
    CHECK(rq.done == 0, "expected receive pending");
    CHECK(tp->ops->isend(tp, me, sbuf, 16, t, &sq) == 0, "trunc2 isend");
    CHECK(wait_req(tp, &rq) == HCOMM_ERR_MISMATCH, "truncation detected (cb)");
    CHECK(rq.arrived == 16 || rq.arrived == HCOMM_TP_LONGER,
          "truncation (cb): arrived %zu", rq.arrived);
    CHECK(wait_req(tp, &sq) == HCOMM_SUCCESS, "trunc2 send");

    /* cancel a receive that never matches */
    t.step++;
    CHECK(tp->ops->irecv(tp, me, rbuf, 8, t, &rq) == 0, "cancel irecv");
    tp->ops->cancel(tp, &rq);
    CHECK(rq.done == 1 && rq.status != HCOMM_SUCCESS,
          "cancelled: done %d st %d", rq.done, rq.status);
    tp->ops->cancel(tp, &rq); /* cancelling a completed request: no-op */
    CHECK(rq.done == 1, "cancel twice");

    /* cancel a rendezvous send nobody receives yet: UCX cannot cancel sends,
     * so it is abandoned (done, *req free) but keeps going: a receive posted
     * later still gets the data (finalize then warns, as expected, that 1
     * request was abandoned) */
    {
        size_t big = 1u << 20;
        uint8_t *sb = malloc(big), *rb = malloc(big);
        if (sb == NULL || rb == NULL) MPI_Abort(MPI_COMM_WORLD, 2);
        fill(sb, me, me, big, 9);
        t.step++;
        CHECK(tp->ops->isend(tp, me, sb, big, t, &sq) == 0, "rndv isend");
        tp->ops->cancel(tp, &sq);
        CHECK(sq.done == 1, "abandoned send is done");
        CHECK(tp->ops->irecv(tp, me, rb, big, t, &rq) == 0, "late irecv");
        CHECK(wait_req(tp, &rq) == HCOMM_SUCCESS &&
                  verify(rb, me, me, big, 9) == 0,
              "abandoned send still delivered");
        free(sb);
        free(rb);
    }

    /* bad peers */
    CHECK(tp->ops->isend(tp, tp->size, sbuf, 1, t, &sq) ==
                  HCOMM_ERR_INVALID_ARG &&
              sq.done,
          "isend to peer == size");
    CHECK(tp->ops->irecv(tp, -1, rbuf, 1, t, &rq) == HCOMM_ERR_INVALID_ARG &&
              rq.done,
          "irecv from peer -1");
    hcomm_log_level = level;
}

/* The benchmark moves bytes through the transport or, for comparison,
 * through MPI (MPI_Isend/MPI_Irecv on MPI_COMM_WORLD). */
static void post(hcomm_tp_t *tp, int mpi, int send, int peer, void *buf,
                 size_t n, hcomm_tag_t t, hcomm_tp_req_t *q, MPI_Request *m) {
    if (mpi && send)
        MPI_Isend(buf, (int)n, MPI_BYTE, peer, (int)t.step, MPI_COMM_WORLD, m);
    else if (mpi)
        MPI_Irecv(buf, (int)n, MPI_BYTE, peer, (int)t.step, MPI_COMM_WORLD, m);
    else if (send)
        tp->ops->isend(tp, peer, buf, n, t, q);
    else
        tp->ops->irecv(tp, peer, buf, n, t, q);
}

static void wait_n(hcomm_tp_t *tp, int mpi, int n, hcomm_tp_req_t *q,
                   MPI_Request *m) {
    if (mpi) {
        MPI_Waitall(n, m, MPI_STATUSES_IGNORE);
        return;
    }
    for (int i = 0; i < n; i++)
        while (!q[i].done) {
            tp->ops->progress(tp);
            tp->ops->test(tp, &q[i]);
        }
}

/* One-way latency of an 8-byte ping-pong, in microseconds. */
static double pingpong(hcomm_tp_t *tp, int mpi, int iters) {
    hcomm_tp_req_t q[2] = {0};
    MPI_Request m[2];
    hcomm_tag_t t = {HCOMM_TAG_COLL, 0, 0};
    char ping[8] = {0}, pong[8];
    int peer = 1 - tp->rank;
    double t0 = now_s();

    for (int i = 0; i < iters; i++) {
        t.seq = (uint32_t)i;
        post(tp, mpi, 0, peer, pong, 8, t, &q[0], &m[0]);
        if (tp->rank == 1) wait_n(tp, mpi, 1, q, m);
        post(tp, mpi, 1, peer, ping, 8, t, &q[1], &m[1]);
        if (tp->rank == 1)
            wait_n(tp, mpi, 1, q + 1, m + 1);
        else
            wait_n(tp, mpi, 2, q, m);
    }
    return (now_s() - t0) / (2.0 * iters) * 1e6;
}

/* Rank 0 streams reps windows of win messages to rank 1; GB/s. */
static double bandwidth(hcomm_tp_t *tp, int mpi, char *buf, size_t bytes,
                        int win, int reps) {
    hcomm_tp_req_t q[16] = {0};
    MPI_Request m[16];
    hcomm_tag_t t = {HCOMM_TAG_COLL, 0, 0};
    int send = tp->rank == 0;
    double t0 = now_s();

    for (int i = 0; i < reps; i++) {
        t.seq = (uint32_t)i;
        for (int w = 0; w < win; w++) {
            t.step = (uint32_t)w;
            post(tp, mpi, send, 1 - tp->rank, buf + (size_t)w * bytes, bytes, t,
                 &q[w], &m[w]);
        }
        wait_n(tp, mpi, win, q, m);
        t.step = 1000; /* zero-byte acknowledgement */
        post(tp, mpi, !send, 1 - tp->rank, NULL, 0, t, &q[0], &m[0]);
        wait_n(tp, mpi, 1, q, m);
    }
    return (double)bytes * win * reps / (now_s() - t0) / 1e9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#define ROUNDS 9
/* Ranks 0 and 1; rank 0 prints the best and the median of ROUNDS rounds. */
static void bench(hcomm_tp_t *tp, int mpi) {
    const char *name = mpi ? "MPI   " : "ucx_tp";
    double v[ROUNDS];
    char info[4096];

    if (tp->rank > 1) return;
    pingpong(tp, mpi, 20000);
    for (int r = 0; r < ROUNDS; r++)
        v[r] = pingpong(tp, mpi, 50000);
    qsort(v, ROUNDS, sizeof v[0], cmp_double);
    if (tp->rank == 0)
        printf("bench: %s 8-byte ping-pong, one-way: best %.3f us, median "
               "%.3f us\n",
               name, v[0], v[ROUNDS / 2]);
    for (int mb = 1; mb <= 16; mb *= 16) {
        size_t bytes = (size_t)mb << 20;
        int win = mb == 1 ? 16 : 4, reps = mb == 1 ? 40 : 10;
        char *buf = malloc(bytes * (size_t)win);
        if (buf == NULL) MPI_Abort(MPI_COMM_WORLD, 2);
        memset(buf, tp->rank + 1, bytes * (size_t)win);
        bandwidth(tp, mpi, buf, bytes, win, 2);
        for (int r = 0; r < ROUNDS; r++)
            v[r] = bandwidth(tp, mpi, buf, bytes, win, reps);
        qsort(v, ROUNDS, sizeof v[0], cmp_double);
        if (tp->rank == 0)
            printf("bench: %s %2d MiB messages, window %2d: best %.2f GB/s, "
                   "median %.2f GB/s\n",
                   name, mb, win, v[ROUNDS - 1], v[ROUNDS / 2]);
        free(buf);
    }
    if (!mpi && tp->rank == 0 &&
        hcomm_ucx_describe_ep(tp, 1, info, sizeof info) == 0)
        printf("bench: endpoint to rank 1:\n%s", info);
    if (!mpi && tp->rank == 0 &&
        hcomm_ucx_describe_ep(tp, 0, info, sizeof info) == 0)
        printf("bench: endpoint to self:\n%s", info);
}

/* HCOMM's rendezvous threshold (ucx_tp.c): taken from UCX 1.17 on, and
 * never over a user's UCX_RNDV_THRESH. */
static void rndv_thresh_test(void) {
    char ver[32], *user = getenv("UCX_RNDV_THRESH");
    unsigned major = 0, minor = 0;
    const char *thresh = hcomm_ucx_rndv_thresh(ver, sizeof(ver));
    CHECK(sscanf(ver, "%u.%u", &major, &minor) == 2, "UCX version '%s'", ver);
    if (!user && (major > 1 || minor >= 17))
        CHECK(thresh && strcmp(thresh, HCOMM_UCX_RNDV_THRESH) == 0,
              "UCX %s: threshold %s", ver, thresh ? thresh : "(UCX's own)");
    else
        CHECK(thresh == NULL, "UCX %s: threshold %s", ver, thresh);
    char *saved = user ? strdup(user) : NULL;
    setenv("UCX_RNDV_THRESH", "1k", 1);
    CHECK(hcomm_ucx_rndv_thresh(NULL, 0) == NULL, "the user's threshold wins");
    if (saved)
        setenv("UCX_RNDV_THRESH", saved, 1);
    else
        unsetenv("UCX_RNDV_THRESH");
    free(saved);
}

int main(int argc, char **argv) {
    int size, provided = 0, level, mt = getenv("HCOMM_TEST_MT") != NULL;
    hcomm_tp_t *tpw = NULL, *tps = NULL, *tpd = NULL, *tmp = NULL;
    MPI_Comm split, dup;
    long res[2];
    hcomm_status_t st;

    if (mt) {
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
        mt = provided == MPI_THREAD_MULTIPLE;
    } else {
        MPI_Init(&argc, &argv);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (getenv("HCOMM_TEST_MT") != NULL && !mt && g_rank == 0)
        fprintf(stderr, "MPI_THREAD_MULTIPLE not provided: serial test\n");

    rndv_thresh_test();
    level = hcomm_log_level;
    hcomm_log_level = HCOMM_LOG_NONE; /* expected errors */
    CHECK(!hcomm_ucx_available() &&
              hcomm_ucx_tp_create(MPI_COMM_WORLD, 1, NULL, &tmp) ==
                  HCOMM_ERR_NOT_INITIALIZED &&
              tmp == NULL,
          "create before init");
    st = hcomm_ucx_init(mt);
    CHECK(hcomm_ucx_tp_create(MPI_COMM_WORLD, 1, NULL, NULL) ==
              HCOMM_ERR_INVALID_ARG,
          "create with out == NULL");
    CHECK(hcomm_ucx_tp_create(MPI_COMM_NULL, 1, NULL, &tmp) ==
                  HCOMM_ERR_INVALID_COMM &&
              tmp == NULL,
          "create on MPI_COMM_NULL");
    hcomm_log_level = level;
    CHECK(st == HCOMM_SUCCESS && hcomm_ucx_available(), "hcomm_ucx_init: %d",
          st);
    if (st != HCOMM_SUCCESS) MPI_Abort(MPI_COMM_WORLD, 1);
    CHECK(hcomm_ucx_init(mt) == HCOMM_SUCCESS, "second init is a no-op");

    MPI_Comm_split(MPI_COMM_WORLD, g_rank % 2, size - g_rank, &split);
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    /* the split first: the world then meets the other half for the first
     * time (address exchange for some ranks), the dup meets nobody new */
    CHECK(hcomm_ucx_tp_create(split, 2, NULL, &tps) == 0, "create split");
    if (tps == NULL) MPI_Abort(MPI_COMM_WORLD, 1);
    CHECK(hcomm_ucx_num_endpoints() == tps->size, "endpoints %d, split %d",
          hcomm_ucx_num_endpoints(), tps->size);
    CHECK(hcomm_ucx_tp_create(MPI_COMM_WORLD, 1, NULL, &tpw) == 0,
          "create world");
    CHECK(hcomm_ucx_num_endpoints() == size, "endpoints %d, world size %d",
          hcomm_ucx_num_endpoints(), size);
    CHECK(hcomm_ucx_tp_create(dup, 0xffff, NULL, &tpd) == 0, "create dup");
    if (tpw == NULL || tpd == NULL) MPI_Abort(MPI_COMM_WORLD, 1);
    CHECK(tpw->rank == g_rank && tpw->size == size, "world rank/size");
    CHECK(tps->size == (size + 1 - g_rank % 2) / 2, "split size %d", tps->size);
    CHECK(tps->rank == tps->size - 1 - g_rank / 2, "split rank %d", tps->rank);
    for (int i = 0; i < 50; i++) { /* many communicators, no new endpoints */
        CHECK(hcomm_ucx_tp_create(i % 2 ? split : MPI_COMM_WORLD,
                                  (uint16_t)(100 + i), NULL, &tmp) == 0,
              "create #%d", i);
        if (tmp != NULL) tmp->ops->destroy(tmp);
        tmp = NULL;
    }
    CHECK(hcomm_ucx_num_endpoints() == size, "endpoints %d after 53 creates",
          hcomm_ucx_num_endpoints());

    if (mt) {
        pthread_t th[2];
        pthread_create(&th[0], NULL, ring_test, tpw);
        pthread_create(&th[1], NULL, ring_test, tps);
        ring_test(tpd);
        pthread_join(th[0], NULL);
        pthread_join(th[1], NULL);
    } else {
        ring_test(tpw);
        ring_test(tps);
        ring_test(tpd);
    }
    error_tests(tpw);
    MPI_Barrier(MPI_COMM_WORLD);

    if (getenv("HCOMM_UCX_BENCH") != NULL && size >= 2) {
        bench(tpw, 0);
        MPI_Barrier(MPI_COMM_WORLD);
        bench(tpw, 1);
    }

    tpw->ops->destroy(tpw);
    tps->ops->destroy(tps);
    tpd->ops->destroy(tpd);
    MPI_Comm_free(&split);
    MPI_Comm_free(&dup);
    hcomm_ucx_finalize();
    CHECK(!hcomm_ucx_available(), "finalized");

    res[0] = g_pass;
    res[1] = g_fail;
    MPI_Allreduce(MPI_IN_PLACE, res, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (g_rank == 0) printf("ucx_tp: %ld passed, %ld failed\n", res[0], res[1]);
    MPI_Finalize();
    return res[1] != 0;
}
