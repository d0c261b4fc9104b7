#include "sched/nccl_tests_sizes.h"

#include <algorithm>

namespace topocoll::sched {

int64_t count_of_size(Collective collective, int64_t size_bytes, size_t elem_size, int nranks) {
  const int64_t elems = size_bytes / int64_t(elem_size);
  if (collective == Collective::AllReduce) return elems;
  return elems / std::max(nranks, 1);
}

int64_t size_of_count(Collective collective, int64_t count, size_t elem_size, int nranks) {
  const int64_t bytes = count * int64_t(elem_size);
  return collective == Collective::AllReduce ? bytes : bytes * int64_t(nranks);
}

double bus_bandwidth_factor(Collective collective, int nranks) {
  if (nranks <= 1) return 0;
  double n = nranks;
  return collective == Collective::AllReduce ? 2.0 * (n - 1) / n : (n - 1) / n;
}

double algbw_gbs(double bytes, double time_us) {
  return time_us > 0 ? bytes / (time_us * 1e3) : 0;  // bytes/us / 1e3 = GB/s
}

double busbw_gbs(Collective collective, int nranks, double bytes, double time_us) {
  return algbw_gbs(bytes, time_us) * bus_bandwidth_factor(collective, nranks);
}

}  // namespace topocoll::sched
