/* Per-communicator topology: which node each rank is on (from MPI, or from
 * the HCOMM_OVERRIDE_TOPO file), and where this rank sits in its node (NUMA
 * node, socket, nearby GPUs and NICs, from hwloc). Found once when the
 * communicator is created and cached in it.
 *
 * The node map is identical on every rank: nodes are numbered in the order
 * of their lowest communicator rank, and ranks inside a node in communicator
 * rank order. The rest (NUMA, socket, devices) describes the calling rank
 * only.
 *
 * HCOMM_ENABLE_TOPOLOGY_AWARE=0 does not change the map: it is still found,
 * checked and reported (hcomm_info), so that a shared-memory transport keeps
 * knowing which peers share its memory; only `aware` is 0, and algorithm
 * choice must then treat the communicator as flat.
 *
 * The override file (jansson), e.g.
 *   {"nodes": [{"name": "n0", "ranks": [0, 1], "gpus": ["0000:1b:00.0"],
 *               "nics": ["mlx5_0"]},
 *              {"name": "n1", "ranks": [2, 3]}]}
 * names every MPI_COMM_WORLD rank exactly once. "name", "gpus" and "nics" are
 * optional; any other key is an error (a misspelt "rank" or "gpu" would
 * otherwise silently change the map). A node's "gpus"/"nics" replace the
 * devices hwloc finds for its ranks; NUMA and socket still come from hwloc.
 * A NIC may be {"name": "mlx5_1", "ranks": [1, 3]}: near those ranks of
 * the node only, as hwloc finds a NIC near the ranks bound to its socket
 * (multipath sends from each rank over its nearest NIC first).
 * A node with "gpus" may state how they are linked, as a square matrix in
 * the order of "gpus" (gpu_links.h): "self" on the diagonal, "nvlink",
 * "pcie" or "none" elsewhere, the same both ways, e.g.
 *   "gpus": ["0000:1b:00.0", "0000:1c:00.0"],
 *   "gpu_links": [["self", "nvlink"], ["nvlink", "self"]]
 * These links replace detection between those GPUs.
 * An override node may not span two hosts that MPI sees as different nodes
 * (peers in one node must be able to share memory).
 */
#ifndef HCOMM_TOPO_TOPO_H
#define HCOMM_TOPO_TOPO_H

#include "hcomm.h"
#include "topo/gpu_links.h"

#include <mpi.h>

#define HCOMM_TOPO_NAME_LEN 64
#define HCOMM_TOPO_PCI_LEN 16  /* "dddd:bb:dd.f" */
#define HCOMM_TOPO_MAX_DEVS 64 /* per kind, per rank: more are left out */

/* Ranks grouped into nodes. One allocation (owned by node_of) holds every
 * array. */
typedef struct {
    int size;           /* ranks */
    int nnodes;         /* nodes */
    int *node_of;       /* [size] node index of each rank */
    int *local_rank;    /* [size] rank within its node */
    int *node_size;     /* [nnodes] ranks on each node */
    int *node_start;    /* [nnodes + 1] node n's ranks are ... */
    int *ranks_by_node; /* [node_start[n], node_start[n + 1]) here, ascending */
} hcomm_topo_map_t;

/* A GPU or NIC, for reporting and matching. */
typedef struct {
    /* OS device names ("mlx5_0/ib0", "cuda0/card1"), the vendor ("nvidia")
     * for a GPU known by its PCI class alone, or the override file's. */
    char name[HCOMM_TOPO_NAME_LEN];
    char pci[HCOMM_TOPO_PCI_LEN]; /* PCI bus id; "" when unknown */
} hcomm_topo_dev_t;

/* What hwloc says about the calling process. */
typedef struct {
    int numa, socket; /* OS indexes; -1 when unknown or not bound to one */
    int ngpus, nnics;
    hcomm_topo_dev_t gpus[HCOMM_TOPO_MAX_DEVS], nics[HCOMM_TOPO_MAX_DEVS];
} hcomm_topo_local_t;

typedef struct hcomm_topo {
    hcomm_topo_map_t map;
    int rank;          /* the calling rank in the communicator */
    int aware;         /* HCOMM_ENABLE_TOPOLOGY_AWARE */
    int from_override; /* the map comes from HCOMM_OVERRIDE_TOPO */
    char node_name[HCOMM_TOPO_NAME_LEN]; /* this rank's: host or override's */
    int numa, socket;                    /* this rank's; -1 when unknown */
    int ngpus, nnics;                    /* near this rank (PCI locality) */
    hcomm_topo_dev_t *gpus, *nics;
    /* [ngpus * ngpus], link of gpus[i] to gpus[j] at i * ngpus + j: the
     * override file's "gpu_links"; NULL where it states none */
    hcomm_gpu_link_t *gpu_links;
} hcomm_topo_t;

/* Collective over comm (the communicator's private duplicate). Every rank
 * returns the same status; a bad override file fails on all of them. */
hcomm_status_t hcomm_topo_create(MPI_Comm comm, hcomm_topo_t **out);
void hcomm_topo_free(hcomm_topo_t *topo); /* NULL is fine */

/* The link between this rank's gpus[i] and gpus[j]: the override's where
 * it states links, else detected from their PCI bus ids (unknown for a GPU
 * without one). */
hcomm_gpu_link_t hcomm_topo_gpu_link(const hcomm_topo_t *t, int i, int j);
/* The same between two GPUs known by PCI bus id (any case): the override's
 * where both are among gpus, else detected. */
hcomm_gpu_link_t hcomm_topo_gpu_link_pci(const hcomm_topo_t *t, const char *a,
                                         const char *b);

/* The topology of a communicator (NULL, with a message, for a bad handle).
 * Owned by the communicator: valid until it is freed. */
const hcomm_topo_t *hcomm_comm_topology(hcomm_comm_t comm);

/* Pure: groups size ranks by label (any int; equal labels share a node).
 * Nodes are numbered by their lowest rank. On success free the map with
 * hcomm_topo_map_free. */
hcomm_status_t hcomm_topo_map_build(int size, const int *label,
                                    hcomm_topo_map_t *map);
void hcomm_topo_map_free(hcomm_topo_map_t *map);

/* The calling process's NUMA node, socket and nearby devices (hwloc; all
 * unknown in a build without it). Found on the first call, then cached: the
 * process's binding is read once. */
const hcomm_topo_local_t *hcomm_topo_local(void);

#ifdef HAVE_HWLOC
/* Loads the machine's topology with its I/O devices and fills out. A failure
 * leaves everything unknown (it is logged, not an error). */
void hcomm_topo_hwloc_detect(hcomm_topo_local_t *out);
#else
static inline void hcomm_topo_hwloc_detect(hcomm_topo_local_t *out) {
    out->numa = out->socket = -1;
    out->ngpus = out->nnics = 0;
}
#endif

/* One node of an override file. ngpus/nnics -1: the file does not say.
 * NIC i is near the MPI_COMM_WORLD ranks nic_ranks[nic_first[i]] to
 * nic_ranks[nic_first[i + 1] - 1], and near every rank of the node where
 * that range is empty or nic_first is NULL (no NIC names its ranks). */
typedef struct {
    char name[HCOMM_TOPO_NAME_LEN];
    int ngpus, nnics;
    hcomm_topo_dev_t *gpus, *nics;
    int *nic_first, *nic_ranks;
    hcomm_gpu_link_t *gpu_links; /* [ngpus * ngpus]; NULL: not stated */
} hcomm_topo_onode_t;

typedef struct {
    int world_size;
    int nnodes;
    int *node_of; /* [world_size] node index of each MPI_COMM_WORLD rank */
    hcomm_topo_onode_t *nodes; /* [nnodes], in the file's order */
} hcomm_topo_override_t;

#ifdef HAVE_JANSSON
/* Pure (no MPI): reads and checks an override file for a job of world_size
 * ranks. Errors (HCOMM_ERR_INVALID_ARG) name the file and, for JSON syntax,
 * the line and column; for content, the JSON path ("nodes[1].ranks[0]"),
 * since jansson keeps no positions for values. On failure nothing is left
 * to free; on success free out with hcomm_topo_override_free. */
hcomm_status_t hcomm_topo_override_load(const char *path, int world_size,
                                        hcomm_topo_override_t *out);
void hcomm_topo_override_free(hcomm_topo_override_t *ov);
#endif

#endif
