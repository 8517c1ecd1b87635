/* A communicator's topology: the node map (MPI or the override file) and
 * this rank's place in its node (hwloc). */
#include "topo/topo.h"
#include "core/comm.h"
#include "core/config.h"
#include "core/log.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static pthread_once_t local_once = PTHREAD_ONCE_INIT;
static hcomm_topo_local_t local_facts;

static void detect_local(void) {
    hcomm_topo_hwloc_detect(&local_facts);
}

/* Loading hwloc's topology with I/O devices takes milliseconds: once per
 * process, not per communicator. */
const hcomm_topo_local_t *hcomm_topo_local(void) {
    pthread_once(&local_once, detect_local);
    return &local_facts;
}

static hcomm_status_t read_override(const char *path,
                                    hcomm_topo_override_t *ov) {
#ifdef HAVE_JANSSON
    int world_size = 0;
    PMPI_Comm_size(MPI_COMM_WORLD, &world_size);
    return hcomm_topo_override_load(path, world_size, ov);
#else
    (void)ov;
    return hcomm_error(HCOMM_ERR_UNSUPPORTED,
                       "HCOMM_OVERRIDE_TOPO=%s, but HCOMM was built without "
                       "JSON support (jansson)",
                       path);
#endif
}

static void drop_override(hcomm_topo_override_t *ov) {
#ifdef HAVE_JANSSON
    hcomm_topo_override_free(ov);
#else
    (void)ov;
#endif
}

/* The lowest rank of comm on this rank's host: the host's label. */
static hcomm_status_t host_leader(MPI_Comm comm, int rank, int *leader) {
    MPI_Comm node;
    MPI_Group node_group, group;
    int zero = 0;
    if (PMPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL,
                             &node) != MPI_SUCCESS)
        return hcomm_error(HCOMM_ERR_TRANSPORT,
                           "topology: MPI_Comm_split_type failed");
    /* Keys are the ranks, so the node's rank 0 is its lowest rank. */
    PMPI_Comm_group(node, &node_group);
    PMPI_Comm_group(comm, &group);
    PMPI_Group_translate_ranks(node_group, 1, &zero, group, leader);
    PMPI_Group_free(&node_group);
    PMPI_Group_free(&group);
    PMPI_Comm_free(&node);
    return HCOMM_SUCCESS;
}

/* Override node of each rank of comm, through its MPI_COMM_WORLD rank. An
 * override node must stay inside one host: its ranks share memory. */
static hcomm_status_t override_labels(MPI_Comm comm, int size,
                                      const hcomm_topo_override_t *ov,
                                      const int *host, int *label) {
    MPI_Group group, world;
    int *ranks = malloc(2 * (size_t)size * sizeof(int));
    int *host_of_node = malloc(((size_t)ov->nnodes + 1) * sizeof(int));
    hcomm_status_t st = HCOMM_ERR_NO_MEMORY;
    if (!ranks || !host_of_node) {
        st = hcomm_error(st, "topology: no memory for %d ranks", size);
        goto out;
    }
    int *world_of = ranks + size;
    for (int r = 0; r < size; r++)
        ranks[r] = r;
    PMPI_Comm_group(comm, &group);
    PMPI_Comm_group(MPI_COMM_WORLD, &world);
    PMPI_Group_translate_ranks(group, size, ranks, world, world_of);
    PMPI_Group_free(&group);
    PMPI_Group_free(&world);
    for (int n = 0; n < ov->nnodes; n++)
        host_of_node[n] = -1;
    for (int r = 0; r < size; r++) {
        if (world_of[r] == MPI_UNDEFINED) {
            st = hcomm_error(HCOMM_ERR_UNSUPPORTED,
                             "HCOMM_OVERRIDE_TOPO: rank %d of the "
                             "communicator is not in MPI_COMM_WORLD",
                             r);
            goto out;
        }
        int n = ov->node_of[world_of[r]];
        if (host_of_node[n] >= 0 && host_of_node[n] != host[r]) {
            st = hcomm_error(HCOMM_ERR_INVALID_ARG,
                             "HCOMM_OVERRIDE_TOPO: node \"%s\" holds "
                             "MPI_COMM_WORLD ranks that run on different "
                             "hosts (rank %d is not on the host of the "
                             "node's first rank); a node cannot span hosts",
                             ov->nodes[n].name, world_of[r]);
            goto out;
        }
        host_of_node[n] = host[r];
        label[r] = n;
    }
    st = HCOMM_SUCCESS;
out:
    free(ranks);
    free(host_of_node);
    return st;
}

static hcomm_status_t copy_devs(const hcomm_topo_dev_t *src, int n,
                                hcomm_topo_dev_t **dst, int *count) {
    *dst = calloc((size_t)n + 1, sizeof(**dst));
    if (!*dst) return hcomm_error(HCOMM_ERR_NO_MEMORY, "topology: no memory");
    if (n > 0) memcpy(*dst, src, (size_t)n * sizeof(**dst));
    *count = n;
    return HCOMM_SUCCESS;
}

/* Node name and devices of this rank. */
static hcomm_status_t fill_local(hcomm_topo_t *t,
                                 const hcomm_topo_override_t *ov, int ov_node) {
    const hcomm_topo_local_t *loc = hcomm_topo_local();
    const hcomm_topo_onode_t *on = ov ? &ov->nodes[ov_node] : NULL;
    hcomm_status_t st;
    t->numa = loc->numa;
    t->socket = loc->socket;
    if (on) {
        snprintf(t->node_name, sizeof(t->node_name), "%s", on->name);
    } else {
        char host[MPI_MAX_PROCESSOR_NAME];
        int len = 0;
        if (PMPI_Get_processor_name(host, &len) != MPI_SUCCESS) len = 0;
        host[len] = '\0';
        snprintf(t->node_name, sizeof(t->node_name), "%.*s",
                 HCOMM_TOPO_NAME_LEN - 1, host);
    }
    st = on && on->ngpus >= 0
             ? copy_devs(on->gpus, on->ngpus, &t->gpus, &t->ngpus)
             : copy_devs(loc->gpus, loc->ngpus, &t->gpus, &t->ngpus);
    if (st != HCOMM_SUCCESS) return st;
    if (on && on->gpu_links) {
        size_t bytes = (size_t)on->ngpus * on->ngpus * sizeof(*t->gpu_links);
        if (!(t->gpu_links = malloc(bytes + 1)))
            return hcomm_error(HCOMM_ERR_NO_MEMORY, "topology: no memory");
        memcpy(t->gpu_links, on->gpu_links, bytes);
    }
    if (!on || on->nnics < 0)
        return copy_devs(loc->nics, loc->nnics, &t->nics, &t->nnics);
    if ((st = copy_devs(on->nics, on->nnics, &t->nics, &t->nnics)) !=
            HCOMM_SUCCESS ||
        !on->nic_first)
        return st;
    /* only the NICs near this rank */
    int world = -1, kept = 0;
    PMPI_Comm_rank(MPI_COMM_WORLD, &world);
    for (int i = 0; i < on->nnics; i++) {
        int near = on->nic_first[i] == on->nic_first[i + 1];
        for (int k = on->nic_first[i]; k < on->nic_first[i + 1]; k++)
            near |= on->nic_ranks[k] == world;
        if (near) t->nics[kept++] = on->nics[i];
    }
    t->nnics = kept;
    return HCOMM_SUCCESS;
}

/* Every rank returns the same status: the worst one, with the lowest rank
 * that had it named on the others. */
static hcomm_status_t agree(MPI_Comm comm, int rank, hcomm_status_t mine) {
    struct {
        int status, rank;
    } in = {(int)mine, rank}, worst;
    if (PMPI_Allreduce(&in, &worst, 1, MPI_2INT, MPI_MAXLOC, comm) !=
        MPI_SUCCESS)
        return hcomm_error(HCOMM_ERR_TRANSPORT,
                           "topology: MPI_Allreduce failed");
    if (worst.status == HCOMM_SUCCESS || mine != HCOMM_SUCCESS)
        return (hcomm_status_t)worst.status;
    return hcomm_error((hcomm_status_t)worst.status,
                       "topology: rank %d failed (%s); HCOMM_DEBUG=info there "
                       "says why%s",
                       worst.rank, hcomm_strerror((hcomm_status_t)worst.status),
                       hcomm_cfg_str(HCOMM_CFG_OVERRIDE_TOPO)[0]
                           ? " (HCOMM_OVERRIDE_TOPO is set)"
                           : "");
}

hcomm_status_t hcomm_topo_create(MPI_Comm comm, hcomm_topo_t **out) {
    const char *path = hcomm_cfg_str(HCOMM_CFG_OVERRIDE_TOPO);
    hcomm_topo_override_t ov;
    int have_ov = 0, size, rank, leader = -1;
    int *host = NULL, *label = NULL;
    hcomm_topo_t *t = NULL;
    hcomm_status_t st = HCOMM_SUCCESS;
    *out = NULL;
    memset(&ov, 0, sizeof(ov));
    PMPI_Comm_rank(comm, &rank);
    PMPI_Comm_size(comm, &size);
    t = calloc(1, sizeof(*t));
    host = malloc(2 * (size_t)size * sizeof(int));
    if (!t || !host) {
        st = hcomm_error(HCOMM_ERR_NO_MEMORY,
                         "topology: no memory for %d ranks", size);
    } else if (path[0]) {
        st = read_override(path, &ov);
        have_ov = st == HCOMM_SUCCESS;
    }
    /* Local failures are agreed on before the exchange, so that no rank
     * leaves its peers waiting in a collective. */
    hcomm_status_t split = host_leader(comm, rank, &leader);
    if ((st = agree(comm, rank, st != HCOMM_SUCCESS ? st : split)) !=
        HCOMM_SUCCESS)
        goto out;
    if (PMPI_Allgather(&leader, 1, MPI_INT, host, 1, MPI_INT, comm) !=
        MPI_SUCCESS) {
        st = hcomm_error(HCOMM_ERR_TRANSPORT, "topology: MPI_Allgather failed");
        goto out;
    }
    label = host + size;
    /* Same data on every rank, so every rank reaches the same verdict. */
    if (have_ov)
        st = override_labels(comm, size, &ov, host, label);
    else
        memcpy(label, host, (size_t)size * sizeof(int));
    if (st == HCOMM_SUCCESS) st = hcomm_topo_map_build(size, label, &t->map);
    if (st == HCOMM_SUCCESS)
        st = fill_local(t, have_ov ? &ov : NULL, have_ov ? label[rank] : 0);
    /* Running out of memory is this rank's alone: tell the others. */
    if ((st = agree(comm, rank, st)) != HCOMM_SUCCESS) goto out;
    t->rank = rank;
    t->aware = strcmp(hcomm_cfg_str(HCOMM_CFG_ENABLE_TOPOLOGY_AWARE), "0") != 0;
    t->from_override = have_ov;
    hcomm_debug("topology: %d ranks on %d nodes (%s%s), rank %d: node %d "
                "(%s) local rank %d of %d, NUMA %d, socket %d, %d GPUs, "
                "%d NICs near",
                size, t->map.nnodes, have_ov ? "HCOMM_OVERRIDE_TOPO " : "MPI",
                have_ov ? path : "", rank, t->map.node_of[rank], t->node_name,
                t->map.local_rank[rank], t->map.node_size[t->map.node_of[rank]],
                t->numa, t->socket, t->ngpus, t->nnics);
    *out = t;
    t = NULL;
out:
    hcomm_topo_free(t);
    if (have_ov) drop_override(&ov);
    free(host);
    return st;
}

void hcomm_topo_free(hcomm_topo_t *topo) {
    if (!topo) return;
    hcomm_topo_map_free(&topo->map);
    free(topo->gpus);
    free(topo->nics);
    free(topo->gpu_links);
    free(topo);
}

hcomm_gpu_link_t hcomm_topo_gpu_link(const hcomm_topo_t *t, int i, int j) {
    if (i == j) return HCOMM_GPU_LINK_SAME;
    if (t->gpu_links) return t->gpu_links[i * t->ngpus + j];
    return hcomm_gpu_link_detect(t->gpus[i].pci, t->gpus[j].pci);
}

static int gpu_index(const hcomm_topo_t *t, const char *pci) {
    for (int i = 0; pci[0] && i < t->ngpus; i++)
        if (strcasecmp(t->gpus[i].pci, pci) == 0) return i;
    return -1;
}

hcomm_gpu_link_t hcomm_topo_gpu_link_pci(const hcomm_topo_t *t, const char *a,
                                         const char *b) {
    int i = gpu_index(t, a), j = gpu_index(t, b);
    if (t->gpu_links && i >= 0 && j >= 0) return hcomm_topo_gpu_link(t, i, j);
    return hcomm_gpu_link_detect(a, b);
}

const hcomm_topo_t *hcomm_comm_topology(hcomm_comm_t comm) {
    hcomm_comm_impl_t *c;
    if (hcomm_comm_lookup(comm, &c) != HCOMM_SUCCESS) return NULL;
    return c->topo;
}
