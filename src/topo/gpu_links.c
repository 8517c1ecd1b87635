/* Links between GPUs, pure: names, the rule for the CUDA IPC path, and
 * what NVML's answers mean (gpu_links_detect.c asks NVML and CUDA). */
#include "topo/gpu_links.h"

#include <string.h>

/* NVML's ABI values (nvml.h is not part of the CUDA toolkit here, and the
 * library is loaded at run time): nvmlReturn_t NVML_SUCCESS, the
 * nvmlGpuP2PCapsIndex_t and nvmlGpuP2PStatus_t values used. */
enum {
    NVML_OK = 0,
    NVML_CAPS_READ = 0,
    NVML_CAPS_NVLINK = 2,
    NVML_P2P_OK = 0,
    NVML_P2P_UNKNOWN = 6
};

static const char *const names[HCOMM_GPU_LINK_COUNT] = {
    "unknown", "self", "nvlink", "pcie", "p2p", "none"};

const char *hcomm_gpu_link_name(hcomm_gpu_link_t link) {
    return link >= 0 && link < HCOMM_GPU_LINK_COUNT ? names[link] : "invalid";
}

int hcomm_gpu_link_parse(const char *word, hcomm_gpu_link_t *out) {
    static const hcomm_gpu_link_t stated[] = {
        HCOMM_GPU_LINK_SAME, HCOMM_GPU_LINK_NVLINK, HCOMM_GPU_LINK_PCIE,
        HCOMM_GPU_LINK_NONE};
    for (size_t i = 0; i < sizeof(stated) / sizeof(stated[0]); i++)
        if (strcmp(word, names[stated[i]]) == 0) {
            *out = stated[i];
            return 0;
        }
    return -1;
}

int hcomm_gpu_links_first_blocked(int n, const hcomm_gpu_link_t *links) {
    for (int i = 0; i < n; i++)
        if (links[i] == HCOMM_GPU_LINK_NONE) return i;
    return -1;
}

hcomm_gpu_link_t hcomm_gpu_link_nvml(const hcomm_nvml_t *nvml, const char *a,
                                     const char *b) {
    void *da = NULL, *db = NULL;
    int nvlink = -1, read = -1;
    if (nvml->handle_by_pci(a, &da) != NVML_OK ||
        nvml->handle_by_pci(b, &db) != NVML_OK)
        return HCOMM_GPU_LINK_UNKNOWN;
    if (nvml->p2p_status(da, db, NVML_CAPS_NVLINK, &nvlink) == NVML_OK &&
        nvlink == NVML_P2P_OK)
        return HCOMM_GPU_LINK_NVLINK;
    if (nvml->p2p_status(da, db, NVML_CAPS_READ, &read) != NVML_OK ||
        read == NVML_P2P_UNKNOWN)
        return HCOMM_GPU_LINK_UNKNOWN;
    return read == NVML_P2P_OK ? HCOMM_GPU_LINK_PCIE : HCOMM_GPU_LINK_NONE;
}
