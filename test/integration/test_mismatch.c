/* Ranks that pass different arguments to one call: one rank's count,
 * type, operation, root or collective differs from the others'. Nobody
 * may read or write outside any rank's buffers (each sits between guard
 * zones that must stay untouched), and nobody may hang:
 *  - on shared memory (one-shot in the ring entries and in the slots,
 *    two-shot in one and in many rounds, direct reads, registered
 *    buffers), every rank gets HCOMM_ERR_MISMATCH with a message that
 *    names the field and the ranks (a rank that reads no peer's data in a
 *    one-round broadcast, within HCOMM_SHM_LAG calls more, HCOMM_SHM_LAG_2
 *    at 2 ranks), and the communicator is broken (a call queued behind the
 *    failed one fails too, at once);
 *  - on the plans (no segment), a rank that receives a message of the
 *    wrong length gets HCOMM_ERR_MISMATCH naming the peer and both sizes,
 *    instead of MPI aborting the job (MPI_ERR_TRUNCATE) or a silent
 *    success; a rank that only sends may succeed, or time out waiting for
 *    a peer that failed.
 * HCOMM_TEST_VERBOSE=1 prints every rank's status per case on stderr;
 * HCOMM_TEST_CASE=text runs only the cases whose name holds text. */
#include "core/comm.h"
#include "core/config.h"
#include "mpi_check.h"
#include "shm_tp/shm.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define TIMEOUT_S 3.0
/* On the plans, ranks that exchange nothing with the odd one wait out the
 * timeout: a shorter one there (3 s made this test take 85 s of CI's, 1 s
 * 39 s; 0.4 s held with two busy loops beside 5 ranks on 2 cores). */
#define PLANS_TIMEOUT_S 0.5

/* The timeout of the cases on the shared segment or on the plans. */
static void set_timeout(int plans) {
    char t[16];
    snprintf(t, sizeof(t), "%g", plans ? PLANS_TIMEOUT_S : TIMEOUT_S);
    CHECK_OK(hcomm_config_set("HCOMM_TIMEOUT", t));
}

typedef enum { AR, RS, AG, BC, RED, GA } kind_t;
static const char *kind_names[] = {"allreduce", "reduce_scatter", "allgather",
                                   "bcast",     "reduce",         "gather"};

typedef struct {
    kind_t kind;
    size_t count;
    hcomm_dtype_t dtype;
    hcomm_op_t op;
    int root;
} args_t;

/* flags: */
#define PLANS 1      /* run on the plans too */
#define REGISTERED 2 /* buffers from hcomm_mem_alloc */
#define ODD_FIRST 4  /* rank 0 passes odd (else the last rank) */
#define TWO_SHOT 8   /* HCOMM_FAST_PATH_SMALL_MSG=0 */
#define SMALL 16     /* HCOMM_SHM_SLOT_SIZE=4K: many rounds */
#define NO_SHM 32    /* the plans alone: their message names bytes */

typedef struct {
    const char *name;
    unsigned flags;
    args_t all, odd;           /* what the odd rank passes, the others */
    const char *field, *value; /* expected in the message */
} case_t;

#define ODD_LAST -1 /* as a root: the odd rank */
#define ARGS(kind, count, dtype, op, root)                                     \
    { kind, count, dtype, op, root }
#define A(kind, count, dtype) ARGS(kind, count, dtype, HCOMM_SUM, 0)
#define F32 HCOMM_FLOAT32
#define U8 HCOMM_UINT8

/* Each case on shared memory, then some on the plans (no segment). */
static const case_t cases[] = {
    {"one-shot, ring entries", PLANS, A(AR, 10, F32), A(AR, 5, F32), "count",
     "passed 5"},
    {"one-shot, slots", ODD_FIRST, A(AR, 1000, F32), A(AR, 3000, F32), "count",
     "passed 3000"},
    {"two-shot", TWO_SHOT, A(AR, 20000, F32), A(AR, 10000, F32), "count",
     "passed 10000"},
    {"two-shot, many rounds", TWO_SHOT | SMALL, A(AR, 20000, F32),
     A(AR, 30000, F32), "count", "passed 30000"},
    {"direct reads", PLANS, A(AR, 1000000, F32), A(AR, 500000, F32), "count",
     "passed 500000"},
    {"direct reads against one-shot", ODD_FIRST, A(AR, 1000000, F32),
     A(AR, 10, F32), "count", "passed 10"},
    {"count 0 against 100", 0, A(AR, 100, F32), A(AR, 0, F32), "count",
     "passed 0"},
    {"element size", PLANS, A(AR, 1000, F32), A(AR, 1000, HCOMM_FLOAT64),
     "data type", "float64"},
    {"type of one size", 0, A(AR, 1000, F32), A(AR, 1000, HCOMM_INT32),
     "data type", "int32"},
    {"operation", 0, A(AR, 1000, F32), ARGS(AR, 1000, F32, HCOMM_MAX, 0),
     "operation", "max"},
    {"collective", 0, A(AR, 100, F32), A(AG, 100, F32), "collective",
     "allgather"},
    {"reduce_scatter, slots", PLANS, A(RS, 1000, F32), A(RS, 500, F32), "count",
     "passed 500"},
    {"reduce_scatter, direct reads", ODD_FIRST, A(RS, 40000, F32),
     A(RS, 60000, F32), "count", "passed 60000"},
    {"allgather, slots", PLANS, A(AG, 1000, U8), A(AG, 2000, U8), "count",
     "passed 2000"},
    {"allgather, direct reads", 0, A(AG, 100000, U8), A(AG, 50000, U8), "count",
     "passed 50000"},
    {"broadcast, ring entries", PLANS, A(BC, 100, U8), A(BC, 50, U8), "count",
     "passed 50"},
    {"broadcast from the odd rank", 0, ARGS(BC, 10000, U8, HCOMM_SUM, ODD_LAST),
     ARGS(BC, 20000, U8, HCOMM_SUM, ODD_LAST), "count", "passed 20000"},
    {"broadcast of 1 MiB to 16 KiB", PLANS, A(BC, 1 << 20, U8),
     A(BC, 16 << 10, U8), "count", "passed 16384"},
    {"broadcast of 1 MiB to 64 KiB", 0, A(BC, 1 << 20, U8), A(BC, 64 << 10, U8),
     "count", "passed 65536"},
    {"broadcast, many rounds", SMALL, A(BC, 100000, U8), A(BC, 30000, U8),
     "count", "passed 30000"},
    {"broadcast roots", 0, A(BC, 1000, U8),
     ARGS(BC, 1000, U8, HCOMM_SUM, ODD_LAST), "root", "root"},
    {"broadcast element size", 0, A(BC, 1000, U8), A(BC, 1000, F32),
     "element size", "4-byte"},
    {"registered allreduce", REGISTERED, A(AR, 1000000, F32),
     A(AR, 500000, F32), "count", "passed 500000"},
    {"registered broadcast", REGISTERED, A(BC, 1 << 20, U8),
     A(BC, 16 << 10, U8), "count", "passed 16384"},
    {"registered broadcast to 64 KiB", REGISTERED, A(BC, 1 << 20, U8),
     A(BC, 64 << 10, U8), "count", "passed 65536"},
    {"registered allgather", REGISTERED | ODD_FIRST, A(AG, 100000, U8),
     A(AG, 200000, U8), "count", "passed 200000"},
    /* A gather's ranks write into the root's buffer: each compares the
     * root's count first. */
    {"gather, direct writes", 0, A(GA, 1100000, U8), A(GA, 2200000, U8),
     "count", "passed 2200000"},
    {"registered gather", REGISTERED, A(GA, 1100000, U8), A(GA, 2200000, U8),
     "count", "passed 2200000"},
    /* The plans: the root receives. */
    {"reduce", PLANS | NO_SHM, A(RED, 100, F32), A(RED, 50, F32), "bytes",
     NULL},
    {"reduce, larger at a leaf", PLANS | NO_SHM, A(RED, 50, F32),
     A(RED, 100, F32), "bytes", NULL},
    {"gather", PLANS | NO_SHM, A(GA, 100, F32), A(GA, 50, F32), "bytes", NULL},
};
#define NCASES (sizeof(cases) / sizeof(cases[0]))

static int rank, nranks;

static int odd_rank(const case_t *c) {
    return c->flags & ODD_FIRST ? 0 : nranks - 1;
}

static args_t args_of(const case_t *c, int r) {
    args_t a = r == odd_rank(c) ? c->odd : c->all;
    if (a.root == ODD_LAST) a.root = nranks - 1;
    return a;
}

/* Bytes of rank r's send and receive buffers (0: none). */
static void buffer_bytes(const args_t *a, int r, size_t *sb, size_t *rb) {
    size_t b = a->count * hcomm_dtype_size(a->dtype), n = (size_t)nranks;
    int root = r == a->root;
    *sb = a->kind == BC ? 0 : a->kind == RS ? b * n : b;
    *rb = a->kind == AG    ? b * n
          : a->kind == RED ? (root ? b : 0)
          : a->kind == GA  ? (root ? b * n : 0)
                           : b;
}

/* The largest buffer any rank has in the case: the guard zones' size. */
static size_t guard_bytes(const case_t *c) {
    size_t most = 0;
    for (int r = 0; r < nranks; r++) {
        args_t a = args_of(c, r);
        size_t sb, rb;
        buffer_bytes(&a, a.root, &sb, &rb); /* the root's are the largest */
        if (sb > most) most = sb;
        if (rb > most) most = rb;
    }
    return (most + 4095) & ~(size_t)4095;
}

/* A buffer between two guard zones of g bytes each. */
typedef struct {
    char *map, *buf;
    size_t len, g, maplen;
    int registered;
} guarded_t;

static unsigned char guard_byte(size_t i) {
    return (unsigned char)(0xa5 ^ (i * 7));
}

static void guarded_alloc(guarded_t *gb, size_t len, size_t g, int registered,
                          hcomm_comm_t comm) {
    memset(gb, 0, sizeof(*gb));
    gb->len = len;
    gb->g = g;
    gb->registered = registered;
    /* Registered: the same size on every rank, as hcomm_mem_alloc needs. */
    gb->maplen = 3 * g;
    if (registered) {
        CHECK_OK(hcomm_mem_alloc(comm, gb->maplen, (void **)&gb->map));
    } else {
        gb->map = mmap(NULL, gb->maplen, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (gb->map == MAP_FAILED) gb->map = NULL;
    }
    CHECK(gb->map != NULL, "no memory for a guarded buffer");
    if (!gb->map) return;
    for (size_t i = 0; i < gb->maplen; i++)
        gb->map[i] = (char)guard_byte(i);
    gb->buf = len ? gb->map + g : NULL;
    for (size_t i = 0; i < len; i++)
        gb->buf[i] = (char)(rank + i);
}

/* Bytes outside [g, g + len) that changed. */
static size_t guarded_damage(const guarded_t *gb) {
    size_t bad = 0;
    for (size_t i = 0; gb->map && i < gb->maplen; i++)
        if ((i < gb->g || i >= gb->g + gb->len) &&
            (unsigned char)gb->map[i] != guard_byte(i))
            bad++;
    return bad;
}

static void guarded_free(guarded_t *gb, hcomm_comm_t comm) {
    if (!gb->map) return;
    if (gb->registered)
        CHECK_OK(hcomm_mem_free(comm, gb->map));
    else
        munmap(gb->map, gb->maplen);
}

static hcomm_status_t call(const args_t *a, void *s, void *r,
                           hcomm_comm_t comm) {
    switch (a->kind) {
    case AR:
        return hcomm_allreduce(s, r, a->count, a->dtype, a->op, comm);
    case RS:
        return hcomm_reduce_scatter(s, r, a->count, a->dtype, a->op, comm);
    case AG:
        return hcomm_allgather(s, r, a->count, a->dtype, comm);
    case BC:
        return hcomm_broadcast(r, a->count, a->dtype, a->root, comm);
    case RED:
        return hcomm_reduce(s, r, a->count, a->dtype, a->op, a->root, comm);
    default:
        return hcomm_gather(s, r, a->count, a->dtype, a->root, comm);
    }
}

static int has_shm(hcomm_comm_t comm) {
    hcomm_comm_impl_t *c;
    return hcomm_comm_lookup(comm, &c) == HCOMM_SUCCESS && c->shm != NULL;
}

static int any_rank(int v) {
    int any = 0;
    MPI_Allreduce(&v, &any, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
    return any;
}

/* Broken communicators of the plans stay alive to the end: a message a
 * failed rank never received could otherwise match a receive of the next
 * communicator, which may get the same id. */
static hcomm_comm_t kept[2 * NCASES + 3];
static int nkept;

/* After a case: its buffers go, and its communicator (those of the plans
 * are kept, above). */
static void case_end(guarded_t *s, guarded_t *r, hcomm_comm_t comm, int plans) {
    MPI_Barrier(MPI_COMM_WORLD);
    guarded_free(s, comm);
    guarded_free(r, comm);
    if (plans)
        kept[nkept++] = comm;
    else
        CHECK_OK(hcomm_comm_free(&comm));
}

static void run_case(const case_t *c, int plans) {
    char what[160];
    snprintf(what, sizeof(what), "%s (%s)", c->name,
             plans ? "plans" : "shared memory");
    int registered = (c->flags & REGISTERED) != 0;
    const char *only = getenv("HCOMM_TEST_CASE");
    if ((only && !strstr(what, only)) || (!plans && (c->flags & NO_SHM)) ||
        (plans && !(c->flags & PLANS)))
        return;
    const char *slot = plans ? "0" : c->flags & SMALL ? "4K" : "256K";
    set_timeout(plans);
    CHECK_OK(hcomm_config_set("HCOMM_SHM_SLOT_SIZE", slot));
    CHECK_OK(hcomm_config_set("HCOMM_FAST_PATH_SMALL_MSG",
                              c->flags & TWO_SHOT ? "0" : "16K"));
    hcomm_comm_t comm = HCOMM_COMM_NULL;
    CHECK_OK(hcomm_comm_create(MPI_COMM_WORLD, &comm));
    int shm = has_shm(comm);
    if (registered && !shm) {
        CHECK_OK(hcomm_comm_free(&comm));
        return;
    }
    args_t a = args_of(c, rank);
    size_t sb, rb, g = guard_bytes(c);
    buffer_bytes(&a, rank, &sb, &rb);
    guarded_t s, r;
    guarded_alloc(&s, sb, g, registered, comm);
    guarded_alloc(&r, rb, g, registered, comm);

    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    hcomm_status_t st = call(&a, s.buf, r.buf, comm);
    /* A rank that reads no peer's data in a one-round rooted call (a
     * broadcast root, say) returns without the others' descriptors and
     * learns of the mismatch within as many more calls as it may leave
     * unchecked (shm.h). */
    int lag = hcomm_shm_lag_limit(nranks);
    for (int more = 0; shm && st == HCOMM_SUCCESS && a.kind == BC && more < lag;
         more++)
        st = call(&a, s.buf, r.buf, comm);
    double took = MPI_Wtime() - t0;
    char msg[512];
    snprintf(msg, sizeof(msg), "%s", hcomm_last_error());
    if (getenv("HCOMM_TEST_VERBOSE"))
        fprintf(stderr, "[rank %d] %s: %s after %.3f s: %s\n", rank, what,
                hcomm_strerror(st), took, st == HCOMM_SUCCESS ? "" : msg);

    size_t damage = guarded_damage(&s) + guarded_damage(&r);
    CHECK(damage == 0, "%s: %zu guard bytes changed", what, damage);
    if (shm) {
        /* Every rank learns of it at once, and the message says what. */
        char odd_name[32];
        snprintf(odd_name, sizeof(odd_name), "rank %d", odd_rank(c));
        CHECK(st == HCOMM_ERR_MISMATCH, "%s: %s, expected a mismatch (%s)",
              what, hcomm_strerror(st), msg);
        CHECK(took < TIMEOUT_S, "%s: took %.1f s", what, took);
        CHECK(st != HCOMM_ERR_MISMATCH ||
                  (strstr(msg, c->field) && strstr(msg, odd_name) &&
                   strstr(msg, c->value) && strstr(msg, "rank 0") &&
                   strstr(msg, kind_names[a.kind])),
              "%s: the message does not name %s, %s, rank 0 and %s: %s", what,
              c->field, c->value, odd_name, msg);
        /* The ranks are out of step now: the communicator stays broken. */
        st = call(&a, s.buf, r.buf, comm);
        CHECK(st == HCOMM_ERR_MISMATCH &&
                  strstr(hcomm_last_error(), "failed earlier"),
              "%s: the next call: %s (%s)", what, hcomm_strerror(st),
              hcomm_last_error());
    } else {
        /* Receivers of a message of the wrong length fail, with the peer
         * and both lengths; senders may not know. */
        CHECK(st == HCOMM_SUCCESS || st == HCOMM_ERR_MISMATCH ||
                  st == HCOMM_ERR_TIMEOUT,
              "%s: %s (%s)", what, hcomm_strerror(st), msg);
        CHECK(st != HCOMM_ERR_MISMATCH ||
                  (strstr(msg, "bytes") && strstr(msg, "rank")),
              "%s: the message does not name a peer and sizes: %s", what, msg);
        CHECK(any_rank(st == HCOMM_ERR_MISMATCH),
              "%s: no rank found the mismatch", what);
        /* Two ranks: the root of a reduce or gather receives from the
         * other. */
        if (nranks == 2 && (a.kind == RED || a.kind == GA) && rank == a.root)
            CHECK(st == HCOMM_ERR_MISMATCH, "%s: the root got %s", what,
                  hcomm_strerror(st));
    }
    case_end(&s, &r, comm, plans);
}

/* alltoallv, whose ranks know only their own counts: rank 0 sends the last
 * rank one element more than it expects, in blocks that fit the segment's
 * records, that take more rounds and that are read directly. On the
 * segment every
 * rank fails and names the pair; on the plans the last rank does. Nothing
 * lands outside a receive buffer. */
static void run_alltoallv(size_t m, int plans) {
    char what[96];
    snprintf(what, sizeof(what), "alltoallv of %zu per block (%s)", m,
             plans ? "plans" : "shared memory");
    const char *only = getenv("HCOMM_TEST_CASE");
    if (only && !strstr(what, only)) return;
    CHECK_OK(hcomm_config_set("HCOMM_SHM_SLOT_SIZE", plans ? "0" : "256K"));
    set_timeout(plans);
    hcomm_comm_t comm = HCOMM_COMM_NULL;
    CHECK_OK(hcomm_comm_create(MPI_COMM_WORLD, &comm));
    int shm = has_shm(comm);
    size_t n = (size_t)nranks, sc[64], sd[64], rc[64], rd[64];
    for (size_t j = 0; j < n; j++) {
        sc[j] = rc[j] = m;
        sd[j] = rd[j] = j * m;
    }
    if (rank == 0) sc[n - 1]++;
    size_t g = ((n * m + 1) * sizeof(float) + 4095) & ~(size_t)4095;
    guarded_t s, r;
    guarded_alloc(&s, (n * m + 1) * sizeof(float), g, 0, comm);
    guarded_alloc(&r, n * m * sizeof(float), g, 0, comm);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    hcomm_status_t st =
        hcomm_alltoallv(s.buf, sc, sd, r.buf, rc, rd, F32, comm);
    double took = MPI_Wtime() - t0;
    char msg[512];
    snprintf(msg, sizeof(msg), "%s", hcomm_last_error());
    size_t damage = guarded_damage(&s) + guarded_damage(&r);
    CHECK(damage == 0, "%s: %zu guard bytes changed", what, damage);
    char pair[96];
    snprintf(pair, sizeof(pair), "rank 0 sends %zu bytes to rank %d",
             (m + 1) * sizeof(float), nranks - 1);
    if (shm) {
        CHECK(st == HCOMM_ERR_MISMATCH && strstr(msg, pair),
              "%s: %s, expected a mismatch naming '%s': %s", what,
              hcomm_strerror(st), pair, msg);
        CHECK(took < TIMEOUT_S, "%s: took %.1f s", what, took);
    } else {
        CHECK(rank != nranks - 1 || st == HCOMM_ERR_MISMATCH,
              "%s: the receiver got %s (%s)", what, hcomm_strerror(st), msg);
    }
    case_end(&s, &r, comm, plans);
}

/* Non-blocking: a mismatched call and one queued behind it on the same
 * communicator both fail, the second without waiting for the timeout. */
static void run_queued(void) {
    const char *only = getenv("HCOMM_TEST_CASE");
    if (only && !strstr("queued", only)) return;
    CHECK_OK(hcomm_config_set("HCOMM_SHM_SLOT_SIZE", "256K"));
    set_timeout(0);
    hcomm_comm_t comm = HCOMM_COMM_NULL;
    CHECK_OK(hcomm_comm_create(MPI_COMM_WORLD, &comm));
    if (!has_shm(comm)) {
        CHECK_OK(hcomm_comm_free(&comm));
        return;
    }
    float in[64] = {0}, out[64], in2[8] = {0}, out2[8];
    hcomm_request_t req[2];
    size_t n = rank == nranks - 1 ? 64 : 32;
    double t0 = MPI_Wtime();
    CHECK_OK(hcomm_iallreduce(in, out, n, F32, HCOMM_SUM, comm, &req[0]));
    CHECK_OK(hcomm_iallreduce(in2, out2, 8, F32, HCOMM_SUM, comm, &req[1]));
    hcomm_status_t st1 = hcomm_wait(&req[1]);
    hcomm_status_t st0 = hcomm_wait(&req[0]);
    double took = MPI_Wtime() - t0;
    CHECK(st0 == HCOMM_ERR_MISMATCH && st1 == HCOMM_ERR_MISMATCH,
          "queued: %s and %s (%s)", hcomm_strerror(st0), hcomm_strerror(st1),
          hcomm_last_error());
    CHECK(took < TIMEOUT_S, "queued: took %.1f s", took);
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK_OK(hcomm_comm_free(&comm));
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    check_rank = rank;
    /* A bug shows as a timeout, not as a hang. */
    char timeout[16];
    snprintf(timeout, sizeof(timeout), "%g", TIMEOUT_S);
    setenv("HCOMM_TIMEOUT", timeout, 1);
    CHECK_OK(hcomm_init(&argc, &argv));
    if (nranks > 1) {
        for (size_t i = 0; i < NCASES; i++)
            run_case(&cases[i], 0);
        run_queued();
        for (int plans = 0; plans < 2; plans++) {
            run_alltoallv(10, plans);     /* records in the ring or slot */
            run_alltoallv(100000, plans); /* rounds through the slots */
            run_alltoallv(600000, plans); /* direct reads */
        }
        for (size_t i = 0; i < NCASES; i++)
            run_case(&cases[i], 1);
    }
    for (int i = 0; i < nkept; i++)
        CHECK_OK(hcomm_comm_free(&kept[i]));
    CHECK_OK(hcomm_finalize());
    int rc = check_summary("test_mismatch");
    MPI_Finalize();
    return rc;
}
