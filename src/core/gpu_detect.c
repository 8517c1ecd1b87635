/* Memory types from the CUDA driver, loaded with dlopen: libhcomm.so needs
 * no driver to load, and a build without CUDA still tells device pointers
 * from host ones (to refuse them rather than crash). The driver's ABI
 * values are written here, as cuda.h may not be installed. */
#include "core/config.h"
#include "core/gpu.h"
#include "core/log.h"

#include <dlfcn.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

enum {
    CU_ATTR_MEMORY_TYPE = 2,
    CU_ATTR_IS_MANAGED = 8,
    CU_ATTR_DEVICE_ORDINAL = 9,
    CU_ATTR_BUFFER_ID = 7,
    CU_ATTR_RANGE_START = 11,
    CU_ATTR_RANGE_SIZE = 12,
    CU_MEMORYTYPE_HOST = 1,
    CU_MEMORYTYPE_DEVICE = 2,
    MAX_DEVICES = 64
};

int hcomm_gpu_present;

/* Where the heap starts; 0 where that is not known (hcomm_gpu_find_heap). */
static uintptr_t heap_start;
/* The calling thread's stack, [stack_lo, stack_hi): stack_hi is 0 until
 * it is looked up, and both are UINTPTR_MAX where it cannot be. */
static _Thread_local uintptr_t stack_lo, stack_hi;

static struct {
    void *lib;
    int ndevices;
    atomic_int in_use; /* a context has been seen: CUDA memory may exist */
    int (*ctx_get_current)(void **ctx);
    int (*primary_ctx_state)(int dev, unsigned *flags, int *active);
    int (*pointer_attributes)(unsigned n, int *attrs, void **data,
                              unsigned long long ptr);
} drv;

static void *sym(const char *name) {
    return dlsym(drv.lib, name);
}

/* glibc's record of the program break: what its sbrk(0) returns, kept
 * by its malloc as the heap grows and shrinks. Read in place, as sbrk(0)
 * is a brk system call where UCX's memory hooks take sbrk over (150 ns in
 * an MPI process over UCX, the driver question it was to save). Weak: a
 * C library without it leaves the heap unknown. */
extern void *__curbrk __attribute__((weak));

static uintptr_t program_break(void) {
    return &__curbrk ? (uintptr_t)__curbrk : 0;
}

/* Where the kernel's heap mapping starts, if the program break lies in
 * it: a break elsewhere (one emulated, as under valgrind) says nothing of
 * what lies between. */
void hcomm_gpu_find_heap(void) {
    char line[512];
    if (!program_break()) (void)sbrk(0); /* glibc notes it on first use */
    uintptr_t start = 0, end = 0, brk = program_break();
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return;
    while (fgets(line, sizeof line, f))
        if (strstr(line, " [heap]") &&
            sscanf(line, "%" SCNxPTR "-%" SCNxPTR, &start, &end) == 2)
            break;
    fclose(f);
    heap_start = start < brk && brk <= end ? start : 0;
}

static void find_own_stack(void) {
    pthread_attr_t a;
    void *lo = NULL;
    size_t size = 0;
    stack_lo = stack_hi = UINTPTR_MAX;
    if (pthread_getattr_np(pthread_self(), &a) != 0) return;
    if (pthread_attr_getstack(&a, &lo, &size) == 0 && lo && size) {
        stack_lo = (uintptr_t)lo;
        stack_hi = (uintptr_t)lo + size;
    }
    pthread_attr_destroy(&a);
}

/* CUDA maps nothing inside the heap below the program break, nor inside
 * a thread's stack, so a buffer there needs no driver question. The
 * stack's live part runs from this frame to the stack's top, when this
 * frame is on the thread's own stack (not a coroutine's elsewhere). */
int hcomm_gpu_surely_host(const void *p) {
    uintptr_t a = (uintptr_t)p;
    if (heap_start && a >= heap_start && a < program_break()) return 1;
    /* below this frame first: the thread-locals cost a call */
    uintptr_t here = (uintptr_t)__builtin_frame_address(0);
    if (a < here) return 0;
    if (!stack_hi) find_own_stack();
    return here >= stack_lo && here < stack_hi && a < stack_hi;
}

int hcomm_gpu_all_host(const void *a, const void *b) {
    if (!hcomm_gpu_present) return 1;
    if ((!a || hcomm_gpu_surely_host(a)) &&
        (!b || b == a || hcomm_gpu_surely_host(b)))
        return 1;
    return !hcomm_gpu_in_use();
}

void hcomm_gpu_init(void) {
    int (*init)(unsigned) = NULL, (*count)(int *) = NULL;
    hcomm_gpu_present = 0;
    if (strcmp(hcomm_cfg_str(HCOMM_CFG_CUDA), "0") == 0 || drv.lib) return;
    drv.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!drv.lib) {
        hcomm_debug("gpu: no CUDA driver (%s)", dlerror());
        return;
    }
    *(void **)&init = sym("cuInit");
    *(void **)&count = sym("cuDeviceGetCount");
    *(void **)&drv.ctx_get_current = sym("cuCtxGetCurrent");
    *(void **)&drv.primary_ctx_state = sym("cuDevicePrimaryCtxGetState");
    *(void **)&drv.pointer_attributes = sym("cuPointerGetAttributes");
    if (!init || !count || !drv.ctx_get_current || !drv.primary_ctx_state ||
        !drv.pointer_attributes || init(0) != 0 || count(&drv.ndevices) != 0 ||
        drv.ndevices <= 0) {
        hcomm_debug("gpu: the CUDA driver has no usable device");
        hcomm_gpu_finalize();
        return;
    }
    if (drv.ndevices > MAX_DEVICES) drv.ndevices = MAX_DEVICES;
    if (!heap_start) hcomm_gpu_find_heap();
    hcomm_gpu_present = 1;
    hcomm_debug("gpu: %d CUDA device(s)", drv.ndevices);
}

void hcomm_gpu_finalize(void) {
    hcomm_gpu_present = 0;
    /* The driver stays loaded: the CUDA runtime and the program share it. */
    drv.lib = NULL;
    atomic_store(&drv.in_use, 0);
}

/* Until the process has a CUDA context, no buffer can be CUDA memory: a
 * thread with a current context, or any device's primary context, shows
 * one (pointers can come from a thread other than the caller's). */
int hcomm_gpu_in_use(void) {
    void *ctx = NULL;
    if (atomic_load_explicit(&drv.in_use, memory_order_relaxed)) return 1;
    if (drv.ctx_get_current(&ctx) == 0 && ctx) goto yes;
    for (int d = 0; d < drv.ndevices; d++) {
        unsigned flags = 0;
        int active = 0;
        if (drv.primary_ctx_state(d, &flags, &active) == 0 && active) goto yes;
    }
    return 0;
yes:
    atomic_store(&drv.in_use, 1);
    return 1;
}

hcomm_memtype_t hcomm_gpu_memtype_slow(const void *p, int *device) {
    unsigned memtype = 0, managed = 0;
    int ordinal = -1;
    int attrs[3] = {CU_ATTR_MEMORY_TYPE, CU_ATTR_IS_MANAGED,
                    CU_ATTR_DEVICE_ORDINAL};
    void *data[3] = {&memtype, &managed, &ordinal};
    if (!hcomm_gpu_in_use()) return HCOMM_MEM_HOST;
    /* The plural form reports plain host memory as type 0, not an error. */
    if (drv.pointer_attributes(3, attrs, data,
                               (unsigned long long)(uintptr_t)p))
        return HCOMM_MEM_HOST;
    if (managed) {
        *device = ordinal;
        return HCOMM_MEM_MANAGED;
    }
    if (memtype == CU_MEMORYTYPE_DEVICE) {
        *device = ordinal;
        return HCOMM_MEM_DEVICE;
    }
    return memtype == CU_MEMORYTYPE_HOST ? HCOMM_MEM_PINNED : HCOMM_MEM_HOST;
}

int hcomm_gpu_alloc_range(const void *p, uint64_t *id, uintptr_t *base,
                          size_t *bytes) {
    unsigned long long buffer_id = 0, start = 0;
    size_t size = 0;
    int attrs[3] = {CU_ATTR_BUFFER_ID, CU_ATTR_RANGE_START, CU_ATTR_RANGE_SIZE};
    void *data[3] = {&buffer_id, &start, &size};
    if (!hcomm_gpu_present ||
        drv.pointer_attributes(3, attrs, data,
                               (unsigned long long)(uintptr_t)p) ||
        !buffer_id || !start)
        return -1;
    *id = buffer_id;
    *base = (uintptr_t)start;
    *bytes = size;
    return 0;
}

int hcomm_gpu_device_count(void) {
    return hcomm_gpu_present ? drv.ndevices : 0;
}

const char *hcomm_memtype_name(hcomm_memtype_t t) {
    static const char *names[HCOMM_MEM_COUNT] = {"host", "pinned host",
                                                 "managed", "device"};
    return (unsigned)t < HCOMM_MEM_COUNT ? names[t] : "unknown";
}
