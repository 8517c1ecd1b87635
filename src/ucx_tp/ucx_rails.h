/* Multipath (HCOMM_USE_MULTIPATH): messages between ranks on different
 * nodes spread over every network device of the node. UCX's own multi-rail
 * splits by its estimate of each link, not by what the link carries, so
 * HCOMM keeps one UCP context and worker per device ("rail", restricted to
 * it by NET_DEVICES; HCOMM_SOCKET_THREADS of them per device), and sends
 * each message whole over one rail picked from its tag by a pattern of
 * HCOMM_UCX_RAIL_SLOTS slots that both sides compute alike from the rails'
 * weights. A message's tag picks the same rail on both sides, and messages
 * with one tag keep one rail, so the per-(peer, tag) order holds. Where
 * a rank has a nearest rail (its NICs in the topology, from hwloc or the
 * override file, name some rails but not all), the collectives' messages
 * it sends of up to HCOMM_UCX_NEAR_BYTES take that rail: their time is
 * latency, which a NIC across the socket link adds to, and spreading them
 * gains nothing; longer ones (a large call's chunks) spread by the
 * weights. Both sides know a collective message's length (a receive of
 * another length fails as a mismatch, here as a timeout where the two
 * lengths pick different rails); a point-to-point receive may be longer
 * than its message, so those always spread. The
 * weights are bandwidths measured once per process, between the first two
 * nodes of the first communicator that spans nodes (ucx_tp.c), and shared
 * from its rank 0; a rail much slower than the others gets no slot.
 * Messages between ranks of one node keep the process-wide worker (shared
 * memory). Private to src/ucx_tp. */
#ifndef HCOMM_UCX_RAILS_H
#define HCOMM_UCX_RAILS_H

#include "ucx_tp/ucx_tag.h"

struct hcomm_topo; /* topo/topo.h */

typedef struct {
    int n;       /* rails open: 0 until hcomm_ucx_rails_open */
    int devices; /* rails this process would open (its devices x threads) */
    char dev[HCOMM_UCX_MAX_RAILS][64];
    ucp_context_h ctx[HCOMM_UCX_MAX_RAILS];
    ucp_worker_h worker[HCOMM_UCX_MAX_RAILS];
    ucp_address_t *addr[HCOMM_UCX_MAX_RAILS];
    size_t addr_len[HCOMM_UCX_MAX_RAILS];
    ucp_ep_h *eps[HCOMM_UCX_MAX_RAILS]; /* by MPI_COMM_WORLD rank */
    int neps;                           /* their length */
    /* measured bytes per second of each rail; have: measured (or shared) */
    double weight[HCOMM_UCX_MAX_RAILS];
    int have_weights;
} hcomm_ucx_rails_t;

/* Process-wide; guarded by ucx_tp.c's lock outside the data path. */
extern hcomm_ucx_rails_t hcomm_ucx_rails;

/* The rails this process would use (hcomm_ucx_rails.devices): 0 with
 * HCOMM_USE_MULTIPATH=0 or fewer than two devices. The devices are those
 * of UCX_NET_DEVICES where it names several, else the node's network
 * devices that UCX reports (not loopback; TCP's only where no other
 * transport has any, as an InfiniBand port also shows as its IP device). */
int hcomm_ucx_rails_count(void);

/* Opens the rails' contexts and workers (each UCX_NET_DEVICES = its
 * device), once; then room for world_size endpoints per rail. */
hcomm_status_t hcomm_ucx_rails_open(int thread_multiple, int world_size);

/* hcomm_ucx_finalize: flush-closes every rail endpoint (the peers
 * progressing theirs, in its fence: hcomm_ucx_rails_progress), then
 * destroys the workers and contexts. */
void hcomm_ucx_rails_close_eps(void);
void hcomm_ucx_rails_progress(void);
void hcomm_ucx_rails_close(void);

/* Fills pattern[HCOMM_UCX_RAIL_SLOTS] with rail numbers in proportion to
 * the weights of the first n rails, interleaved. */
void hcomm_ucx_rail_pattern(const double *weight, int n, uint8_t *pattern);

/* Collective over comm, after its default endpoints exist, where every
 * rank has nrails rails (>= 2): where comm spans nodes, opens the rails
 * (once per process), connects them to the ranks on other nodes, and
 * fills c's rail fields (the weights measured first where this process
 * has none yet, within timeout seconds); else leaves c->nrails 0. Every
 * rank returns alike. */
hcomm_status_t hcomm_ucx_rails_setup(MPI_Comm comm, hcomm_ucx_comm_t *c,
                                     int rank, const int *world, int nrails,
                                     const struct hcomm_topo *topo,
                                     int thread_multiple, double timeout);

#define HCOMM_UCX_NEAR_BYTES ((size_t)16 << 10)

/* The rail of a message of bytes with tag t from a sender whose nearest
 * rail is near (-1: none): alike on sender and receiver. */
static inline int hcomm_ucx_rail_of(const uint8_t *pattern, hcomm_tag_t t,
                                    size_t bytes, int near) {
    if (near >= 0 && t.kind == HCOMM_TAG_COLL && bytes <= HCOMM_UCX_NEAR_BYTES)
        return near;
    return pattern[(t.seq + t.step) % HCOMM_UCX_RAIL_SLOTS];
}

#endif
