#include "plugin/interposer/release_fence.h"

#include <algorithm>
#include <thread>

#include "plugin/log.h"

namespace topocoll::plugin::interposer {

ServedCallsInside::ServedCallsInside(const std::vector<PendingCollective>& calls) {
  for (const PendingCollective& c : calls) {
    if (!c.state || std::find(entered_.begin(), entered_.end(), c.state) != entered_.end()) continue;
    c.state->calls_inside.fetch_add(1);
    entered_.push_back(c.state);
  }
}

ServedCallsInside::~ServedCallsInside() {
  for (const auto& st : entered_) st->calls_inside.fetch_sub(1);
}

bool fence_served_calls(CommState& st, bool abort, std::chrono::milliseconds bound) {
  if (abort) st.aborting.store(true);
  st.releasing.store(true);
  const auto deadline = std::chrono::steady_clock::now() + bound;
  while (st.calls_inside.load() > 0) {
    if (std::chrono::steady_clock::now() >= deadline) {
      TC_WARN("comm %p: %d served topocoll call(s) on other threads still inside after %lld ms; "
              "releasing it anyway (NCCL's abort ends what they wait for in NCCL, but a call "
              "on a communicator being released is undefined in NCCL)",
              static_cast<void*>(st.comm), st.calls_inside.load(), static_cast<long long>(bound.count()));
      return false;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

}  // namespace topocoll::plugin::interposer
