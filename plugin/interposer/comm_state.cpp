#include "plugin/interposer/comm_state.h"

#if TOPOCOLL_INTERPOSER_CUDA
#include "exec/nccl_backend.h"
#include "plugin/interposer/device_scratch.h"
#include "plugin/interposer/rank_exchange.h"
#endif

namespace topocoll::plugin::interposer {

#if TOPOCOLL_INTERPOSER_CUDA
CommState::CommState() = default;
CommState::~CommState() = default;
#else
// Without CUDA there is no scratch, no lane and no timeline; the pointers stay null.
class DeviceScratch {};
class VoteCell {};
}  // namespace topocoll::plugin::interposer
namespace topocoll::exec {
class OverlapLane {};
class StepTimeline {};
}  // namespace topocoll::exec
namespace topocoll::plugin::interposer {
CommState::CommState() = default;
CommState::~CommState() = default;
#endif

CommRegistry& CommRegistry::instance() {
  // Never destroyed: exported NCCL calls may arrive from other libraries' destructors.
  static CommRegistry* registry = new CommRegistry;
  return *registry;
}

void CommRegistry::insert(std::shared_ptr<CommState> state) {
  std::unique_lock lock(mutex_);
  const bool served = state->served;
  auto& slot = states_[state->comm];
  if (slot && slot->served) served_count_.fetch_sub(1, std::memory_order_relaxed);
  slot = std::move(state);
  if (served) served_count_.fetch_add(1, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_acq_rel);
}

void CommRegistry::set_served(CommState& state) noexcept {
  std::unique_lock lock(mutex_);
  // Only the registered state counts (an abort during init may have taken it out).
  const auto it = states_.find(state.comm);
  if (state.served || it == states_.end() || it->second.get() != &state) return;
  state.served = true;
  served_count_.fetch_add(1, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_acq_rel);
}

void CommRegistry::set_unserved(CommState& state) noexcept {
  std::unique_lock lock(mutex_);
  const auto it = states_.find(state.comm);
  if (!state.served || it == states_.end() || it->second.get() != &state) return;
  state.served = false;
  served_count_.fetch_sub(1, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_acq_rel);
}

CommState* CommRegistry::find(ncclComm_t comm) const {
  std::shared_lock lock(mutex_);
  auto it = states_.find(comm);
  return it == states_.end() ? nullptr : it->second.get();
}

std::shared_ptr<CommState> CommRegistry::share(ncclComm_t comm) const {
  std::shared_lock lock(mutex_);
  auto it = states_.find(comm);
  return it == states_.end() ? nullptr : it->second;
}

std::shared_ptr<CommState> CommRegistry::remove(ncclComm_t comm) {
  std::unique_lock lock(mutex_);
  auto it = states_.find(comm);
  if (it == states_.end()) return nullptr;
  std::shared_ptr<CommState> state = std::move(it->second);
  states_.erase(it);
  if (state->served) served_count_.fetch_sub(1, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  return state;
}

std::size_t CommRegistry::size() const {
  std::shared_lock lock(mutex_);
  return states_.size();
}

}  // namespace topocoll::plugin::interposer
