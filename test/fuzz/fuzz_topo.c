/* libFuzzer target: the topology override file (HCOMM_OVERRIDE_TOPO,
 * src/topo/topo_override.c), read from an in-memory file for jobs of 1, 4
 * and 8 ranks. An accepted file must place every rank on a node in range. */
#include "core/log.h"
#include "topo/topo.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int fd = memfd_create("fuzz_topo", 0);
    if (fd < 0) return 0;
    if (write(fd, data, size) != (ssize_t)size) {
        close(fd);
        return 0;
    }
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    static const int sizes[] = {1, 4, 8};
    for (int i = 0; i < 3; i++) {
        hcomm_topo_override_t ov;
        if (hcomm_topo_override_load(path, sizes[i], &ov) != HCOMM_SUCCESS)
            continue;
        for (int r = 0; r < sizes[i]; r++)
            if (ov.node_of[r] < 0 || ov.node_of[r] >= ov.nnodes) abort();
        hcomm_topo_override_free(&ov);
    }
    close(fd);
    return 0;
}
