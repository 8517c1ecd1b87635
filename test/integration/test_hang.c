/* Hang diagnosis and failures, on the shared segment and on the plans:
 *  - a rank that never comes: its peers fail with HCOMM_ERR_TIMEOUT within
 *    10% of the communicator's timeout (hcomm_comm_set_timeout), naming
 *    the operation, sequence, size and the rank awaited, and every rank's
 *    flight recorder file holds the call, RUNNING for as long as it waited;
 *    the communicator then fails at once;
 *  - SIGUSR1 writes the flight recorder without anything failing;
 *  - hcomm_comm_abort from another thread ends a call in flight with
 *    HCOMM_ERR_ABORTED;
 *  - with "kill" (run under mpirun --enable-recovery): the last rank dies
 *    by SIGKILL in the middle of calls; every survivor's call fails within
 *    the timeout naming it, and the communicator is broken. */
#include "mpi_check.h"

#include <mpi.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int rank, nranks;
static char recorder[256];

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Whether a line of path holds a and b (b NULL: a only); its seconds, the
 * number after b, in *seconds where asked. */
static int file_has_time(const char *path, const char *a, const char *b,
                         double *seconds) {
    char line[512];
    int found = 0;
    FILE *f = fopen(path, "r");
    while (f && !found && fgets(line, sizeof(line), f))
        found = strstr(line, a) && (!b || strstr(line, b));
    if (f) fclose(f);
    if (found && b && seconds)
        *seconds = strtod(strstr(line, b) + strlen(b), NULL);
    return found;
}

static int file_has(const char *path, const char *a, const char *b) {
    return file_has_time(path, a, b, NULL);
}

/* This rank's recorder file (HCOMM_FLIGHT_RECORDER=dir/flight.%r). */
static const char *my_recorder(void) {
    static char path[300];
    snprintf(path, sizeof(path), "%s.%d", recorder, rank);
    return path;
}

/* The last rank stays away; the others time out. Ranks in reverse order,
 * so that the message must say where they are in MPI_COMM_WORLD. */
static void absent_rank(hcomm_comm_t parent, const char *path) {
    hcomm_comm_t c;
    const double limit = 2.0;
    int in[1000] = {0}, out[1000];
    CHECK_OK(hcomm_comm_split(parent, 0, nranks - 1 - rank, &c));
    CHECK_OK(hcomm_comm_set_timeout(c, limit));
    if (rank != 0) { /* the last of c */
        double t0 = now();
        hcomm_status_t st =
            hcomm_allreduce(in, out, 1000, HCOMM_INT32, HCOMM_SUM, c);
        double took = now() - t0;
        /* on shared memory the absent rank itself; a plan may wait on a
         * neighbour that waits for it */
        char want[64];
        snprintf(want, sizeof(want), "rank %d", nranks - 1);
        const char *msg = hcomm_last_error();
        CHECK(st == HCOMM_ERR_TIMEOUT, "%s: absent rank gives %s", path,
              hcomm_strerror(st));
        CHECK(took >= limit && took <= 1.1 * limit,
              "%s: timed out after %.2f s of %.1f", path, took, limit);
        CHECK(strstr(msg, "allreduce (sequence") && strstr(msg, "4000 bytes") &&
                  strstr(msg, "waiting for") &&
                  strstr(msg, strcmp(path, "plans") ? want : "from rank"),
              "%s: the message names call, size and whom it waits for: %s",
              path, msg);
        char world[256];
        int used = snprintf(world, sizeof(world),
                            "(ranks 0 to %d are MPI_COMM_WORLD's", nranks - 1);
        for (int i = 0; i < nranks && nranks <= 16; i++)
            used += snprintf(world + used, sizeof(world) - (size_t)used,
                             "%s %d", i ? "," : "", nranks - 1 - i);
        CHECK(nranks > 16 || strstr(msg, world),
              "%s: the message says where the ranks are (%s): %s", path, world,
              msg);
        /* its clock started in its wait, within 256 polls of the call */
        double running = -1;
        CHECK(file_has_time(my_recorder(), "allreduce", "RUNNING", &running) &&
                  running >= limit - 0.1 && running <= 1.1 * limit + 0.1,
              "%s: %s records the running call, for %.3f s of %.1f", path,
              my_recorder(), running, limit);
        t0 = now();
        st = hcomm_barrier(c);
        CHECK(st == HCOMM_ERR_TIMEOUT && now() - t0 < 0.5,
              "%s: a broken communicator fails at once (%s)", path,
              hcomm_strerror(st));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK_OK(hcomm_comm_free(&c));
}

static void *abort_later(void *arg) {
    usleep(300 * 1000);
    CHECK_OK(hcomm_comm_abort(*(hcomm_comm_t *)arg));
    return NULL;
}

/* A call no peer joins, stopped by another thread. */
static void abort_from_thread(hcomm_comm_t parent) {
    hcomm_comm_t c;
    pthread_t t;
    int x = 1, y;
    CHECK_OK(hcomm_comm_dup(parent, &c));
    if (rank == 0 && nranks > 1) {
        pthread_create(&t, NULL, abort_later, &c);
        double t0 = now();
        hcomm_status_t st =
            hcomm_allreduce(&x, &y, 1, HCOMM_INT32, HCOMM_SUM, c);
        CHECK(st == HCOMM_ERR_ABORTED && now() - t0 < 5,
              "abort from a thread: %s after %.2f s", hcomm_strerror(st),
              now() - t0);
        pthread_join(t, NULL);
        CHECK(hcomm_barrier(c) == HCOMM_ERR_ABORTED,
              "an aborted communicator stays broken");
    }
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK_OK(hcomm_comm_free(&c));
}

static void sigusr1_dump(hcomm_comm_t c) {
    int x = rank, y;
    CHECK_OK(hcomm_allreduce(&x, &y, 1, HCOMM_INT32, HCOMM_SUM, c));
    unlink(my_recorder());
    raise(SIGUSR1);
    CHECK_OK(hcomm_barrier(c)); /* the next call writes it */
    CHECK(file_has(my_recorder(), "SIGUSR1", NULL) &&
              file_has(my_recorder(), "allreduce", "done"),
          "SIGUSR1 wrote %s with the calls done", my_recorder());
}

/* The last rank dies by SIGKILL while the others wait for it. */
static void killed_rank(hcomm_comm_t c) {
    int in[64] = {0}, out[64];
    CHECK_OK(hcomm_comm_set_timeout(c, 5));
    CHECK_OK(hcomm_allreduce(in, out, 64, HCOMM_INT32, HCOMM_SUM, c));
    /* every rank is done with that call before one dies */
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == nranks - 1) raise(SIGKILL);
    double t0 = now();
    hcomm_status_t st = HCOMM_SUCCESS;
    for (int i = 0; i < 1000 && st == HCOMM_SUCCESS; i++)
        st = hcomm_allreduce(in, out, 64, HCOMM_INT32, HCOMM_SUM, c);
    char want[64];
    snprintf(want, sizeof(want), "rank %d", nranks - 1);
    CHECK(st != HCOMM_SUCCESS && now() - t0 < 5 * 1.1,
          "a dead peer ends the call within the timeout: %s after %.1f s",
          hcomm_strerror(st), now() - t0);
    CHECK(strstr(hcomm_last_error(), want) != NULL,
          "the message names the dead %s: %s", want, hcomm_last_error());
    CHECK(hcomm_barrier(c) != HCOMM_SUCCESS, "the communicator is broken");
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    check_rank = rank;
    char dir[64] = "/tmp/hcomm_hang_XXXXXX";
    if (rank == 0 && !mkdtemp(dir)) return 1;
    MPI_Bcast(dir, sizeof(dir), MPI_CHAR, 0, MPI_COMM_WORLD);
    snprintf(recorder, sizeof(recorder), "%s/flight", dir);
    char pattern[300];
    snprintf(pattern, sizeof(pattern), "%s.%%r", recorder);
    setenv("HCOMM_FLIGHT_RECORDER", pattern, 1);
    int kill_mode = argc > 1 && strcmp(argv[1], "kill") == 0;
    for (int pass = 0; pass < 2; pass++) {
        /* the shared segment, then the plans */
        setenv("HCOMM_SHM_SLOT_SIZE", pass ? "0" : "256K", 1);
        CHECK_OK(hcomm_init(&argc, &argv));
        hcomm_comm_t comm;
        CHECK_OK(hcomm_comm_create(MPI_COMM_WORLD, &comm));
        if (kill_mode && nranks > 1) {
            if (pass == 0) killed_rank(comm); /* one death per job */
        } else {
            sigusr1_dump(comm);
            if (nranks > 1) {
                absent_rank(comm, pass ? "plans" : "shared memory");
                abort_from_thread(comm);
            }
        }
        hcomm_comm_free(&comm);
        CHECK_OK(hcomm_finalize());
        if (kill_mode) break;
    }
    int rc = kill_mode ? (check_failed != 0) : check_summary("test_hang");
    if (kill_mode && rank == 0)
        printf("test_hang kill: %ld passed, %ld failed\n", check_passed,
               check_failed);
    if (!kill_mode) MPI_Finalize();
    return rc;
}
