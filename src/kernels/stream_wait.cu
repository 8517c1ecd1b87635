// The kernel that holds a stream until the host writes a word: one thread
// polls the mapped pinned word with a volatile load (each load goes to host
// memory), sleeping between looks so that it costs the bus little.
#include "kernels/stream_wait.h"

#include <cuda_runtime.h>

namespace {

__global__ void wait_flag_kernel(const volatile uint64_t *flag,
                                 uint64_t value) {
    while (*flag < value)
        __nanosleep(1000);
}

} // namespace

extern "C" int hcomm_cuda_wait_flag(const volatile uint64_t *flag,
                                    uint64_t value, void *stream) {
    wait_flag_kernel<<<1, 1, 0, (cudaStream_t)stream>>>(flag, value);
    return (int)cudaGetLastError();
}
