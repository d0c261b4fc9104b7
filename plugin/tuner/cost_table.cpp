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

int apply_model(CostTable& table, const sched::NcclAlgorithmModel& model, ncclFunc_t coll,
                double nbytes) {
  int changed = 0;
  for (int a = 0; a < table.num_algo(); ++a)
    for (int p = 0; p < table.num_proto(); ++p) {
      if (!table.enabled(a, p)) continue;
      if (auto t = predict_us(model, coll, a, p, nbytes)) changed += table.set_enabled(a, p, *t);
    }
  return changed;
}

}  // namespace topocoll::plugin::tuner
