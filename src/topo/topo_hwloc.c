/* hwloc: the calling process's NUMA node and socket, and the GPUs and NICs
 * whose PCI locality overlaps the CPUs it may run on. */
#include "core/log.h"
#include "topo/topo.h"

#include <hwloc.h>
#include <stdio.h>
#include <string.h>

/* hwloc's PCI plugin keeps what it allocates while the topology loads and
 * is unloaded before exit, so LeakSanitizer can neither attribute nor
 * suppress those leaks: allocations made inside hwloc_topology_load are
 * hwloc's alone and are not tracked (sanitizer builds only). */
#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/lsan_interface.h>
#define LSAN_OFF() __lsan_disable()
#define LSAN_ON() __lsan_enable()
#else
#define LSAN_OFF() ((void)0)
#define LSAN_ON() ((void)0)
#endif

/* The OS index of the one object of this type that holds every CPU of cpus,
 * or -1 when none does (the process is not bound inside one). */
static int covering(hwloc_topology_t t, hwloc_obj_type_t type,
                    hwloc_const_cpuset_t cpus) {
    hwloc_obj_t o = NULL;
    while ((o = hwloc_get_next_obj_by_type(t, type, o)))
        if (o->cpuset && !hwloc_bitmap_iszero(o->cpuset) &&
            hwloc_bitmap_isincluded(cpus, o->cpuset))
            return o->os_index == HWLOC_UNKNOWN_INDEX ? -1 : (int)o->os_index;
    return -1;
}

static hwloc_obj_t pci_parent(hwloc_obj_t o) {
    while (o && o->type != HWLOC_OBJ_PCI_DEVICE) {
        if (!hwloc_obj_type_is_io(o->type)) return NULL;
        o = o->parent;
    }
    return o;
}

static void pci_id(hwloc_obj_t pci, char *out) {
    out[0] = '\0';
    if (pci)
        snprintf(out, HCOMM_TOPO_PCI_LEN, "%04x:%02x:%02x.%01x",
                 pci->attr->pcidev.domain, pci->attr->pcidev.bus,
                 pci->attr->pcidev.dev, pci->attr->pcidev.func);
}

static int near(hwloc_topology_t t, hwloc_obj_t o, hwloc_const_cpuset_t cpus) {
    hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(t, o);
    return anc && anc->cpuset && hwloc_bitmap_intersects(anc->cpuset, cpus);
}

/* One entry per PCI function: an InfiniBand port is both "mlx5_0" and
 * "ib0", a GPU often "cuda0" and "card1"; their names are joined. */
static void add_dev(hcomm_topo_dev_t *list, int *n, const char *name,
                    const char *pci) {
    for (int i = 0; pci[0] && i < *n; i++) {
        if (strcmp(list[i].pci, pci) != 0) continue;
        size_t len = strlen(list[i].name);
        snprintf(list[i].name + len, sizeof(list[i].name) - len, "/%s", name);
        return;
    }
    if (*n == HCOMM_TOPO_MAX_DEVS) {
        hcomm_debug("topology: more than %d devices near this rank; %s and "
                    "later ones are left out",
                    HCOMM_TOPO_MAX_DEVS, name);
        return;
    }
    snprintf(list[*n].name, sizeof(list[*n].name), "%s", name);
    snprintf(list[*n].pci, sizeof(list[*n].pci), "%s", pci);
    (*n)++;
}

static int has_pci(const hcomm_topo_dev_t *list, int n, const char *pci) {
    for (int i = 0; i < n; i++)
        if (strcmp(list[i].pci, pci) == 0) return 1;
    return 0;
}

/* GPUs that no driver plugin named (Debian's hwloc has no CUDA/NVML plugin,
 * and NVIDIA's driver may create no DRM device): 3D and other display
 * controllers, and processing accelerators, found by PCI class. Plain VGA
 * (0x0300) is left out: on servers that is the BMC's display. */
static void add_pci_gpus(hwloc_topology_t t, hwloc_const_cpuset_t cpus,
                         hcomm_topo_local_t *out) {
    hwloc_obj_t o = NULL;
    while ((o = hwloc_get_next_pcidev(t, o))) {
        unsigned cls = o->attr->pcidev.class_id;
        if (!((cls >> 8) == 0x03 && cls != 0x0300) && (cls >> 8) != 0x12)
            continue;
        char pci[HCOMM_TOPO_PCI_LEN];
        pci_id(o, pci);
        if (!near(t, o, cpus) || has_pci(out->gpus, out->ngpus, pci)) continue;
        unsigned vendor = o->attr->pcidev.vendor_id;
        add_dev(out->gpus, &out->ngpus,
                vendor == 0x10de   ? "nvidia"
                : vendor == 0x1002 ? "amd"
                : vendor == 0x8086 ? "intel"
                                   : "pci",
                pci);
    }
}

static void collect(hwloc_topology_t t, hwloc_const_cpuset_t cpus,
                    hcomm_topo_local_t *out) {
    out->numa = covering(t, HWLOC_OBJ_NUMANODE, cpus);
    out->socket = covering(t, HWLOC_OBJ_PACKAGE, cpus);
    hwloc_obj_t o = NULL;
    while ((o = hwloc_get_next_osdev(t, o))) {
        hwloc_obj_osdev_type_t type = o->attr->osdev.type;
        int gpu = type == HWLOC_OBJ_OSDEV_GPU || type == HWLOC_OBJ_OSDEV_COPROC;
        int nic = type == HWLOC_OBJ_OSDEV_NETWORK ||
                  type == HWLOC_OBJ_OSDEV_OPENFABRICS;
        if ((!gpu && !nic) || !o->name || !near(t, o, cpus)) continue;
        char pci[HCOMM_TOPO_PCI_LEN];
        pci_id(pci_parent(o), pci);
        if (gpu)
            add_dev(out->gpus, &out->ngpus, o->name, pci);
        else
            add_dev(out->nics, &out->nnics, o->name, pci);
    }
    add_pci_gpus(t, cpus, out);
}

void hcomm_topo_hwloc_detect(hcomm_topo_local_t *out) {
    hwloc_topology_t t;
    hwloc_bitmap_t cpus = NULL;
    memset(out, 0, sizeof(*out));
    out->numa = out->socket = -1;
    if (hwloc_topology_init(&t) != 0) {
        hcomm_debug("topology: hwloc_topology_init failed");
        return;
    }
    hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    LSAN_OFF();
    int loaded = hwloc_topology_load(t);
    LSAN_ON();
    if (loaded != 0) {
        hcomm_debug("topology: hwloc_topology_load failed");
        goto out;
    }
    cpus = hwloc_bitmap_alloc();
    if (!cpus) goto out;
    /* An unbound process may run anywhere: it is near every device, and on
     * no single NUMA node unless the machine has one. */
    if (hwloc_get_cpubind(t, cpus, HWLOC_CPUBIND_PROCESS) != 0 ||
        hwloc_bitmap_iszero(cpus))
        hwloc_bitmap_copy(cpus, hwloc_topology_get_topology_cpuset(t));
    collect(t, cpus, out);
out:
    hwloc_bitmap_free(cpus);
    hwloc_topology_destroy(t);
}
