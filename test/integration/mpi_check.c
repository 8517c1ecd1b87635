#include "mpi_check.h"

#include <mpi.h>

long check_passed, check_failed;
int check_rank;

int check_summary(const char *name) {
    long mine[2] = {check_passed, check_failed}, all[2];
    MPI_Reduce(mine, all, 2, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (check_rank == 0)
        printf("%s: %ld passed, %ld failed\n", name, all[0], all[1]);
    int bad = check_failed > 0, any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
    return any ? 1 : 0;
}
