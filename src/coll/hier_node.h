/* Hierarchical calls with their node stages on shared memory or CUDA IPC (see
 * hier_node.c). */
#ifndef HCOMM_COLL_HIER_NODE_H
#define HCOMM_COLL_HIER_NODE_H

#include "coll/select.h"
#include "core/comm.h"

/* Whether a blocking call of coll, of bytes (count * element size), for
 * which algo was chosen, runs as node and rail stages: allreduce and
 * broadcast, reduce_scatter and allgather from 4 MiB in all; hierarchical
 * chosen by size (not forced), topology-aware, several nodes of one size,
 * at least 2 ranks each. The same answer on every rank. */
int hcomm_hier_node_applies(const hcomm_comm_impl_t *c, hcomm_coll_t coll,
                            const hcomm_algo_t *algo, size_t bytes);
/* Whether c's nodes can take node and rail stages at all: topology-aware,
 * several nodes of one size, at least 2 ranks each. */
int hcomm_hier_node_shape_ok(const hcomm_comm_impl_t *c);
/* This rank's node and rail communicators, made on first use (collective:
 * every rank of c must reach it in the same call). */
hcomm_status_t hcomm_hier_subcomms(hcomm_comm_impl_t *c, hcomm_comm_t *node,
                                   hcomm_comm_t *rail);
/* Allreduce runs on any memory the node and rail calls take (its stages
 * need no scratch), in chunks of chunk bytes; it divides for HCOMM_AVG with
 * the CPU. The others run on host memory, in chunks of HCOMM_CHUNK_SIZE
 * (ReduceScatter and AllGather regroup blocks with the CPU). */
hcomm_status_t hcomm_hier_node_allreduce(hcomm_comm_impl_t *c,
                                         const void *sendbuf, void *recvbuf,
                                         size_t count, hcomm_dtype_t dtype,
                                         hcomm_op_t op, size_t chunk);
hcomm_status_t hcomm_hier_node_reduce_scatter(hcomm_comm_impl_t *c,
                                              const void *sendbuf,
                                              void *recvbuf, size_t count,
                                              hcomm_dtype_t dtype,
                                              hcomm_op_t op);
hcomm_status_t hcomm_hier_node_allgather(hcomm_comm_impl_t *c,
                                         const void *sendbuf, void *recvbuf,
                                         size_t count, hcomm_dtype_t dtype);
hcomm_status_t hcomm_hier_node_bcast(hcomm_comm_impl_t *c, void *buf,
                                     size_t count, hcomm_dtype_t dtype,
                                     int root);

#endif
