#include "plugin/interposer/call_route_cache.h"

namespace topocoll::plugin::interposer {

std::size_t route_footprint_bytes(const Route& route) {
  std::size_t bytes = sizeof(Route) + route.algo.capacity() + route.reason.capacity();
  if (const sched::Schedule* s = route.schedule.get()) {
    bytes += sizeof(sched::Schedule) + s->algo.capacity();
    for (const sched::RankProgram& p : s->programs)
      bytes += sizeof(p) + p.ops.capacity() * sizeof(sched::Op) +
               p.step_begin.capacity() * sizeof(uint32_t);
  }
  return bytes;
}

}  // namespace topocoll::plugin::interposer
