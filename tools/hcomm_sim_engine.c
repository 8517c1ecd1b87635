/* The discrete-event engine of hcomm_sim (the model: hcomm_sim.h). Events
 * are processed in time order: a rank waking to start its ready steps, a
 * message starting to move (when it reserves its resources, so resources
 * serve messages in the order they start), arriving, or leaving its
 * sender. */
#define _POSIX_C_SOURCE 200809L

#include "hcomm_sim_int.h"
#include "kernels/reduce.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *const hcomm_sim_level_names[SIM_LEVELS] = {"node", "nic", "switch"};

/* Critical-path links: to another step's end; through a message (VIA, to
 * the other side's post); or to the step before on the CPU (POSTED: to its
 * post, which for a message is not its end). */
#define VIA (INT64_C(1) << 62)
#define POSTED (INT64_C(1) << 61)
#define GID(rep, step) (((int64_t)(rep) << 32) | (int64_t)(step))
#define GREP(g) ((int)(((g) & ~(VIA | POSTED)) >> 32))
#define GSTEP(g) ((uint32_t)((g)&0xffffffff))

typedef struct {
    int rank;
    uint32_t n;
    hcomm_sim_step_t *st;
    uint32_t *succ_off, *succ;
    uint8_t *left, *done;
    double *start, *fin; /* start: ready time until the step starts */
    int64_t *pp, *pd;    /* what the start and the end waited for */
    uint32_t first_open;
    uint32_t *heap, hn; /* ready steps, lowest index first */
    double cpu_free;
    int64_t cpu_last;
    double wake_at;
    int64_t wake_pred;
    hcomm_plan_t plan; /* data mode */
    char *buf[HCOMM_BUF_COUNT];
} rep_t;

typedef struct {
    int32_t s_rep, r_rep; /* -1 while that side is not posted */
    uint32_t s_step, r_step;
    int32_t src, dst; /* real ranks (canonical) */
    double st, rt, arrive;
    double in_end, last; /* by copies: copied in; the last fragment in */
    uint64_t bytes;
    /* copies: moved by the CPUs' copies (copied: out, at the receiver) */
    uint8_t level, arrived, eager, copies, copied;
    uint8_t from_input; /* the sender's input buffer, not written by it */
    int32_t next;       /* in its pending queue, or the free list */
    char *data;         /* data mode */
} msg_t;

/* Pending queues by (sender, receiver, tag), chained hash buckets. */
typedef struct {
    int32_t src, dst, head, tail, next;
    uint16_t tag;
} qkey_t;

enum { EV_WAKE, EV_XSTART, EV_ARRIVE, EV_SDONE, EV_RDONE };
typedef struct {
    double t;
    uint64_t seq;
    int32_t id;
    uint8_t type;
} event_t;

typedef struct {
    const hcomm_sim_model_t *m;
    const hcomm_sim_shape_t *sh;
    const hcomm_sim_call_t *c;
    hcomm_sim_sym_t sym;
    int nreps;
    double orbit; /* real ranks per representative */
    rep_t *reps;
    msg_t *msgs;
    int32_t nmsgs, capmsgs, freemsg;
    qkey_t *keys;
    int32_t nkeys, capkeys, freekey, *bucket;
    uint32_t nbuckets;
    event_t *ev;
    size_t nev, capev;
    uint64_t seq;
    /* Resources, per representative node: busy-until times. */
    double *chan, *nic_out, *nic_in, *sw_out, *sw_in;
    int nchan, rails;
    double speed;   /* the cache's speedup for this call, or 1 */
    double cross;   /* its speed between ranks not sharing a cache, or 1 */
    uint32_t calls; /* back to back (hcomm_sim_call_t) */
    hcomm_reduce_fn_t reduce;
    hcomm_scale_fn_t scale;
    hcomm_sim_result_t *res;
    int oom;
} sim_t;

/* --- small containers ----------------------------------------------------- */

static void *grow(void *p, size_t *cap, size_t need, size_t elem, int *oom) {
    if (need <= *cap) return p;
    size_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    void *q = realloc(p, c * elem);
    if (!q) {
        *oom = 1;
        return p;
    }
    *cap = c;
    return q;
}

static int ev_less(const event_t *a, const event_t *b) {
    return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

static void ev_push(sim_t *s, double t, uint8_t type, int32_t id) {
    s->ev = grow(s->ev, &s->capev, s->nev + 1, sizeof(event_t), &s->oom);
    if (s->oom) return;
    size_t i = s->nev++;
    event_t e = {t, s->seq++, id, type};
    while (i > 0 && ev_less(&e, &s->ev[(i - 1) / 2])) {
        s->ev[i] = s->ev[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    s->ev[i] = e;
}

static event_t ev_pop(sim_t *s) {
    event_t top = s->ev[0], last = s->ev[--s->nev];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= s->nev) break;
        if (c + 1 < s->nev && ev_less(&s->ev[c + 1], &s->ev[c])) c++;
        if (!ev_less(&s->ev[c], &last)) break;
        s->ev[i] = s->ev[c];
        i = c;
    }
    if (s->nev) s->ev[i] = last;
    return top;
}

static void ready_push(rep_t *r, uint32_t step) {
    uint32_t i = r->hn++;
    while (i > 0 && r->heap[(i - 1) / 2] > step) {
        r->heap[i] = r->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    r->heap[i] = step;
}

static uint32_t ready_pop(rep_t *r) {
    uint32_t top = r->heap[0], last = r->heap[--r->hn], i = 0;
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= r->hn) break;
        if (c + 1 < r->hn && r->heap[c + 1] < r->heap[c]) c++;
        if (r->heap[c] >= last) break;
        r->heap[i] = r->heap[c];
        i = c;
    }
    if (r->hn) r->heap[i] = last;
    return top;
}

/* --- links -----------------------------------------------------------------
 */

static int level_of(const sim_t *s, int a, int b) {
    int na = s->sh->node_of[a], nb = s->sh->node_of[b];
    int nps = s->m->nodes_per_switch;
    if (na == nb) return SIM_NODE;
    if (nps > 0 && na / nps != nb / nps) return SIM_SWITCH;
    return SIM_NIC;
}

static int rail_of(const sim_t *s, int rank) {
    return s->sh->local[rank] % s->rails;
}

/* A representative node's resources stand for those of its images. */
static int cnode(const sim_t *s, int rank) {
    return s->sh->node_of[rank] % s->sym.G;
}

static double latency(const sim_t *s, int level) {
    double l = s->m->lat[level];
    if (level == SIM_SWITCH) l += s->m->lat[SIM_NIC];
    return l;
}

/* The cache's speedup for a message, where the call fits in the cache
 * (written lines: the share it holds, hcomm_sim.h); where cache_ranks is
 * set, the model tells cores apart. A rendezvous
 * inside a node is read in place by the receiver (CMA): lines of the
 * sender's input, unchanged since its last call (hcomm_perf passes the same
 * buffers every call), are clean and read at the cache's speed from any
 * core; lines the sender wrote in this call (a block it reduced or
 * received) are modified in its own core's cache and read at cross_speedup
 * times the uncached rate. Eager messages get the cache's speed only
 * between ranks that share the cache; other pairs' copies go at the
 * uncached rate, their eager moves at cross_speedup times it. */
static double msg_speed(const sim_t *s, const msg_t *g) {
    int k = s->m->cache_ranks;
    if (g->level != SIM_NODE || k <= 0) return s->speed;
    if (!g->eager) return g->from_input ? s->speed : s->cross;
    if (s->sh->local[g->src] / k == s->sh->local[g->dst] / k) return s->speed;
    return g->copies ? 1 : s->cross;
}

/* Reserves the message's resources from t; returns when it has moved its
 * bytes (the arrival adds the latency). */
static double reserve(sim_t *s, const msg_t *g, double t) {
    double b = (double)g->bytes, start = t, dur;
    double ebw = g->eager ? s->m->eager_bw[g->level] : 0;
    int ns = cnode(s, g->src), nd = cnode(s, g->dst);
    /* Shared memory: the sender's copy-in was the move. */
    if (g->copies && g->level == SIM_NODE) return t;
    if (g->level == SIM_NODE) {
        double *ch = &s->chan[(size_t)ns * (size_t)s->nchan], *best = ch;
        for (int i = 1; i < s->nchan; i++)
            if (ch[i] < *best) best = &ch[i];
        if (*best > start) start = *best;
        /* With UCX's protocols in the model (copy_bytes), a rendezvous
         * inside a node is one copy that the receiver's CPU makes (CMA
         * get): that CPU reduces nothing meanwhile. Without them, the
         * selection table's model, a copy channel moves it. */
        rep_t *r = g->eager || !s->m->copy_bytes ? NULL : &s->reps[g->r_rep];
        if (r && r->cpu_free > start) start = r->cpu_free;
        *best = start +
                b / ((ebw > 0 ? ebw : s->m->bw[SIM_NODE]) * msg_speed(s, g));
        if (r) {
            r->cpu_free = *best;
            r->cpu_last = GID(g->r_rep, g->r_step);
        }
        return *best;
    }
    double *out =
        &s->nic_out[(size_t)ns * (size_t)s->rails + rail_of(s, g->src)];
    double *in = &s->nic_in[(size_t)nd * (size_t)s->rails + rail_of(s, g->dst)];
    double bw = ebw > 0 ? ebw : s->m->bw[SIM_NIC];
    start = fmax(start, fmax(*out, *in));
    if (g->level == SIM_SWITCH) {
        start = fmax(start, fmax(s->sw_out[ns], s->sw_in[nd]));
        bw = fmin(bw, s->m->bw[SIM_SWITCH]);
    }
    dur = b / bw;
    *out = *in = start + dur;
    if (g->level == SIM_SWITCH) s->sw_out[ns] = s->sw_in[nd] = start + dur;
    return start + dur;
}

/* --- steps -----------------------------------------------------------------
 */

static void wake(sim_t *s, int ri, double t, int64_t pred) {
    rep_t *r = &s->reps[ri];
    if (r->wake_at <= t) return;
    r->wake_at = t;
    r->wake_pred = pred;
    ev_push(s, t, EV_WAKE, ri);
}

static void complete(sim_t *s, int ri, uint32_t i, double t) {
    rep_t *r = &s->reps[ri];
    r->done[i] = 1;
    r->fin[i] = t;
    for (uint32_t k = r->succ_off[i]; k < r->succ_off[i + 1]; k++) {
        uint32_t j = r->succ[k];
        if (t >= r->start[j]) {
            r->start[j] = t;
            r->pp[j] = GID(ri, i);
        }
        if (--r->left[j] == 0) ready_push(r, j);
    }
    while (r->first_open < r->n && r->done[r->first_open])
        r->first_open++;
    wake(s, ri, t, GID(ri, i));
}

static char *ref_addr(const rep_t *r, hcomm_ref_t ref, size_t esize) {
    return r->buf[ref.buf] + ref.offset * esize;
}

/* A local step in data mode. */
static void run_local(sim_t *s, rep_t *r, uint32_t i) {
    const hcomm_step_t *p = &r->plan.steps[i];
    size_t es = s->c->esize;
    if (p->kind == HCOMM_STEP_REDUCE)
        s->reduce(ref_addr(r, p->dst, es), ref_addr(r, p->a, es),
                  ref_addr(r, p->b, es), p->count);
    else if (p->kind == HCOMM_STEP_COPY)
        memcpy(ref_addr(r, p->dst, es), ref_addr(r, p->a, es), p->count * es);
    else if (p->kind == HCOMM_STEP_SCALE)
        s->scale(ref_addr(r, p->dst, es), p->count, s->sh->size);
}

static int32_t msg_new(sim_t *s) {
    int32_t id;
    if (s->freemsg >= 0) {
        id = s->freemsg;
        s->freemsg = s->msgs[id].next;
    } else {
        size_t cap = (size_t)s->capmsgs;
        s->msgs =
            grow(s->msgs, &cap, (size_t)s->nmsgs + 1, sizeof(msg_t), &s->oom);
        s->capmsgs = (int32_t)cap;
        if (s->oom) return -1;
        id = s->nmsgs++;
    }
    memset(&s->msgs[id], 0, sizeof(msg_t));
    s->msgs[id].s_rep = s->msgs[id].r_rep = -1;
    s->msgs[id].next = -1;
    return id;
}

static void msg_free(sim_t *s, int32_t id) {
    free(s->msgs[id].data);
    s->msgs[id].data = NULL;
    s->msgs[id].next = s->freemsg;
    s->freemsg = id;
}

static uint32_t key_hash(const sim_t *s, int src, int dst, uint16_t tag) {
    uint64_t h = (uint64_t)(uint32_t)src * 0x9e3779b97f4a7c15u ^
                 (uint64_t)(uint32_t)dst * 0xc2b2ae3d27d4eb4fu ^
                 (uint64_t)tag * 0x165667b19e3779f9u;
    return (uint32_t)(h >> 32) & (s->nbuckets - 1);
}

/* The message of (src, dst, tag) that lacks the side posted now, or a new
 * one queued for the other side: sends and receives match in order. */
static int32_t match(sim_t *s, int src, int dst, uint16_t tag, int is_send) {
    uint32_t h = key_hash(s, src, dst, tag);
    int32_t *link = &s->bucket[h];
    while (*link >= 0) {
        qkey_t *k = &s->keys[*link];
        if (k->src == src && k->dst == dst && k->tag == tag) break;
        link = &k->next;
    }
    if (*link >= 0) {
        qkey_t *k = &s->keys[*link];
        msg_t *head = &s->msgs[k->head];
        int lacks = is_send ? head->s_rep < 0 : head->r_rep < 0;
        if (lacks) { /* the head waits for this side: take it */
            int32_t id = k->head;
            k->head = head->next;
            if (k->head < 0) { /* queue empty: drop the key */
                int32_t dead = *link;
                *link = k->next;
                s->keys[dead].next = s->freekey;
                s->freekey = dead;
            }
            s->msgs[id].next = -1;
            return id;
        }
    } else {
        int32_t kid;
        if (s->freekey >= 0) {
            kid = s->freekey;
            s->freekey = s->keys[kid].next;
        } else {
            size_t cap = (size_t)s->capkeys;
            s->keys = grow(s->keys, &cap, (size_t)s->nkeys + 1, sizeof(qkey_t),
                           &s->oom);
            s->capkeys = (int32_t)cap;
            if (s->oom) return -1;
            kid = s->nkeys++;
        }
        s->keys[kid] = (qkey_t){src, dst, -1, -1, s->bucket[h], tag};
        s->bucket[h] = kid;
        link = &s->bucket[h];
    }
    int32_t id = msg_new(s);
    if (id < 0) return -1;
    qkey_t *k = &s->keys[*link];
    if (k->head < 0)
        k->head = id;
    else
        s->msgs[k->tail].next = id;
    k->tail = id;
    s->msgs[id].src = src;
    s->msgs[id].dst = dst;
    return id;
}

/* Both sides known: a rendezvous starts after one latency and the level's
 * rendezvous cost for the handshake. */
static void matched(sim_t *s, int32_t id) {
    msg_t *g = &s->msgs[id];
    if (!g->eager)
        ev_push(
            s, fmax(g->st, g->rt) + latency(s, g->level) + s->m->rndv[g->level],
            EV_XSTART, id);
    else if (g->arrived)
        ev_push(s, fmax(g->arrive, g->rt), EV_RDONE, id);
}

/* UCX's copy protocols: the sender's CPU copies a message into bounce
 * buffers of eager_bytes (its fragments), the receiver's copies each out
 * once it has arrived. Seconds of one side's copy of bytes: */
static double copy_time(const sim_t *s, const msg_t *g, uint64_t bytes) {
    double rate = s->m->copy_rate[g->level];
    return (double)bytes /
           ((rate > 0 ? rate : s->m->copy_bw) * msg_speed(s, g));
}

static double first_fragment(const sim_t *s, const msg_t *g) {
    uint64_t f = s->m->eager_bytes;
    return copy_time(s, g, f && f < g->bytes ? f : g->bytes);
}

/* The send side of a message: whether the CPUs copy it, and whether it
 * leaves without its receive (copies do: UCX's eager protocols). */
static void classify(sim_t *s, msg_t *g) {
    const hcomm_sim_model_t *m = s->m;
    size_t z = m->zcopy_bytes[g->level];
    int zcopy = z && g->bytes <= z;
    g->copies = !zcopy && m->copy_bytes > 0 && g->bytes <= m->copy_bytes;
    g->eager = zcopy || g->copies || g->bytes <= m->eager_bytes;
}

/* The receiver's fixed cost of a message of several fragments (UCX's
 * multi-fragment protocol); one fragment goes by plain eager copies. */
static double multi_start(const sim_t *s, const msg_t *g) {
    return g->bytes > s->m->eager_bytes ? s->m->copy_start[g->level] : 0;
}

/* The receiver's CPU copies the message out once it is free, after the
 * protocol's start, and does nothing else until the last fragment is out.
 * The receive ends then. */
static void copy_out(sim_t *s, msg_t *g, int32_t id, double t) {
    rep_t *r = &s->reps[g->r_rep];
    double start = fmax(t, r->cpu_free) + multi_start(s, g);
    r->cpu_free =
        fmax(start + copy_time(s, g, g->bytes), g->last + first_fragment(s, g));
    r->cpu_last = GID(g->r_rep, g->r_step);
    g->copied = 1;
    ev_push(s, r->cpu_free, EV_RDONE, id);
}

/* Posts step i at t; returns the CPU time it keeps after the post (a send
 * by copies: the copy-in). */
static double post(sim_t *s, int ri, uint32_t i, double t) {
    rep_t *r = &s->reps[ri];
    const hcomm_sim_step_t *p = &r->st[i];
    int is_send = p->kind == HCOMM_STEP_SEND;
    int src = is_send ? r->rank : p->peer, dst = is_send ? p->peer : r->rank;
    /* A receive from outside the simulated ranks is the image of one of
     * theirs: rename both ends into the representatives' frame. */
    int k = hcomm_sim_sym_elem(&s->sym, s->sh->node_of[src]);
    src = hcomm_sim_sym_rank(&s->sym, k, src, 0);
    dst = hcomm_sim_sym_rank(&s->sym, k, dst, 0);
    int32_t id = match(s, src, dst, p->tag, is_send);
    if (id < 0) return 0;
    msg_t *g = &s->msgs[id];
    int both = is_send ? g->r_rep >= 0 : g->s_rep >= 0;
    double busy = 0, first = 0;
    if (is_send) {
        g->s_rep = ri;
        g->s_step = i;
        g->st = t;
        g->bytes = p->bytes;
        g->from_input = p->from_input;
        g->level = (uint8_t)level_of(s, src, dst);
        classify(s, g);
        if (g->copies) { /* it moves from its first fragment on */
            busy = copy_time(s, g, g->bytes);
            first = first_fragment(s, g);
            g->in_end = t + busy;
        }
        if (g->eager) ev_push(s, t + first, EV_XSTART, id);
    } else {
        g->r_rep = ri;
        g->r_step = i;
        g->rt = t;
    }
    if (both) matched(s, id);
    return busy;
}

/* The executor's pass: ready steps in index order inside the window and
 * the current epoch; local ones run to completion on this CPU. */
static void run_rank(sim_t *s, int ri, double t) {
    rep_t *r = &s->reps[ri];
    double now = fmax(t, r->cpu_free);
    int64_t now_pred = r->cpu_free >= t ? r->cpu_last : r->wake_pred;
    r->wake_at = INFINITY;
    while (r->hn && r->heap[0] < r->first_open + SIM_WINDOW &&
           r->st[r->heap[0]].epoch <= r->first_open) {
        uint32_t i = ready_pop(r);
        const hcomm_sim_step_t *p = &r->st[i];
        if (r->start[i] < now) r->pp[i] = now_pred;
        r->start[i] = now;
        double b = (double)p->bytes;
        switch (p->kind) {
        case HCOMM_STEP_SEND:
        case HCOMM_STEP_RECV:
            now +=
                s->m->overhead + s->m->msg_cpu[level_of(s, r->rank, p->peer)];
            now += post(s, ri, i, now);
            break;
        default:
            now += b / ((p->kind == HCOMM_STEP_COPY ? s->m->copy_bw
                                                    : s->m->reduce_bw) *
                        s->speed);
            if (r->buf[HCOMM_BUF_RECV] || r->buf[HCOMM_BUF_SEND])
                run_local(s, r, i);
            r->wake_at = -INFINITY; /* no wake: this loop goes on */
            complete(s, ri, i, now);
            r->wake_at = INFINITY;
        }
        r->cpu_last = GID(ri, i) | POSTED;
        now_pred = r->cpu_last;
    }
    r->cpu_free = now;
}

static void deliver_data(sim_t *s, msg_t *g) {
    if (!g->data) return;
    rep_t *r = &s->reps[g->r_rep];
    const hcomm_step_t *p = &r->plan.steps[g->r_step];
    memcpy(ref_addr(r, p->dst, s->c->esize), g->data, g->bytes);
}

static void on_event(sim_t *s, event_t e) {
    msg_t *g = e.type == EV_WAKE ? NULL : &s->msgs[e.id];
    switch (e.type) {
    case EV_WAKE:
        if (s->reps[e.id].wake_at == e.t) run_rank(s, e.id, e.t);
        return;
    case EV_XSTART: {
        if (s->reps[g->s_rep].buf[HCOMM_BUF_RECV] ||
            s->reps[g->s_rep].buf[HCOMM_BUF_SEND]) {
            rep_t *r = &s->reps[g->s_rep];
            const hcomm_step_t *p = &r->plan.steps[g->s_step];
            g->data = malloc(g->bytes);
            if (!g->data) {
                s->oom = 1;
                return;
            }
            memcpy(g->data, ref_addr(r, p->a, s->c->esize), g->bytes);
        }
        double moved = reserve(s, g, e.t);
        s->res->bytes[g->level] += (double)g->bytes * s->orbit;
        s->res->msgs[g->level] += s->orbit;
        double lat = latency(s, g->level);
        if (g->copies) { /* the first fragment can be copied out */
            g->last = fmax(moved, g->in_end) + lat;
            ev_push(s, e.t + lat, EV_ARRIVE, e.id);
            ev_push(s, fmax(moved, g->in_end), EV_SDONE, e.id);
            return;
        }
        ev_push(s, moved + lat, EV_ARRIVE, e.id);
        if (g->eager) ev_push(s, moved, EV_SDONE, e.id);
        return;
    }
    case EV_ARRIVE:
        g->arrived = 1;
        g->arrive = e.t;
        if (!g->eager) { /* both sides end with the transfer */
            if (g->st >= g->rt)
                s->reps[g->r_rep].pd[g->r_step] =
                    GID(g->s_rep, g->s_step) | VIA;
            else
                s->reps[g->s_rep].pd[g->s_step] =
                    GID(g->r_rep, g->r_step) | VIA;
            complete(s, g->s_rep, g->s_step, e.t);
        } else if (g->r_rep < 0) {
            return; /* the receive is posted later */
        } else if (g->rt > e.t) {
            ev_push(s, g->rt, EV_RDONE, e.id);
            return;
        } else {
            s->reps[g->r_rep].pd[g->r_step] = GID(g->s_rep, g->s_step) | VIA;
        }
        /* fall through */
    case EV_RDONE:
        if (g->copies && !g->copied) {
            copy_out(s, g, e.id, e.t);
            return;
        }
        deliver_data(s, g);
        complete(s, g->r_rep, g->r_step, e.t);
        if (!g->eager || s->reps[g->s_rep].done[g->s_step])
            msg_free(s, e.id);
        else
            g->r_rep = -2; /* freed when the send is done */
        return;
    case EV_SDONE:
        complete(s, g->s_rep, g->s_step, e.t);
        if (g->r_rep == -2) msg_free(s, e.id);
        return;
    }
}

/* --- setup -----------------------------------------------------------------
 */

/* Builds a representative's plan and its compact form, successors and
 * state. Keeps the builder's plan only in data mode. */
static hcomm_status_t rep_setup(sim_t *s, int ri, uint64_t *budget, char *err,
                                size_t errlen) {
    rep_t *r = &s->reps[ri];
    hcomm_plan_t plan;
    hcomm_status_t st = hcomm_sim_build(s->m, s->sh, s->c, r->rank, &plan);
    if (st != HCOMM_SUCCESS) {
        snprintf(err, errlen, "%s declines rank %d of %d", s->c->algo->name,
                 r->rank, s->sh->size);
        return st;
    }
    uint32_t n1 = plan.nsteps; /* a call's */
    if ((uint64_t)n1 * s->calls > *budget) {
        hcomm_plan_release(&plan);
        snprintf(err, errlen,
                 "over the step budget (--max-steps) without a symmetry");
        return HCOMM_ERR_UNSUPPORTED;
    }
    *budget -= (uint64_t)n1 * s->calls;
    uint32_t n = r->n = n1 * s->calls;
    r->st = malloc((size_t)n * sizeof(*r->st) + 1);
    r->succ_off = calloc((size_t)n + 2, sizeof(uint32_t));
    r->left = calloc((size_t)n + 1, 1);
    r->done = calloc((size_t)n + 1, 1);
    r->start = calloc((size_t)n + 1, sizeof(double));
    r->fin = calloc((size_t)n + 1, sizeof(double));
    r->pp = malloc(((size_t)n + 1) * sizeof(int64_t));
    r->pd = malloc(((size_t)n + 1) * sizeof(int64_t));
    r->heap = malloc(((size_t)n + 1) * sizeof(uint32_t));
    if (!r->st || !r->succ_off || !r->left || !r->done || !r->start ||
        !r->fin || !r->pp || !r->pd || !r->heap)
        goto nomem;
    size_t nsucc = 0;
    /* Calls back to back: the plan again and again, each copy's steps
     * in an epoch after every step of the one before. */
    for (uint32_t i = 0; i < n; i++) {
        const hcomm_step_t *p = &plan.steps[i % n1];
        uint32_t base = i - i % n1; /* the call's first step */
        r->st[i] = (hcomm_sim_step_t){
            (uint64_t)p->count * s->c->esize,
            p->peer,
            {p->dep[0] < 0 ? -1 : p->dep[0] + (int32_t)base,
             p->dep[1] < 0 ? -1 : p->dep[1] + (int32_t)base},
            p->epoch + base,
            p->tag,
            p->kind,
            p->kind == HCOMM_STEP_SEND && p->a.buf == HCOMM_BUF_SEND &&
                !s->c->inplace};
        r->pp[i] = r->pd[i] = -1;
        for (int d = 0; d < 2; d++) {
            /* Two equal dependencies count once. */
            int32_t dep = r->st[i].dep[d];
            if (dep < 0 || (d == 1 && dep == r->st[i].dep[0])) continue;
            r->succ_off[dep + 1]++;
            r->left[i]++;
            nsucc++;
        }
    }
    for (uint32_t i = 0; i < n; i++)
        r->succ_off[i + 1] += r->succ_off[i];
    r->succ = malloc((nsucc + 1) * sizeof(uint32_t));
    if (!r->succ) goto nomem;
    uint32_t *fill = r->heap; /* scratch until the run */
    memcpy(fill, r->succ_off, (size_t)n * sizeof(uint32_t));
    for (uint32_t i = 0; i < n; i++)
        for (int d = 0; d < 2; d++) {
            int32_t dep = r->st[i].dep[d];
            if (dep < 0 || (d == 1 && dep == r->st[i].dep[0])) continue;
            r->succ[fill[dep]++] = i;
        }
    r->hn = 0;
    for (uint32_t i = 0; i < n; i++)
        if (!r->left[i]) ready_push(r, i);
    r->wake_at = INFINITY;
    r->cpu_last = -1;
    if (s->c->sendbufs) {
        r->plan = plan;
        r->buf[HCOMM_BUF_SEND] = s->c->sendbufs[r->rank];
        r->buf[HCOMM_BUF_RECV] = s->c->recvbufs[r->rank];
        r->buf[HCOMM_BUF_SCRATCH] =
            malloc(plan.scratch_count * s->c->esize + 1);
        if (!r->buf[HCOMM_BUF_SCRATCH]) goto nomem;
    } else {
        hcomm_plan_release(&plan);
    }
    return HCOMM_SUCCESS;
nomem:
    hcomm_plan_release(&plan);
    snprintf(err, errlen, "no memory for rank %d's %u steps", r->rank, n);
    return HCOMM_ERR_NO_MEMORY;
}

static void rep_free(rep_t *r) {
    free(r->st);
    free(r->succ_off);
    free(r->succ);
    free(r->left);
    free(r->done);
    free(r->start);
    free(r->fin);
    free(r->pp);
    free(r->pd);
    free(r->heap);
    hcomm_plan_release(&r->plan);
    free(r->buf[HCOMM_BUF_SCRATCH]);
}

/* --- results ----------------------------------------------------------------
 */

static int step_level(const sim_t *s, const rep_t *r, uint32_t i) {
    return level_of(s, r->rank, r->st[i].peer);
}

/* Back from the step done last: each step's end through what it waited for
 * last (a message's other side, or its own start), each start through the
 * step that released it (a dependency, the CPU, the window). */
static void critical_path(sim_t *s, hcomm_sim_result_t *o) {
    int ri = -1;
    uint32_t i = 0;
    double last = -1;
    for (int k = 0; k < s->nreps; k++)
        for (uint32_t j = 0; j < s->reps[k].n; j++)
            if (s->reps[k].fin[j] > last) {
                last = s->reps[k].fin[j];
                ri = k;
                i = j;
            }
    int at_post = 0;
    while (ri >= 0) {
        rep_t *r = &s->reps[ri];
        const hcomm_sim_step_t *p = &r->st[i];
        int msg = p->kind == HCOMM_STEP_SEND || p->kind == HCOMM_STEP_RECV;
        double post = msg ? r->start[i] + s->m->overhead : r->fin[i];
        o->cp_steps++;
        if (!at_post && r->pd[i] >= 0 && (r->pd[i] & VIA)) {
            /* Ended by the other side: the message from its post. */
            int rr = GREP(r->pd[i]);
            uint32_t rs = GSTEP(r->pd[i]);
            int lv = step_level(s, r, i);
            o->cp_msg[lv] +=
                r->fin[i] - (s->reps[rr].start[rs] + s->m->overhead);
            o->cp_msgs[lv]++;
            ri = rr;
            i = rs;
            at_post = 1;
            continue;
        }
        if (!at_post && msg) {
            int lv = step_level(s, r, i);
            o->cp_msg[lv] += r->fin[i] - post;
            o->cp_msgs[lv]++;
        }
        o->cp_cpu += post - r->start[i];
        int64_t pr = r->pp[i];
        if (pr < 0) break;
        rep_t *q = &s->reps[GREP(pr)];
        uint32_t qi = GSTEP(pr);
        at_post = (pr & POSTED) != 0;
        double qt = at_post && (q->st[qi].kind == HCOMM_STEP_SEND ||
                                q->st[qi].kind == HCOMM_STEP_RECV)
                        ? q->start[qi] + s->m->overhead
                        : q->fin[qi];
        if (r->start[i] > qt) o->cp_wait += r->start[i] - qt;
        ri = GREP(pr);
        i = qi;
    }
}

/* CPU time, so that how much else the machine runs does not decide. */
static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static hcomm_status_t simulate(sim_t *s, char *err, size_t errlen) {
    for (int k = 0; k < s->nreps; k++)
        wake(s, k, 0, -1);
    while (s->nev && !s->oom)
        on_event(s, ev_pop(s));
    if (s->oom) {
        snprintf(err, errlen, "no memory for the simulation's state");
        return HCOMM_ERR_NO_MEMORY;
    }
    for (int k = 0; k < s->nreps; k++) {
        rep_t *r = &s->reps[k];
        if (r->first_open < r->n) {
            const hcomm_sim_step_t *p = &r->st[r->first_open];
            snprintf(err, errlen,
                     "deadlock: rank %d stops at step %u (%s peer %d tag %u)",
                     r->rank, r->first_open,
                     p->kind == HCOMM_STEP_SEND   ? "send to"
                     : p->kind == HCOMM_STEP_RECV ? "receive from"
                                                  : "local",
                     p->peer, (unsigned)p->tag);
            return HCOMM_ERR_INTERNAL;
        }
    }
    return HCOMM_SUCCESS;
}

hcomm_status_t hcomm_sim_run(const hcomm_sim_model_t *m,
                             const hcomm_sim_shape_t *sh,
                             const hcomm_sim_call_t *c, hcomm_sim_result_t *out,
                             char *err, size_t errlen) {
    sim_t s;
    err[0] = '\0';
    if (hcomm_sim_is_shm(c->algo))
        return hcomm_sim_shm_run(m, sh, c, out, err, errlen);
    memset(&s, 0, sizeof(s));
    memset(out, 0, sizeof(*out));
    s.m = m;
    s.sh = sh;
    s.c = c;
    s.res = out;
    s.freemsg = s.freekey = -1;
    hcomm_status_t st = hcomm_sim_find_symmetry(m, sh, c, &s.sym);
    if (st != HCOMM_SUCCESS) {
        snprintf(err, errlen, "%s declines the shape", c->algo->name);
        return st;
    }
    static const char *names[] = {"none", "node-shift", "node-xor"};
    out->symmetry = names[s.sym.kind];
    s.nreps = s.sym.kind == SYM_NONE ? sh->size : s.sym.G * s.sym.L;
    s.orbit = (double)sh->size / s.nreps;
    int rnodes = s.sym.kind == SYM_NONE ? sh->nnodes : s.sym.G;
    int most = 0;
    for (int j = 0; j < sh->nnodes; j++)
        if (sh->node_size[j] > most) most = sh->node_size[j];
    s.rails = m->rails > 0 ? m->rails : most;
    size_t set =
        c->esize *
        (hcomm_coll_send_count(c->algo->coll, sh->size, 0, c->root, c->count) +
         hcomm_coll_recv_count(c->algo->coll, sh->size, 0, c->root, c->count));
    int cached = m->cache_bytes && set <= m->cache_bytes;
    s.speed = cached && m->cached_speedup > 0 ? m->cached_speedup : 1;
    /* Lines written in the call are modified in their writer's cache only
     * as far as the cache holds the call's data: past it, that share of
     * a written block is read at cross_speedup, the rest at the uncached
     * rate. */
    s.cross = 1;
    if (m->cache_bytes && m->cross_speedup > 0) {
        double held = fmin(1.0, (double)m->cache_bytes / (double)set);
        s.cross = 1.0 / (held / m->cross_speedup + (1.0 - held));
    }
    s.nchan = m->cores > 0 ? m->cores : most;
    s.calls = c->calls > 1 && !c->sendbufs ? (uint32_t)c->calls : 1;
    s.nbuckets = 1024;
    while (s.nbuckets < (uint32_t)s.nreps * 64 && s.nbuckets < (1u << 22))
        s.nbuckets *= 2;
    s.reps = calloc((size_t)s.nreps, sizeof(rep_t));
    s.bucket = malloc(s.nbuckets * sizeof(int32_t));
    s.chan = calloc((size_t)rnodes * (size_t)s.nchan, sizeof(double));
    s.nic_out = calloc((size_t)rnodes * (size_t)s.rails, sizeof(double));
    s.nic_in = calloc((size_t)rnodes * (size_t)s.rails, sizeof(double));
    s.sw_out = calloc((size_t)rnodes, sizeof(double));
    s.sw_in = calloc((size_t)rnodes, sizeof(double));
    st = HCOMM_ERR_NO_MEMORY;
    if (!s.reps || !s.bucket || !s.chan || !s.nic_out || !s.nic_in ||
        !s.sw_out || !s.sw_in) {
        snprintf(err, errlen, "no memory for %d ranks", s.nreps);
        goto out;
    }
    for (uint32_t b = 0; b < s.nbuckets; b++)
        s.bucket[b] = -1;
    if (c->sendbufs) {
        s.reduce = hcomm_kernel_reduce(c->dtype, c->op);
        s.scale = hcomm_kernel_scale(c->dtype);
    }
    uint64_t budget = c->max_steps ? c->max_steps : UINT64_C(32000000);
    double limit = c->max_build_seconds > 0 ? c->max_build_seconds : 30;
    double t0 = now_seconds();
    for (int k = 0; k < s.nreps; k++) {
        s.reps[k].rank = k; /* representatives: nodes [0, G), node-major */
        if ((st = rep_setup(&s, k, &budget, err, errlen)) != HCOMM_SUCCESS)
            goto out;
        out->steps += s.reps[k].n;
        /* Builders cost O(ranks) per rank even for tiny plans (a ring of
         * 16,384 ranks for 8 bytes): give up early on what would take
         * minutes. */
        double spent = now_seconds() - t0;
        if (k == 63 || (k > 63 && spent > 1 && k % 64 == 0)) {
            double total = spent * s.nreps / (k + 1);
            if (total > limit) {
                snprintf(err, errlen,
                         "not simulated: no symmetry here, and building all "
                         "%d plans would take about %.0f s (limit %.0f s)",
                         s.nreps, total, limit);
                st = HCOMM_ERR_UNSUPPORTED;
                goto out;
            }
        }
    }
    out->steps_all = (double)out->steps * s.orbit;
    out->simulated_ranks = s.nreps;
    if ((st = simulate(&s, err, errlen)) != HCOMM_SUCCESS) goto out;
    for (int k = 0; k < s.nreps; k++)
        for (uint32_t j = 0; j < s.reps[k].n; j++)
            if (s.reps[k].fin[j] > out->time) out->time = s.reps[k].fin[j];
    critical_path(&s, out);
    /* Per call. The critical path runs through every call: its steps and
     * messages are all the calls', its times a call's share. */
    out->time /= s.calls;
    out->cp_cpu /= s.calls;
    out->cp_wait /= s.calls;
    for (int l = 0; l < SIM_LEVELS; l++) {
        out->bytes[l] /= s.calls;
        out->msgs[l] /= s.calls;
        out->cp_msg[l] /= s.calls;
    }
out:
    for (int k = 0; s.reps && k < s.nreps; k++)
        rep_free(&s.reps[k]);
    for (int32_t k = 0; k < s.nmsgs; k++)
        free(s.msgs[k].data);
    free(s.reps);
    free(s.msgs);
    free(s.keys);
    free(s.bucket);
    free(s.ev);
    free(s.chan);
    free(s.nic_out);
    free(s.nic_in);
    free(s.sw_out);
    free(s.sw_in);
    return st;
}
