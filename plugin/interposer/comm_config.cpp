#include "plugin/interposer/comm_config.h"

#include <algorithm>
#include <cstddef>
#include <cstring>

namespace topocoll::plugin::interposer {

CommConfigCopy::CommConfigCopy(const ncclConfig_t& user) {
  // As NCCL reads it (parseCommConfig): `size` bytes of the caller's struct, which may be of
  // an older or newer NCCL; fields beyond them keep the initializer's "undefined".
  const std::size_t bytes = std::min(user.size, sizeof(ncclConfig_t));
  if (bytes >= offsetof(ncclConfig_t, blocking)) std::memcpy(&config_, &user, bytes);
  config_.size = sizeof(ncclConfig_t);
  if (config_.netName) net_name_ = config_.netName;
  if (config_.commName) comm_name_ = config_.commName;
  config_.netName = NCCL_CONFIG_UNDEF_PTR;
  config_.commName = NCCL_CONFIG_UNDEF_PTR;
}

ncclConfig_t CommConfigCopy::user() const {
  ncclConfig_t c = config_;
  if (net_name_) c.netName = net_name_->c_str();
  if (comm_name_) c.commName = comm_name_->c_str();
  return c;
}

ncclConfig_t CommConfigCopy::for_split() const {
  ncclConfig_t c = user();
  c.blocking = 1;
  return c;
}

}  // namespace topocoll::plugin::interposer
