// The CUDA IPC collectives' entry (ipc_kernels.h), and their kernels for
// half of the types (the others': ipc_kernels_more.cu).
#include "cuda_ipc/ipc_kernels.cuh"

extern "C" int hcomm_ipc_kernel_launch(const hcomm_ipc_kargs_t *a,
                                       hcomm_dtype_t dtype, hcomm_op_t op,
                                       void *stream) {
    if (a->count == 0) return 0;
    if (a->nranks < 1 || a->nranks > HCOMM_IPC_MAX_RANKS || a->blocks < 1 ||
        a->blocks > HCOMM_IPC_MAX_BLOCKS || a->piece == 0)
        return (int)cudaErrorInvalidValue;
    cudaStream_t s = (cudaStream_t)stream;
    switch (dtype) {
    case HCOMM_FLOAT16:
        return launch_typed<__half>(a, op, s);
    case HCOMM_BFLOAT16:
        return launch_typed<__nv_bfloat16>(a, op, s);
    case HCOMM_FLOAT32:
        return launch_typed<float>(a, op, s);
    case HCOMM_FLOAT64:
        return launch_typed<double>(a, op, s);
    case HCOMM_INT8:
        return launch_typed<int8_t>(a, op, s);
    default:
        return hcomm_ipc_kernel_launch_more(a, dtype, op, s);
    }
}

// Whether the kernels may be started early (follow_previous_kernel): only
// where they were built for compute capability 9.0 or newer. A kernel
// built from older PTX, compiled for a newer GPU when loaded, has no wait
// for the kernel before it.
extern "C" int hcomm_ipc_kernels_start_early(void) {
    cudaFuncAttributes fa;
    if (cudaFuncGetAttributes(&fa, ipc_kernel<float, OpSum>) != cudaSuccess) {
        cudaGetLastError(); /* not left for the next launch to report */
        return 0;
    }
    return fa.ptxVersion >= 90;
}
