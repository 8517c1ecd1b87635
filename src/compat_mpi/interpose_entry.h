/* The exported C entry points of libhcomm_mpi.so are all the same few
 * lines: HCOMM's try takes the call (it returns 1 and sets rc, the MPI
 * return code), else MPI's own PMPI_<name> runs with the very same
 * arguments. One definition here keeps every entry point taking and falling
 * back alike, and each file lists only what differs: the name, the try,
 * the parameter list (params) and the same names as arguments (args), both
 * in parentheses. */
#ifndef HCOMM_COMPAT_MPI_INTERPOSE_ENTRY_H
#define HCOMM_COMPAT_MPI_INTERPOSE_ENTRY_H

#include "compat_mpi/interpose.h"

/* An argument list without its parentheses, and one with more at its end
 * (list may be a macro that expands to a list). */
#define HCMPI_ARGS(...) __VA_ARGS__
#define HCMPI_APPEND(list, ...) (HCMPI_ARGS list, __VA_ARGS__)

#define HCMPI_DEFINE_ENTRY(name, params, args, taken)                          \
    HCMPI_EXPORT int MPI_##name params {                                       \
        int rc;                                                                \
        if (taken) return rc;                                                  \
        return PMPI_##name args;                                               \
    }

/* An entry point whose try takes the same arguments, then &rc. */
#define HCMPI_ENTRY(name, try, params, args)                                   \
    HCMPI_DEFINE_ENTRY(name, params, args, try(HCMPI_ARGS args, &rc))

/* A blocking call whose try serves the non-blocking form too: it is told
 * so by a NULL request. */
#define HCMPI_ENTRY_NULL(name, try, params, args)                              \
    HCMPI_DEFINE_ENTRY(name, params, args, try(HCMPI_ARGS args, NULL, &rc))

/* A non-blocking call: args end in its request, which the try takes too.
 * A NULL request is the program's error: MPI gets the call, and reports
 * it. */
#define HCMPI_ENTRY_REQUEST(name, try, params, args)                           \
    HCMPI_DEFINE_ENTRY(name, params, args,                                     \
                       (request) && try(HCMPI_ARGS args, &rc))

/* An entry point and its non-blocking form MPI_<iname>, whose parameters
 * are the same and then the request: try and itry as above. */
#define HCMPI_ENTRY_PAIR(name, try, iname, itry, params, args)                 \
    HCMPI_ENTRY(name, try, params, args)                                       \
    HCMPI_ENTRY_REQUEST(iname, itry,                                           \
                        HCMPI_APPEND(params, MPI_Request *request),            \
                        HCMPI_APPEND(args, request))

/* The same where one try serves both forms (HCMPI_ENTRY_NULL). */
#define HCMPI_ENTRY_NULL_PAIR(name, iname, try, params, args)                  \
    HCMPI_ENTRY_NULL(name, try, params, args)                                  \
    HCMPI_ENTRY_REQUEST(iname, try,                                            \
                        HCMPI_APPEND(params, MPI_Request *request),            \
                        HCMPI_APPEND(args, request))

/* MPI_Allgather's parameters, which MPI_Alltoall shares, as a list and as
 * the arguments that pass them on (interpose_coll.c, interpose_move.c). */
#define HCMPI_BLOCKS_PARAMS                                                    \
    (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, \
     int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
#define HCMPI_BLOCKS_ARGS                                                      \
    (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm)
/* MPI_Gather and MPI_Scatter: the same, with a root. */
#define HCMPI_ROOTED_PARAMS                                                    \
    (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, \
     int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm)
#define HCMPI_ROOTED_ARGS                                                      \
    (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm)

#endif
