// Generator registry: algorithm name + collective -> schedule.
//   "ring"       ring allreduce / reduce-scatter / allgather        (sched/ring.h);
//                store-and-forward ring all-to-all                   (sched/all_to_all.h)
//   "hd"         halving-doubling, all three                         (sched/halving_doubling.h)
//   "fc"         NAP whole-vector log-step allreduce and allgather;
//                direct all-to-all                                   (sched/nap_log_step.h)
//   "fc-direct"  direct reduce-scatter + allgather on a crossbar, all three;
//                direct all-to-all                                   (sched/fc_direct.h)
//   "direct"     direct all-to-all                                   (sched/all_to_all.h)
//   "hier"       two-level allreduce over groups                     (sched/hierarchical.h)
// `order` maps the algorithm's logical position (ring position, HD virtual rank, package-
// major position) to communicator rank; identity when empty.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sched/hierarchical.h"
#include "sched/schedule.h"

namespace topocoll::sched {

struct GenerateRequest {
  std::string algo;
  Collective collective = Collective::AllReduce;
  int nranks = 1;
  int64_t count = 0;
  std::vector<int> order;  // empty: identity
  HierParams hier;         // "hier" only; group_size 1 means one rank per group
};

// Throws std::invalid_argument naming the algorithm and collective when the pair is not
// supported, or the parameter that is wrong.
Schedule generate(const GenerateRequest& request);
Schedule generate(std::string_view algo, Collective collective, int nranks, int64_t count,
                  std::span<const int> order = {});

bool is_supported(std::string_view algo, Collective collective);
// The algorithm names that generate `collective`, in the order listed above.
std::vector<std::string> algorithms_for(Collective collective);

}  // namespace topocoll::sched
