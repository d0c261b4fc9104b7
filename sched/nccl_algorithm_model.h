// NCCL's own algorithms laid over a topology: how long NCCL's Ring, Tree (double binary
// tree) and PAT would take for a collective of n bytes on this fabric with each protocol
// (LL, LL128, Simple). Below both NCCL faces: the tuner re-ranks NCCL's cost table with it
// where NCCL's generic model cannot see the wiring (e.g. a rank-order ring whose hops share
// BiGraph inter-group links), and the interposer's `auto` compares topocoll against NCCL's
// best with it.
//
// Fabric terms come from the project's cost model (sched/cost_model.h): each algorithm's
// concurrent transfers are written as a small Schedule (one step of the ring, every edge of
// both trees, PAT's log steps) and costed with link sharing; a pattern step then takes
// latency_us + bytes * us_per_byte. Protocol terms are NCCL's (2.28, src/graph/tuning.cc):
//   bandwidth efficiency   Ring  LL 0.5   LL128 0.92        Simple 1.0
//                          Tree  LL 0.92/3.8  LL128 0.92*120/128  Simple 0.92
//                          PAT   Simple 0.75
//   latencies (us)         base + per step "hw" latency (NET between hosts, NVLink inside
//                          one), NCCL's defaults or the constants NCCL hands to a v5 tuner;
//                          a ring's NET step at one GPU per node the Tree's NET latency, a
//                          step inside a node at least the network overhead on several nodes;
//                          PAT also NCCL's linear term 2.8 us per rank; times numPipeOps (ring)
//                          or its batches of 10 (the others) for grouped collectives.
// Which (collective, algorithm, protocol) NCCL can run follows NCCL 2.28: Tree only for
// allreduce; PAT only for allgather/reduce-scatter, Simple only, one GPU per node;
// broadcast/reduce only Ring. Everything else (CollNet, NVLS) is not modelled.
//
// Algorithms and protocols are NCCL's indices (the rows and columns of its cost table,
// NCCL_ALGO_* and NCCL_PROTO_*); no NCCL header is needed here.
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "sched/placement.h"
#include "topo/topology.h"

namespace topocoll::sched {

// NCCL 2.28's algorithm indices.
enum NcclAlgorithm : int {
  kNcclTree = 0,
  kNcclRing = 1,
  kNcclCollNetDirect = 2,
  kNcclCollNetChain = 3,
  kNcclNvls = 4,
  kNcclNvlsTree = 5,
  kNcclPat = 6,
};
inline constexpr int kNumNcclAlgorithms = 7;
// NCCL 2.28's protocol indices.
enum NcclProtocol : int { kNcclLL = 0, kNcclLL128 = 1, kNcclSimple = 2 };
inline constexpr int kNumNcclProtocols = 3;
// NCCL 2.28's NCCL_MAX_DEV_WORK_BATCH_COLLS (src/include/device.h): 1024 / sizeof(ncclDevWorkColl).
inline constexpr int kNcclMaxWorkBatchColls = 10;
// NCCL 2.28's network overhead per ring step inside a node on several nodes (getNetOverhead:
// x86 Intel and the default; AMD 2 us, NCCL_NET_OVERHEAD sets it).
inline constexpr double kNcclNetOverheadUs = 1.0;

// The collectives the model has something to say about.
enum class NcclCollective { Broadcast, Reduce, AllGather, ReduceScatter, AllReduce };

const char* nccl_algorithm_name(int algo);  // "Tree", "Ring", ... as NCCL prints them
const char* nccl_protocol_name(int proto);  // "LL", "LL128", "Simple"

// NCCL's latency constants, microseconds.
struct NcclLatencies {
  double base[kNumNcclAlgorithms][kNumNcclProtocols];
  double intra_host[kNumNcclAlgorithms][kNumNcclProtocols];  // NCCL's NVLink hw latencies
  double inter_host[kNumNcclAlgorithms][kNumNcclProtocols];  // NCCL's NET hw latencies
};
NcclLatencies default_nccl_latencies();  // NCCL 2.28's defaults

// Fabric cost of one step of a pattern: latency_us + bytes * us_per_byte, where bytes is the
// pattern's unit (a ring hop's message, a tree's whole buffer, a PAT chunk).
struct PatternCost {
  double latency_us = 0;
  double us_per_byte = 0;
};

class NcclAlgorithmModel {
 public:
  // `placement`: rank -> endpoint in NCCL's rank numbering; nnodes: NCCL's node count.
  NcclAlgorithmModel(const topo::Topology& topology, const Placement& placement, int nnodes,
                     const NcclLatencies& latencies);

  // Predicted time in microseconds of NCCL's `algo` with `proto` for `coll` of `nbytes` (NCCL's
  // nBytes: the allreduce/broadcast/reduce buffer, the whole gathered / scattered buffer for
  // allgather / reduce-scatter); nullopt when NCCL cannot run that combination or the model
  // has nothing to say about it. `num_pipe_ops`: NCCL's numPipeOps, the collectives of one
  // group launched together, each paying the latency again on a ring (per batch of 10
  // otherwise); nbytes is then their sum, as NCCL passes it.
  std::optional<double> predict_us(NcclCollective coll, int algo, int proto, double nbytes,
                                   int num_pipe_ops = 1) const;

  int nranks() const { return nranks_; }
  int nnodes() const { return nnodes_; }
  // The fabric terms, for tests and the decision log.
  const PatternCost& ring() const { return ring_; }
  const PatternCost& chain() const { return chain_; }
  const PatternCost& tree() const { return tree_; }
  const std::vector<PatternCost>& pat_steps() const { return pat_steps_; }
  int tree_depth() const { return tree_depth_; }

 private:
  struct Terms {
    double latency_us = 0;   // paid once per op (ring) or per batch of ops
    double transfer_us = 0;  // the bytes at the pattern's rate
  };
  std::optional<Terms> terms(NcclCollective coll, int algo, int proto, double nbytes) const;

  int nranks_ = 0, nnodes_ = 0, ranks_per_node_ = 1;
  NcclLatencies lat_;
  PatternCost ring_, chain_, tree_;
  std::vector<PatternCost> pat_steps_;  // empty when PAT does not apply (several GPUs per node)
  int tree_depth_ = 0;                  // inter-node levels of the deeper of the two trees
};

// NCCL's double binary tree over `n` nodes (NCCL 2.4+, "two binary trees, each node a leaf
// in one of them"): parent of every node in tree 0 and tree 1, -1 for a root. Tree 0 is the
// in-order binary tree rooted at node 0 (whose one child is the largest power of two < n);
// tree 1 mirrors it (n even) or shifts it by one (n odd).
std::vector<int> btree_parents(int n, int which_tree);

}  // namespace topocoll::sched
