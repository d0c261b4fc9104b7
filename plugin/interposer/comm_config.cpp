#include "plugin/interposer/comm_config.h"

#include <algorithm>
#include <cstring>

namespace topocoll::plugin::interposer {

CommConfigCopy::CommConfigCopy() : config_(NCCL_CONFIG_INITIALIZER) {}

CommConfigCopy::CommConfigCopy(const ncclConfig_t& user) : config_(NCCL_CONFIG_INITIALIZER) {
  // As NCCL reads it (parseCommConfig): `size` bytes of the caller's struct, which may be of
  // an older or newer NCCL; fields beyond them keep the initializer's "undefined".
  const std::size_t bytes = std::min(user.size, sizeof(ncclConfig_t));
  if (bytes >= offsetof(ncclConfig_t, blocking)) std::memcpy(&config_, &user, bytes);
  config_.size = sizeof(ncclConfig_t);
  own_strings();
}

CommConfigCopy::CommConfigCopy(const CommConfigCopy& other)
    : config_(other.config_), net_name_(other.net_name_), comm_name_(other.comm_name_) {
  if (config_.netName != NCCL_CONFIG_UNDEF_PTR) config_.netName = net_name_.c_str();
  if (config_.commName != NCCL_CONFIG_UNDEF_PTR) config_.commName = comm_name_.c_str();
}

CommConfigCopy& CommConfigCopy::operator=(const CommConfigCopy& other) {
  if (this != &other) {
    config_ = other.config_;
    net_name_ = other.net_name_;
    comm_name_ = other.comm_name_;
    if (config_.netName != NCCL_CONFIG_UNDEF_PTR) config_.netName = net_name_.c_str();
    if (config_.commName != NCCL_CONFIG_UNDEF_PTR) config_.commName = comm_name_.c_str();
  }
  return *this;
}

void CommConfigCopy::own_strings() {
  if (config_.netName != NCCL_CONFIG_UNDEF_PTR && config_.netName) {
    net_name_ = config_.netName;
    config_.netName = net_name_.c_str();
  } else {
    config_.netName = NCCL_CONFIG_UNDEF_PTR;
  }
  if (config_.commName != NCCL_CONFIG_UNDEF_PTR && config_.commName) {
    comm_name_ = config_.commName;
    config_.commName = comm_name_.c_str();
  } else {
    config_.commName = NCCL_CONFIG_UNDEF_PTR;
  }
}

ncclConfig_t CommConfigCopy::for_split() const {
  ncclConfig_t c = config_;
  c.splitShare = 1;
  c.blocking = 1;
  return c;
}

}  // namespace topocoll::plugin::interposer
