/* libhcomm_mpi.so: MPI_Init/MPI_Finalize hooks, the settings every rank
 * agrees on, the MPI_Comm -> HCOMM communicator cache, HCOMM_MPI_INTERCEPT
 * and the statistics. */
#include "compat_mpi/interpose.h"
#include "compat_mpi/intercept_parse.h"
#include "core/config.h"
#include "core/log.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

hcmpi_state_t hcmpi;
_Thread_local int hcmpi_depth __attribute__((tls_model("initial-exec")));

static int comm_keyval = MPI_KEYVAL_INVALID;
static int self_keyval = MPI_KEYVAL_INVALID;
static atomic_int hcomm_up; /* HCOMM runs: cache entries own communicators */
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static atomic_ulong n_taken[HCMPI_NCOLL], n_failed[HCMPI_NCOLL];
static atomic_ulong n_comms; /* communicators set up collectively */
static atomic_ulong n_fallback[HCMPI_NCOLL][HCMPI_NWHY];

static const char *coll_names[HCMPI_NCOLL] = {
    "allreduce",      "iallreduce",
    "allgather",      "bcast",
    "reduce",         "reduce_scatter_block",
    "alltoall",       "barrier",
    "allgatherv",     "iallgatherv",
    "alltoallv",      "ialltoallv",
    "reduce_scatter", "ireduce_scatter",
    "gather",         "igather",
    "scatter",        "iscatter",
    "iallgather",     "ibcast",
    "ireduce",        "ireduce_scatter_block",
    "ialltoall",      "ibarrier"};
static const char *mpi_names[HCMPI_NCOLL] = {
    "MPI_Allreduce",      "MPI_Iallreduce",
    "MPI_Allgather",      "MPI_Bcast",
    "MPI_Reduce",         "MPI_Reduce_scatter_block",
    "MPI_Alltoall",       "MPI_Barrier",
    "MPI_Allgatherv",     "MPI_Iallgatherv",
    "MPI_Alltoallv",      "MPI_Ialltoallv",
    "MPI_Reduce_scatter", "MPI_Ireduce_scatter",
    "MPI_Gather",         "MPI_Igather",
    "MPI_Scatter",        "MPI_Iscatter",
    "MPI_Iallgather",     "MPI_Ibcast",
    "MPI_Ireduce",        "MPI_Ireduce_scatter_block",
    "MPI_Ialltoall",      "MPI_Ibarrier"};
static const char *why_names[] = {"disabled",
                                  "re-entry",
                                  "user op",
                                  "op",
                                  "derived datatype",
                                  "datatype",
                                  "intercommunicator",
                                  "several worlds",
                                  "arguments",
                                  "count 0",
                                  "communicator setup",
                                  "not implemented in HCOMM",
                                  "refused by HCOMM",
                                  "no progress hook",
                                  "size",
                                  "over 2 GiB"};

_Static_assert(sizeof(why_names) / sizeof(why_names[0]) == HCMPI_NWHY,
               "a name for every reason");

const char *hcmpi_coll_name(hcmpi_coll_t coll) {
    return mpi_names[coll];
}

/* --- statistics -------------------------------------------------------- */

int hcmpi_fallback(hcmpi_coll_t coll, hcmpi_why_t why) {
    if (hcmpi.stats)
        atomic_fetch_add_explicit(&n_fallback[coll][why], 1,
                                  memory_order_relaxed);
    return 0;
}

void hcmpi_count_taken(hcmpi_coll_t coll) {
    if (hcmpi.stats)
        atomic_fetch_add_explicit(&n_taken[coll], 1, memory_order_relaxed);
}

void hcmpi_count_failed(hcmpi_coll_t coll) {
    if (hcmpi.stats)
        atomic_fetch_add_explicit(&n_failed[coll], 1, memory_order_relaxed);
}

/* One line per collective that was called, each in one fprintf so that
 * ranks' lines do not mix. */
static void print_stats(void) {
    int any = 0;
    for (int c = 0; c < HCMPI_NCOLL; c++) {
        unsigned long fb = 0, taken = atomic_load(&n_taken[c]);
        unsigned long failed = atomic_load(&n_failed[c]);
        char why[512] = "";
        size_t used = 0;
        for (int w = 0; w < HCMPI_NWHY; w++) {
            unsigned long n = atomic_load(&n_fallback[c][w]);
            if (!n) continue;
            fb += n;
            int k = snprintf(why + used, sizeof(why) - used, "%s%lu %s",
                             used ? ", " : " (", n, why_names[w]);
            if (k > 0 && (size_t)k < sizeof(why) - used) used += (size_t)k;
        }
        if (used) strcat(why, ")");
        if (!taken && !fb && !failed) continue;
        any = 1;
        char fail[64] = "";
        if (failed) snprintf(fail, sizeof(fail), ", %lu failed", failed);
        fprintf(stderr, "[hcomm_mpi rank %d] %s: %lu taken, %lu fallback%s%s\n",
                hcmpi.world_rank, mpi_names[c], taken, fb, why, fail);
    }
    if (!any)
        fprintf(stderr, "[hcomm_mpi rank %d] no collective calls\n",
                hcmpi.world_rank);
    /* The same on every rank of a program whose ranks call the same
     * collectives: a rank that set one up alone would have hung. */
    if (atomic_load(&n_comms))
        fprintf(stderr, "[hcomm_mpi rank %d] communicators: %lu set up\n",
                hcmpi.world_rank, atomic_load(&n_comms));
}

int hcmpi_finish(hcmpi_coll_t coll, MPI_Comm comm, hcomm_status_t st, int *rc) {
    switch (st) {
    case HCOMM_SUCCESS:
        hcmpi_count_taken(coll);
        *rc = MPI_SUCCESS;
        return 1;
    case HCOMM_ERR_UNSUPPORTED:
        return hcmpi_fallback(coll, HCMPI_WHY_UNSUPPORTED);
    case HCOMM_ERR_INVALID_ARG:
    case HCOMM_ERR_INVALID_DTYPE:
    case HCOMM_ERR_INVALID_OP:
    case HCOMM_ERR_INVALID_COMM:
    case HCOMM_ERR_OVERFLOW:
    case HCOMM_ERR_NOT_INITIALIZED:
        return hcmpi_fallback(coll, HCMPI_WHY_REFUSED);
    default:
        *rc = hcmpi_report_failure(coll, comm, st);
        return 1;
    }
}

int hcmpi_report_local(hcmpi_coll_t coll, MPI_Comm comm, int err,
                       const char *what) {
    hcmpi_count_failed(coll);
    fprintf(stderr, "[hcomm_mpi rank %d] %s failed: %s\n", hcmpi.world_rank,
            mpi_names[coll], what);
    hcmpi_depth++;
    PMPI_Comm_call_errhandler(comm, err);
    hcmpi_depth--;
    return err;
}

int hcmpi_report_failure(hcmpi_coll_t coll, MPI_Comm comm, hcomm_status_t st) {
    hcmpi_count_failed(coll);
    fprintf(stderr, "[hcomm_mpi rank %d] %s failed in HCOMM: %s: %s\n",
            hcmpi.world_rank, mpi_names[coll], hcomm_strerror(st),
            hcomm_last_error());
    hcmpi_depth++;
    PMPI_Comm_call_errhandler(comm, MPI_ERR_INTERN);
    hcmpi_depth--;
    return MPI_ERR_INTERN;
}

/* --- HCOMM_MPI_INTERCEPT ------------------------------------------------ */

/* The grammar is intercept_parse.c's; *why says what is wrong. */
static int parse_intercept(const char *s, unsigned *mask, char *why,
                           size_t len) {
    return hcomm_intercept_parse(s, coll_names, HCMPI_NCOLL, mask,
                                 hcmpi.min_bytes, hcmpi.max_bytes, why, len);
}

/* --- the communicator cache ---------------------------------------------- */

/* The last entry each thread looked up, valid while no entry has been
 * deleted since (a freed MPI_Comm's handle may come back for another
 * communicator): asking MPI for the attribute costs more than the rest of
 * a small call. */
static atomic_uint deletions;
static _Thread_local struct {
    MPI_Comm comm;
    hcmpi_comm_t *entry;
    unsigned deletions;
} last_lookup __attribute__((tls_model("initial-exec")));

static pthread_mutex_t deferred_lock = PTHREAD_MUTEX_INITIALIZER;
static hcmpi_comm_t *deferred; /* entries whose requests still run */

static int free_entry(hcmpi_comm_t *e) {
    if (e->comm && atomic_load(&hcomm_up)) {
        hcmpi_depth++;
        hcomm_status_t st = hcomm_comm_free(&e->comm);
        hcmpi_depth--;
        /* MPI lets a program free a communicator with a non-blocking call
         * still running on it: free ours when the call completes. */
        if (st == HCOMM_ERR_INVALID_ARG) return 0;
    }
    free(e);
    return 1;
}

void hcmpi_comm_retry_frees(void) {
    if (!deferred || pthread_mutex_trylock(&deferred_lock) != 0) return;
    hcmpi_comm_t **p = &deferred;
    while (*p) {
        hcmpi_comm_t *e = *p;
        *p = e->next;
        if (!free_entry(e)) {
            e->next = *p;
            *p = e;
            p = &e->next;
        }
    }
    pthread_mutex_unlock(&deferred_lock);
}

static int comm_delete(MPI_Comm comm, int keyval, void *value, void *extra) {
    (void)comm;
    (void)keyval;
    (void)extra;
    hcmpi_comm_t *e = value;
    atomic_fetch_add_explicit(&deletions, 1, memory_order_release);
    if (e && !free_entry(e)) {
        pthread_mutex_lock(&deferred_lock);
        e->next = deferred;
        deferred = e;
        pthread_mutex_unlock(&deferred_lock);
    }
    return MPI_SUCCESS;
}

/* Collective over comm: every rank reaches it at the same call, since the
 * decision to take a call, made before, is the same on all. Whether HCOMM
 * serves comm is then decided here once, by all its ranks together. */
static hcmpi_comm_t *comm_create(MPI_Comm comm) {
    hcmpi_comm_t *e = calloc(1, sizeof(*e));
    int inter = 0;
    if (!e) return NULL;
    hcmpi_depth++;
    PMPI_Comm_test_inter(comm, &inter);
    PMPI_Comm_rank(comm, &e->rank);
    PMPI_Comm_size(comm, &e->size);
    if (inter) {
        e->why = HCMPI_WHY_INTERCOMM;
    } else if (!hcmpi_within_world(comm, e->size)) {
        e->why = HCMPI_WHY_WORLDS;
    } else {
        MPI_Comm bare;
        /* HCOMM duplicates what it is given; a split copies no attributes,
         * so the program's copy callbacks never see our communicators. */
        atomic_fetch_add_explicit(&n_comms, 1, memory_order_relaxed);
        if (PMPI_Comm_split(comm, 0, e->rank, &bare) == MPI_SUCCESS) {
            hcomm_status_t st = hcomm_comm_create(bare, &e->comm);
            int ok = st == HCOMM_SUCCESS, all_ok = 0;
            /* Either every rank uses HCOMM on comm or none does. */
            PMPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, bare);
            if (!all_ok && ok) hcomm_comm_free(&e->comm);
            if (!all_ok)
                hcomm_info("MPI communicator left to MPI: %s",
                           ok ? "HCOMM failed on another rank"
                              : hcomm_last_error());
            PMPI_Comm_free(&bare);
        }
        if (!e->comm) e->why = HCMPI_WHY_COMM_SETUP;
    }
    PMPI_Comm_set_attr(comm, comm_keyval, e);
    hcmpi_depth--;
    return e;
}

hcmpi_comm_t *hcmpi_comm_get(MPI_Comm comm, hcmpi_why_t *why) {
    void *value = NULL;
    int flag = 0;
    hcmpi_comm_t *e;
    unsigned seen = atomic_load_explicit(&deletions, memory_order_acquire);
    if (last_lookup.entry && last_lookup.comm == comm &&
        last_lookup.deletions == seen) {
        e = last_lookup.entry;
    } else {
        if (comm == MPI_COMM_NULL ||
            PMPI_Comm_get_attr(comm, comm_keyval, &value, &flag) !=
                MPI_SUCCESS) {
            *why = HCMPI_WHY_ARGS;
            return NULL;
        }
        e = flag ? value : comm_create(comm);
        if (e) {
            last_lookup.comm = comm;
            last_lookup.entry = e;
            last_lookup.deletions = seen;
        }
    }
    if (!e || !e->comm) {
        *why = e ? e->why : HCMPI_WHY_COMM_SETUP;
        return NULL;
    }
    return e;
}

/* --- init and finalize ---------------------------------------------------- */

/* First of the MPI_COMM_SELF attributes deleted at MPI_Finalize (they go
 * in reverse order of setting, and ours is set after HCOMM's): report, and
 * stop taking calls. HCOMM's own callback then tears it down while MPI
 * still works. */
static int on_finalize(MPI_Comm comm, int keyval, void *value, void *extra) {
    (void)comm;
    (void)keyval;
    (void)value;
    (void)extra;
    atomic_store(&hcmpi.mask, 0);
    hcmpi_ireq_finalize();
    if (hcmpi.stats) print_stats();
    atomic_store(&hcomm_up, 0);
    return MPI_SUCCESS;
}

static void start(void) {
    const char *spec = getenv("HCOMM_MPI_INTERCEPT");
    const char *stats = getenv("HCOMM_MPI_STATS");
    unsigned mask = 0;
    char why[128];
    int bad = parse_intercept(spec, &mask, why, sizeof(why)) != 0;
    hcmpi_depth++;
    PMPI_Comm_rank(MPI_COMM_WORLD, &hcmpi.world_rank);
    hcmpi.stats = stats && atoi(stats) > 0;
    if (bad) mask = 0;
    /* A rank that takes nothing makes the others take nothing too. */
    int packs_raw = mask ? hcmpi_dtype_init() : 1;
    if (hcmpi_agree_settings(&mask, bad, packs_raw) == hcmpi.world_rank)
        fprintf(stderr,
                "[hcomm_mpi] HCOMM_MPI_INTERCEPT=%s: %s%sexpected all, "
                "none or a list of allreduce, iallreduce, allgather, bcast, "
                "reduce, reduce_scatter_block, alltoall, barrier, each "
                "maybe with :MIN or :MIN-MAX bytes; every call goes to "
                "MPI\n",
                spec, bad ? why : "", bad && why[0] ? "; " : "");
    /* none on every rank: a pass-through that starts nothing. */
    if (mask) {
        int ok = hcomm_init(NULL, NULL) == HCOMM_SUCCESS;
        if (!ok) {
            fprintf(stderr,
                    "[hcomm_mpi rank %d] HCOMM did not start, every call "
                    "goes to MPI: %s\n",
                    hcmpi.world_rank, hcomm_last_error());
        } else {
            /* validated */
            hcmpi.stats = hcomm_cfg_int(HCOMM_CFG_MPI_STATS) > 0;
            hcmpi_map_init();
            hcmpi_ireq_init();
            ok = PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, comm_delete,
                                         &comm_keyval, NULL) == MPI_SUCCESS;
            if (ok) atomic_store(&hcomm_up, 1);
        }
        hcmpi_agree_started(&mask, ok);
    }
    if ((mask || hcmpi.stats) &&
        PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, on_finalize,
                                &self_keyval, NULL) == MPI_SUCCESS)
        PMPI_Comm_set_attr(MPI_COMM_SELF, self_keyval, NULL);
    atomic_store(&hcmpi.mask, mask);
    hcmpi_depth--;
}

void hcmpi_after_init(void) {
    int flag = 0;
    PMPI_Initialized(&flag);
    if (flag) pthread_once(&init_once, start);
}

HCMPI_EXPORT int MPI_Init(int *argc, char ***argv) {
    int rc = PMPI_Init(argc, argv);
    if (rc == MPI_SUCCESS) hcmpi_after_init();
    return rc;
}

HCMPI_EXPORT int MPI_Init_thread(int *argc, char ***argv, int required,
                                 int *provided) {
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    if (rc == MPI_SUCCESS) hcmpi_after_init();
    return rc;
}

/* Teardown runs from the MPI_COMM_SELF delete callbacks inside. */
HCMPI_EXPORT int MPI_Finalize(void) {
    return PMPI_Finalize();
}
