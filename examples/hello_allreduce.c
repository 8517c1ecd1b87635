#include <hcomm.h>
#include <stdio.h>

int main(int argc, char **argv) {
    hcomm_comm_t comm;
    int rank, size;
    if (hcomm_init(&argc, &argv) != HCOMM_SUCCESS) return 1; /* inits MPI */
    hcomm_comm_create(MPI_COMM_WORLD, &comm);
    hcomm_comm_rank(comm, &rank);
    hcomm_comm_size(comm, &size);
    float grad[4] = {1, 2, 3, (float)rank};
    hcomm_status_t st = hcomm_allreduce(grad, grad, 4, HCOMM_FLOAT32, HCOMM_AVG,
                                        comm); /* in place */
    if (st != HCOMM_SUCCESS)
        fprintf(stderr, "allreduce: %s: %s\n", hcomm_strerror(st),
                hcomm_last_error());
    else if (rank == 0)
        printf("%d ranks: %g %g %g %g\n", size, grad[0], grad[1], grad[2],
               grad[3]);
    hcomm_comm_free(&comm);
    return hcomm_finalize() == HCOMM_SUCCESS && st == HCOMM_SUCCESS ? 0 : 1;
}
