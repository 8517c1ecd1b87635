/* Detection of the link between two GPUs: NVML, loaded with dlopen so that
 * libhcomm needs no NVML to load, else CUDA's peer access. */
#include "core/gpu.h"
#include "core/log.h"
#include "topo/gpu_links.h"

#include <dlfcn.h>
#include <pthread.h>
#include <strings.h>

#ifdef HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

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
    int rc = init ? init() : -1; /* NVML_SUCCESS is 0 */
    if (!init || !nvml_lib.handle_by_pci || !nvml_lib.p2p_status || rc != 0) {
        HCOMM_LOG(HCOMM_LOG_INFO,
                  "gpu links: libnvidia-ml.so.1 is there but unusable "
                  "(nvmlInit_v2: %d); links come from CUDA where it can tell",
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

hcomm_gpu_link_t hcomm_gpu_link_detect(const char *a, const char *b) {
    if (!a[0] || !b[0]) return HCOMM_GPU_LINK_UNKNOWN;
    if (strcasecmp(a, b) == 0) return HCOMM_GPU_LINK_SAME;
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
