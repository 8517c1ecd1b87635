/* Multipath rails (ucx_rails.h): which devices, their UCP contexts and
 * workers, and the pattern that spreads messages over them. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include "ucx_tp/ucx_rails.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/log.h"
#include "topo/topo.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

hcomm_ucx_rails_t hcomm_ucx_rails;
#define R hcomm_ucx_rails

static int add_device(char (*dev)[64], int n, const char *name) {
    if (n >= HCOMM_UCX_MAX_RAILS || !name[0] || strlen(name) >= 64 ||
        strcmp(name, "all") == 0)
        return n;
    for (int i = 0; i < n; i++)
        if (strcmp(dev[i], name) == 0) return n;
    snprintf(dev[n], 64, "%s", name);
    return n + 1;
}

/* The devices UCX_NET_DEVICES names. */
static int devices_from_env(char (*dev)[64]) {
    const char *env = getenv("UCX_NET_DEVICES");
    char list[512];
    int n = 0;
    if (strlen(env) >= sizeof(list)) return 0;
    snprintf(list, sizeof(list), "%s", env);
    char *save = NULL;
    for (char *t = strtok_r(list, ",", &save); t;
         t = strtok_r(NULL, ",", &save))
        n = add_device(dev, n, t);
    return n;
}

/* The network devices of the transports of one memory domain. */
static void md_devices(uct_component_h comp, const char *md_name,
                       char (*tcp)[64], int *ntcp, char (*other)[64],
                       int *nother) {
    uct_md_config_t *cfg = NULL;
    uct_md_h md = NULL;
    uct_tl_resource_desc_t *res = NULL;
    unsigned nres = 0;
    if (uct_md_config_read(comp, NULL, NULL, &cfg) != UCS_OK) return;
    ucs_status_t us = uct_md_open(comp, md_name, cfg, &md);
    uct_config_release(cfg);
    if (us != UCS_OK) return;
    if (uct_md_query_tl_resources(md, &res, &nres) == UCS_OK) {
        for (unsigned i = 0; i < nres; i++) {
            if (res[i].dev_type != UCT_DEVICE_TYPE_NET ||
                strcmp(res[i].dev_name, "lo") == 0)
                continue;
            if (strcmp(res[i].tl_name, "tcp") == 0)
                *ntcp = add_device(tcp, *ntcp, res[i].dev_name);
            else
                *nother = add_device(other, *nother, res[i].dev_name);
        }
        uct_release_tl_resource_list(res);
    }
    uct_md_close(md);
}

/* The network devices UCX reports, through its transport layer. */
static int devices_from_ucx(char (*dev)[64]) {
    char tcp[HCOMM_UCX_MAX_RAILS][64];
    int ntcp = 0, nother = 0;
    uct_component_h *comps = NULL;
    unsigned ncomps = 0;
    if (uct_query_components(&comps, &ncomps) != UCS_OK) return 0;
    for (unsigned c = 0; c < ncomps; c++) {
        uct_component_attr_t attr = {
            .field_mask = UCT_COMPONENT_ATTR_FIELD_NAME |
                          UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT};
        /* the network components only: opening the others' domains may
         * start a GPU driver, and they have no network devices */
        if (uct_component_query(comps[c], &attr) != UCS_OK ||
            !attr.md_resource_count ||
            (strcmp(attr.name, "tcp") != 0 && strcmp(attr.name, "ib") != 0))
            continue;
        uct_md_resource_desc_t *mds =
            calloc(attr.md_resource_count, sizeof(*mds));
        if (!mds) break;
        attr.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES;
        attr.md_resources = mds;
        if (uct_component_query(comps[c], &attr) == UCS_OK)
            for (unsigned m = 0; m < attr.md_resource_count; m++)
                md_devices(comps[c], mds[m].md_name, tcp, &ntcp, dev, &nother);
        free(mds);
    }
    uct_release_component_list(comps);
    if (nother) return nother;
    memcpy(dev, tcp, sizeof(tcp));
    return ntcp;
}

int hcomm_ucx_rails_count(void) {
    if (strcmp(hcomm_cfg_str(HCOMM_CFG_USE_MULTIPATH), "0") == 0) return 0;
    if (R.devices) return R.devices < 2 ? 0 : R.devices;
    char dev[HCOMM_UCX_MAX_RAILS][64];
    /* the user's choice of devices stands, one device too */
    const char *env = getenv("UCX_NET_DEVICES");
    int n = env && *env && strcmp(env, "all") != 0 ? devices_from_env(dev)
                                                   : devices_from_ucx(dev);
    int per = (int)hcomm_cfg_int(HCOMM_CFG_SOCKET_THREADS);
    if (per < 1) per = 1;
    R.devices = 0;
    for (int k = 0; k < per; k++)
        for (int i = 0; i < n && R.devices < HCOMM_UCX_MAX_RAILS; i++)
            memcpy(R.dev[R.devices++], dev[i], sizeof(dev[i]));
    if (R.devices < 1) R.devices = -1; /* looked: none */
    return R.devices < 2 ? 0 : R.devices;
}

static hcomm_status_t open_rail(int r, int thread_multiple) {
    ucp_config_t *cfg = NULL;
    ucs_status_t us = ucp_config_read(NULL, NULL, &cfg);
    if (us == UCS_OK) us = ucp_config_modify(cfg, "NET_DEVICES", R.dev[r]);
    ucp_params_t params = {.field_mask = UCP_PARAM_FIELD_FEATURES |
                                         UCP_PARAM_FIELD_MT_WORKERS_SHARED,
                           .features = UCP_FEATURE_TAG,
                           .mt_workers_shared = 0};
    if (us == UCS_OK) us = ucp_init(&params, cfg, &R.ctx[r]);
    if (cfg) ucp_config_release(cfg);
    if (us != UCS_OK) {
        R.ctx[r] = NULL;
        return hcomm_error(HCOMM_ERR_TRANSPORT,
                           "ucx: rail %d (%s): ucp_init: %s", r, R.dev[r],
                           ucs_status_string(us));
    }
    ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                              .thread_mode = thread_multiple
                                                 ? UCS_THREAD_MODE_MULTI
                                                 : UCS_THREAD_MODE_SERIALIZED};
    us = ucp_worker_create(R.ctx[r], &wp, &R.worker[r]);
    if (us == UCS_OK)
        us = ucp_worker_get_address(R.worker[r], &R.addr[r], &R.addr_len[r]);
    if (us != UCS_OK)
        return hcomm_error(HCOMM_ERR_TRANSPORT,
                           "ucx: rail %d (%s): its worker: %s", r, R.dev[r],
                           ucs_status_string(us));
    return HCOMM_SUCCESS;
}

hcomm_status_t hcomm_ucx_rails_open(int thread_multiple, int world_size) {
    if (R.n) return HCOMM_SUCCESS;
    int n = hcomm_ucx_rails_count();
    hcomm_status_t st = HCOMM_SUCCESS;
    for (int r = 0; r < n && st == HCOMM_SUCCESS; r++) {
        R.n = r + 1; /* so that close frees what this opened */
        st = open_rail(r, thread_multiple);
        if (st == HCOMM_SUCCESS &&
            !(R.eps[r] = calloc((size_t)world_size, sizeof(ucp_ep_h))))
            st = hcomm_error(HCOMM_ERR_NO_MEMORY, "ucx: rail endpoints");
    }
    R.neps = world_size;
    if (st != HCOMM_SUCCESS) {
        hcomm_ucx_rails_close();
        return st;
    }
    hcomm_debug("ucx: %d rails open", R.n);
    return HCOMM_SUCCESS;
}

void hcomm_ucx_rails_close_eps(void) {
    ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                             .flags = 0}; /* flush: our sends arrive first */
    double deadline = hcomm_now_seconds() + hcomm_ucx_close_seconds();
    for (int r = 0; r < R.n; r++)
        for (int i = 0; R.eps[r] && i < R.neps; i++) {
            ucp_ep_h ep = R.eps[r][i];
            if (!ep) continue;
            R.eps[r][i] = NULL;
            ucs_status_ptr_t sp = ucp_ep_close_nbx(ep, &p);
            if (UCS_PTR_IS_PTR(sp)) {
                while (ucp_request_check_status(sp) == UCS_INPROGRESS &&
                       hcomm_now_seconds() < deadline)
                    hcomm_ucx_rails_progress();
                ucp_request_free(sp);
            }
        }
}

void hcomm_ucx_rails_progress(void) {
    for (int r = 0; r < R.n; r++)
        ucp_worker_progress(R.worker[r]);
}

void hcomm_ucx_rails_close(void) {
    hcomm_ucx_rails_close_eps();
    for (int r = 0; r < R.n; r++) {
        free(R.eps[r]);
        R.eps[r] = NULL;
        if (R.addr[r]) ucp_worker_release_address(R.worker[r], R.addr[r]);
        if (R.worker[r]) ucp_worker_destroy(R.worker[r]);
        if (R.ctx[r]) ucp_cleanup(R.ctx[r]);
        R.addr[r] = NULL;
        R.worker[r] = NULL;
        R.ctx[r] = NULL;
    }
    R.n = 0;
    R.have_weights = 0;
}

void hcomm_ucx_rail_pattern(const double *weight, int n, uint8_t *pattern) {
    double total = 0, credit[HCOMM_UCX_MAX_RAILS] = {0};
    for (int r = 0; r < n; r++)
        total += weight[r] > 0 ? weight[r] : 0;
    for (int s = 0; s < HCOMM_UCX_RAIL_SLOTS; s++) {
        /* each slot to the rail furthest behind its share (a smooth
         * weighted round robin): shares to within one slot, spread out */
        int best = 0;
        for (int r = 0; r < n; r++) {
            credit[r] +=
                total > 0 ? (weight[r] > 0 ? weight[r] : 0) / total : 1.0 / n;
            if (credit[r] > credit[best]) best = r;
        }
        credit[best] -= 1.0;
        pattern[s] = (uint8_t)best;
    }
}

/* ---- a communicator's rails (hcomm_ucx_rails_setup) --------------------- */

/* remote[i]: rank i of comm is on another node than this rank (MPI's own
 * notion of a node, as the topology has it). */
static hcomm_status_t find_remote(MPI_Comm comm, int size, char *remote,
                                  int *spans) {
    MPI_Comm node = MPI_COMM_NULL;
    MPI_Group all = MPI_GROUP_NULL, local = MPI_GROUP_NULL;
    int *ranks = malloc(2 * (size_t)size * sizeof(int));
    hcomm_status_t st = HCOMM_SUCCESS;
    if (!ranks) return hcomm_error(HCOMM_ERR_NO_MEMORY, "ucx: rails");
    if (PMPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL,
                             &node) != MPI_SUCCESS ||
        PMPI_Comm_group(comm, &all) != MPI_SUCCESS ||
        PMPI_Comm_group(node, &local) != MPI_SUCCESS)
        st = hcomm_error(HCOMM_ERR_TRANSPORT, "ucx: finding the node's ranks");
    for (int i = 0; i < size; i++)
        ranks[i] = i;
    if (st == HCOMM_SUCCESS &&
        PMPI_Group_translate_ranks(all, size, ranks, local, ranks + size) !=
            MPI_SUCCESS)
        st = hcomm_error(HCOMM_ERR_TRANSPORT, "ucx: finding the node's ranks");
    *spans = 0;
    for (int i = 0; st == HCOMM_SUCCESS && i < size; i++) {
        remote[i] = ranks[size + i] == MPI_UNDEFINED;
        *spans |= remote[i];
    }
    if (local != MPI_GROUP_NULL) PMPI_Group_free(&local);
    if (all != MPI_GROUP_NULL) PMPI_Group_free(&all);
    if (node != MPI_COMM_NULL) PMPI_Comm_free(&node);
    free(ranks);
    return st;
}

/* Waits for a UCX request (NULL: done at once) until deadline. */
static ucs_status_t rail_wait(ucp_worker_h w, ucs_status_ptr_t sp,
                              double deadline) {
    if (!sp) return UCS_OK;
    if (UCS_PTR_IS_ERR(sp)) return UCS_PTR_STATUS(sp);
    ucs_status_t us;
    while ((us = ucp_request_check_status(sp)) == UCS_INPROGRESS &&
           hcomm_now_seconds() < deadline)
        ucp_worker_progress(w);
    if (us == UCS_INPROGRESS) {
        ucp_request_cancel(w, sp);
        us = UCS_ERR_TIMED_OUT;
    }
    ucp_request_free(sp);
    return us;
}

#define PROBE_BYTES ((size_t)4 << 20)
#define PROBE_REPS 3

/* Times PROBE_BYTES from rank a to rank b of the communicator over rail r
 * (and a word back): on a, bytes per second (0 on failure); on b, 0. The
 * first message opens the connection, so the best of the later ones. */
static double probe_rail(const hcomm_ucx_comm_t *c, int r, int rank, int a,
                         int b, char *buf, double timeout) {
    ucp_worker_h w = c->rail_worker[r];
    int peer = rank == a ? b : a;
    ucp_ep_h ep = c->rail_eps[(size_t)peer * c->nrails + r];
    /* this communicator's point-to-point tags are all its own yet */
    ucp_tag_t low = hcomm_ucx_tag_low((hcomm_tag_t){HCOMM_TAG_P2P, ~0u, ~0u});
    ucp_tag_t to_peer = hcomm_ucx_tag_base(c->comm_id, rank) | low;
    ucp_tag_t from_peer = hcomm_ucx_tag_base(c->comm_id, peer) | low;
    ucp_request_param_t p = {.op_attr_mask = 0};
    double best = 0;
    for (int i = 0; i < PROBE_REPS; i++) {
        double t0 = hcomm_now_seconds(), deadline = t0 + timeout;
        ucs_status_t us;
        if (rank == a) {
            us = rail_wait(w,
                           ucp_tag_send_nbx(ep, buf, PROBE_BYTES, to_peer, &p),
                           deadline);
            if (us == UCS_OK)
                us = rail_wait(w,
                               ucp_tag_recv_nbx(w, buf, 8, from_peer,
                                                HCOMM_UCX_TAG_MASK_FULL, &p),
                               deadline);
        } else {
            us = rail_wait(w,
                           ucp_tag_recv_nbx(w, buf, PROBE_BYTES, from_peer,
                                            HCOMM_UCX_TAG_MASK_FULL, &p),
                           deadline);
            if (us == UCS_OK)
                us = rail_wait(w, ucp_tag_send_nbx(ep, buf, 8, to_peer, &p),
                               deadline);
        }
        if (us != UCS_OK) {
            hcomm_warn("ucx: measuring rail %d (%s): %s", r,
                       hcomm_ucx_rails.dev[r], ucs_status_string(us));
            return 0;
        }
        double bw = (double)PROBE_BYTES / (hcomm_now_seconds() - t0);
        if (rank == a && i > 0 && bw > best) best = bw;
    }
    return best;
}

/* The rails' weights, measured once per process: by rank 0 of the first
 * communicator across nodes with its first peer on another node, then
 * shared from rank 0 (so every rank of a communicator spreads alike). */
static hcomm_status_t weigh_rails(MPI_Comm comm, hcomm_ucx_comm_t *c, int rank,
                                  const char *remote, double timeout) {
    int n = c->nrails, ab[2] = {R.have_weights, 0};
    for (int i = 0; rank == 0 && i < c->size && !ab[1]; i++)
        if (remote[i]) ab[1] = i;
    if (PMPI_Bcast(ab, 2, MPI_INT, 0, comm) != MPI_SUCCESS)
        return hcomm_error(HCOMM_ERR_TRANSPORT, "ucx: PMPI_Bcast failed");
    double w[HCOMM_UCX_MAX_RAILS];
    memcpy(w, R.weight, sizeof(w));
    if (!ab[0] && (rank == 0 || rank == ab[1])) {
        char *buf = malloc(PROBE_BYTES);
        for (int r = 0; r < n; r++)
            w[r] = buf ? probe_rail(c, r, rank, 0, ab[1], buf, timeout) : 0;
        free(buf);
    }
    if (PMPI_Bcast(w, n, MPI_DOUBLE, 0, comm) != MPI_SUCCESS)
        return hcomm_error(HCOMM_ERR_TRANSPORT, "ucx: PMPI_Bcast failed");
    memcpy(R.weight, w, (size_t)n * sizeof(double));
    R.have_weights = 1;
    hcomm_ucx_rail_pattern(w, n, c->pattern);
    for (int r = 0; rank == 0 && !ab[0] && r < n; r++) {
        int slots = 0;
        for (int s = 0; s < HCOMM_UCX_RAIL_SLOTS; s++)
            slots += c->pattern[s] == r;
        hcomm_info("ucx: rail %d (%s): %.1f MB/s measured, %d of %d messages",
                   r, R.dev[r], w[r] / 1e6, slots, HCOMM_UCX_RAIL_SLOTS);
    }
    return HCOMM_SUCCESS;
}

/* Does the UCX device dev ("mlx5_0:1", "eth0") name the topology's NIC
 * nic ("mlx5_0/ib0", "eth0": hwloc's OS devices, '/' between them)? */
static int names_nic(const char *dev, const char *nic) {
    size_t len = strcspn(dev, ":");
    for (const char *p = nic; *p;) {
        size_t n = strcspn(p, "/");
        if (n == len && strncmp(p, dev, len) == 0) return 1;
        p += n + (p[n] == '/');
    }
    return 0;
}

/* The first rail over a NIC near this rank, where such NICs carry some
 * rails but not all (an unbound rank is near every NIC); else -1. */
static int nearest_rail(const hcomm_topo_t *topo, int nrails) {
    int first = -1, near = 0;
    for (int r = 0; topo && r < nrails; r++) {
        int is_near = 0;
        for (int i = 0; i < topo->nnics && !is_near; i++)
            is_near = names_nic(R.dev[r], topo->nics[i].name);
        if (is_near && first < 0) first = r;
        near += is_near;
    }
    return near < nrails ? first : -1;
}

/* c->rail_near: every rank's nearest rail (-1: none, or a rail without
 * slots, too slow to use). Collective; every rank returns alike. */
static hcomm_status_t share_nearest(MPI_Comm comm, hcomm_ucx_comm_t *c,
                                    int rank, const hcomm_topo_t *topo) {
    int *near = malloc((size_t)c->size * sizeof(int));
    c->rail_near = malloc((size_t)c->size);
    int v = (int)(near && c->rail_near
                      ? HCOMM_SUCCESS
                      : hcomm_error(HCOMM_ERR_NO_MEMORY, "ucx: rails"));
    hcomm_status_t st = hcomm_ucx_agree(comm, &v, 1);
    if (st == HCOMM_SUCCESS) {
        near[rank] = nearest_rail(topo, c->nrails);
        if (PMPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, near, 1, MPI_INT,
                           comm) != MPI_SUCCESS)
            st = hcomm_error(HCOMM_ERR_TRANSPORT, "ucx: PMPI_Allgather failed");
    }
    if (st != HCOMM_SUCCESS) {
        free(near);
        return st;
    }
    for (int i = 0; i < c->size; i++) {
        int used = 0;
        for (int s = 0; near[i] >= 0 && s < HCOMM_UCX_RAIL_SLOTS; s++)
            used |= c->pattern[s] == near[i];
        c->rail_near[i] = (int8_t)(used ? near[i] : -1);
    }
    if (c->rail_near[rank] >= 0)
        hcomm_info("ucx: rank %d: rail %d (%s) is its nearest: collective "
                   "messages of up to %zu bytes take it",
                   rank, near[rank], R.dev[near[rank]], HCOMM_UCX_NEAR_BYTES);
    free(near);
    return HCOMM_SUCCESS;
}

hcomm_status_t hcomm_ucx_rails_setup(MPI_Comm comm, hcomm_ucx_comm_t *c,
                                     int rank, const int *world, int nrails,
                                     const hcomm_topo_t *topo,
                                     int thread_multiple, double timeout) {
    int size = c->size, spans = 0, v[2];
    char *remote = malloc((size_t)size), *all = NULL;
    hcomm_status_t st = remote ? find_remote(comm, size, remote, &spans)
                               : hcomm_error(HCOMM_ERR_NO_MEMORY, "ucx: rails");
    v[0] = (int)st;
    if ((st = hcomm_ucx_agree(comm, v, 1)) != HCOMM_SUCCESS || !spans)
        goto out; /* spans is alike on every rank: each has a remote peer */
    hcomm_ucx_lock();
    st = hcomm_ucx_rails_open(thread_multiple, hcomm_ucx_world_size());
    hcomm_ucx_unlock();
    /* 1. every rail's worker address, in slots of the longest */
    v[0] = (int)st;
    v[1] = 0;
    for (int r = 0; st == HCOMM_SUCCESS && r < nrails; r++)
        if ((int)R.addr_len[r] > v[1]) v[1] = (int)R.addr_len[r];
    if ((st = hcomm_ucx_agree(comm, v, 2)) != HCOMM_SUCCESS) goto out;
    size_t slot = (sizeof(uint32_t) + (size_t)v[1] + 7) & ~(size_t)7;
    size_t mine = slot * (size_t)nrails;
    all = calloc((size_t)size, mine);
    c->rail_eps = calloc((size_t)size * (size_t)nrails, sizeof(ucp_ep_h));
    v[0] = (int)(all && c->rail_eps
                     ? HCOMM_SUCCESS
                     : hcomm_error(HCOMM_ERR_NO_MEMORY, "ucx: rail addresses"));
    if ((st = hcomm_ucx_agree(comm, v, 1)) != HCOMM_SUCCESS) goto out;
    for (int r = 0; r < nrails; r++) {
        char *at = all + (size_t)rank * mine + (size_t)r * slot;
        uint32_t len = (uint32_t)R.addr_len[r];
        memcpy(at, &len, sizeof(len));
        memcpy(at + sizeof(len), R.addr[r], R.addr_len[r]);
    }
    if (PMPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, (int)mine,
                       MPI_BYTE, comm) != MPI_SUCCESS) {
        st = hcomm_error(HCOMM_ERR_TRANSPORT, "ucx: PMPI_Allgather failed");
        goto out;
    }
    /* 2. an endpoint per rail to every rank on another node (cached) */
    hcomm_ucx_lock();
    for (int i = 0; st == HCOMM_SUCCESS && i < size; i++)
        for (int r = 0; remote[i] && st == HCOMM_SUCCESS && r < nrails; r++) {
            ucp_ep_h *ep = &R.eps[r][world[i]];
            const char *at = all + (size_t)i * mine + (size_t)r * slot;
            ucp_ep_params_t ep_params = {
                .field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS,
                .address = (const ucp_address_t *)(at + sizeof(uint32_t))};
            ucs_status_t us =
                *ep ? UCS_OK : ucp_ep_create(R.worker[r], &ep_params, ep);
            if (us != UCS_OK) {
                *ep = NULL;
                st = hcomm_error(HCOMM_ERR_TRANSPORT,
                                 "ucx: rail %d (%s) to rank %d: %s", r,
                                 R.dev[r], i, ucs_status_string(us));
            }
            c->rail_eps[(size_t)i * nrails + r] = *ep;
        }
    hcomm_ucx_unlock();
    v[0] = (int)st;
    if ((st = hcomm_ucx_agree(comm, v, 1)) != HCOMM_SUCCESS) goto out;
    c->nrails = nrails;
    for (int r = 0; r < nrails; r++)
        c->rail_worker[r] = R.worker[r];
    v[0] = (int)weigh_rails(comm, c, rank, remote, timeout);
    if ((st = hcomm_ucx_agree(comm, v, 1)) == HCOMM_SUCCESS)
        st = share_nearest(comm, c, rank, topo);
out:
    if (st != HCOMM_SUCCESS || !c->nrails) {
        free(c->rail_eps);
        free(c->rail_near);
        c->rail_eps = NULL;
        c->rail_near = NULL;
        c->nrails = 0;
    }
    free(all);
    free(remote);
    return st;
}
