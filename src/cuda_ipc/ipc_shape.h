/* A CUDA IPC call's shape: which kernel kind, how many elements a round
 * moves, how many rounds and blocks. Every rank computes it from what all
 * ranks agreed on (collective, count, type, configuration), so all launch
 * the same kernel. */
#ifndef HCOMM_CUDA_IPC_SHAPE_H
#define HCOMM_CUDA_IPC_SHAPE_H

#include "cuda_ipc/ipc_kernels.h"
#include "coll/plan.h"

/* Each block of a kernel moves at least this much of a round: fewer,
 * busier blocks raise fewer flags. Small rounds, where a block's own
 * copying and reading is the call's time, still spread over up to
 * HCOMM_IPC_SMALL_BLOCKS blocks of HCOMM_IPC_SMALL_BYTES_PER_BLOCK: on the
 * H200, 32 KiB allreduces, stream-ordered, took 7.5-7.7 us at 2 ranks and
 * 11.6-12.0 at 4 in 4 blocks, 8.4-10.1 and 13.5-13.8 in one; from 256 KiB
 * more blocks were as often slower (broadcast, reduce-scatter, 4 ranks). */
#define HCOMM_IPC_BYTES_PER_BLOCK (32u << 10)
#define HCOMM_IPC_SMALL_BYTES_PER_BLOCK (8u << 10)
#define HCOMM_IPC_SMALL_BLOCKS 8

typedef struct {
    size_t piece;  /* elements of count per round */
    size_t rounds; /* ceil(count / piece) */
    int blocks;
} hcomm_ipc_shape_t;

/* The bytes of the data area one round uses. */
size_t hcomm_ipc_round_bytes(hcomm_ipc_kind_t kind, int nranks, size_t piece,
                             size_t esize);

/* The kernel for coll of bytes (per rank's block for allgather and
 * reduce-scatter); algo is HCOMM_CUDA_IPC_ALGO. */
hcomm_ipc_kind_t hcomm_ipc_kind(hcomm_coll_t coll, size_t bytes,
                                const char *algo, size_t oneshot_max);

/* The rounds and blocks of a call of count elements of esize bytes through
 * areas of area_bytes (at least 64 KiB), at most max_blocks blocks. */
void hcomm_ipc_shape(hcomm_ipc_kind_t kind, int nranks, size_t count,
                     size_t esize, size_t area_bytes, long long max_blocks,
                     hcomm_ipc_shape_t *out);

/* The blocks of a round of round_bytes: one per HCOMM_IPC_BYTES_PER_BLOCK,
 * or one per HCOMM_IPC_SMALL_BYTES_PER_BLOCK up to HCOMM_IPC_SMALL_BLOCKS
 * where that makes more; 1 to max_blocks (itself at most
 * HCOMM_IPC_MAX_BLOCKS). */
int hcomm_ipc_blocks(size_t round_bytes, long long max_blocks);

/* The most blocks a kernel may have, for n ranks whose GPUs have sms[p]
 * multiprocessors, rank p on the same GPU as rank gpu_of[p] (the first
 * such rank). Every block spins until the same block of every peer has
 * arrived, so all ranks' blocks must be on their GPUs at once, one a
 * multiprocessor (ipc_kernels.cuh), on the GPU the most ranks share; and
 * every rank uses the same number. Six ranks on one H100 (132
 * multiprocessors) at 32 blocks waited until the timeout: five ranks'
 * kernels filled it and the sixth's blocks never started. At least 1, at
 * most HCOMM_IPC_MAX_BLOCKS. */
int hcomm_ipc_resident_blocks(int n, const int *sms, const int *gpu_of);

#endif
