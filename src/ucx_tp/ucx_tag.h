/* Internal to src/ucx_tp: the 64-bit UCP tag layout and the per-communicator
 * state shared by ucx_tp.c (setup) and ucx_ops.c (the data path).
 *
 * THE TAG LAYOUT (reference), most significant bit first:
 *
 *   63        48 47                 28   27   26      16 15          0
 *  +-----------+---------------------+------+----------+-------------+
 *  | comm_id:16| source rank in comm | kind | seq:11   | step:16     |
 *  |           | :20                 | :1   |          |             |
 *  +-----------+---------------------+------+----------+-------------+
 *
 *  comm_id  the id given to hcomm_ucx_tp_create (same on all ranks)
 *  source   the sender's rank in the communicator (so at most 2^20 ranks)
 *  kind     hcomm_tag_t.kind: 0 collective, 1 point-to-point
 *  seq      hcomm_tag_t.seq mod 2^11
 *  step     hcomm_tag_t.step mod 2^16
 *
 * Receives are posted with the full mask (all 64 bits), so a receive matches
 * exactly one source, communicator, kind, sequence (mod 2^11) and step (mod
 * 2^16). UCX keeps messages with the same tag from the same endpoint in
 * order, which gives the per-(peer, tag) ordering that tp.h asks for.
 */
#ifndef HCOMM_UCX_TAG_H
#define HCOMM_UCX_TAG_H

#include "core/tp.h"

#include <mpi.h>
#include <stdint.h>

/* UCX's headers (1.22: ucs/arch/x86_64/bitops.h, atomic.h) use the GNU
 * keyword asm, which -std=c11 does not have: they get its reserved
 * spelling while they are read. */
#ifndef asm
#define asm __asm__
#define HCOMM_UCX_ASM_DEFINED
#endif
#include <ucp/api/ucp.h>
#include <uct/api/uct.h> /* the rails' devices (ucx_rails.c) */
#include <ucs/debug/log_def.h>
#ifdef HCOMM_UCX_ASM_DEFINED
#undef asm
#undef HCOMM_UCX_ASM_DEFINED
#endif

#define HCOMM_UCX_COMM_BITS 16
#define HCOMM_UCX_SRC_BITS 20
#define HCOMM_UCX_KIND_BITS 1
#define HCOMM_UCX_SEQ_BITS 11
#define HCOMM_UCX_STEP_BITS 16

/* bit positions: step 0, seq 16, kind 27, source 28, comm_id 48 */
#define HCOMM_UCX_STEP_SHIFT 0
#define HCOMM_UCX_SEQ_SHIFT (HCOMM_UCX_STEP_SHIFT + HCOMM_UCX_STEP_BITS)
#define HCOMM_UCX_KIND_SHIFT (HCOMM_UCX_SEQ_SHIFT + HCOMM_UCX_SEQ_BITS)
#define HCOMM_UCX_SRC_SHIFT (HCOMM_UCX_KIND_SHIFT + HCOMM_UCX_KIND_BITS)
#define HCOMM_UCX_COMM_SHIFT (HCOMM_UCX_SRC_SHIFT + HCOMM_UCX_SRC_BITS)

#define HCOMM_UCX_MAX_RANKS (1 << HCOMM_UCX_SRC_BITS)
#define HCOMM_UCX_TAG_MASK_FULL ((ucp_tag_t)-1)

_Static_assert(HCOMM_UCX_SEQ_SHIFT == 16 && HCOMM_UCX_KIND_SHIFT == 27 &&
                   HCOMM_UCX_SRC_SHIFT == 28 && HCOMM_UCX_COMM_SHIFT == 48 &&
                   HCOMM_UCX_COMM_SHIFT + HCOMM_UCX_COMM_BITS == 64,
               "the tag layout documented above");

/* The bits above kind: the communicator and the source rank. */
static inline ucp_tag_t hcomm_ucx_tag_base(uint16_t comm_id, int src) {
    return ((ucp_tag_t)comm_id << HCOMM_UCX_COMM_SHIFT) |
           ((ucp_tag_t)(uint32_t)src << HCOMM_UCX_SRC_SHIFT);
}

/* The low 28 bits: kind, seq and step, truncated to their widths. */
static inline ucp_tag_t hcomm_ucx_tag_low(hcomm_tag_t t) {
    return ((ucp_tag_t)(t.kind & 1u) << HCOMM_UCX_KIND_SHIFT) |
           ((ucp_tag_t)(t.seq & ((1u << HCOMM_UCX_SEQ_BITS) - 1))
            << HCOMM_UCX_SEQ_SHIFT) |
           ((ucp_tag_t)(t.step & ((1u << HCOMM_UCX_STEP_BITS) - 1))
            << HCOMM_UCX_STEP_SHIFT);
}

/* Per-communicator state: tp->priv. One allocation (eps is a flexible
 * array); the endpoints themselves belong to the process-wide cache. */
#define HCOMM_UCX_MAX_RAILS 8
#define HCOMM_UCX_RAIL_SLOTS 16

typedef struct hcomm_ucx_comm {
    ucp_worker_h worker;
    ucp_tag_t send_base; /* hcomm_ucx_tag_base(comm_id, own rank) */
    ucp_tag_t recv_base; /* hcomm_ucx_tag_base(comm_id, 0) */
    uint32_t recv_attr;  /* HCOMM_UCX_RECV_ATTR_IMM or _NO_IMM */
    uint16_t comm_id;
    int size;
    /* Multipath (ucx_rails.h): 0 rails, or an endpoint per rail to every
     * rank on another node (rail_eps[rank * nrails + rail], NULL for the
     * ranks of this node) and the rail of each tag slot. */
    int nrails;
    uint8_t pattern[HCOMM_UCX_RAIL_SLOTS];
    int8_t *rail_near; /* [size]: each rank's nearest rail, -1 for none */
    ucp_worker_h rail_worker[HCOMM_UCX_MAX_RAILS];
    ucp_ep_h *rail_eps;
    ucp_ep_h eps[]; /* by rank in the communicator, self included */
} hcomm_ucx_comm_t;

/* Request state kept in hcomm_tp_req_t.handle_store while the UCX request is
 * in flight: two flag bits (handshake between the completion callback and
 * cancel, see ucx_ops.c) and, for receives, the expected length above them.
 */
#define HCOMM_UCX_RS_DONE 1u      /* the callback has run (or is running) */
#define HCOMM_UCX_RS_CANCELING 2u /* cancel owns freeing the UCX request */
#define HCOMM_UCX_RS_LEN_SHIFT 2

/* The op_attr_mask for ucp_tag_recv_nbx. UCX before 1.16 does not fill
 * recv_info.tag_info when a tag receive completes immediately, so the length
 * of the message could not be checked; there receives use
 * UCP_OP_ATTR_FLAG_NO_IMM_CMPL instead (UCX then runs the callback, with the
 * info, before ucp_tag_recv_nbx returns). Chosen once from the UCX library
 * version at run time. */
#define HCOMM_UCX_RECV_ATTR_BASE                                               \
    (UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA)
#define HCOMM_UCX_RECV_ATTR_IMM                                                \
    (HCOMM_UCX_RECV_ATTR_BASE | UCP_OP_ATTR_FIELD_RECV_INFO)
#define HCOMM_UCX_RECV_ATTR_NO_IMM                                             \
    (HCOMM_UCX_RECV_ATTR_BASE | UCP_OP_ATTR_FLAG_NO_IMM_CMPL)

/* Requests that cancel had to abandon to UCX still running (ucx_ops.c);
 * finalize lets the worker settle longer when there are any. */
extern unsigned long hcomm_ucx_abandoned;

extern const hcomm_tp_ops_t hcomm_ucx_ops;

/* ucx_tp.c, for the rails' setup: vals[0] is each rank's status, and every
 * value becomes its maximum over comm (every rank returns alike); the lock
 * of the process-wide state; the size of MPI_COMM_WORLD. */
hcomm_status_t hcomm_ucx_agree(MPI_Comm comm, int *vals, int n);
void hcomm_ucx_lock(void);
void hcomm_ucx_unlock(void);
int hcomm_ucx_world_size(void);
/* How long finalize waits for its endpoints' closes (a flush over a link
 * that went down never ends): HCOMM_TIMEOUT, at most 10 s. */
double hcomm_ucx_close_seconds(void);
/* Frees the per-communicator state; the endpoints stay in the cache. */
void hcomm_ucx_tp_destroy(hcomm_tp_t *tp);

#endif
