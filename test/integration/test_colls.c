/* Every collective end to end: every dtype (and op where it reduces) x
 * every algorithm x in place and out of place x every root, counts around
 * the rank count, results compared bit for bit with references computed
 * here; non-blocking collectives in flight on several communicators at
 * once; one long interleaved sequence of 1000 calls, each checked; and a
 * random mix of blocking and non-blocking calls (HCOMM_TEST_SEED). */
#include "coll/plan.h"
#include "coll/select.h"
#include "coll_cases.h"
#include "mpi_check.h"
#include "reference.h"

#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int nranks, rank;

static void run_blocking(const shape_t *s, hcomm_comm_t comm) {
    int n, r;
    bufs_t b;
    hcomm_comm_size(comm, &n);
    hcomm_comm_rank(comm, &r);
    case_prepare(s, n, r, &b);
    hcomm_request_t req = HCOMM_REQUEST_NULL;
    hcomm_status_t st = case_start(s, &b, comm, &req);
    if (st == HCOMM_SUCCESS) st = hcomm_wait(&req);
    case_finish(s, &b, st);
}

static const hcomm_coll_t colls[] = {
    HCOMM_COLL_ALLREDUCE, HCOMM_COLL_ALLGATHER, HCOMM_COLL_REDUCE_SCATTER,
    HCOMM_COLL_BCAST,     HCOMM_COLL_REDUCE,    HCOMM_COLL_ALLTOALL,
    HCOMM_COLL_GATHER,    HCOMM_COLL_SCATTER};
#define NCOLLS (sizeof(colls) / sizeof(colls[0]))

/* One collective: every dtype x op x in place x root x count with the
 * default choice, then every algorithm on a smaller set of types. */
static void test_collective(hcomm_coll_t coll, hcomm_comm_t comm) {
    size_t counts[] = {0, 1, 2, 7, (size_t)nranks + 1, 1031};
    int nroots = case_rooted(coll) ? nranks : 1;
    shape_t s = {.coll = coll, .algo = "auto"};
    for (int t = 0; t < HCOMM_DTYPE_COUNT; t++)
        for (int op = 0; op < (case_reduces(coll) ? HCOMM_OP_COUNT : 1); op++)
            for (int root = 0; root < nroots; root++)
                for (int ip = 0; ip < 2; ip++)
                    for (size_t k = 0; k < sizeof(counts) / sizeof(*counts);
                         k++) {
                        s.t = (hcomm_dtype_t)t;
                        s.op = (hcomm_op_t)op;
                        s.root = root;
                        s.inplace = ip;
                        s.count = counts[k];
                        run_blocking(&s, comm);
                    }
    for (int a = 0; a < hcomm_nalgos; a++) {
        if (hcomm_algos[a].coll != coll) continue;
        char spec[96];
        snprintf(spec, sizeof(spec), "%s=%s", hcomm_coll_name(coll),
                 hcomm_algos[a].name);
        CHECK_OK(hcomm_select_configure(spec));
        s.algo = hcomm_algos[a].name;
        static const hcomm_dtype_t types[] = {HCOMM_INT32, HCOMM_BFLOAT16,
                                              HCOMM_UINT8};
        for (int t = 0; t < 3; t++)
            for (int root = 0; root < nroots; root++)
                for (int ip = 0; ip < 2; ip++)
                    for (size_t k = 0; k < sizeof(counts) / sizeof(*counts);
                         k++) {
                        s.t = types[t];
                        s.op = t == 1 ? HCOMM_MAX : HCOMM_SUM;
                        s.root = root;
                        s.inplace = ip;
                        s.count = counts[k];
                        run_blocking(&s, comm);
                    }
        /* Big enough for several pipeline chunks. */
        s.t = HCOMM_FLOAT32;
        s.op = HCOMM_SUM;
        s.root = nranks - 1;
        s.inplace = 0;
        s.count = (300u << 10) + 3;
        run_blocking(&s, comm);
    }
    CHECK_OK(hcomm_select_configure(""));
}

static double now(void) {
    struct timespec ts; /* one clock for every process of the node */
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void test_barrier(hcomm_comm_t comm) {
    /* The last rank arrives late: nobody may leave before it came. */
    for (int round = 0; round < 3; round++) {
        double arrived = 0;
        if (rank == nranks - 1) {
            struct timespec d = {0, 20 * 1000 * 1000};
            nanosleep(&d, NULL);
            arrived = now();
        }
        CHECK_OK(hcomm_barrier(comm));
        double left = now();
        MPI_Bcast(&arrived, 1, MPI_DOUBLE, nranks - 1, MPI_COMM_WORLD);
        CHECK(left >= arrived,
              "left the barrier %.6f s before the last rank "
              "arrived",
              arrived - left);
    }
}

static void test_send_recv(hcomm_comm_t comm) {
    size_t counts[] = {0, 1, 1031, 300003};
    for (size_t k = 0; k < 4; k++) {
        size_t c = counts[k];
        int *out = malloc(c * sizeof(int) + 1),
            *in = malloc(c * sizeof(int) + 1);
        for (size_t i = 0; i < c; i++)
            out[i] = rank * 1000003 + (int)i;
        int right = (rank + 1) % nranks, left = (rank - 1 + nranks) % nranks;
        hcomm_request_t req[2];
        CHECK_OK(hcomm_irecv(in, c, HCOMM_INT32, left, 7, comm, &req[0]));
        CHECK_OK(hcomm_isend(out, c, HCOMM_INT32, right, 7, comm, &req[1]));
        CHECK_OK(hcomm_waitall(2, req));
        size_t bad = 0;
        for (size_t i = 0; i < c; i++)
            bad += in[i] != left * 1000003 + (int)i;
        CHECK(bad == 0, "ring send/recv of %zu: %zu wrong", c, bad);
        /* Blocking, in pairs; tags keep two messages apart. */
        int peer = rank ^ 1;
        if (peer < nranks) {
            int a = rank, b = -1, a2 = rank + 100, b2 = -1;
            if (rank % 2 == 0) {
                CHECK_OK(hcomm_send(&a, 1, HCOMM_INT32, peer, 1, comm));
                CHECK_OK(hcomm_send(&a2, 1, HCOMM_INT32, peer, 2, comm));
                CHECK_OK(hcomm_recv(&b, 1, HCOMM_INT32, peer, 1, comm));
            } else {
                CHECK_OK(hcomm_recv(&b2, 1, HCOMM_INT32, peer, 2, comm));
                CHECK_OK(hcomm_recv(&b, 1, HCOMM_INT32, peer, 1, comm));
                CHECK_OK(hcomm_send(&a, 1, HCOMM_INT32, peer, 1, comm));
                CHECK(b2 == peer + 100, "tag 2 delivered %d", b2);
            }
            CHECK(b == peer, "pair send/recv got %d", b);
        }
        free(out);
        free(in);
    }
}

/* Collectives in flight on three communicators at once, waited in another
 * order than started. */
static void test_concurrent(hcomm_comm_t world) {
    hcomm_comm_t half, dup;
    CHECK_OK(hcomm_comm_split(world, rank % 2, rank, &half));
    CHECK_OK(hcomm_comm_dup(world, &dup));
    shape_t s[3] = {
        {HCOMM_COLL_ALLGATHER, HCOMM_INT64, HCOMM_SUM, 999, 0, 0, "auto"},
        {HCOMM_COLL_BCAST, HCOMM_FLOAT32, HCOMM_SUM, 70001, 0, 0, "auto"},
        {HCOMM_COLL_REDUCE_SCATTER, HCOMM_INT32, HCOMM_SUM, 513, 0, 1, "auto"}};
    s[1].root = nranks - 1;
    hcomm_comm_t comms[3] = {half, dup, world};
    bufs_t b[3];
    hcomm_request_t req[3];
    for (int i = 0; i < 3; i++) {
        int n, r;
        hcomm_comm_size(comms[i], &n);
        hcomm_comm_rank(comms[i], &r);
        if (i == 1 && s[1].root >= n) s[1].root = n - 1;
        case_prepare(&s[i], n, r, &b[i]);
        CHECK_OK(case_start(&s[i], &b[i], comms[i], &req[i]));
    }
    for (int i = 2; i >= 0; i--)
        case_finish(&s[i], &b[i], hcomm_wait(&req[i]));
    CHECK_OK(hcomm_comm_free(&half));
    CHECK_OK(hcomm_comm_free(&dup));
}

/* 1000 calls of every kind back to back, each result checked. */
static void test_sequence(hcomm_comm_t comm) {
    for (int i = 0; i < 1000; i++) {
        shape_t s = {.coll = colls[i % NCOLLS],
                     .t = (hcomm_dtype_t)(i % HCOMM_DTYPE_COUNT),
                     .op = (hcomm_op_t)((i / 7) % HCOMM_OP_COUNT),
                     .count = (size_t)((i * 37) % 61),
                     .root = (i / 3) % nranks,
                     .inplace = (i / 11) % 2,
                     .algo = "sequence"};
        if (i % 97 == 0) {
            CHECK_OK(hcomm_barrier(comm));
            continue;
        }
        run_blocking(&s, comm);
    }
}

/* A random mix, the same on every rank (one seed): batches of up to four
 * non-blocking calls on the world, a half and a duplicate, with a
 * blocking call now and then while they run, counts from 0 to 100003
 * (one-shot, two-shot, direct-read and many-round shared-memory calls,
 * plans), each rank waiting in its own random order. */
/* A random mix, the same on every rank (one seed): batches of up to four
 * non-blocking calls on the world, a half and a duplicate, with blocking
 * calls in between while they run, counts from 0 to 100003 (one-shot,
 * two-shot, direct-read and many-round shared-memory calls, plans,
 * hierarchical node stages under an override file), each rank waiting in
 * its own random order. */
static shape_t random_shape(unsigned *seed, int n) {
    static const size_t counts[] = {0, 1, 3, 61, 1031, 4099, 40009, 100003};
    shape_t s = {.coll = colls[rand_r(seed) % NCOLLS],
                 .t = (hcomm_dtype_t)(rand_r(seed) % HCOMM_DTYPE_COUNT),
                 .op = (hcomm_op_t)(rand_r(seed) % HCOMM_OP_COUNT),
                 .count =
                     counts[rand_r(seed) % (sizeof(counts) / sizeof(*counts))],
                 .inplace = rand_r(seed) % 2,
                 .algo = "random"};
    s.root = rand_r(seed) % n;
    return s;
}

static void test_random(hcomm_comm_t world) {
    enum { BATCHES = 60, MAXCALLS = 4 };
    hcomm_comm_t comms[3];
    comms[0] = world;
    CHECK_OK(hcomm_comm_split(world, rank % 2, rank, &comms[1]));
    CHECK_OK(hcomm_comm_dup(world, &comms[2]));
    const char *seed = getenv("HCOMM_TEST_SEED");
    unsigned shared = seed ? (unsigned)atoi(seed) : 12345;
    unsigned mine = 777u + (unsigned)rank;
    for (int batch = 0; batch < BATCHES; batch++) {
        shape_t s[MAXCALLS];
        bufs_t b[MAXCALLS];
        hcomm_request_t req[MAXCALLS];
        int waited[MAXCALLS] = {0}, ncalls = 1 + rand_r(&shared) % MAXCALLS;
        for (int k = 0; k < ncalls; k++) {
            hcomm_comm_t comm = comms[rand_r(&shared) % 3];
            int n, r;
            hcomm_comm_size(comm, &n);
            hcomm_comm_rank(comm, &r);
            s[k] = random_shape(&shared, n);
            case_prepare(&s[k], n, r, &b[k]);
            CHECK_OK(case_start(&s[k], &b[k], comm, &req[k]));
            if (rand_r(&shared) % 3 == 0) {
                shape_t blocking = random_shape(&shared, n);
                blocking.algo = "random, blocking";
                run_blocking(&blocking, comm);
            }
        }
        for (int left = ncalls; left > 0; left--) {
            int k = rand_r(&mine) % ncalls;
            while (waited[k])
                k = (k + 1) % ncalls;
            waited[k] = 1;
            case_finish(&s[k], &b[k], hcomm_wait(&req[k]));
        }
    }
    CHECK_OK(hcomm_comm_free(&comms[1]));
    CHECK_OK(hcomm_comm_free(&comms[2]));
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    check_rank = rank;
    hcomm_comm_t world;
    CHECK_OK(hcomm_init(&argc, &argv));
    CHECK_OK(hcomm_comm_create(MPI_COMM_WORLD, &world));
    for (size_t i = 0; i < NCOLLS; i++)
        test_collective(colls[i], world);
    test_barrier(world);
    test_send_recv(world);
    test_concurrent(world);
    test_sequence(world);
    test_random(world);
    CHECK_OK(hcomm_comm_free(&world));
    CHECK_OK(hcomm_finalize());
    int rc = check_summary("test_colls");
    MPI_Finalize();
    return rc;
}
