/* For test/multinode/link_down.sh: 1 MiB allreduces (or
 * HCOMM_TEST_LOOP_COUNT floats) back to back for
 * HCOMM_TEST_LOOP_SECONDS (default 20) or until one fails, while the
 * script takes a link down. Rank 0 says "link_loop: running" on stderr
 * once a first call has succeeded; every rank then says how many calls it
 * made and how its last one ended. A rank whose call failed goes on to
 * hcomm_finalize and MPI_Finalize like the others (no MPI_Abort, which
 * would end the ranks still waiting and hide a hang). Exit status: 0 if
 * every call succeeded, 3 after an HCOMM error, 4 after a wrong sum.
 *
 * Only rank 0's clock decides when to stop, and its decision travels in
 * the last element of the allreduce itself: were each rank to read its own
 * clock, one could start a call the others never join (a hang that ends in
 * a timeout), and a separate MPI message would cross the link the script
 * takes down. */
#include "hcomm.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
    const char *s = getenv("HCOMM_TEST_LOOP_SECONDS");
    double seconds = s ? atof(s) : 20.0;
    s = getenv("HCOMM_TEST_LOOP_COUNT");
    const int count = s && atoi(s) >= 2 ? atoi(s) : 1 << 18;
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    hcomm_comm_t comm = HCOMM_COMM_NULL;
    hcomm_status_t st = hcomm_init(&argc, &argv);
    if (st == HCOMM_SUCCESS) st = hcomm_comm_create(MPI_COMM_WORLD, &comm);
    float *buf = malloc(count * sizeof(float));
    if (!buf) st = HCOMM_ERR_NO_MEMORY;
    long calls = 0;
    long wrong = -1; /* first element with a wrong sum */
    double start = now(), end = start;
    int stop = 0;
    while (st == HCOMM_SUCCESS && !stop) {
        for (int i = 0; i < count - 1; i++)
            buf[i] = 1.0f;
        buf[count - 1] = rank == 0 && now() - start >= seconds ? 1.0f : 0.0f;
        st = hcomm_allreduce(buf, buf, count, HCOMM_FLOAT32, HCOMM_SUM, comm);
        end = now();
        if (st != HCOMM_SUCCESS) break;
        for (int i = 0; i < count - 1 && wrong < 0; i++)
            if (buf[i] != (float)size) wrong = i;
        stop = buf[count - 1] != 0.0f || wrong >= 0;
        if (++calls == 1 && rank == 0) fprintf(stderr, "link_loop: running\n");
    }
    if (wrong >= 0)
        fprintf(stderr,
                "link_loop: rank %d: call %ld: element %ld is %g, not %d\n",
                rank, calls, wrong, (double)buf[wrong], size);
    else if (st == HCOMM_SUCCESS)
        fprintf(stderr, "link_loop: rank %d: %ld calls, all succeeded\n", rank,
                calls);
    else
        fprintf(
            stderr, "link_loop: rank %d: %ld calls, then %s after %.1f s: %s\n",
            rank, calls, hcomm_strerror(st), end - start, hcomm_last_error());
    free(buf);
    if (comm != HCOMM_COMM_NULL) hcomm_comm_free(&comm);
    hcomm_finalize();
    MPI_Finalize();
    return wrong >= 0 ? 4 : st == HCOMM_SUCCESS ? 0 : 3;
}
