#include "plugin/interposer/plan_cache.h"

namespace topocoll::plugin::interposer {

std::size_t plan_footprint_bytes(const Plan& plan) {
  std::size_t bytes = sizeof(Plan) + plan.algo.capacity() + plan.reason.capacity();
  if (const sched::Schedule* s = plan.schedule.get()) {
    bytes += sizeof(sched::Schedule) + s->algo.capacity();
    for (const sched::RankProgram& p : s->programs)
      bytes += sizeof(p) + p.ops.capacity() * sizeof(sched::Op) +
               p.step_begin.capacity() * sizeof(uint32_t);
  }
  return bytes;
}

}  // namespace topocoll::plugin::interposer
