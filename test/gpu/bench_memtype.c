/* What finding a buffer's memory type costs per call (hcomm_gpu_memtype),
 * on host, pinned, device and managed memory, before and after the process
 * has a CUDA context, and what the shortcut for heap and stack buffers
 * (hcomm_gpu_surely_host) costs. Printed; exit 1 where either gets a type
 * wrong (the shortcut claiming CUDA memory), 77 without a GPU. */
#include "core/config.h"
#include "core/gpu.h"

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

enum { N = 200000 };
static int wrong;

static void time_it(const char *what, const void *p, hcomm_memtype_t want) {
    int dev, bad = 0;
    double t0 = now();
    for (int i = 0; i < N; i++)
        bad += hcomm_gpu_memtype(p, &dev) != want;
    printf("memtype %-26s %7.1f ns per call%s\n", what, (now() - t0) / N * 1e9,
           bad ? "  WRONG TYPE" : "");
    wrong += bad != 0;
}

static void time_shortcut(const char *what, const void *p, int want) {
    int bad = 0;
    double t0 = now();
    for (int i = 0; i < N; i++)
        bad += hcomm_gpu_surely_host(p) != want;
    printf("surely_host %-22s %7.1f ns per call (%s)%s\n", what,
           (now() - t0) / N * 1e9, want ? "host" : "asks the driver",
           bad ? "  WRONG" : "");
    wrong += bad != 0;
}

int main(void) {
    static char host[4096];
    if (hcomm_config_load() != HCOMM_SUCCESS) return 1;
    hcomm_gpu_init();
    if (!hcomm_gpu_present) {
        printf("bench_memtype: no CUDA device: skipped\n");
        return 77;
    }
    time_it("host, no CUDA context yet", host, HCOMM_MEM_HOST);
    void *d, *m, *p;
    if (cudaMalloc(&d, 1 << 20) || cudaMallocManaged(&m, 1 << 20, 1) ||
        cudaMallocHost(&p, 1 << 20))
        return 1;
    time_it("host", host, HCOMM_MEM_HOST);
    time_it("pinned host", p, HCOMM_MEM_PINNED);
    time_it("device", (char *)d + 64, HCOMM_MEM_DEVICE);
    time_it("managed", m, HCOMM_MEM_MANAGED);
    char stack[64] = {0};
    char *heap = malloc(64);
    time_shortcut("heap", heap, 1);
    time_shortcut("stack", stack, 1);
    time_shortcut("static", host, 0);
    time_shortcut("pinned host", p, 0);
    time_shortcut("device", d, 0);
    time_shortcut("managed", m, 0);
    free(heap);
    return wrong ? 1 : 0;
}
