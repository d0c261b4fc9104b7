// NCCL's cost table (tuner v3+): float[numAlgo][numProto], row-major, handed over as float**.
// Each entry is NCCL's predicted time in microseconds, or NCCL_ALGO_PROTO_IGNORE (-1) for a
// combination NCCL ruled out; NCCL then runs the smallest non-negative entry.
// Rule kept here for every writer: only enabled (>= 0) entries change, and only to finite
// non-negative values, so nothing NCCL disabled is ever re-enabled.
#pragma once

#include <optional>
#include <utility>

#include "plugin/nccl_api/tuner_v2.h"
#include "sched/nccl_algorithm_model.h"

namespace topocoll::plugin::tuner {

class CostTable {
 public:
  CostTable(float** table, int num_algo, int num_proto)
      : data_(reinterpret_cast<float*>(table)), num_algo_(table ? num_algo : 0),
        num_proto_(table ? num_proto : 0) {}

  int num_algo() const { return num_algo_; }
  int num_proto() const { return num_proto_; }
  bool contains(int algo, int proto) const {
    return algo >= 0 && algo < num_algo_ && proto >= 0 && proto < num_proto_;
  }
  bool enabled(int algo, int proto) const { return contains(algo, proto) && at(algo, proto) >= 0; }
  float at(int algo, int proto) const { return data_[algo * num_proto_ + proto]; }
  // Writes only over an enabled entry and only a finite value >= 0, capped below NCCL's
  // search ceiling; returns whether it did.
  static constexpr double kBelowNcclsSearchCeilingUs = 3.5e9;
  bool set_enabled(int algo, int proto, double time_us);
  // NCCL's own rule: the smallest non-negative entry (first one on ties), or none.
  std::optional<std::pair<int, int>> best() const;

 private:
  float* data_;
  int num_algo_, num_proto_;
};

// NCCL 2.28 (src/enqueue.cc, topoGetAlgoTime) multiplies every Ring entry by 1024 for an fp8
// reduction on more than 8 ranks before a tuner sees the table, so that a deep ring's
// precision loss is chosen only when nothing else can run; the tuner is not told the
// datatype. The mark it leaves: NCCL's Ring times, over the model's, stand at least 32x (a
// factor between 1 and 1024 that the two models' disagreement stays far from) above the same
// ratio of every other modelled entry. Needs a modelled entry besides Ring to see it.
inline constexpr double kRingRelegation = 1024.0;
inline constexpr double kRingRelegationEvidence = 32.0;
inline constexpr int kRingRelegationMinRanks = 8;
bool ring_relegated(const CostTable& table, const sched::NcclAlgorithmModel& model, ncclFunc_t coll,
                    double nbytes, int num_pipe_ops);

// Writes the model's predicted times over the enabled entries it models for this collective
// and size (`num_pipe_ops` as NCCL passes it: a group's collectives, nbytes their sum).
// Entries it does not model (NVLS, NVLSTree, CollNet) keep NCCL's own times, which come from
// NCCL's view of the hardware (NVSwitch, SHARP) the model knows nothing of: where NCCL's own
// pick is one of them the table is left whole, and otherwise, with any of them enabled, the
// model's times are scaled so that NCCL's pick keeps NCCL's time, which keeps NCCL's own
// comparison against those entries (the model reorders only what it models). Where NCCL
// relegated Ring (ring_relegated), the model's Ring times get the same 1024x.
// Returns how many entries changed.
int apply_model(CostTable& table, const sched::NcclAlgorithmModel& model, ncclFunc_t coll,
                double nbytes, int num_pipe_ops = 1);

}  // namespace topocoll::plugin::tuner
