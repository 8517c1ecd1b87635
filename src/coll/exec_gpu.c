/* The executor's steps on device memory. The plan is the host one; only
 * how a step runs changes:
 *   reduce, copy, scale  a kernel (or copy) on the call's kernel stream,
 *                        complete when its event is; a kernel that depends
 *                        on a kernel still running is enqueued behind it
 *                        at once (the stream orders them);
 *   send                 from device memory when the transport carries it
 *                        (UCX with CUDA), else copied to pinned staging on
 *                        the D2H stream first, then sent from there;
 *   receive              into device memory likewise, or into staging and
 *                        then copied on the H2D stream.
 * Plans are chunked (HCOMM_CHUNK_SIZE), so staging copies of one chunk
 * overlap transfers of others. */
#include "coll/exec.h"
#include "core/gpu.h"
#include "core/log.h"
#include "kernels/reduce_cuda.h"

#include <stdlib.h>

enum {
    PHASE_NONE = 0,
    PHASE_KERNEL,    /* a kernel or local copy runs */
    PHASE_STAGE_OUT, /* send: device -> staging copy runs */
    PHASE_XFER,      /* the transport moves it */
    PHASE_XFER_IN,   /* receive: the transport fills staging */
    PHASE_STAGE_IN   /* receive: staging -> device copy runs */
};

static char *addr(const hcomm_exec_t *ex, hcomm_ref_t ref) {
    return ex->buf[ref.buf] + ref.offset * ex->esize;
}

static int is_local(const hcomm_step_t *s) {
    return s->kind != HCOMM_STEP_SEND && s->kind != HCOMM_STEP_RECV;
}

hcomm_status_t hcomm_exec_gpu_start(hcomm_exec_t *ex) {
    const hcomm_plan_t *plan = ex->plan;
    ex->gstep = calloc(plan->nsteps ? plan->nsteps : 1, sizeof(*ex->gstep));
    if (!ex->gstep)
        return hcomm_error(HCOMM_ERR_NO_MEMORY, "no memory for a GPU plan");
    if (plan->scratch_count) {
        ex->buf[HCOMM_BUF_SCRATCH] = hcomm_gpu_alloc(
            HCOMM_GPU_POOL_DEVICE, hcomm_gpu_ctx_device(ex->gpu),
            plan->scratch_count * ex->esize);
        if (!ex->buf[HCOMM_BUF_SCRATCH]) return HCOMM_ERR_NO_MEMORY;
    }
    return HCOMM_SUCCESS;
}

int hcomm_exec_gpu_chains(const hcomm_exec_t *ex, const hcomm_step_t *s,
                          int32_t dep) {
    return is_local(s) && ex->state[dep] == HCOMM_STEP_IN_FLIGHT &&
           ex->gstep[dep].phase == PHASE_KERNEL;
}

static hcomm_status_t record(hcomm_exec_t *ex, uint32_t i,
                             hcomm_gpu_stream_id_t sid, int phase) {
    void *ev =
        hcomm_gpu_event_record(ex->gpu, hcomm_gpu_ctx_stream(ex->gpu, sid));
    if (!ev) return HCOMM_ERR_INTERNAL;
    ex->gstep[i].event = ev;
    ex->gstep[i].phase = (uint8_t)phase;
    return HCOMM_SUCCESS;
}

static hcomm_status_t cuda_status(int err, const char *what) {
    return err ? hcomm_gpu_error(err, what) : HCOMM_SUCCESS;
}

static hcomm_status_t run_local(hcomm_exec_t *ex, uint32_t i) {
    const hcomm_step_t *s = &ex->plan->steps[i];
    void *stream = hcomm_gpu_ctx_stream(ex->gpu, HCOMM_GPU_STREAM_KERNEL);
    hcomm_status_t st;
    char *dst = addr(ex, s->dst);
    switch (s->kind) {
    case HCOMM_STEP_REDUCE: {
        const void *srcs[2] = {addr(ex, s->a), addr(ex, s->b)};
        st = cuda_status(hcomm_cuda_reduce(dst, NULL, srcs, 2, s->count,
                                           ex->dtype, ex->op, 0, stream),
                         "reduction kernel");
        break;
    }
    case HCOMM_STEP_COPY:
        st = hcomm_gpu_copy_async(dst, addr(ex, s->a), s->count * ex->esize,
                                  stream);
        break;
    case HCOMM_STEP_SCALE:
        st = cuda_status(
            hcomm_cuda_divide(dst, s->count, ex->dtype, ex->divisor, stream),
            "scaling kernel");
        break;
    default:
        st = hcomm_error(HCOMM_ERR_INTERNAL, "bad step kind %d", s->kind);
    }
    return st == HCOMM_SUCCESS
               ? record(ex, i, HCOMM_GPU_STREAM_KERNEL, PHASE_KERNEL)
               : st;
}

static hcomm_tag_t step_tag(const hcomm_exec_t *ex, const hcomm_step_t *s) {
    /* as exec.c: point-to-point carries the user's tag */
    return ex->kind == HCOMM_TAG_P2P ? (hcomm_tag_t){ex->kind, 0, ex->seq}
                                     : (hcomm_tag_t){ex->kind, ex->seq, s->tag};
}

static hcomm_status_t post(hcomm_exec_t *ex, uint32_t i, void *buf,
                           int on_device, int phase) {
    const hcomm_step_t *s = &ex->plan->steps[i];
    hcomm_tp_req_t *req = &ex->reqs[i];
    size_t bytes = s->count * ex->esize;
    req->mem = on_device ? HCOMM_TP_MEM_CUDA : HCOMM_TP_MEM_HOST;
    ex->gstep[i].phase = (uint8_t)phase;
    if (s->kind == HCOMM_STEP_SEND)
        return ex->tp->ops->isend(ex->tp, s->peer, buf, bytes, step_tag(ex, s),
                                  req);
    return ex->tp->ops->irecv(ex->tp, s->peer, buf, bytes, step_tag(ex, s),
                              req);
}

hcomm_status_t hcomm_exec_gpu_step_start(hcomm_exec_t *ex, uint32_t i) {
    const hcomm_step_t *s = &ex->plan->steps[i];
    hcomm_exec_gpu_step_t *g = &ex->gstep[i];
    ex->state[i] = HCOMM_STEP_IN_FLIGHT;
    if (is_local(s)) return run_local(ex, i);
    hcomm_ref_t ref = s->kind == HCOMM_STEP_SEND ? s->a : s->dst;
    int dev = ex->on_device[ref.buf];
    if (!dev || ex->gpu_direct)
        return post(ex, i, addr(ex, ref), dev, PHASE_XFER);
    size_t bytes = s->count * ex->esize;
    g->stage = hcomm_gpu_alloc(HCOMM_GPU_POOL_PINNED, -1, bytes);
    if (!g->stage) return HCOMM_ERR_NO_MEMORY;
    if (s->kind == HCOMM_STEP_RECV)
        return post(ex, i, g->stage, 0, PHASE_XFER_IN);
    void *d2h = hcomm_gpu_ctx_stream(ex->gpu, HCOMM_GPU_STREAM_D2H);
    hcomm_status_t st =
        hcomm_gpu_copy_async(g->stage, addr(ex, ref), bytes, d2h);
    return st == HCOMM_SUCCESS
               ? record(ex, i, HCOMM_GPU_STREAM_D2H, PHASE_STAGE_OUT)
               : st;
}

static void drop_stage(hcomm_exec_t *ex, uint32_t i) {
    hcomm_exec_gpu_step_t *g = &ex->gstep[i];
    if (!g->stage) return;
    hcomm_gpu_free(HCOMM_GPU_POOL_PINNED, -1, g->stage,
                   ex->plan->steps[i].count * ex->esize);
    g->stage = NULL;
}

static int fail(hcomm_exec_t *ex, hcomm_status_t st) {
    ex->status = st;
    return -1;
}

int hcomm_exec_gpu_step_test(hcomm_exec_t *ex, uint32_t i) {
    hcomm_exec_gpu_step_t *g = &ex->gstep[i];
    hcomm_tp_req_t *req = &ex->reqs[i];
    const hcomm_step_t *s = &ex->plan->steps[i];
    hcomm_status_t st;
    switch (g->phase) {
    case PHASE_KERNEL:
    case PHASE_STAGE_OUT:
    case PHASE_STAGE_IN: {
        int r = hcomm_gpu_event_query(g->event);
        if (r <= 0) return r < 0 ? fail(ex, HCOMM_ERR_INTERNAL) : 0;
        hcomm_gpu_event_put(ex->gpu, g->event);
        g->event = NULL;
        if (g->phase != PHASE_STAGE_OUT) {
            drop_stage(ex, i);
            g->phase = PHASE_NONE;
            return 1;
        }
        st = post(ex, i, g->stage, 0, PHASE_XFER);
        return st == HCOMM_SUCCESS ? 0 : fail(ex, st);
    }
    case PHASE_XFER:
    case PHASE_XFER_IN:
        if (!req->done) ex->tp->ops->test(ex->tp, req);
        if (!req->done) return 0;
        if (req->status != HCOMM_SUCCESS)
            return fail(ex, hcomm_exec_step_failed(ex, i, req->status));
        if (g->phase == PHASE_XFER) {
            drop_stage(ex, i);
            g->phase = PHASE_NONE;
            return 1;
        }
        void *h2d = hcomm_gpu_ctx_stream(ex->gpu, HCOMM_GPU_STREAM_H2D);
        st = hcomm_gpu_copy_async(addr(ex, s->dst), g->stage,
                                  s->count * ex->esize, h2d);
        if (st == HCOMM_SUCCESS)
            st = record(ex, i, HCOMM_GPU_STREAM_H2D, PHASE_STAGE_IN);
        return st == HCOMM_SUCCESS ? 0 : fail(ex, st);
    default:
        return 1;
    }
}

void hcomm_exec_gpu_release(hcomm_exec_t *ex, int abort) {
    if (ex->gstep && ex->state) {
        for (uint32_t i = 0; i < ex->plan->nsteps; i++) {
            hcomm_exec_gpu_step_t *g = &ex->gstep[i];
            int xfer = g->phase == PHASE_XFER || g->phase == PHASE_XFER_IN;
            if (abort && xfer && !ex->reqs[i].done)
                ex->tp->ops->cancel(ex->tp, &ex->reqs[i]);
            if (g->event) {
                /* kernels and copies end by themselves: wait, then reuse */
                while (hcomm_gpu_event_query(g->event) == 0) {
                }
                hcomm_gpu_event_put(ex->gpu, g->event);
                g->event = NULL;
            }
            /* A cancelled transfer may still use its staging buffer (UCX
             * cannot always stop one): that buffer is left to leak. */
            if (abort && xfer)
                g->stage = NULL;
            else
                drop_stage(ex, i);
        }
    }
    free(ex->gstep);
    ex->gstep = NULL;
    if (ex->buf[HCOMM_BUF_SCRATCH]) {
        hcomm_gpu_free(HCOMM_GPU_POOL_DEVICE, hcomm_gpu_ctx_device(ex->gpu),
                       ex->buf[HCOMM_BUF_SCRATCH],
                       ex->plan->scratch_count * ex->esize);
        ex->buf[HCOMM_BUF_SCRATCH] = NULL;
    }
}
