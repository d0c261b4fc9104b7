#include "sched/all_to_all.h"

#include <vector>

#include "sched/schedule_builder.h"

namespace topocoll::sched {

Schedule direct_all_to_all(int nranks, int64_t count, std::span<const int> order) {
  const std::vector<int> members = resolve_order(nranks, order);
  const int N = nranks;
  ScheduleBuilder b(Collective::AllToAll, "fc-direct", N, count, count * N, count * N, 2 * int64_t(N) + 2);
  for (int i = 1; i < N || i == 1; ++i) {
    const int step = i - 1;
    for (int p = 0; p < N; ++p) {
      const int r = members[size_t(p)];
      if (N > 1) {
        const int to = members[size_t((p + i) % N)], from = members[size_t((p - i + N) % N)];
        b.send(step, r, to, {Buf::Input, int64_t(to) * count}, count);
        b.recv(step, r, from, {Buf::Output, int64_t(from) * count}, count);
      }
      if (i == 1) b.copy(0, r, {Buf::Output, int64_t(r) * count}, {Buf::Input, int64_t(r) * count}, count);
    }
    b.touch(step);
  }
  return b.finish();
}

}  // namespace topocoll::sched
