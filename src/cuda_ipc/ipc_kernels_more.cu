// The CUDA IPC collectives' kernels for the types ipc_kernels.cu leaves
// to this file (ipc_kernels.cuh).
#include "cuda_ipc/ipc_kernels.cuh"

extern "C" int hcomm_ipc_kernel_launch_more(const hcomm_ipc_kargs_t *a,
                                            hcomm_dtype_t dtype, hcomm_op_t op,
                                            cudaStream_t s) {
    switch (dtype) {
    case HCOMM_UINT8:
        return launch_typed<uint8_t>(a, op, s);
    case HCOMM_INT32:
        return launch_typed<int32_t>(a, op, s);
    case HCOMM_UINT32:
        return launch_typed<uint32_t>(a, op, s);
    case HCOMM_INT64:
        return launch_typed<int64_t>(a, op, s);
    case HCOMM_UINT64:
        return launch_typed<uint64_t>(a, op, s);
    default:
        return (int)cudaErrorInvalidValue;
    }
}
