/* What the ranks agree on so that none is taken by HCOMM alone: the
 * settings that decide which calls HCOMM takes, combined across
 * MPI_COMM_WORLD at MPI_Init, and which communicators may be served at
 * all. The per-call rule itself (only arguments every rank must pass
 * alike) is in interpose_coll.c and interpose_move.c. */
#include "compat_mpi/interpose.h"
#include "core/log.h"

#include <limits.h>
#include <stdint.h>

/* The settings that decide what HCOMM takes, combined over
 * MPI_COMM_WORLD in one allreduce, so that no rank is taken alone: a call
 * goes to HCOMM only where every rank's HCOMM_MPI_INTERCEPT takes it (and
 * in the narrowest of their windows), data movement only where every rank
 * packs datatypes as raw bytes. Returns the lowest rank whose setting did
 * not parse, or -1. */
int hcmpi_agree_settings(unsigned *mask, int bad, int packs_raw) {
    enum { BAD, NO_PACK, COLL, N = COLL + 3 * HCMPI_NCOLL };
    const unsigned moves =
        1u << HCMPI_BCAST | 1u << HCMPI_ALLGATHER | 1u << HCMPI_ALLTOALL |
        1u << HCMPI_ALLGATHERV | 1u << HCMPI_IALLGATHERV |
        1u << HCMPI_ALLTOALLV | 1u << HCMPI_IALLTOALLV | 1u << HCMPI_GATHER |
        1u << HCMPI_IGATHER | 1u << HCMPI_SCATTER | 1u << HCMPI_ISCATTER |
        1u << HCMPI_IALLGATHER | 1u << HCMPI_IBCAST | 1u << HCMPI_IALLTOALL;
    uint64_t v[N], all[N];
    v[BAD] = bad ? (uint64_t)INT_MAX + 1 - (uint64_t)hcmpi.world_rank : 0;
    v[NO_PACK] = !packs_raw;
    for (int c = 0; c < HCMPI_NCOLL; c++) {
        v[COLL + 3 * c] = !((*mask >> c) & 1u);
        v[COLL + 3 * c + 1] = hcmpi.min_bytes[c];
        v[COLL + 3 * c + 2] = (uint64_t)(SIZE_MAX - hcmpi.max_bytes[c]);
    }
    *mask = 0;
    if (PMPI_Allreduce(v, all, N, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD) !=
        MPI_SUCCESS)
        return -1;
    for (int c = 0; c < HCMPI_NCOLL; c++) {
        if (!all[COLL + 3 * c]) *mask |= 1u << c;
        hcmpi.min_bytes[c] = (size_t)all[COLL + 3 * c + 1];
        hcmpi.max_bytes[c] = SIZE_MAX - (size_t)all[COLL + 3 * c + 2];
    }
    if (all[NO_PACK]) *mask &= ~moves;
    return all[BAD] ? (int)((uint64_t)INT_MAX + 1 - all[BAD]) : -1;
}

/* Whether HCOMM started on every rank, and whether every rank can progress
 * non-blocking calls: one more allreduce, where HCOMM was to start. */
void hcmpi_agree_started(unsigned *mask, int ok) {
    uint64_t v[2] = {!ok, !hcmpi_ireq_available()}, all[2] = {1, 1};
    PMPI_Allreduce(v, all, 2, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    if (all[0]) {
        if (ok)
            hcomm_info("HCOMM did not start on another rank: every call "
                       "goes to MPI");
        *mask = 0;
    }
    if (all[1]) hcmpi_ireq_finalize();
}

/* Whether every process of comm belongs to this process's MPI_COMM_WORLD.
 * The worlds joined by MPI_Comm_spawn or MPI_Comm_connect agreed on their
 * settings separately, so a communicator across them is left to MPI; each
 * of its members sees a process outside its own world, so all decide alike
 * without a word. */
int hcmpi_within_world(MPI_Comm comm, int size) {
    MPI_Group group, world, both;
    int n = -1;
    if (comm == MPI_COMM_WORLD) return 1;
    if (PMPI_Comm_group(comm, &group) != MPI_SUCCESS) return 0;
    if (PMPI_Comm_group(MPI_COMM_WORLD, &world) == MPI_SUCCESS) {
        if (PMPI_Group_intersection(group, world, &both) == MPI_SUCCESS) {
            PMPI_Group_size(both, &n);
            PMPI_Group_free(&both);
        }
        PMPI_Group_free(&world);
    }
    PMPI_Group_free(&group);
    return n == size;
}
