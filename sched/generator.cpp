#include "sched/generator.h"

#include <stdexcept>

#include "sched/algorithm_registry.h"

namespace topocoll::sched {

Schedule generate(const GenerateRequest& r) {
  const Algorithm* algorithm = find_algorithm(r.algo);
  if (!algorithm)
    throw std::invalid_argument("unknown algorithm \"" + r.algo + "\" (known: " + algorithm_list() + ")");
  BuildInput input;
  input.shape.collective = r.collective;
  input.shape.nranks = r.nranks;
  input.count = r.count;
  input.order = r.order;
  return build_schedule(*algorithm, input);
}

Schedule generate(std::string_view algo, Collective collective, int nranks, int64_t count,
                  std::span<const int> order) {
  GenerateRequest r;
  r.algo = std::string(algo);
  r.collective = collective;
  r.nranks = nranks;
  r.count = count;
  r.order.assign(order.begin(), order.end());
  return generate(r);
}

}  // namespace topocoll::sched
