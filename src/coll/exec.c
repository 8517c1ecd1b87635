/* The plan executor: a dataflow loop over a window of steps. */
#include "coll/exec.h"
#include "core/log.h"
#include "core/pool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Steps considered at once beyond the first incomplete one: bounds the
 * messages in flight and the cost of one pass. */
#define EXEC_WINDOW 256

#define STEP_WAITING HCOMM_STEP_WAITING
#define STEP_IN_FLIGHT HCOMM_STEP_IN_FLIGHT
#define STEP_DONE HCOMM_STEP_DONE

static char *addr(const hcomm_exec_t *ex, hcomm_ref_t ref) {
    return ex->buf[ref.buf] + ref.offset * ex->esize;
}

hcomm_status_t hcomm_exec_start(hcomm_exec_t *ex, const hcomm_exec_args_t *a) {
    const hcomm_plan_t *plan = a->plan;
    memset(ex, 0, offsetof(hcomm_exec_t, state_inline));
    ex->plan = plan;
    ex->tp = a->tp;
    ex->pool = a->pool;
    ex->esize = hcomm_dtype_size(a->dtype);
    ex->buf[HCOMM_BUF_SEND] = (char *)(uintptr_t)a->sendbuf;
    ex->buf[HCOMM_BUF_RECV] = a->recvbuf;
    ex->divisor = a->divisor;
    ex->kind = (uint8_t)a->tag_kind;
    ex->seq = a->seq;
    ex->rng = a->rng;
    ex->status = HCOMM_ERR_IN_PROGRESS;
    ex->dtype = a->dtype;
    ex->op = a->op;
    if (plan->has_reduce && !a->gpu) {
        ex->reduce = hcomm_kernel_reduce(a->dtype, a->op);
        ex->scale = hcomm_kernel_scale(a->dtype);
        if (!ex->reduce || !ex->scale)
            return hcomm_error(HCOMM_ERR_INTERNAL, "no kernel for the type");
    }
    if (plan->nsteps <= sizeof(ex->state_inline)) {
        ex->state = ex->state_inline;
        ex->reqs = ex->reqs_inline;
        memset(ex->state, 0, plan->nsteps);
    } else {
        ex->state = calloc(plan->nsteps, 1);
        ex->reqs = malloc(plan->nsteps * sizeof(*ex->reqs));
        if (!ex->state || !ex->reqs) goto nomem;
    }
    if (a->gpu) {
        ex->gpu = a->gpu;
        ex->gpu_direct = a->gpu_direct;
        ex->on_device[HCOMM_BUF_SEND] = a->send_on_device;
        ex->on_device[HCOMM_BUF_RECV] = a->recv_on_device;
        ex->on_device[HCOMM_BUF_SCRATCH] = 1;
        hcomm_status_t st = hcomm_exec_gpu_start(ex);
        if (st != HCOMM_SUCCESS) {
            hcomm_exec_finish(ex);
            return st;
        }
    } else if (plan->scratch_count) {
        size_t bytes = plan->scratch_count * ex->esize;
        ex->buf[HCOMM_BUF_SCRATCH] =
            ex->pool ? hcomm_pool_get(ex->pool, bytes) : malloc(bytes);
        if (!ex->buf[HCOMM_BUF_SCRATCH]) goto nomem;
    }
    return HCOMM_SUCCESS;
nomem:
    hcomm_exec_finish(ex);
    return hcomm_error(HCOMM_ERR_NO_MEMORY, "no memory for a plan of %u steps",
                       plan->nsteps);
}

/* A message of another length than step i's receive: the ranks passed
 * different counts or types. */
static void report_length(const hcomm_exec_t *ex, uint32_t i) {
    const hcomm_step_t *s = &ex->plan->steps[i];
    size_t got = ex->reqs[i].arrived, want = s->count * ex->esize;
    char len[48];
    if (got == HCOMM_TP_LONGER)
        snprintf(len, sizeof(len), "more than %zu", want);
    else
        snprintf(len, sizeof(len), "%zu", got);
    hcomm_error(HCOMM_ERR_MISMATCH,
                "rank %d sent %s bytes where rank %d expected %zu (the ranks "
                "passed different counts or types)",
                s->peer, len, ex->tp->rank, want);
}

hcomm_status_t hcomm_exec_step_failed(const hcomm_exec_t *ex, uint32_t i,
                                      hcomm_status_t st) {
    const hcomm_step_t *s = &ex->plan->steps[i];
    if (st == HCOMM_ERR_MISMATCH) report_length(ex, i);
    if (st != HCOMM_ERR_TRANSPORT) return st;
    return hcomm_error(st, "%s rank %d (%zu bytes) failed in the transport",
                       s->kind == HCOMM_STEP_SEND ? "sending to"
                                                  : "receiving from",
                       s->peer, s->count * ex->esize);
}

static int step_ready(const hcomm_exec_t *ex, const hcomm_step_t *s) {
    if (s->epoch > ex->first_open) return 0;
    for (int d = 0; d < 2; d++)
        if (s->dep[d] >= 0 && ex->state[s->dep[d]] != STEP_DONE &&
            !(ex->gpu && hcomm_exec_gpu_chains(ex, s, s->dep[d])))
            return 0;
    return 1;
}

/* Starts step i: posts a message, or runs a local operation to completion. */
static hcomm_status_t step_start(hcomm_exec_t *ex, uint32_t i) {
    const hcomm_step_t *s = &ex->plan->steps[i];
    if (ex->gpu) return hcomm_exec_gpu_step_start(ex, i);
    size_t bytes = s->count * ex->esize;
    /* Point-to-point messages carry the user's tag where collectives carry
     * the plan's message number: transports keep 16 bits of it. */
    hcomm_tag_t tag = ex->kind == HCOMM_TAG_P2P
                          ? (hcomm_tag_t){ex->kind, 0, ex->seq}
                          : (hcomm_tag_t){ex->kind, ex->seq, s->tag};
    hcomm_status_t st;
    switch (s->kind) {
    case HCOMM_STEP_SEND:
        ex->state[i] = STEP_IN_FLIGHT;
        return ex->tp->ops->isend(ex->tp, s->peer, addr(ex, s->a), bytes, tag,
                                  &ex->reqs[i]);
    case HCOMM_STEP_RECV:
        ex->state[i] = STEP_IN_FLIGHT;
        return ex->tp->ops->irecv(ex->tp, s->peer, addr(ex, s->dst), bytes, tag,
                                  &ex->reqs[i]);
    case HCOMM_STEP_REDUCE:
        ex->reduce(addr(ex, s->dst), addr(ex, s->a), addr(ex, s->b), s->count);
        break;
    case HCOMM_STEP_COPY:
        memcpy(addr(ex, s->dst), addr(ex, s->a), bytes);
        break;
    case HCOMM_STEP_SCALE:
        ex->scale(addr(ex, s->dst), s->count, ex->divisor);
        break;
    default:
        st = hcomm_error(HCOMM_ERR_INTERNAL, "bad step kind %d", s->kind);
        return st;
    }
    ex->state[i] = STEP_DONE;
    return HCOMM_SUCCESS;
}

static uint32_t next_random(hcomm_exec_t *ex) {
    ex->rng ^= ex->rng << 13;
    ex->rng ^= ex->rng >> 17;
    ex->rng ^= ex->rng << 5;
    return ex->rng;
}

/* One pass over the window: reaps completions, starts ready steps. Returns
 * how many steps changed state, or -1 on error (ex->status says which). */
static int exec_pass(hcomm_exec_t *ex, int may_skip) {
    const hcomm_plan_t *plan = ex->plan;
    int changed = 0;
    uint32_t end = ex->first_open + EXEC_WINDOW;
    if (end > plan->nsteps) end = plan->nsteps;
    for (uint32_t i = ex->first_open; i < end; i++) {
        if (ex->state[i] != STEP_IN_FLIGHT) continue;
        if (ex->gpu) {
            int r = hcomm_exec_gpu_step_test(ex, i);
            if (r < 0) return -1;
            if (r == 0) continue;
            ex->state[i] = STEP_DONE;
            changed++;
            continue;
        }
        if (!ex->reqs[i].done) ex->tp->ops->test(ex->tp, &ex->reqs[i]);
        if (!ex->reqs[i].done) continue;
        if (ex->reqs[i].status != HCOMM_SUCCESS) {
            ex->status = hcomm_exec_step_failed(ex, i, ex->reqs[i].status);
            ex->state[i] = STEP_DONE;
            return -1;
        }
        ex->state[i] = STEP_DONE;
        changed++;
    }
    while (ex->first_open < plan->nsteps &&
           ex->state[ex->first_open] == STEP_DONE)
        ex->first_open++;
    end = ex->first_open + EXEC_WINDOW;
    if (end > plan->nsteps) end = plan->nsteps;
    uint32_t len = end - ex->first_open;
    /* The verifier scans in a random direction and skips some ready steps,
     * so that an order the dependencies allow but a plan did not expect
     * shows up in unit tests rather than at scale. */
    int backwards = ex->rng ? (int)(next_random(ex) & 1) : 0;
    for (uint32_t j = 0; j < len; j++) {
        uint32_t i = backwards ? end - 1 - j : ex->first_open + j;
        if (ex->state[i] != STEP_WAITING) continue;
        if (!step_ready(ex, &plan->steps[i])) continue;
        if (may_skip && (next_random(ex) & 1)) continue;
        hcomm_tp_req_t *req = &ex->reqs[i];
        req->done = 0;
        req->status = HCOMM_SUCCESS;
        req->mem = HCOMM_TP_MEM_HOST;
        hcomm_status_t st = step_start(ex, i);
        if (st != HCOMM_SUCCESS) {
            ex->status = st;
            return -1;
        }
        changed++;
    }
    return changed;
}

hcomm_status_t hcomm_exec_progress(hcomm_exec_t *ex) {
    if (ex->status != HCOMM_ERR_IN_PROGRESS) return ex->status;
    if (ex->tp) ex->tp->ops->progress(ex->tp);
    for (;;) {
        int changed = exec_pass(ex, ex->rng != 0);
        if (changed == 0 && ex->rng) changed = exec_pass(ex, 0);
        if (changed < 0) return ex->status;
        if (ex->first_open == ex->plan->nsteps) {
            ex->status = HCOMM_SUCCESS;
            return ex->status;
        }
        if (changed == 0) return HCOMM_ERR_IN_PROGRESS;
    }
}

void hcomm_exec_finish(hcomm_exec_t *ex) {
    if (ex->gpu) hcomm_exec_gpu_release(ex, 0);
    if (ex->buf[HCOMM_BUF_SCRATCH]) {
        if (ex->pool)
            hcomm_pool_put(ex->pool, ex->buf[HCOMM_BUF_SCRATCH]);
        else
            free(ex->buf[HCOMM_BUF_SCRATCH]);
        ex->buf[HCOMM_BUF_SCRATCH] = NULL;
    }
    if (ex->state && ex->state != ex->state_inline) {
        free(ex->state);
        free(ex->reqs);
    }
    ex->state = NULL;
    ex->reqs = NULL;
}

void hcomm_exec_abort(hcomm_exec_t *ex) {
    if (ex->gpu)
        hcomm_exec_gpu_release(ex, 1);
    else if (ex->state && ex->tp) {
        for (uint32_t i = ex->first_open; i < ex->plan->nsteps; i++)
            if (ex->state[i] == STEP_IN_FLIGHT && !ex->reqs[i].done)
                ex->tp->ops->cancel(ex->tp, &ex->reqs[i]);
    }
    hcomm_exec_finish(ex);
}

int hcomm_exec_describe_wait(const hcomm_exec_t *ex, char *out, size_t len) {
    size_t used = 0;
    int n = 0;
    out[0] = '\0';
    if (!ex->state) return 0;
    for (uint32_t i = ex->first_open; i < ex->plan->nsteps && n < 8; i++) {
        const hcomm_step_t *s = &ex->plan->steps[i];
        if (ex->state[i] != STEP_IN_FLIGHT || ex->reqs[i].done) continue;
        if (s->kind != HCOMM_STEP_SEND && s->kind != HCOMM_STEP_RECV)
            continue; /* a kernel on the GPU */
        int w = snprintf(
            out + used, len - used, "%s%s rank %d (%zu bytes)", n ? ", " : "",
            s->kind == HCOMM_STEP_SEND ? "send to" : "receive from", s->peer,
            s->count * ex->esize);
        if (w < 0 || (size_t)w >= len - used) break;
        used += (size_t)w;
        n++;
    }
    return n;
}
