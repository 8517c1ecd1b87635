/* Links between GPUs: names, the rule for the CUDA IPC path, and detection
 * through NVML (dlopen) or CUDA. */
#include "topo/gpu_links.h"
#include "core/gpu.h"
#include "core/log.h"

#include <ctype.h>
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

#ifdef HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

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

/* libnvidia-ml, loaded and initialised once per process and kept: NVML
 * counts its initialisations, and detection runs at setup only. */
static pthread_once_t nvml_once = PTHREAD_ONCE_INIT;
static hcomm_nvml_t nvml_lib;
static int nvml_loaded;

static void load_nvml(void) {
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return;
    int (*init)(void) = (int (*)(void))dlsym(lib, "nvmlInit_v2");
    nvml_lib.handle_by_pci = (int (*)(const char *, void **))dlsym(
        lib, "nvmlDeviceGetHandleByPciBusId_v2");
    nvml_lib.p2p_status = (int (*)(void *, void *, int, int *))dlsym(
        lib, "nvmlDeviceGetP2PStatus");
    int rc = init ? init() : -1;
    if (!init || !nvml_lib.handle_by_pci || !nvml_lib.p2p_status ||
        rc != NVML_OK) {
        HCOMM_LOG(HCOMM_LOG_INFO,
                  "gpu links: libnvidia-ml.so.1 is there but unusable "
                  "(nvmlInit_v2: %d); CUDA's peer attributes are used",
                  rc);
        dlclose(lib);
        return;
    }
    nvml_loaded = 1;
}

#ifdef HAVE_CUDA
/* Only peer access, both ways, is known to CUDA, and only for GPUs this
 * process sees (CUDA_VISIBLE_DEVICES may hide the peer's). */
static hcomm_gpu_link_t link_cuda(const char *a, const char *b) {
    int da = -1, db = -1, ab = 0, ba = 0;
    if (!hcomm_gpu_present || cudaDeviceGetByPCIBusId(&da, a) != cudaSuccess ||
        cudaDeviceGetByPCIBusId(&db, b) != cudaSuccess ||
        cudaDeviceCanAccessPeer(&ab, da, db) != cudaSuccess ||
        cudaDeviceCanAccessPeer(&ba, db, da) != cudaSuccess) {
        cudaGetLastError(); /* not left for the next launch to report */
        return HCOMM_GPU_LINK_UNKNOWN;
    }
    if (da == db) return HCOMM_GPU_LINK_SAME;
    return ab && ba ? HCOMM_GPU_LINK_P2P : HCOMM_GPU_LINK_NONE;
}
#endif

static int same_pci(const char *a, const char *b) {
    for (; *a && *b; a++, b++)
        if (tolower((unsigned char)*a) != tolower((unsigned char)*b)) return 0;
    return *a == *b;
}

hcomm_gpu_link_t hcomm_gpu_link_detect(const char *a, const char *b) {
    if (!a[0] || !b[0]) return HCOMM_GPU_LINK_UNKNOWN;
    if (same_pci(a, b)) return HCOMM_GPU_LINK_SAME;
    pthread_once(&nvml_once, load_nvml);
    if (nvml_loaded) {
        hcomm_gpu_link_t l = hcomm_gpu_link_nvml(&nvml_lib, a, b);
        if (l != HCOMM_GPU_LINK_UNKNOWN) return l;
    }
#ifdef HAVE_CUDA
    return link_cuda(a, b);
#else
    return HCOMM_GPU_LINK_UNKNOWN;
#endif
}
