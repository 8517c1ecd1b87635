/* A request tested by one thread while another advances it: the main
 * thread tests an iallreduce on one communicator in a loop while a helper
 * thread waits on an iallreduce of its own on another, and that wait
 * progresses every running request, the main thread's too. Both results
 * must be exact. Built with -fsanitize=thread (the sanitizer job in
 * .ci/run), ThreadSanitizer reports the request's status as a data race
 * unless it is read and written atomically (issue 18 item 6). */
#include "mpi_check.h"

#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

enum { ROUNDS = 200 };

static int rank, nranks;

typedef struct {
    hcomm_comm_t comm;
    size_t n;
    int round;
    long wrong; /* the helper's own counts: CHECK is not thread safe */
    hcomm_status_t st;
} helper_t;

static int64_t value(int r, size_t i, int round) {
    return (int64_t)(i * 7 + (size_t)round) + r;
}

static int64_t sum(size_t i, int round) {
    return (int64_t)nranks * (int64_t)(i * 7 + (size_t)round) +
           (int64_t)nranks * (nranks - 1) / 2;
}

static void *helper(void *arg) {
    helper_t *h = arg;
    int64_t *v = malloc(h->n * sizeof(*v));
    for (size_t i = 0; i < h->n; i++)
        v[i] = value(rank, i, h->round);
    hcomm_request_t req;
    h->st = hcomm_iallreduce(v, v, h->n, HCOMM_INT64, HCOMM_SUM, h->comm, &req);
    if (h->st == HCOMM_SUCCESS) h->st = hcomm_wait(&req);
    for (size_t i = 0; i < h->n; i++)
        h->wrong += v[i] != sum(i, h->round);
    free(v);
    return NULL;
}

int main(int argc, char **argv) {
    CHECK_OK(hcomm_init(&argc, &argv));
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    check_rank = rank;
    int level;
    MPI_Query_thread(&level);
    if (level != MPI_THREAD_MULTIPLE) {
        if (rank == 0)
            fprintf(stderr, "test_req_race: no MPI_THREAD_MULTIPLE\n");
        hcomm_finalize();
        return 77;
    }
    hcomm_comm_t a = HCOMM_COMM_NULL, b = HCOMM_COMM_NULL;
    CHECK_OK(hcomm_comm_create(MPI_COMM_WORLD, &a));
    CHECK_OK(hcomm_comm_create(MPI_COMM_WORLD, &b));
    /* Small and large: the shared segment's direct calls and plans. */
    static const size_t sizes[] = {3, 1000, 70001};
    long wrong = 0, helper_wrong = 0, failed = 0;
    for (int round = 0; round < ROUNDS; round++) {
        size_t n = sizes[round % 3];
        helper_t h = {b, n, round, 0, HCOMM_SUCCESS};
        int64_t *v = malloc(n * sizeof(*v));
        for (size_t i = 0; i < n; i++)
            v[i] = value(rank, i, round + 1);
        hcomm_request_t req;
        hcomm_status_t st =
            hcomm_iallreduce(v, v, n, HCOMM_INT64, HCOMM_SUM, a, &req);
        pthread_t t;
        pthread_create(&t, NULL, helper, &h);
        while (st == HCOMM_SUCCESS &&
               (st = hcomm_test(&req)) == HCOMM_ERR_IN_PROGRESS)
            st = HCOMM_SUCCESS;
        pthread_join(t, NULL);
        failed += st != HCOMM_SUCCESS || h.st != HCOMM_SUCCESS;
        for (size_t i = 0; i < n; i++)
            wrong += v[i] != sum(i, round + 1);
        helper_wrong += h.wrong;
        free(v);
    }
    CHECK(failed == 0, "%ld rounds failed: %s", failed, hcomm_last_error());
    CHECK(wrong == 0, "%ld wrong elements in the tested calls", wrong);
    CHECK(helper_wrong == 0, "%ld wrong elements in the helper's calls",
          helper_wrong);
    CHECK_OK(hcomm_comm_free(&a));
    CHECK_OK(hcomm_comm_free(&b));
    int rc = check_summary("test_req_race");
    hcomm_finalize();
    return rc;
}
