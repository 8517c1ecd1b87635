/* AllReduce with compression (hcomm.h): built from the library's own
 * AllToAll and AllGather on the same communicator, so it runs on every
 * path they do (shared segment, plans over UCX or MPI). The count splits
 * into one chunk per rank (the last ones padded with zeros); each rank
 * owns the reduction of its chunk.
 *
 * On several nodes of one size, only the rails compress: each node first
 * reduce-scatters the input uncompressed on its shared memory, local rank
 * i then runs the compressed allreduce of block i along rail i (one rank
 * per node), and the node allgathers the blocks. A node's data crosses
 * the network compressed once, not once per rank, and every rank
 * compresses a block. Top-k then selects per block.
 *
 * On host memory, from 8 MiB, the 16-bit schemes run in pieces of at least
 * 4 MiB, so that the node stages of one piece (non-blocking, progressed
 * while the rail exchange waits on the network) overlap the rail exchange
 * of the next; piece q's block i is then elements [q S + i S / L, ...),
 * and every value is the same as whole. Top-k and one-bit run whole: they
 * send little, so there is little to hide behind, and pieces would change
 * what they select and scale (top-k measured no faster in pieces). */
#include "coll/hier_node.h"
#include "compress/compress.h"
#include "compress/compress_steps.h"
#include "core/clock.h"
#include "core/comm.h"
#include "core/config.h"
#include "core/context.h"
#include "core/gpu.h"
#include "core/log.h"
#include "topo/topo.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    hcomm_comm_t comm; /* the whole communicator, or a rail */
    int rail;          /* comm is a rail: its exchanges cross the network */
    int rank, size;
    size_t count, chunk;          /* chunk: ceil(count / size) */
    int divisor;                  /* > 1: the sum is divided by it (avg) */
    float *worker;                /* error feedback: count residuals, or NULL */
    hcomm_compress_state_t state; /* its server residual (1-bit) */
    hcomm_cx_t *x;                /* where the local steps run */
} job_t;

/* 16-bit values out, fp32 sums, 16-bit sums back. Along a rail of two
 * nodes the two exchange their whole 16-bit inputs once and both sum: the
 * bytes of a reduce-scatter and an allgather of halves in one exchange,
 * not two that each wait on the link, and the same arithmetic (each sum
 * in rank order, rounded once), so the same bits. Not inside a node, where
 * the CPUs, not a link, bound the call and summing every element on both
 * costs (2 ranks, 64 MiB: 82-99 ms against 53-58). */
static hcomm_status_t run_half(const job_t *j, const float *in, float *out,
                               int bf16) {
    hcomm_cx_t *x = j->x;
    size_t n = (size_t)j->size, m = j->chunk, bytes = n * m * 2;
    int whole = n == 2 && j->rail;
    size_t rbytes = whole ? n * bytes : bytes;
    hcomm_dtype_t t = bf16 ? HCOMM_BFLOAT16 : HCOMM_FLOAT16;
    uint16_t *send = hcomm_cx_alloc(x, bytes),
             *recv = hcomm_cx_alloc(x, rbytes);
    hcomm_cx_to16(x, send, in, j->count, bf16);
    if (whole) {
        if (hcomm_cx_sync(x) == HCOMM_SUCCESS)
            x->status = hcomm_allgather(send, recv, n * m, t, j->comm);
        hcomm_cx_sum16(x, send, recv, n, n * m, bf16, j->divisor);
        hcomm_cx_from16(x, out, send, j->count, bf16);
    } else {
        if (hcomm_cx_sync(x) == HCOMM_SUCCESS)
            x->status = hcomm_alltoall(send, recv, m, t, j->comm);
        hcomm_cx_sum16(x, send, recv, n, m, bf16, j->divisor);
        if (hcomm_cx_sync(x) == HCOMM_SUCCESS)
            x->status = hcomm_allgather(send, recv, m, t, j->comm);
        hcomm_cx_from16(x, out, recv, j->count, bf16);
    }
    hcomm_status_t st = hcomm_cx_sync(x);
    hcomm_cx_free(x, send, bytes);
    hcomm_cx_free(x, recv, rbytes);
    return st;
}

/* v = in + residual; the k largest go out with their indices; what stays
 * behind is the new residual. v is the residual itself, added to in place
 * (or in, without error feedback): no copy of the count values, nor fresh
 * memory for them, whose page faults cost as much as the selection. */
static hcomm_status_t run_topk(const job_t *j, const float *in, float *out,
                               double density) {
    hcomm_cx_t *x = j->x;
    size_t count = j->count, n = (size_t)j->size;
    size_t k = (size_t)(density * (double)count + 0.999999);
    if (k < 1) k = 1;
    if (k > count) k = count;
    size_t vb = count * sizeof(float), pb = 2 * k * sizeof(uint32_t);
    const float *v = j->worker ? j->worker : in;
    uint32_t *pairs = hcomm_cx_alloc(x, pb), *all = hcomm_cx_alloc(x, n * pb);
    if (j->worker) hcomm_cx_add(x, j->worker, in, j->worker, count);
    hcomm_cx_topk_pairs(x, v, count, k, pairs, j->worker);
    if (hcomm_cx_sync(x) == HCOMM_SUCCESS)
        x->status = hcomm_allgather(pairs, all, 2 * k, HCOMM_UINT32, j->comm);
    hcomm_cx_zero(x, out, vb);
    for (size_t p = 0; p < n; p++) /* rank by rank: every rank sums alike */
        hcomm_cx_topk_add(x, out, all + 2 * k * p, k, count);
    hcomm_cx_divide(x, out, count, j->divisor);
    hcomm_status_t st = hcomm_cx_sync(x);
    hcomm_cx_free(x, pairs, pb);
    hcomm_cx_free(x, all, n * pb);
    return st;
}

/* The real elements of chunk p, without its zero padding: m but for the
 * last chunks (0 for those wholly past the count). */
static size_t chunk_len(const job_t *j, size_t p) {
    size_t m = j->chunk, at = p * m;
    return at >= j->count ? 0 : j->count - at < m ? j->count - at : m;
}

/* Worker: v = in + worker residual, each chunk compressed for its owner;
 * server: the owner's sum plus its residual, compressed for everyone. */
static hcomm_status_t run_onebit(const job_t *j, const float *in, float *out) {
    hcomm_cx_t *x = j->x;
    hcomm_compress_state_t state = j->state;
    size_t n = (size_t)j->size, m = j->chunk;
    size_t rb = hcomm_onebit_record_bytes(m);
    if (state && !state->server &&
        (state->server = hcomm_cx_alloc(x, m * sizeof(float))))
        state->chunk = m;
    float *y = hcomm_cx_alloc(x, m * sizeof(float));
    uint8_t *send = hcomm_cx_alloc(x, n * rb),
            *recv = hcomm_cx_alloc(x, n * rb);
    /* v is the worker residual, added to in place, then encoded into its
     * new self (as top-k's); without error feedback, in itself */
    float *res = j->worker;
    const float *v = res ? res : in;
    if (res) hcomm_cx_add(x, res, in, res, j->count);
    for (size_t p = 0; p < n; p++) {
        size_t len = chunk_len(j, p), at = len ? p * m : 0; /* none past */
        hcomm_cx_onebit_encode(x, v + at, len, send + p * rb,
                               res ? res + at : NULL);
    }
    if (hcomm_cx_sync(x) == HCOMM_SUCCESS)
        x->status = hcomm_alltoall(send, recv, rb, HCOMM_UINT8, j->comm);
    size_t mine = chunk_len(j, (size_t)j->rank);
    for (size_t p = 0; p < n; p++)
        hcomm_cx_onebit_decode(x, y, recv + p * rb, mine, p > 0);
    hcomm_cx_divide(x, y, mine, j->divisor);
    if (state) hcomm_cx_add(x, y, y, state->server, mine);
    hcomm_cx_onebit_encode(x, y, mine, send, state ? state->server : NULL);
    if (hcomm_cx_sync(x) == HCOMM_SUCCESS)
        x->status = hcomm_allgather(send, recv, rb, HCOMM_UINT8, j->comm);
    for (size_t p = 0; p < n && p * m < j->count; p++)
        hcomm_cx_onebit_decode(x, out + p * m, recv + p * rb, chunk_len(j, p),
                               0);
    hcomm_status_t st = hcomm_cx_sync(x);
    hcomm_cx_free(x, y, m * sizeof(float));
    hcomm_cx_free(x, send, n * rb);
    hcomm_cx_free(x, recv, n * rb);
    return st;
}

static hcomm_status_t run_scheme(const job_t *j, hcomm_compress_t kind,
                                 double density, const float *in, float *out) {
    switch (kind) {
    case HCOMM_COMPRESS_BF16:
    case HCOMM_COMPRESS_FP16:
        return run_half(j, in, out, kind == HCOMM_COMPRESS_BF16);
    case HCOMM_COMPRESS_TOPK:
        return run_topk(j, in, out, density);
    default:
        return run_onebit(j, in, out);
    }
}

/* The job's count, and its chunk: one per participant. */
static void set_count(job_t *j, size_t count) {
    j->count = count;
    j->chunk = (count + (size_t)j->size - 1) / (size_t)j->size;
}

/* Pieces of at least this many bytes, at most MAX_PIECES of them: a
 * piece's rail exchange must outlast its node stages for them to hide. */
#define PIECE_BYTES ((size_t)4 << 20)
#define MAX_PIECES 16

size_t hcomm_compress_pieces(hcomm_compress_t kind, int on_gpu, size_t count,
                             size_t L, size_t *S) {
    size_t pieces = count * sizeof(float) / PIECE_BYTES;
    if (pieces > MAX_PIECES) pieces = MAX_PIECES;
    int half = kind == HCOMM_COMPRESS_BF16 || kind == HCOMM_COMPRESS_FP16;
    if (!half || on_gpu || pieces < 2 || L < 1) return 0;
    *S = count / (pieces * L) * L;
    return pieces;
}

/* Waits for every request in reqs[0..n-1], in order; the first failure. */
static hcomm_status_t wait_all(hcomm_request_t *reqs, size_t n,
                               hcomm_status_t st) {
    for (size_t i = 0; i < n; i++) {
        hcomm_status_t w = hcomm_wait(&reqs[i]);
        if (st == HCOMM_SUCCESS) st = w;
    }
    return st;
}

/* run_compressed's node stages and 16-bit rail exchange in pieces (the
 * top): this rank's block of piece q is the sub = S / L elements at local
 * rank li's offset. Piece q + 1's node reduce-scatter and piece q's node
 * allgather run while piece q's rail exchange waits. */
static hcomm_status_t run_pieces(const job_t *j, int bf16, hcomm_comm_t node,
                                 size_t pieces, size_t S, size_t li,
                                 const float *in, float *out) {
    size_t sub = j->count; /* S / L, as the caller set it */
    hcomm_request_t rs[MAX_PIECES] = {0}, ag[MAX_PIECES] = {0};
    hcomm_status_t st = hcomm_ireduce_scatter(
        in, out + li * sub, sub, HCOMM_FLOAT32, HCOMM_SUM, node, &rs[0]);
    for (size_t q = 0; q < pieces && st == HCOMM_SUCCESS; q++) {
        float *mine = out + q * S + li * sub;
        st = hcomm_wait(&rs[q]);
        if (st == HCOMM_SUCCESS && q + 1 < pieces)
            st = hcomm_ireduce_scatter(in + (q + 1) * S, mine + S, sub,
                                       HCOMM_FLOAT32, HCOMM_SUM, node,
                                       &rs[q + 1]);
        if (st == HCOMM_SUCCESS) st = run_half(j, mine, mine, bf16);
        if (st == HCOMM_SUCCESS)
            st = hcomm_iallgather(mine, out + q * S, sub, HCOMM_FLOAT32, node,
                                  &ag[q]);
    }
    /* after a failure: what was started still ends before the buffers go */
    st = wait_all(rs, pieces, st);
    return wait_all(ag, pieces, st);
}

/* A compressed allreduce of count (> 0) floats on c: along the rails
 * between node stages where c's nodes allow it (see the top), else on the
 * whole communicator. */
static hcomm_status_t run_compressed(hcomm_comm_impl_t *c, hcomm_cx_t *x,
                                     hcomm_compress_t kind, double density,
                                     hcomm_compress_state_t state,
                                     const float *in, float *out, size_t count,
                                     int avg) {
    job_t j = {.x = x,
               .comm = c->handle,
               .rank = c->rank,
               .size = c->size,
               .divisor = avg ? c->size : 0,
               .worker = state ? state->worker : NULL,
               .state = state};
    hcomm_comm_t node, rail;
    hcomm_comm_impl_t *r;
    size_t L = hcomm_hier_node_shape_ok(c) ? (size_t)c->topo->map.node_size[0]
                                           : 0,
           blk = L ? count / L : 0;
    if (!blk) {
        set_count(&j, count);
        return run_scheme(&j, kind, density, in, out);
    }
    hcomm_status_t st = hcomm_hier_subcomms(c, &node, &rail);
    if (st == HCOMM_SUCCESS) st = hcomm_comm_lookup(rail, &r);
    if (st != HCOMM_SUCCESS) return st;
    j.comm = rail;
    j.rail = 1;
    j.rank = r->rank;
    j.size = r->size;
    size_t li = (size_t)c->topo->map.local_rank[c->rank], S, covered;
    size_t pieces = hcomm_compress_pieces(kind, x->device >= 0, count, L, &S);
    if (pieces) {
        set_count(&j, S / L);
        st = run_pieces(&j, kind == HCOMM_COMPRESS_BF16, node, pieces, S, li,
                        in, out);
        covered = pieces * S;
    } else {
        float *mine = out + li * blk;
        set_count(&j, blk);
        j.worker = state ? state->worker + li * blk : NULL;
        st =
            hcomm_reduce_scatter(in, mine, blk, HCOMM_FLOAT32, HCOMM_SUM, node);
        if (st == HCOMM_SUCCESS) st = run_scheme(&j, kind, density, mine, mine);
        if (st == HCOMM_SUCCESS)
            st = hcomm_allgather(mine, out, blk, HCOMM_FLOAT32, node);
        covered = L * blk;
    }
    /* what the blocks leave over (fewer than L, or pieces x L): exact */
    if (st == HCOMM_SUCCESS && covered < count)
        st = hcomm_allreduce(in + covered, out + covered, count - covered,
                             HCOMM_FLOAT32, avg ? HCOMM_AVG : HCOMM_SUM,
                             c->handle);
    return st;
}

const char *hcomm_compress_name(hcomm_compress_t k) {
    static const char *names[] = {"none", "bf16", "fp16", "topk", "onebit"};
    return (unsigned)k < sizeof(names) / sizeof(*names) ? names[k] : "?";
}

hcomm_compress_t hcomm_compress_auto_pick(double none_us, double bf16_us,
                                          double lossy_us,
                                          hcomm_compress_t lossy) {
    hcomm_compress_t pick = HCOMM_COMPRESS_NONE;
    double best = none_us;
    if (bf16_us < 0.8 * best) {
        pick = HCOMM_COMPRESS_BF16;
        best = bf16_us;
    }
    if (lossy != HCOMM_COMPRESS_NONE && lossy_us < 0.8 * best) pick = lossy;
    return pick;
}

/* HCOMM_COMPRESS_AUTO's first call of a size: bf16 and the lossy scheme
 * allowed (without error feedback: the state stays as the caller left it)
 * into scratch, then the call itself uncompressed, all timed; the slowest
 * rank's times decide for every rank alike. */
static hcomm_status_t measure_auto(hcomm_comm_impl_t *c, hcomm_cx_t *x,
                                   unsigned cls, const float *in, float *out,
                                   size_t count, hcomm_op_t op,
                                   hcomm_compress_t lossy, double density) {
    float *scratch = hcomm_cx_alloc(x, count * sizeof(float));
    if (!scratch) return x->status;
    double t[3] = {0, 0, 0}, worst[3];
    hcomm_compress_t tried[2] = {HCOMM_COMPRESS_BF16, lossy};
    hcomm_status_t st = HCOMM_SUCCESS;
    for (int i = 0; i < 2 && st == HCOMM_SUCCESS; i++) {
        if (tried[i] == HCOMM_COMPRESS_NONE) continue;
        double start = 1e6 * hcomm_now_seconds();
        st = run_compressed(c, x, tried[i], density, NULL, in, scratch, count,
                            op == HCOMM_AVG);
        t[i ? 2 : 0] = 1e6 * hcomm_now_seconds() - start;
    }
    hcomm_cx_free(x, scratch, count * sizeof(float));
    if (st != HCOMM_SUCCESS) return st;
    t[1] = 1e6 * hcomm_now_seconds();
    st = hcomm_allreduce(in, out, count, HCOMM_FLOAT32, op, c->handle);
    t[1] = 1e6 * hcomm_now_seconds() - t[1];
    if (st == HCOMM_SUCCESS)
        st = hcomm_allreduce(t, worst, 3, HCOMM_FLOAT64, HCOMM_MAX, c->handle);
    if (st != HCOMM_SUCCESS) return st;
    hcomm_compress_t pick =
        hcomm_compress_auto_pick(worst[1], worst[0], worst[2], lossy);
    for (int i = 0; i < 3; i++)
        c->compress_us[cls][i] = (float)worst[i];
    c->compress_lossy[cls] = (uint8_t)(1 + lossy);
    c->compress_density[cls] = density;
    c->compress_pick[cls] = (uint8_t)(1 + pick);
    char also[64] = "";
    if (lossy != HCOMM_COMPRESS_NONE)
        snprintf(also, sizeof(also), ", %s %.0f us", hcomm_compress_name(lossy),
                 worst[2]);
    HCOMM_LOG(HCOMM_LOG_INFO,
              "compression auto on communicator %u, %zu to %zu bytes: bf16 "
              "%.0f us%s, uncompressed %.0f us (slowest rank): %s",
              (unsigned)c->id, (size_t)1 << cls, ((size_t)2 << cls) - 1,
              worst[0], also, worst[1], hcomm_compress_name(pick));
    return HCOMM_SUCCESS;
}

/* HCOMM_COMPRESS's values. */
hcomm_status_t hcomm_compress_parse(const char *s, hcomm_compress_t *kind,
                                    double *density, hcomm_compress_t *lossy) {
    *density = 0;
    *lossy = HCOMM_COMPRESS_NONE;
    if (s && strncmp(s, "auto:", 5) == 0) {
        hcomm_compress_t inner, unused;
        if (hcomm_compress_parse(s + 5, &inner, density, &unused) !=
                HCOMM_SUCCESS ||
            (inner != HCOMM_COMPRESS_TOPK && inner != HCOMM_COMPRESS_ONEBIT))
            return hcomm_error(HCOMM_ERR_INVALID_ARG,
                               "HCOMM_COMPRESS=%s: auto may add topk:<density> "
                               "or onebit, as auto:topk:0.01",
                               s);
        *kind = HCOMM_COMPRESS_AUTO;
        *lossy = inner;
        return HCOMM_SUCCESS;
    }
    if (!s || !*s || strcmp(s, "none") == 0) {
        *kind = HCOMM_COMPRESS_NONE;
    } else if (strcmp(s, "bf16") == 0) {
        *kind = HCOMM_COMPRESS_BF16;
    } else if (strcmp(s, "fp16") == 0) {
        *kind = HCOMM_COMPRESS_FP16;
    } else if (strcmp(s, "onebit") == 0) {
        *kind = HCOMM_COMPRESS_ONEBIT;
    } else if (strcmp(s, "auto") == 0) {
        *kind = HCOMM_COMPRESS_AUTO;
    } else if (strncmp(s, "topk:", 5) == 0) {
        char *end;
        double d = strtod(s + 5, &end);
        if (end == s + 5 || *end || !(d > 0 && d <= 1))
            return hcomm_error(HCOMM_ERR_INVALID_ARG,
                               "HCOMM_COMPRESS=%s: top-k needs a density in "
                               "(0, 1], as topk:0.01",
                               s);
        *kind = HCOMM_COMPRESS_TOPK;
        *density = d;
    } else {
        return hcomm_error(HCOMM_ERR_INVALID_ARG,
                           "HCOMM_COMPRESS=%s: expected none, bf16, fp16, "
                           "topk:<density>, onebit, auto or auto:<lossy>",
                           s);
    }
    return HCOMM_SUCCESS;
}

/* The communicator default: HCOMM_COMPRESS (lossy schemes without error
 * feedback: a default cannot know which tensor a call carries). */
/* Where a call's local steps run: on the CPU for host memory, else on
 * the GPU of its buffers, on the communicator's stream that follows the
 * default stream, as a blocking call's work does (README, "GPU memory"). */
static hcomm_status_t steps_for(hcomm_comm_impl_t *c, const void *sendbuf,
                                const void *recvbuf, hcomm_cx_t *x) {
    int sdev, rdev;
    if (hcomm_gpu_all_host(sendbuf, recvbuf)) return hcomm_cx_init(x, -1, NULL);
    hcomm_memtype_t sm = hcomm_gpu_memtype(sendbuf, &sdev),
                    rm = hcomm_gpu_memtype(recvbuf, &rdev);
    int gpu = sm == HCOMM_MEM_DEVICE || sm == HCOMM_MEM_MANAGED ||
              rm == HCOMM_MEM_DEVICE || rm == HCOMM_MEM_MANAGED;
    if (!gpu) return hcomm_cx_init(x, -1, NULL);
    if (sm == HCOMM_MEM_HOST || rm == HCOMM_MEM_HOST)
        return hcomm_error(HCOMM_ERR_UNSUPPORTED,
                           "allreduce with compression: the %s buffer is "
                           "ordinary host memory and the other GPU memory",
                           sm == HCOMM_MEM_HOST ? "send" : "receive");
    int device = sdev >= 0 ? sdev : rdev;
    void *stream = NULL;
#ifdef HAVE_CUDA
    struct hcomm_gpu_ctx *ctx;
    if (device < 0 && (device = hcomm_gpu_current_device()) < 0)
        return HCOMM_ERR_INTERNAL;
    hcomm_status_t st = hcomm_comm_gpu(c, device, &ctx);
    if (st != HCOMM_SUCCESS) return st;
    stream = hcomm_gpu_ctx_stream(ctx, HCOMM_GPU_STREAM_IPC);
#else
    (void)c;
#endif
    return hcomm_cx_init(x, device < 0 ? 0 : device, stream);
}

/* A call's end: its steps' scratch given back, its first failure. */
static hcomm_status_t ended(hcomm_cx_t *x, hcomm_status_t st) {
    hcomm_status_t steps = hcomm_cx_finish(x);
    return st != HCOMM_SUCCESS ? st : steps;
}

/* The residuals where the call's buffers are (x): moved there when the
 * state's last call ran on the other side (or on another GPU). */
static hcomm_status_t state_place(hcomm_compress_state_t s, hcomm_cx_t *x) {
    if (s->device == x->device) return HCOMM_SUCCESS;
    hcomm_cx_t old;
    hcomm_cx_init(&old, s->device, NULL);
    hcomm_cx_t *gpu = x->device >= 0 ? x : &old; /* it copies either way */
    size_t wb = (s->count ? s->count : 1) * sizeof(float),
           sb = s->chunk * sizeof(float);
    float *worker = hcomm_cx_alloc(x, wb),
          *server = s->server ? hcomm_cx_alloc(x, sb) : NULL;
    hcomm_cx_copy(gpu, worker, s->worker, wb);
    if (server) hcomm_cx_copy(gpu, server, s->server, sb);
    hcomm_status_t st = hcomm_cx_sync(x);
    if (st == HCOMM_SUCCESS) st = hcomm_cx_sync(gpu);
    if (st != HCOMM_SUCCESS) {
        hcomm_cx_free(x, worker, wb);
        hcomm_cx_free(x, server, sb);
        return st;
    }
    hcomm_cx_free(&old, s->worker, wb);
    hcomm_cx_free(&old, s->server, sb);
    s->worker = worker;
    s->server = server;
    s->device = x->device;
    return HCOMM_SUCCESS;
}

static hcomm_status_t default_opts(hcomm_allreduce_opts_t *o) {
    memset(o, 0, sizeof(*o));
    return hcomm_compress_parse(hcomm_cfg_str(HCOMM_CFG_COMPRESS), &o->compress,
                                &o->density, &o->lossy);
}

hcomm_status_t hcomm_allreduce_ex(const void *sendbuf, void *recvbuf,
                                  size_t count, hcomm_dtype_t dtype,
                                  hcomm_op_t op, hcomm_comm_t comm,
                                  const hcomm_allreduce_opts_t *opts) {
    hcomm_allreduce_opts_t o;
    hcomm_status_t st;
    if (!hcomm_is_initialized())
        return hcomm_error(HCOMM_ERR_NOT_INITIALIZED,
                           "allreduce before hcomm_init");
    if (opts)
        o = *opts;
    else if ((st = default_opts(&o)) != HCOMM_SUCCESS)
        return st;
    if (o.compress == HCOMM_COMPRESS_NONE)
        return hcomm_allreduce(sendbuf, recvbuf, count, dtype, op, comm);
    hcomm_comm_impl_t *c;
    if ((st = hcomm_comm_lookup(comm, &c)) != HCOMM_SUCCESS) return st;
    if ((unsigned)o.compress >= HCOMM_COMPRESS_COUNT)
        return hcomm_error(HCOMM_ERR_INVALID_ARG,
                           "allreduce: unknown compression %d",
                           (int)o.compress);
    if (dtype != HCOMM_FLOAT32 || (op != HCOMM_SUM && op != HCOMM_AVG))
        return hcomm_error(HCOMM_ERR_UNSUPPORTED,
                           "allreduce: compression takes float32 sum and avg "
                           "only");
    int autos = o.compress == HCOMM_COMPRESS_AUTO;
    if (autos && o.lossy != HCOMM_COMPRESS_NONE &&
        o.lossy != HCOMM_COMPRESS_TOPK && o.lossy != HCOMM_COMPRESS_ONEBIT)
        return hcomm_error(HCOMM_ERR_INVALID_ARG,
                           "allreduce: auto may add top-k or onebit, not %s",
                           hcomm_compress_name(o.lossy));
    if ((o.compress == HCOMM_COMPRESS_TOPK ||
         (autos && o.lossy == HCOMM_COMPRESS_TOPK)) &&
        !(o.density > 0 && o.density <= 1))
        return hcomm_error(HCOMM_ERR_INVALID_ARG,
                           "allreduce: top-k density %g is not in (0, 1]",
                           o.density);
    if (count && (!sendbuf || !recvbuf))
        return hcomm_error(HCOMM_ERR_INVALID_ARG, "allreduce: NULL buffer");
    if (count > UINT32_MAX)
        return hcomm_error(HCOMM_ERR_UNSUPPORTED,
                           "allreduce: compression takes at most 2^32 - 1 "
                           "elements");
    hcomm_compress_state_t state = o.state;
    int lossy = o.compress == HCOMM_COMPRESS_TOPK ||
                o.compress == HCOMM_COMPRESS_ONEBIT ||
                (autos && o.lossy != HCOMM_COMPRESS_NONE);
    if (state && lossy && (state->comm != comm || state->count != count))
        return hcomm_error(HCOMM_ERR_INVALID_ARG,
                           "allreduce: the compression state was made for %zu "
                           "elements on %s communicator, not %zu here",
                           state->count,
                           state->comm == comm ? "this" : "another", count);
    if (count == 0)
        return hcomm_allreduce(sendbuf, recvbuf, 0, dtype, op, comm);
    hcomm_cx_t x;
    if ((st = steps_for(c, sendbuf, recvbuf, &x)) != HCOMM_SUCCESS) return st;
    if (autos) { /* measured once per size and lossy scheme allowed */
        unsigned cls = 63 - (unsigned)__builtin_clzll(count * 4);
        if (!c->compress_pick[cls] || c->compress_lossy[cls] != 1 + o.lossy ||
            (o.lossy == HCOMM_COMPRESS_TOPK &&
             c->compress_density[cls] != o.density))
            return ended(&x, measure_auto(c, &x, cls, sendbuf, recvbuf, count,
                                          op, o.lossy, o.density));
        o.compress = (hcomm_compress_t)(c->compress_pick[cls] - 1);
        if (o.compress == HCOMM_COMPRESS_NONE)
            return ended(
                &x, hcomm_allreduce(sendbuf, recvbuf, count, dtype, op, comm));
    }
    int fed = o.compress == HCOMM_COMPRESS_TOPK ||
              o.compress == HCOMM_COMPRESS_ONEBIT; /* error feedback */
    if (fed && state && (st = state_place(state, &x)) != HCOMM_SUCCESS)
        return ended(&x, st);
    return ended(&x, run_compressed(c, &x, o.compress, o.density,
                                    fed ? state : NULL, sendbuf, recvbuf, count,
                                    op == HCOMM_AVG));
}

hcomm_status_t hcomm_compress_state_create(hcomm_comm_t comm, size_t count,
                                           hcomm_compress_state_t *state) {
    hcomm_comm_impl_t *c;
    if (!state)
        return hcomm_error(HCOMM_ERR_INVALID_ARG,
                           "hcomm_compress_state_create: state is NULL");
    *state = NULL;
    hcomm_status_t st = hcomm_comm_lookup(comm, &c);
    if (st != HCOMM_SUCCESS) return st;
    hcomm_compress_state_t s = calloc(1, sizeof(*s));
    if (s) s->worker = calloc(count ? count : 1, sizeof(float));
    if (!s || !s->worker) {
        free(s);
        return hcomm_error(HCOMM_ERR_NO_MEMORY,
                           "no memory for the residuals of %zu values", count);
    }
    s->comm = comm;
    s->count = count;
    s->device = -1; /* host memory until a call on a GPU moves them */
    *state = s;
    return HCOMM_SUCCESS;
}

hcomm_status_t hcomm_compress_state_reset(hcomm_compress_state_t state) {
    if (!state)
        return hcomm_error(HCOMM_ERR_INVALID_ARG,
                           "hcomm_compress_state_reset: state is NULL");
    hcomm_cx_t x;
    hcomm_cx_init(&x, state->device, NULL);
    hcomm_cx_zero(&x, state->worker, state->count * sizeof(float));
    if (state->server) hcomm_cx_zero(&x, state->server, state->chunk * 4);
    return hcomm_cx_sync(&x);
}

hcomm_status_t hcomm_compress_state_free(hcomm_compress_state_t *state) {
    if (!state) return HCOMM_SUCCESS;
    hcomm_compress_state_t s = *state;
    if (s) {
        hcomm_cx_t x;
        hcomm_cx_init(&x, s->device, NULL);
        hcomm_cx_free(&x, s->worker, (s->count ? s->count : 1) * sizeof(float));
        hcomm_cx_free(&x, s->server, s->chunk * sizeof(float));
        hcomm_cx_finish(&x);
        free(s);
        *state = NULL;
    }
    return HCOMM_SUCCESS;
}
