/* How two GPUs of a node reach each other: the same GPU, NVLink, PCIe
 * peer-to-peer, or no peer access at all; "unknown" where neither the
 * override file (HCOMM_OVERRIDE_TOPO's "gpu_links") nor detection says.
 *
 * Detection takes two PCI bus ids: NVML first (libnvidia-ml.so.1, loaded
 * with dlopen: no link-time dependency), then, without NVML, CUDA's peer
 * attributes where both GPUs are visible to this process. CUDA says whether
 * peers can access each other, not over what: that is HCOMM_GPU_LINK_P2P.
 * A build without CUDA and a machine without NVML detect nothing (unknown).
 *
 * Choosing on links is pure (hcomm_gpu_links_first_blocked): the same
 * links give the same answer on every rank. */
#ifndef HCOMM_TOPO_GPU_LINKS_H
#define HCOMM_TOPO_GPU_LINKS_H

typedef enum {
    HCOMM_GPU_LINK_UNKNOWN = 0, /* zeroed memory says nothing */
    HCOMM_GPU_LINK_SAME,        /* one GPU */
    HCOMM_GPU_LINK_NVLINK,      /* peer-to-peer over NVLink (or NVSwitch) */
    HCOMM_GPU_LINK_PCIE,        /* peer-to-peer, not over NVLink */
    HCOMM_GPU_LINK_P2P,         /* peer-to-peer, over a link CUDA won't name */
    HCOMM_GPU_LINK_NONE,        /* no peer access */
    HCOMM_GPU_LINK_COUNT
} hcomm_gpu_link_t;

/* "unknown", "self", "nvlink", "pcie", "p2p", "none". */
const char *hcomm_gpu_link_name(hcomm_gpu_link_t link);

/* The override file's words: "self", "nvlink", "pcie", "none" (not
 * "unknown" or "p2p": a file states what it knows). -1 for anything else. */
int hcomm_gpu_link_parse(const char *word, hcomm_gpu_link_t *out);

/* Index of the first of n links without peer access (NONE), or -1 when
 * every one may carry the CUDA IPC path. UNKNOWN does not block: the
 * mapping itself (cudaIpcOpenMemHandle) still has its say, as before
 * links were known. */
int hcomm_gpu_links_first_blocked(int n, const hcomm_gpu_link_t *links);

/* NVML as detection calls it (a table, so that tests can stand in for the
 * library). Return codes and values are NVML's. */
typedef struct {
    int (*handle_by_pci)(const char *pci, void **device);
    int (*p2p_status)(void *a, void *b, int caps_index, int *status);
} hcomm_nvml_t;

/* The link between the GPUs at PCI bus ids a and b, from NVML's P2P
 * status: NVLink where the NVLink index says OK, else PCIe where the read
 * index says OK, else none; unknown where NVML fails or says unknown. */
hcomm_gpu_link_t hcomm_gpu_link_nvml(const hcomm_nvml_t *nvml, const char *a,
                                     const char *b);

/* Detection between the GPUs at PCI bus ids a and b ("dddd:bb:dd.f", any
 * case): NVML where it loads, else CUDA. Equal ids: SAME. */
hcomm_gpu_link_t hcomm_gpu_link_detect(const char *a, const char *b);

#endif
