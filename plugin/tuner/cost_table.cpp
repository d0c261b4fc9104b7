#include "plugin/tuner/cost_table.h"

#include <cmath>

#include "plugin/tuner/tuner_api_mapping.h"

namespace topocoll::plugin::tuner {

bool CostTable::set_enabled(int algo, int proto, double time_us) {
  if (!enabled(algo, proto) || !std::isfinite(time_us) || time_us < 0) return false;
  float v = static_cast<float>(time_us);
  if (!std::isfinite(v)) return false;
  data_[algo * num_proto_ + proto] = v;
  return true;
}

std::optional<std::pair<int, int>> CostTable::best() const {
  std::optional<std::pair<int, int>> pick;
  float best_time = 0;
  for (int a = 0; a < num_algo_; ++a)
    for (int p = 0; p < num_proto_; ++p) {
      float t = at(a, p);
      if (t >= 0 && (!pick || t < best_time)) {
        pick = std::make_pair(a, p);
        best_time = t;
      }
    }
  return pick;
}

bool ring_relegated(const CostTable& table, const sched::NcclAlgorithmModel& model, ncclFunc_t coll,
                    double nbytes, int num_pipe_ops) {
  if (model.nranks() <= kRingRelegationMinRanks) return false;
  double ring_lowest = -1, other_highest = -1;  // NCCL's time over the model's
  for (int a = 0; a < table.num_algo(); ++a)
    for (int p = 0; p < table.num_proto(); ++p) {
      if (!table.enabled(a, p)) continue;
      const auto t = predict_us(model, coll, a, p, nbytes, num_pipe_ops);
      if (!t || !(*t > 0)) continue;
      const double ratio = double(table.at(a, p)) / *t;
      if (a == NCCL_ALGO_RING) ring_lowest = ring_lowest < 0 ? ratio : std::min(ring_lowest, ratio);
      else other_highest = std::max(other_highest, ratio);
    }
  return ring_lowest > 0 && other_highest > 0 && ring_lowest >= kRingRelegationEvidence * other_highest;
}

int apply_model(CostTable& table, const sched::NcclAlgorithmModel& model, ncclFunc_t coll,
                double nbytes, int num_pipe_ops) {
  const double ring_factor = ring_relegated(table, model, coll, nbytes, num_pipe_ops) ? kRingRelegation : 1.0;
  int changed = 0;
  for (int a = 0; a < table.num_algo(); ++a)
    for (int p = 0; p < table.num_proto(); ++p) {
      if (!table.enabled(a, p)) continue;
      if (auto t = predict_us(model, coll, a, p, nbytes, num_pipe_ops))
        changed += table.set_enabled(a, p, *t * (a == NCCL_ALGO_RING ? ring_factor : 1.0));
    }
  return changed;
}

}  // namespace topocoll::plugin::tuner
