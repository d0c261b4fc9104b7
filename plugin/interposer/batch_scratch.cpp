#include "plugin/interposer/batch_scratch.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "plugin/interposer/cuda_probe.h"
#include "plugin/interposer/device_scratch.h"
#include "plugin/log.h"

namespace topocoll::plugin::interposer {

bool reserve_batch_scratch(const std::vector<PendingCollective>& calls,
                           const std::vector<std::size_t>& needs, CurrentDeviceGuard& device_guard,
                           std::vector<char*>& regions) {
  regions.assign(calls.size(), nullptr);
  std::vector<std::pair<CommState*, std::size_t>> totals;
  std::vector<std::size_t> offsets(calls.size(), 0);
  for (std::size_t i = 0; i < calls.size(); ++i) {
    if (needs[i] == 0) continue;
    CommState* st = calls[i].state.get();
    auto it = std::find_if(totals.begin(), totals.end(), [&](auto& t) { return t.first == st; });
    if (it == totals.end()) it = totals.insert(totals.end(), {st, 0});
    offsets[i] = it->second;
    it->second += (needs[i] + 255) / 256 * 256;
  }
  for (auto& [st, total] : totals) {
    if (!st->scratch) throw std::logic_error("served communicator without scratch");
    device_guard.use(st->device);
    bool captured = false;
    for (const PendingCollective& c : calls)
      if (c.state.get() == st && stream_capturing(c.call.stream)) captured = true;
    char* base = static_cast<char*>(st->scratch->reserve(total, captured));
    if (!base) {
      TC_WARN("comm %p: cannot allocate %zu bytes of scratch", static_cast<void*>(st->comm), total);
      return false;
    }
    for (std::size_t i = 0; i < calls.size(); ++i)
      if (needs[i] > 0 && calls[i].state.get() == st) regions[i] = base + offsets[i];
  }
  for (std::size_t i = 0; i < calls.size(); ++i) {
    if (needs[i] == 0) continue;
    device_guard.use(calls[i].state->device);
    calls[i].state->scratch->order_after_previous(calls[i].call.stream);
  }
  return true;
}

void mark_batch_scratch_used(const std::vector<PendingCollective>& calls,
                             const std::vector<std::size_t>& needs, CurrentDeviceGuard& device_guard) {
  std::vector<CommState*> done;
  for (std::size_t i = 0; i < calls.size(); ++i) {
    CommState* st = calls[i].state.get();
    if (needs[i] == 0 || std::find(done.begin(), done.end(), st) != done.end()) continue;
    done.push_back(st);
    std::vector<cudaStream_t> streams;
    for (std::size_t k = 0; k < calls.size(); ++k)
      if (needs[k] > 0 && calls[k].state.get() == st) streams.push_back(calls[k].call.stream);
    device_guard.use(st->device);
    st->scratch->mark_used(streams);
  }
}

}  // namespace topocoll::plugin::interposer
