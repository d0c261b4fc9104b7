#include "plugin/tuner/cost_table.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <utility>

#include "plugin/tuner/tuner_api_mapping.h"

namespace topocoll::plugin::tuner {

bool CostTable::set_enabled(int algo, int proto, double time_us) {
  if (!enabled(algo, proto) || !std::isfinite(time_us) || time_us < 0) return false;
  // NCCL searches below 3600000000 us only (enqueue.cc topoGetAlgoInfo, minTime = 1 hour):
  // an entry written at or above it is never picked, and a table of only such entries fails
  // the collective ("no algorithm/protocol available"). Longer predictions stay selectable.
  data_[algo * num_proto_ + proto] = static_cast<float>(std::min(time_us, kBelowNcclsSearchCeilingUs));
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

namespace {

// The model's time for every enabled entry of the table it models (-1 elsewhere), computed
// once per call: NCCL asks the tuner on every collective it enqueues.
using Predictions = std::array<double, sched::kNumNcclAlgorithms * sched::kNumNcclProtocols>;

Predictions predict_enabled(const CostTable& table, const sched::NcclAlgorithmModel& model, ncclFunc_t coll,
                            double nbytes, int num_pipe_ops) {
  Predictions out;
  out.fill(-1);
  for (int a = 0; a < std::min(table.num_algo(), sched::kNumNcclAlgorithms); ++a)
    for (int p = 0; p < std::min(table.num_proto(), sched::kNumNcclProtocols); ++p)
      if (table.enabled(a, p))
        if (const auto t = predict_us(model, coll, a, p, nbytes, num_pipe_ops))
          out[std::size_t(a * sched::kNumNcclProtocols + p)] = *t;
  return out;
}

bool ring_relegated(const CostTable& table, const sched::NcclAlgorithmModel& model, const Predictions& predicted) {
  if (model.nranks() <= kRingRelegationMinRanks) return false;
  double ring_lowest = -1, other_highest = -1;  // NCCL's time over the model's
  for (int a = 0; a < sched::kNumNcclAlgorithms; ++a)
    for (int p = 0; p < sched::kNumNcclProtocols; ++p) {
      const double t = predicted[std::size_t(a * sched::kNumNcclProtocols + p)];
      if (!(t > 0)) continue;
      const double ratio = double(table.at(a, p)) / t;
      if (a == NCCL_ALGO_RING) ring_lowest = ring_lowest < 0 ? ratio : std::min(ring_lowest, ratio);
      else other_highest = std::max(other_highest, ratio);
    }
  return ring_lowest > 0 && other_highest > 0 && ring_lowest >= kRingRelegationEvidence * other_highest;
}

}  // namespace

bool ring_relegated(const CostTable& table, const sched::NcclAlgorithmModel& model, ncclFunc_t coll,
                    double nbytes, int num_pipe_ops) {
  return ring_relegated(table, model, predict_enabled(table, model, coll, nbytes, num_pipe_ops));
}

int apply_model(CostTable& table, const sched::NcclAlgorithmModel& model, ncclFunc_t coll,
                double nbytes, int num_pipe_ops) {
  const Predictions predicted = predict_enabled(table, model, coll, nbytes, num_pipe_ops);
  const double ring_factor = ring_relegated(table, model, predicted) ? kRingRelegation : 1.0;
  auto modelled = [&](int a, int p) {
    if (a >= sched::kNumNcclAlgorithms || p >= sched::kNumNcclProtocols) return -1.0;
    const double t = predicted[std::size_t(a * sched::kNumNcclProtocols + p)];
    return t < 0 ? -1.0 : t * (a == NCCL_ALGO_RING ? ring_factor : 1.0);
  };
  const std::optional<std::pair<int, int>> nccl_pick = table.best();
  if (!nccl_pick) return 0;
  const double pick_modelled = modelled(nccl_pick->first, nccl_pick->second);
  if (pick_modelled < 0) return 0;  // NCCL's pick is hardware the model does not know
  bool any_unmodelled = false;
  for (int a = 0; a < table.num_algo(); ++a)
    for (int p = 0; p < table.num_proto(); ++p) any_unmodelled |= table.enabled(a, p) && modelled(a, p) < 0;
  const double scale =
      any_unmodelled && pick_modelled > 0 ? double(table.at(nccl_pick->first, nccl_pick->second)) / pick_modelled : 1.0;
  int changed = 0;
  for (int a = 0; a < sched::kNumNcclAlgorithms; ++a)
    for (int p = 0; p < sched::kNumNcclProtocols; ++p)
      if (const double t = modelled(a, p); t >= 0) changed += table.set_enabled(a, p, t * scale);
  return changed;
}

}  // namespace topocoll::plugin::tuner
