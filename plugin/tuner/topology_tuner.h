// The one implementation behind every exported tuner version (tuner_v2.cpp .. tuner_v5.cpp
// are thin adapters onto it). One TopologyTuner per communicator, created by NCCL's init:
// it either models NCCL's algorithms on the process's topology (active) or changes nothing,
// and says why once at INFO (WARN for a broken topology file). No call throws.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include "plugin/nccl_api/tuner_v5.h"
#include "plugin/tuner/communicator_fit.h"
#include "plugin/tuner/tuner_api_mapping.h"
#include "sched/nccl_algorithm_model.h"

namespace topocoll::plugin::tuner {

class CostTable;

class TopologyTuner {
 public:
  // `constants`: NCCL's tuning constants (v5 only; nullptr = NCCL 2.28's defaults). A tuner
  // that changes nothing where the rules say so (no topology, a communicator it does not
  // describe: the same on every rank); nullptr, for NCCL's init to fail (init_context), when
  // this rank cannot build what its peers build: out of host memory (*refusal
  // ncclSystemError), or a TOPOCOLL_TOPO_FILE it cannot load (ncclInvalidUsage: a host that
  // lacks the file would keep NCCL's tables while its peers tune theirs, and ranks that pick
  // different algorithms for one collective wait for each other forever; NCCL decides each
  // rank's alone, enqueue.cc topoGetAlgoInfo).
  // `per_node`: the ranks of NCCL's smallest and largest node (v5 only; nullptr = unknown).
  static std::unique_ptr<TopologyTuner> create(size_t nranks, size_t nnodes, const ncclTunerConstants_v5_t* constants,
                                               const RanksPerNode* per_node = nullptr,
                                               ncclResult_t* refusal = nullptr) noexcept;
  // NCCL's init: *context = create(...), create's refusal when it is null.
  static ncclResult_t init_context(size_t nranks, size_t nnodes, const ncclTunerConstants_v5_t* constants,
                                   void** context, const RanksPerNode* per_node = nullptr) noexcept;

  bool active() const { return model_.has_value(); }
  const sched::NcclAlgorithmModel* model() const { return model_ ? &*model_ : nullptr; }
  // The process's topology (plugin/process_context.h) the model was built on; null when inactive.
  const topo::Topology* topology() const { return topology_.get(); }

  // v3+: rewrites the enabled entries of NCCL's cost table it models (apply_model, NCCL's
  // numPipeOps passed on). nChannels is left to NCCL. ncclSystemError when this rank ran out
  // of host memory predicting (NCCL's table untouched): NCCL then fails the call here rather
  // than pick another algorithm than its peers.
  ncclResult_t tune(ncclFunc_t coll, size_t nbytes, float** table, int num_algo, int num_proto,
            int num_pipe_ops) noexcept;

  // v2 (NCCL 2.21, which uses the answer unchecked): Ring or, for allreduce, Tree, in LL or
  // Simple — what 2.21 runs everywhere — or NCCL_ALGO_UNDEF / NCCL_PROTO_UNDEF for "NCCL
  // decides", also whenever NCCL could use CollNet or NVLS, whose times v2 does not show.
  // ncclSystemError as tune().
  ncclResult_t choose(ncclFunc_t coll, size_t nbytes, bool collnet_support, bool nvls_support, int num_pipe_ops,
              int* algorithm, int* protocol) noexcept;

 private:
  TopologyTuner() = default;
  // Logs a decision at INFO the first time a (collective, power-of-two size bucket) is seen.
  bool first_in_bucket(ncclFunc_t coll, size_t nbytes);
  void log_decision(ncclFunc_t coll, size_t nbytes, const CostTable& table,
                    const char* nccl_pick) const;

  std::shared_ptr<const topo::Topology> topology_;  // outlives model_, which refers to it
  std::optional<sched::NcclAlgorithmModel> model_;
  std::array<std::atomic<uint64_t>, ncclNumFuncs> logged_buckets_{};
};

}  // namespace topocoll::plugin::tuner
