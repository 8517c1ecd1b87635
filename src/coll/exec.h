/* Runs one plan over a transport: posts sends and receives as their
 * dependencies complete, runs reductions on the CPU kernels, and reports when
 * the plan is done. A state machine, so that blocking calls, non-blocking
 * requests and the verifier all drive it the same way. */
#ifndef HCOMM_COLL_EXEC_H
#define HCOMM_COLL_EXEC_H

#include "core/tp.h"
#include "coll/plan.h"
#include "kernels/reduce.h"

struct hcomm_pool;
struct hcomm_gpu_ctx;

/* Step states. A device call's in-flight steps also have a phase
 * (exec_gpu.c). */
enum { HCOMM_STEP_WAITING = 0, HCOMM_STEP_IN_FLIGHT = 1, HCOMM_STEP_DONE = 2 };

/* A device call's per-step state: the event of its kernel or staging copy
 * and its pinned staging buffer. */
typedef struct {
    void *event;
    void *stage;
    uint8_t phase;
} hcomm_exec_gpu_step_t;

typedef struct hcomm_exec {
    const hcomm_plan_t *plan;
    hcomm_tp_t *tp;
    struct hcomm_pool *pool; /* scratch comes from here (NULL: malloc) */
    char *buf[HCOMM_BUF_COUNT];
    size_t esize;
    hcomm_reduce_fn_t reduce;
    hcomm_scale_fn_t scale;
    int divisor; /* for HCOMM_STEP_SCALE */
    uint8_t kind;
    uint32_t seq;
    uint32_t first_open; /* lowest step not yet complete */
    uint8_t *state;      /* per step: 0 waiting, 1 in flight, 2 complete */
    hcomm_tp_req_t *reqs;
    uint32_t rng; /* nonzero: scan ready steps in random order (verifier) */
    hcomm_status_t status;
    /* A call on GPU memory: its kernels and copies run on gpu's streams;
     * on_device: the buffer is device memory, which the transport reads
     * itself only with gpu_direct (else it is staged through pinned host
     * memory). */
    struct hcomm_gpu_ctx *gpu;
    hcomm_exec_gpu_step_t *gstep;
    hcomm_dtype_t dtype;
    hcomm_op_t op;
    uint8_t on_device[HCOMM_BUF_COUNT];
    uint8_t gpu_direct;
    /* small plans (latency path) use these instead of allocating */
    uint8_t state_inline[8];
    hcomm_tp_req_t reqs_inline[8];
} hcomm_exec_t;

typedef struct {
    const hcomm_plan_t *plan;
    hcomm_tp_t *tp;
    struct hcomm_pool *pool;
    const void *sendbuf;
    void *recvbuf;
    hcomm_dtype_t dtype;
    hcomm_op_t op; /* ignored unless the plan reduces */
    int divisor;   /* the communicator size, for HCOMM_AVG */
    hcomm_tag_kind_t tag_kind;
    uint32_t seq;
    uint32_t rng;
    /* Device calls (NULL: host memory): where kernels run, and whether each
     * user buffer is device memory. */
    struct hcomm_gpu_ctx *gpu;
    uint8_t send_on_device, recv_on_device;
    uint8_t gpu_direct;
} hcomm_exec_args_t;

hcomm_status_t hcomm_exec_start(hcomm_exec_t *ex, const hcomm_exec_args_t *a);
/* HCOMM_SUCCESS when the plan has completed, HCOMM_ERR_IN_PROGRESS while it
 * runs, or an error. Never blocks. */
hcomm_status_t hcomm_exec_progress(hcomm_exec_t *ex);
/* Cancels what is in flight and releases what start took. */
void hcomm_exec_abort(hcomm_exec_t *ex);
/* Releases what start took, after completion. */
void hcomm_exec_finish(hcomm_exec_t *ex);
/* The error of step i's transfer, naming its peer. */
hcomm_status_t hcomm_exec_step_failed(const hcomm_exec_t *ex, uint32_t i,
                                      hcomm_status_t st);
/* Which peers the plan is still waiting for, for timeout messages. */
int hcomm_exec_describe_wait(const hcomm_exec_t *ex, char *out, size_t len);

#ifdef HAVE_CUDA
/* Device calls (exec_gpu.c, built with CUDA). */
hcomm_status_t hcomm_exec_gpu_start(hcomm_exec_t *ex);
hcomm_status_t hcomm_exec_gpu_step_start(hcomm_exec_t *ex, uint32_t i);
/* 1 when step i has completed, 0 while it runs, -1 on error (ex->status). */
int hcomm_exec_gpu_step_test(hcomm_exec_t *ex, uint32_t i);
/* Whether step s may start while step dep is still in flight: a kernel
 * after a kernel, ordered by their stream. */
int hcomm_exec_gpu_chains(const hcomm_exec_t *ex, const hcomm_step_t *s,
                          int32_t dep);
/* Waits for what the GPU still runs for the plan (cancelling transfers
 * first with abort), gives back events, staging and scratch. Idempotent. */
void hcomm_exec_gpu_release(hcomm_exec_t *ex, int abort);

#else /* never called: without CUDA no call runs on device memory */
static inline hcomm_status_t hcomm_exec_gpu_start(hcomm_exec_t *ex) {
    (void)ex;
    return HCOMM_ERR_UNSUPPORTED;
}
static inline hcomm_status_t hcomm_exec_gpu_step_start(hcomm_exec_t *ex,
                                                       uint32_t i) {
    (void)ex;
    (void)i;
    return HCOMM_ERR_UNSUPPORTED;
}
static inline int hcomm_exec_gpu_step_test(hcomm_exec_t *ex, uint32_t i) {
    (void)ex;
    (void)i;
    return -1;
}
static inline int hcomm_exec_gpu_chains(const hcomm_exec_t *ex,
                                        const hcomm_step_t *s, int32_t dep) {
    (void)ex;
    (void)s;
    (void)dep;
    return 0;
}
static inline void hcomm_exec_gpu_release(hcomm_exec_t *ex, int abort) {
    (void)ex;
    (void)abort;
}
#endif

#endif
