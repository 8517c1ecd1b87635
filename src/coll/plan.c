/* Appending steps to a plan. */
#include "coll/plan.h"

#include <stdlib.h>
#include <string.h>

void hcomm_plan_init(hcomm_plan_t *plan) {
    memset(plan, 0, sizeof(*plan));
}

void hcomm_plan_release(hcomm_plan_t *plan) {
    free(plan->steps);
    memset(plan, 0, sizeof(*plan));
}

/* Empty steps are never added: the index -1 they return means "no
 * dependency", so builders need no special case for empty blocks. */
static int append(hcomm_plan_t *plan, const hcomm_step_t *step) {
    if (plan->oom || step->count == 0) return -1;
    if (plan->nsteps == plan->cap) {
        uint32_t cap = plan->cap ? plan->cap * 2 : 16;
        hcomm_step_t *steps = realloc(plan->steps, cap * sizeof(*steps));
        if (!steps) {
            plan->oom = 1;
            return -1;
        }
        plan->steps = steps;
        plan->cap = cap;
    }
    hcomm_step_t *s = &plan->steps[plan->nsteps];
    *s = *step;
    s->epoch = plan->epoch;
    return (int)plan->nsteps++;
}

static hcomm_step_t make(hcomm_step_kind_t kind, size_t count, int dep0,
                         int dep1) {
    hcomm_step_t s;
    memset(&s, 0, sizeof(s));
    s.kind = (uint8_t)kind;
    s.count = count;
    s.dep[0] = dep0;
    s.dep[1] = dep1;
    s.peer = -1;
    return s;
}

int hcomm_plan_send(hcomm_plan_t *plan, int peer, uint16_t tag, hcomm_ref_t src,
                    size_t count, int dep0, int dep1) {
    hcomm_step_t s = make(HCOMM_STEP_SEND, count, dep0, dep1);
    s.peer = peer;
    s.tag = tag;
    s.a = src;
    return append(plan, &s);
}

int hcomm_plan_recv(hcomm_plan_t *plan, int peer, uint16_t tag, hcomm_ref_t dst,
                    size_t count, int dep0, int dep1) {
    hcomm_step_t s = make(HCOMM_STEP_RECV, count, dep0, dep1);
    s.peer = peer;
    s.tag = tag;
    s.dst = dst;
    return append(plan, &s);
}

int hcomm_plan_reduce(hcomm_plan_t *plan, hcomm_ref_t dst, hcomm_ref_t a,
                      hcomm_ref_t b, size_t count, int dep0, int dep1) {
    hcomm_step_t s = make(HCOMM_STEP_REDUCE, count, dep0, dep1);
    s.dst = dst;
    s.a = a;
    s.b = b;
    plan->has_reduce = 1;
    return append(plan, &s);
}

int hcomm_plan_copy(hcomm_plan_t *plan, hcomm_ref_t dst, hcomm_ref_t src,
                    size_t count, int dep0, int dep1) {
    hcomm_step_t s = make(HCOMM_STEP_COPY, count, dep0, dep1);
    s.dst = dst;
    s.a = src;
    return append(plan, &s);
}

int hcomm_plan_scale(hcomm_plan_t *plan, hcomm_ref_t dst, size_t count,
                     int dep0, int dep1) {
    hcomm_step_t s = make(HCOMM_STEP_SCALE, count, dep0, dep1);
    s.dst = dst;
    s.a = dst;
    plan->has_reduce = 1;
    return append(plan, &s);
}

void hcomm_plan_fence(hcomm_plan_t *plan) {
    plan->epoch = plan->nsteps;
}
