/* Internals shared by the simulator's files: the symmetry that picks the
 * simulated ranks, and the compact steps they run. */
#ifndef HCOMM_TOOLS_SIM_INT_H
#define HCOMM_TOOLS_SIM_INT_H

#include "hcomm_sim.h"

/* The executor's window (EXEC_WINDOW in src/coll/exec.c): steps considered
 * past the first incomplete one. */
#define SIM_WINDOW 256

enum { SYM_NONE = 0, SYM_SHIFT, SYM_XOR };

/* A group of node renamings under which the plans are equivariant. The
 * simulated ranks are those of nodes [0, G): every node is the image of
 * exactly one of them under exactly one group element. */
typedef struct {
    int kind;
    int N, L, G; /* nodes, ranks per node, representative nodes */
} hcomm_sim_sym_t;

/* The element that takes node j into [0, G), and a node or rank under an
 * element (inverse: the other way). */
int hcomm_sim_sym_elem(const hcomm_sim_sym_t *s, int node);
int hcomm_sim_sym_node(const hcomm_sim_sym_t *s, int k, int node, int inverse);
int hcomm_sim_sym_rank(const hcomm_sim_sym_t *s, int k, int rank, int inverse);

/* A step as the simulator needs it: 32 bytes instead of the plan's 80. */
typedef struct {
    uint64_t bytes;
    int32_t peer; /* real rank */
    int32_t dep[2];
    uint32_t epoch;
    uint16_t tag;
    uint8_t kind;
    /* a send of the caller's input buffer; in place the last call wrote
     * it, so not then */
    uint8_t from_input;
} hcomm_sim_step_t;

/* The plan of rank for call c on shape sh (builder's form). */
hcomm_status_t hcomm_sim_build(const hcomm_sim_model_t *m,
                               const hcomm_sim_shape_t *sh,
                               const hcomm_sim_call_t *c, int rank,
                               hcomm_plan_t *plan);

/* Picks the symmetry to simulate under: the first of shift (by a node, or
 * by the nodes a switch holds), exclusive-or, and shift by the nodes the
 * count's block pattern spans, that the shape allows and the plans obey for
 * sampled ranks and elements, else none. */
hcomm_status_t hcomm_sim_find_symmetry(const hcomm_sim_model_t *m,
                                       const hcomm_sim_shape_t *sh,
                                       const hcomm_sim_call_t *c,
                                       hcomm_sim_sym_t *out);

/* A call of a shared-memory algorithm (hcomm_sim_shm.c). */
hcomm_status_t hcomm_sim_shm_run(const hcomm_sim_model_t *m,
                                 const hcomm_sim_shape_t *sh,
                                 const hcomm_sim_call_t *c,
                                 hcomm_sim_result_t *out, char *err,
                                 size_t errlen);

#endif
