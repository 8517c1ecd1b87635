/* One call on the CUDA IPC path: its kernel's shape (kind, rounds, blocks),
 * its launch in the communicator's order, its end and its failures. */
#include "core/config.h"
#include "core/log.h"
#include "cuda_ipc/ipc_shape.h"
#include "cuda_ipc/ipc_state.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

static const char *kind_name(hcomm_ipc_kind_t k) {
    static const char *names[] = {"oneshot", "twoshot", "reduce_scatter",
                                  "allgather", "broadcast"};
    return k < HCOMM_IPC_NKINDS ? names[k] : "?";
}

/* HCOMM_CUDA_IPC_BLOCKS, within what the GPUs hold (ipc.c). */
static long long most_blocks(const hcomm_ipc_t *ipc) {
    long long most = hcomm_cfg_int(HCOMM_CFG_CUDA_IPC_BLOCKS);
    return most < ipc->resident_blocks ? most : ipc->resident_blocks;
}

hcomm_status_t hcomm_ipc_op_init(hcomm_ipc_op_t *op, hcomm_comm_impl_t *c,
                                 hcomm_coll_t coll, const void *in, void *out,
                                 size_t count, hcomm_dtype_t dtype,
                                 hcomm_op_t rop, int root, void *user_stream,
                                 int cpu_visible) {
    hcomm_ipc_t *ipc = c->ipc;
    size_t esize = hcomm_dtype_size(dtype);
    /* the tails are read only where a head says they were sent */
    memset(op, 0, offsetof(hcomm_ipc_op_t, devtail));
    op->comm = c;
    op->dtype = dtype;
    op->op = rop;
    op->user_stream = user_stream;
    hcomm_ipc_kargs_t *k = &op->k;
    const char *algo = hcomm_cfg_str(HCOMM_CFG_CUDA_IPC_ALGO);
    k->kind =
        hcomm_ipc_kind(coll, count * esize, algo,
                       (size_t)hcomm_cfg_int(HCOMM_CFG_CUDA_IPC_ONESHOT_MAX));
    for (int p = 0; p < c->size; p++)
        k->ws[p] = ipc->ws[p];
    k->rank = c->rank;
    k->nranks = c->size;
    k->one_gpu = ipc->one_gpu;
    k->root = root;
    k->in = in;
    k->out = out;
    k->count = count;
    k->area_bytes = ipc->area_bytes;
    hcomm_ipc_shape_t shape;
    hcomm_ipc_shape(k->kind, c->size, count, esize, ipc->area_bytes,
                    most_blocks(ipc), &shape);
    k->piece = shape.piece;
    k->blocks = shape.blocks;
    int reduces =
        coll == HCOMM_COLL_ALLREDUCE || coll == HCOMM_COLL_REDUCE_SCATTER;
    k->divisor = reduces && rop == HCOMM_AVG ? c->size : 0;
    /* The kernel gives up first, so that its message (which names the
     * ranks) is the one the call returns. */
    double t = 0.9 * hcomm_comm_timeout(c);
    k->timeout_ns = t >= 1e9 ? UINT64_MAX / 2 : (uint64_t)(t * 1e9);
    k->abort = ipc->abort_dev;
    k->status = ipc->status_dev;
    k->epoch0 = ipc->epoch;
    ipc->epoch += shape.rounds;
    op->ticket = ipc->ticket++;
    /* A call that returns once the GPU is done learns that from the
     * blocks' done words: an event after the kernel is seen later (8 B at
     * 2 ranks on the GPU machine: 12.8 us from the launch's return to the
     * event, 11.5 to the words). Not where the CPU may touch the buffers:
     * managed memory must wait for the kernel's end where the CPU cannot
     * share it with a running kernel. */
    if (!user_stream && !cpu_visible) {
        k->done = ipc->done_dev;
        k->done_value = op->ticket + 1;
    }
    /* Where this rank's buffers lie in registered memory, for go_direct:
     * whole buffers (a reduce-scatter's input and an allgather's output
     * hold every rank's block). */
    size_t len = count * esize, whole = len * (size_t)c->size;
    size_t in_len = coll == HCOMM_COLL_REDUCE_SCATTER ? whole : len;
    hcomm_shm_devreg_t *mine = &op->devreg[c->rank];
    hcomm_ipc_mem_find(c, in, in_len, &mine->in_reg, &mine->in_off);
    hcomm_ipc_mem_find(c, out, coll == HCOMM_COLL_ALLGATHER ? whole : len,
                       &mine->out_reg, &mine->out_off);
    /* Ordinary buffers of a large call are offered to the peers to map
     * (ipc_cards.h): the input wherever a peer reads it, an allreduce's
     * output, which peers write. Not managed memory (cpu_visible): CUDA
     * exports no handle for it. */
    int large = len >= (size_t)hcomm_cfg_int(HCOMM_CFG_CUDA_IPC_DIRECT_MIN);
    int offers = !cpu_visible && ipc->cards && large;
    op->twoshot_in_place =
        large && k->kind == HCOMM_IPC_ONESHOT && strcmp(algo, "oneshot") != 0;
    int reads_in = coll != HCOMM_COLL_BCAST || c->rank == root;
    if (ipc->cards)
        hcomm_ipc_cards_publish(
            ipc->cards, offers && reads_in && !mine->in_reg ? in : NULL, in_len,
            offers && coll == HCOMM_COLL_ALLREDUCE && !mine->out_reg ? out
                                                                     : NULL,
            len, mine, &op->devtail[c->rank]);
    return HCOMM_SUCCESS;
}

/* Which buffers a call reads from its peers, or writes into theirs, when
 * they are registered: an allreduce (two-shot) reads every rank's input and
 * writes every rank's output; a reduce-scatter and an allgather read every
 * rank's input; a broadcast reads the root's buffer. */
static int needs_peer(const hcomm_ipc_kargs_t *k, int p, int output) {
    switch (k->kind) {
    case HCOMM_IPC_TWOSHOT:
        return 1;
    case HCOMM_IPC_REDUCE_SCATTER:
    case HCOMM_IPC_ALLGATHER:
        return !output;
    case HCOMM_IPC_BCAST:
        return !output && p == k->root;
    default:
        return -1; /* one-shot: its copy in is what it synchronises on */
    }
}

/* Whether rank p's buffer (its output, or its input) can be reached in
 * place: registered, or an ordinary buffer whose card every peer has
 * mapped. Every rank sees the same agreement, so all answer alike. */
static int reachable(const hcomm_ipc_op_t *op, int p, int output) {
    const hcomm_shm_devreg_t *d = &op->devreg[p];
    const hcomm_shm_devcard_t *card = &op->devtail[p].card[output];
    return (output ? d->out_reg : d->in_reg) ||
           (d->has_tail && card->id && card->confirmed);
}

/* Where rank p's buffer is in this process, len bytes; NULL if it is not
 * mapped here after all. */
static char *peer_buffer(const hcomm_ipc_op_t *op, int p, int output,
                         size_t len) {
    const hcomm_comm_impl_t *c = op->comm;
    const hcomm_shm_devreg_t *d = &op->devreg[p];
    uint32_t reg = output ? d->out_reg : d->in_reg;
    if (reg)
        return hcomm_ipc_mem_peer(c, reg, p, output ? d->out_off : d->in_off,
                                  len);
    if (p == c->rank) return output ? op->k.out : (char *)op->k.in;
    return hcomm_ipc_cards_peer(c->ipc->cards, p, &op->devtail[p].card[output],
                                len);
}

/* A call whose buffers can be reached in place wherever it needs a peer's
 * goes direct: one round over the buffers themselves, no workspace. So
 * does an allreduce that would take one shot, from
 * HCOMM_CUDA_IPC_DIRECT_MIN: it then runs two-shot in place. */
static hcomm_status_t go_direct(hcomm_ipc_op_t *op) {
    hcomm_comm_impl_t *c = op->comm;
    hcomm_ipc_kargs_t *k = &op->k;
    int tails = 0;
    for (int p = 0; p < c->size; p++)
        tails |= (int)op->devreg[p].has_tail;
    if (tails) hcomm_ipc_cards_learn(c->ipc->cards, op->devreg, op->devtail);
    size_t esize = hcomm_dtype_size(op->dtype), len = k->count * esize;
    size_t whole = len * (size_t)c->size;
    int one_shot = k->kind == HCOMM_IPC_ONESHOT;
    if (one_shot) {
        if (!op->twoshot_in_place) return HCOMM_SUCCESS;
        k->kind = HCOMM_IPC_TWOSHOT;
    }
    for (int p = 0; p < c->size; p++)
        if ((needs_peer(k, p, 0) && !reachable(op, p, 0)) ||
            (needs_peer(k, p, 1) && !reachable(op, p, 1))) {
            if (one_shot) k->kind = HCOMM_IPC_ONESHOT;
            return HCOMM_SUCCESS;
        }
    size_t in_len = k->kind == HCOMM_IPC_REDUCE_SCATTER ? whole : len;
    for (int p = 0; p < c->size; p++) {
        int in = needs_peer(k, p, 0), out = needs_peer(k, p, 1);
        k->peer_in[p] = in ? peer_buffer(op, p, 0, in_len) : NULL;
        k->peer_out[p] = out ? peer_buffer(op, p, 1, len) : NULL;
        if ((in && !k->peer_in[p]) || (out && !k->peer_out[p]))
            return c->broken = hcomm_error(
                       HCOMM_ERR_INVALID_ARG,
                       "%s: rank %d's buffer is not mapped on this rank (%d): "
                       "registered device memory freed, or a call beyond it",
                       kind_name(k->kind), p, c->rank);
    }
    k->direct = 1;
    k->piece = k->count;
    /* a reduce-scatter or allgather moves every rank's block */
    int blocks_all =
        k->kind == HCOMM_IPC_REDUCE_SCATTER || k->kind == HCOMM_IPC_ALLGATHER;
    k->blocks = hcomm_ipc_blocks(blocks_all ? whole : len, most_blocks(c->ipc));
    return HCOMM_SUCCESS;
}

hcomm_status_t hcomm_ipc_failure(hcomm_comm_impl_t *c, const char *what) {
    hcomm_ipc_t *ipc = c->ipc;
    volatile unsigned long long *st = ipc->status_host;
    unsigned long long why = st[0], epoch = st[1], missing = st[2];
    char ranks[256] = "";
    size_t len = 0;
    for (int p = 0; p < c->size && len + 8 < sizeof(ranks); p++)
        if (missing >> p & 1)
            len += (size_t)snprintf(ranks + len, sizeof(ranks) - len, "%s%d",
                                    len ? ", " : "", p);
    hcomm_status_t s =
        why == HCOMM_IPC_ABORTED ? HCOMM_ERR_ABORTED : HCOMM_ERR_TIMEOUT;
    c->broken = s;
    if (why == HCOMM_IPC_ABORTED)
        return hcomm_error(s,
                           "%s on communicator %u, rank %d of %d: the CUDA "
                           "IPC kernel was aborted by hcomm_comm_abort",
                           what, (unsigned)c->id, c->rank, c->size);
    return hcomm_error(s,
                       "%s on communicator %u, rank %d of %d: the CUDA IPC "
                       "kernel gave up after %.1f s in round %llu waiting "
                       "for rank(s) %s",
                       what, (unsigned)c->id, c->rank, c->size,
                       0.9 * hcomm_comm_timeout(c), epoch,
                       len ? ranks : "(none named)");
}

/* Enqueues the kernel on its stream, after the communicator's previous
 * kernel wherever that one went. A stream-ordered call on the stream of
 * the one before it needs no wait: the stream orders them. Streams are
 * told apart by id, not handle: a destroyed stream's handle may come back
 * as a new stream's while the old one's kernel still runs. */
static hcomm_status_t launch(hcomm_ipc_op_t *op) {
    hcomm_ipc_t *ipc = op->comm->ipc;
    void *own = hcomm_gpu_ctx_stream(ipc->ctx, HCOMM_GPU_STREAM_IPC);
    void *stream = op->user_stream ? op->user_stream : own;
    unsigned long long stream_id =
        op->user_stream ? hcomm_gpu_stream_uid(stream) : 0;
    void *before = ipc->last;
    hcomm_status_t st = HCOMM_SUCCESS;
    if (!before && stream != own &&
        !(before = hcomm_gpu_event_record(ipc->ctx, own)))
        return HCOMM_ERR_INTERNAL;
    if (before) {
        int same = ipc->last && stream_id && stream_id == ipc->last_stream;
        if (!same) st = hcomm_gpu_stream_wait_event(stream, before);
        hcomm_gpu_event_put(ipc->ctx, before);
        ipc->last = NULL;
        if (st != HCOMM_SUCCESS) return st;
    }
    /* Started early, a kernel holds its multiprocessors while the one
     * before it still runs: so only where every rank's two fit at once. */
    op->k.early = ipc->early_launch && op->k.blocks * 2 <= ipc->resident_blocks;
    int e = hcomm_ipc_kernel_launch(&op->k, op->dtype, op->op, stream);
    if (e) return hcomm_gpu_error(e, "launching the CUDA IPC kernel");
    ipc->launched++;
    op->launched = 1;
    if (op->k.done) return HCOMM_SUCCESS;
    void *after = hcomm_gpu_event_record(ipc->ctx, stream);
    if (!after) return HCOMM_ERR_INTERNAL;
    if (op->user_stream) {
        ipc->last = after;
        ipc->last_stream = stream_id;
    } else {
        op->done = after;
    }
    return HCOMM_SUCCESS;
}

static int blocks_done(const hcomm_ipc_op_t *op) {
    const volatile unsigned long long *w = op->comm->ipc->done_host;
    if (op->k.count == 0) return 1; /* no kernel */
    for (int b = 0; b < op->k.blocks; b++)
        if (w[b] < op->k.done_value) return 0;
    return 1;
}

static hcomm_status_t kernel_failed(hcomm_ipc_op_t *op) {
    char what[64];
    snprintf(what, sizeof(what), "CUDA IPC %s", kind_name(op->k.kind));
    return hcomm_ipc_failure(op->comm, what);
}

/* The end of a kernel that writes done words. A kernel that failed or
 * faulted ends without them: the status words tell the former at once;
 * the stream, asked every 256 polls (a driver call), the latter. */
static hcomm_status_t words_end(hcomm_ipc_op_t *op) {
    if (blocks_done(op)) return HCOMM_SUCCESS;
    hcomm_ipc_t *ipc = op->comm->ipc;
    int failed = ((volatile unsigned long long *)ipc->status_host)[0] != 0;
    if (!failed && ++op->polls % 256) return HCOMM_ERR_IN_PROGRESS;
    int idle = hcomm_gpu_stream_query(
        hcomm_gpu_ctx_stream(ipc->ctx, HCOMM_GPU_STREAM_IPC));
    if (idle == 0) return HCOMM_ERR_IN_PROGRESS;
    if (idle < 0) return op->comm->broken = HCOMM_ERR_INTERNAL;
    if (blocks_done(op)) return HCOMM_SUCCESS;
    if (failed) return kernel_failed(op);
    return op->comm->broken = hcomm_error(
               HCOMM_ERR_INTERNAL, "the CUDA IPC %s kernel ended unfinished",
               kind_name(op->k.kind));
}

hcomm_status_t hcomm_ipc_op_progress(hcomm_ipc_op_t *op) {
    hcomm_comm_impl_t *c = op->comm;
    hcomm_ipc_t *ipc = c->ipc;
    if (!op->launched) {
        /* Kernels go to the stream in call order, whatever order the
         * requests are progressed in. */
        if (op->ticket != ipc->launched) return HCOMM_ERR_IN_PROGRESS;
        /* on the communicator's GPU: go_direct maps the peers' buffers */
        int prev = hcomm_gpu_use_device(hcomm_gpu_ctx_device(ipc->ctx));
        hcomm_status_t st = go_direct(op);
        if (st == HCOMM_SUCCESS) st = launch(op);
        if (prev >= 0) hcomm_gpu_use_device(prev);
        if (st != HCOMM_SUCCESS) {
            c->broken = st; /* the peers' kernels now wait in vain */
            return st;
        }
        if (op->user_stream) return HCOMM_SUCCESS;
    }
    if (op->k.done) return words_end(op);
    int done = hcomm_gpu_event_query(op->done);
    if (done == 0) return HCOMM_ERR_IN_PROGRESS;
    hcomm_gpu_event_put(ipc->ctx, op->done);
    op->done = NULL;
    if (done < 0) return c->broken = HCOMM_ERR_INTERNAL;
    if (((volatile unsigned long long *)ipc->status_host)[0])
        return kernel_failed(op);
    return HCOMM_SUCCESS;
}

void hcomm_ipc_op_describe(const hcomm_ipc_op_t *op, char *out, size_t len) {
    const hcomm_ipc_t *ipc = op->comm->ipc;
    if (!op->launched)
        snprintf(out, len,
                 "the CUDA IPC %s kernel's turn (calls before it unlaunched)",
                 kind_name(op->k.kind));
    else
        snprintf(out, len,
                 "the CUDA IPC %s kernel (rounds %llu on, %d blocks%s) on GPU "
                 "%d",
                 kind_name(op->k.kind), (unsigned long long)op->k.epoch0,
                 op->k.blocks, op->k.direct ? ", registered buffers" : "",
                 hcomm_gpu_ctx_device(ipc->ctx));
}
