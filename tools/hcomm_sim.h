/* hcomm_sim: the real plans (the builders the executor runs) for a
 * communicator of any shape, run through a discrete-event cost model
 * instead of a network.
 *
 * The model. A rank is one CPU that runs its plan as the executor does:
 * ready steps in index order, at most 256 past the first incomplete one,
 * epochs respected; reductions and copies take bytes / (reduce or copy
 * bandwidth) of its CPU, posting a message takes a fixed overhead (and
 * the CPU its level costs a message, over TCP: msg_cpu). A
 * message goes over one link level: inside a node (shared memory), through
 * NICs (nodes on one switch), or through NICs and the switch level (nodes
 * on different switches). It takes latency + bytes / bandwidth, where the
 * bandwidth is what the resources on its way give it: the node's copy
 * channels (one per core) inside a node; the sender's NIC out and the
 * receiver's NIC in (a node's ranks share its rails, local rank i on
 * rail i % rails), and each node's share of the switch level out and in
 * across switches. Each resource serves messages one at a time in the
 * order they start (a busy-until time per resource), which is how a NIC
 * shared by eight ranks delivers an eighth of its bandwidth to each.
 * Messages up to eager_bytes leave when sent; larger ones wait for the
 * receive (a rendezvous, one latency more). With UCX's copy protocols in
 * the model (copy_bytes), messages up to copy_bytes leave when sent too,
 * and the sender's and the receiver's CPU pay for copying them; a larger
 * one inside a node is read by the receiver's CPU (UCX's CMA get), which
 * neither reduces nor copies anything else meanwhile.
 *
 * Scale. When the nodes are equal and numbered node-major, many plans are
 * the same on every node up to renaming nodes: a shift (rings) or an
 * exclusive-or of node numbers (recursive doubling and halving). The
 * simulator checks that symmetry on the plans themselves (plan(g r) is
 * g plan(r) for sampled ranks and group elements) and then simulates one
 * node's ranks only (one switch's nodes for a shift under several
 * switches): a message from a rank outside them is the image of one its
 * representative sends, and every node's resources are busy as the
 * representative node's are. Otherwise every rank is simulated, with the
 * plans kept in a compact form (32 bytes a step). */
#ifndef HCOMM_TOOLS_SIM_H
#define HCOMM_TOOLS_SIM_H

#include "coll/plan.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum { SIM_NODE = 0, SIM_NIC, SIM_SWITCH, SIM_LEVELS };
extern const char *const hcomm_sim_level_names[SIM_LEVELS];

typedef struct {
    double lat[SIM_LEVELS]; /* seconds; a switch crossing adds NIC's too */
    double bw[SIM_LEVELS];  /* bytes/s: per copy channel; per NIC and
                               direction; per node and direction */
    /* A message up to eager_bytes moves at eager_bw (0: bw): UCX copies it
     * through a bounce buffer on both sides, where a larger one is read in
     * place once its rendezvous has taken a latency and rndv more. */
    double eager_bw[SIM_LEVELS];
    double rndv[SIM_LEVELS]; /* seconds */
    int rails;               /* NICs per node (0: one per rank) */
    int nodes_per_switch;    /* 0: every node on one switch */
    int cores;               /* copy channels per node (0: one per rank) */
    double reduce_bw;        /* bytes of result per second, per rank */
    double copy_bw;          /* per rank */
    double overhead;         /* seconds of CPU per message posted */
    /* Seconds of CPU each side pays to post a message over the level, on
     * top of overhead: over TCP a message costs both ends the sockets'
     * work, which the CPU does not overlap with anything else it does. */
    double msg_cpu[SIM_LEVELS];
    /* A call whose buffers (send and receive, one rank's) fit in
     * cache_bytes copies and reduces cached_speedup times faster, inside
     * the node and on the CPU (0: no such effect). */
    size_t cache_bytes;
    double cached_speedup;
    /* Where cache_ranks is set, inside a node: an eager message goes at
     * that speed only between ranks that share the cache (local ranks in
     * one group of cache_ranks), others' copies at the uncached rate (and
     * their eager moves at cross_speedup times it); a
     * rendezvous (the receiver reading the sender's buffer in place) at
     * that speed where it reads the sender's input, unchanged since the
     * last call, and at cross_speedup times the uncached rate (0: 1)
     * where it reads lines the sender wrote in the call, which lie
     * modified in the sender's core's cache (in a call larger than
     * cache_bytes, the share of its bytes the cache holds; the rest at
     * the uncached rate). */
    int cache_ranks;
    double cross_speedup;
    size_t eager_bytes;
    size_t chunk_bytes; /* the plans' HCOMM_CHUNK_SIZE */
    /* UCX's copy protocols (0: off, the above alone): a message up to
     * copy_bytes leaves without waiting for its receive, copied into
     * bounce buffers of eager_bytes (fragments) by the sender's CPU and
     * out of them, as they arrive, by the receiver's, each at copy_rate
     * (0: the CPU's copy_bw); the CPUs do nothing else meanwhile. Inside a
     * node the copies are the move (shared memory): no copy channel. */
    size_t copy_bytes;
    double copy_rate[SIM_LEVELS]; /* bytes/s */
    /* A copied message of more than one fragment (over eager_bytes) goes
     * by UCX's multi-fragment protocol, whose receiver pays copy_start
     * (seconds of its CPU) once before copying the first fragment out. */
    double copy_start[SIM_LEVELS];
    /* A level where UCX sends a message of up to zcopy_bytes as one
     * message from the sender's buffer (over TCP, 16,483 B: UCX_PROTO_INFO
     * names it zero-copy eager): it leaves when sent, at eager_bw, and
     * neither CPU copies it (0: none such, the copy protocols above). */
    size_t zcopy_bytes[SIM_LEVELS];
    /* The node's shared-memory algorithms (hcomm_sim_shm.c): a call's
     * fixed cost, a peer's flag seen (seconds each), a peer's slot lines
     * read at shm_peer_speedup times the CPU's rate, whether direct reads
     * (CMA) work, a process_vm_readv's cost and its copy rate, and the
     * input slot (0: the library's, HCOMM_SHM_SLOT_SIZE); shm: the file gave
     * them (else no such rows). */
    int shm;
    double shm_call, shm_flag, shm_peer_speedup;
    int shm_cma;
    double shm_cma_call, shm_cma_bw;
    size_t shm_slot_bytes;
} hcomm_sim_model_t;

/* Nodes numbered by their lowest rank, as topo.h numbers them. */
typedef struct {
    int size, nnodes;
    int *node_of;   /* [size] */
    int *local;     /* [size] index among its node's ranks */
    int *node_size; /* [nnodes] */
} hcomm_sim_shape_t;

typedef struct {
    const hcomm_algo_t *algo;
    size_t count; /* elements, as the collective's count argument */
    size_t esize;
    int root, inplace, scale;
    /* Optional (every rank simulated): run the steps on real buffers, so
     * results can be compared with the verifier's. scratch is allocated. */
    void **sendbufs, **recvbufs;
    hcomm_dtype_t dtype;
    hcomm_op_t op;
    uint64_t max_steps; /* refuse a run that would simulate more (0: 32M) */
    double max_build_seconds; /* refuse one whose plans take longer (0: 30) */
    int no_symmetry;          /* simulate every rank */
    /* Calls back to back, each rank starting the next once its last one
     * is done, as hcomm_perf times them (0: 1; on real buffers, 1); time,
     * bytes and messages are then per call. A rank that waits for nobody
     * (a broadcast's root) runs ahead. */
    int calls;
} hcomm_sim_call_t;

typedef struct {
    double time;              /* seconds, until the last rank is done */
    double bytes[SIM_LEVELS]; /* sent over each level, all ranks */
    double msgs[SIM_LEVELS];  /* messages over each level, all ranks */
    uint64_t steps;           /* steps simulated */
    double steps_all;         /* steps of every rank of the real run */
    int simulated_ranks;      /* representatives */
    const char *symmetry;     /* "none", "node-shift", "node-xor" */
    /* The critical path: from the step done last, back through what each
     * step waited for last. */
    int cp_steps, cp_msgs[SIM_LEVELS];
    double cp_cpu, cp_msg[SIM_LEVELS], cp_wait; /* seconds */
} hcomm_sim_result_t;

/* Shapes. Node-major equal nodes, or labels (any ints) per rank. */
int hcomm_sim_shape_regular(hcomm_sim_shape_t *sh, int nnodes, int ppn);
int hcomm_sim_shape_labels(hcomm_sim_shape_t *sh, int size, const int *label);
void hcomm_sim_shape_free(hcomm_sim_shape_t *sh);

/* Model figures, defaults (a cluster of NVLink-less 8-rank nodes on
 * 200 Gb/s rails) and a file in HCOMM_OVERRIDE_TOPO's format extended
 * with link figures (hcomm_sim_model.c says which keys). */
void hcomm_sim_model_default(hcomm_sim_model_t *m);
hcomm_status_t hcomm_sim_load(const char *path, hcomm_sim_model_t *m,
                              hcomm_sim_shape_t *sh, char *err, size_t len);

/* The shared-memory algorithms, as rows beside the plans' on one node:
 * "shm" (what selection takes), "shm_oneshot", "shm_twoshot" and
 * "shm_cma"; hcomm_sim_run runs them through their formulas. */
extern const hcomm_algo_t hcomm_sim_shm_algos[];
extern const int hcomm_sim_nshm_algos;
int hcomm_sim_is_shm(const hcomm_algo_t *a);

/* Runs one call. HCOMM_ERR_UNSUPPORTED: the algorithm declines the shape,
 * or the run is over max_steps (err says which). */
hcomm_status_t hcomm_sim_run(const hcomm_sim_model_t *m,
                             const hcomm_sim_shape_t *sh,
                             const hcomm_sim_call_t *c, hcomm_sim_result_t *out,
                             char *err, size_t errlen);

/* nccl-tests' conventions, as hcomm_perf reports them: the size of a call
 * (the larger buffer), its count argument for a size, and busbw's
 * factor. */
size_t hcomm_sim_count_for(hcomm_coll_t coll, size_t bytes, size_t esize,
                           int n);
double hcomm_sim_busbw_factor(hcomm_coll_t coll, int n);

/* The selection table (hcomm_sim_select.c): its i-th shape and size (0 or
 * NULL past the last), the fastest algorithm for one cell (only: that
 * algorithm alone), and the whole table as src/coll/select_table.c. */
int hcomm_sim_select_shape(int i, hcomm_coll_t *coll, int *nodes, int *ppn);
size_t hcomm_sim_select_size(int i);
hcomm_status_t hcomm_sim_select_best(const hcomm_sim_model_t *m,
                                     hcomm_coll_t coll, int nodes, int ppn,
                                     size_t bytes, const char *only,
                                     const hcomm_algo_t **best, double *time,
                                     char *err, size_t len);
/* This machine's reduce (float32 sum) and copy bandwidth, bytes/s of
 * result (hcomm_sim_cpu.c). */
int hcomm_sim_measure_cpu(double *reduce_bw, double *copy_bw);
int hcomm_sim_write_select_table(const hcomm_sim_model_t *m,
                                 const char *model_path, FILE *f);

#endif
