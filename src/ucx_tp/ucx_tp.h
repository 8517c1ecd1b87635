/* The UCX transport: tagged send/receive over one process-wide UCP worker.
 *
 * Lifetime:
 *   hcomm_ucx_init()          once per process, after MPI is initialised
 *   hcomm_ucx_tp_create()     collective over a communicator, any number
 *   tp->ops->destroy(tp)      frees the per-communicator state only
 *   hcomm_ucx_finalize()      after every tp has been destroyed; collective
 *                             over MPI_COMM_WORLD while MPI is still up (see
 *                             below)
 *
 * The tag layout is in ucx_tag.h. Endpoints are cached per MPI_COMM_WORLD
 * rank, so any number of communicators over the same processes share one
 * endpoint per peer.
 */
#ifndef HCOMM_UCX_TP_H
#define HCOMM_UCX_TP_H

#include "core/tp.h"

#include <stddef.h>
#include <stdint.h>

struct hcomm_topo; /* topo/topo.h */

#ifdef HAVE_UCX

/* Creates the UCP context (UCP_FEATURE_TAG) and the worker (thread mode
 * MULTI when thread_multiple, else SERIALIZED). Reads the usual UCX_*
 * environment variables. A second call while initialised is a no-op. */
hcomm_status_t hcomm_ucx_init(int thread_multiple);

/* Closes the endpoints (flushing them), then - when MPI is initialised and
 * not yet finalised - waits in a PMPI_Ibarrier on MPI_COMM_WORLD while
 * progressing the worker, so that no process tears down its worker while a
 * peer still flushes towards it; then destroys the worker and the context.
 * Every process that called hcomm_ucx_init must call it (whether init
 * succeeded or not), like MPI_Finalize. Destroy all transports first. */
void hcomm_ucx_finalize(void);

/* 1 after a successful hcomm_ucx_init, 0 otherwise. */
int hcomm_ucx_available(void);

/* Collective over comm (an intracommunicator of at most 2^20 ranks whose
 * processes are all in MPI_COMM_WORLD). comm_id must be the same on every
 * rank and distinct among the communicators alive at the same time (only
 * its 16 bits exist in the tag). topo: the communicator's topology, whose
 * NICs near this rank multipath uses first (NULL: none known). Every rank
 * returns the same status. */
hcomm_status_t hcomm_ucx_tp_create(MPI_Comm comm, uint16_t comm_id,
                                   const struct hcomm_topo *topo,
                                   hcomm_tp_t **out);

/* Inside a node UCX's eager protocol (copy in, copy out through its shared
 * memory) moves HCOMM's messages faster than its rendezvous (a handshake,
 * then the receiver reads the sender's memory) up to 64 KiB, while by
 * default UCX switches at one eager fragment, about 5 KiB: on 16 cores,
 * plans of 8-64 KiB at 3 to 16 ranks ran up to 2x faster with the
 * threshold at 64 KiB (README). The rendezvous still wins where it reads
 * the sender's input, unchanged since its last call (2-rank recursive
 * doubling). Between nodes UCX's own choice stays. UCX reads the
 * intra:/inter: form from 1.17 on; a user's UCX_RNDV_THRESH wins. */
#define HCOMM_UCX_RNDV_THRESH "intra:64K,inter:auto"

/* The RNDV_THRESH that HCOMM's UCX context takes (ucx_tp.c), or NULL
 * where UCX keeps its own (UCX before 1.17, or the user set
 * UCX_RNDV_THRESH); with ver, also UCX's version. Needs no init. */
const char *hcomm_ucx_rndv_thresh(char *ver, size_t len);

/* Number of endpoints in the process-wide cache (for tests). */
int hcomm_ucx_num_endpoints(void);

/* Writes UCX's description of the endpoint to peer (its lanes and the
 * transports they use, ucp_ep_print_info) into buf, NUL-terminated and
 * truncated to len. For diagnostics; not on any fast path. */
hcomm_status_t hcomm_ucx_describe_ep(hcomm_tp_t *tp, int peer, char *buf,
                                     size_t len);

#else /* built without UCX: the MPI transport serves every communicator */

static inline hcomm_status_t hcomm_ucx_init(int thread_multiple) {
    (void)thread_multiple;
    return HCOMM_ERR_UNSUPPORTED;
}
static inline void hcomm_ucx_finalize(void) {}
static inline int hcomm_ucx_available(void) {
    return 0;
}
static inline const char *hcomm_ucx_rndv_thresh(char *ver, size_t len) {
    if (ver && len) ver[0] = 0;
    return NULL;
}
static inline hcomm_status_t hcomm_ucx_tp_create(MPI_Comm comm,
                                                 uint16_t comm_id,
                                                 const struct hcomm_topo *topo,
                                                 hcomm_tp_t **out) {
    (void)comm;
    (void)comm_id;
    (void)topo;
    (void)out;
    return HCOMM_ERR_UNSUPPORTED;
}

#endif /* HAVE_UCX */

#endif
