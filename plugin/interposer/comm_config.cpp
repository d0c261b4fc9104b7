#include "plugin/interposer/comm_config.h"

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdlib>
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

bool CommConfigCopy::splits_share_resources(const std::string& env_value) const {
  int share = config_.splitShare;
  // NCCL reads its integer parameters with strtoll(value, nullptr, 0) and refuses a value only
  // when errno is set (misc/param.cc ncclLoadParam): "yes" reads as 0, an out-of-range
  // number leaves the parameter unset.
  if (!env_value.empty()) {
    errno = 0;
    const long long v = std::strtoll(env_value.c_str(), nullptr, 0);
    if (errno == 0 && v != NCCL_CONFIG_UNDEF_INT) share = int(v);
  }
  return share == 1;
}

}  // namespace topocoll::plugin::interposer
