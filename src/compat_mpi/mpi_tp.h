/* The MPI transport: the transport interface over PMPI_Isend/PMPI_Irecv on
 * a private duplicate of the communicator. The slow path: builds without
 * UCX, HCOMM_TRANSPORT=mpi, and what UCX cannot serve. */
#ifndef HCOMM_COMPAT_MPI_TP_H
#define HCOMM_COMPAT_MPI_TP_H

#include "core/tp.h"

#include <mpi.h>

/* Collective over comm (it is duplicated). */
hcomm_status_t hcomm_mpi_tp_create(MPI_Comm comm, hcomm_tp_t **out);

#endif
