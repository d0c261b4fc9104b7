// The user's ncclConfig_t for a communicator, kept for the topology-ordered split of it.
// NCCL gives a split made with a config exactly that config, not its parent's (NCCL 2.28
// init.cc: parseCommConfig for a config, copyCommConfig only without one), so a default
// config would drop the user's CTA limits (left free for compute overlap), traffic class,
// network and the rest on the communicator that then carries the user's collectives.
#pragma once

#include <nccl.h>

#include <optional>
#include <string>

namespace topocoll::plugin::interposer {

class CommConfigCopy {
 public:
  CommConfigCopy() = default;  // NCCL_CONFIG_INITIALIZER: NCCL's defaults
  // The first user.size bytes NCCL would read (at most this build's ncclConfig_t), its
  // strings copied: the user may free them once the call returns.
  explicit CommConfigCopy(const ncclConfig_t& user);

  // The user's config; its strings point into this copy.
  ncclConfig_t user() const;
  // The config for splitting the communicator: the user's, blocking (the split is made
  // inside the user's init call). Its splitShare stays the user's: NCCL decides whether a
  // split shares its parent's buffers, proxy and net context by the *parent's* splitShare
  // (2.28 init.cc ncclCommInitChildComm: comm->config.splitShare), so setting it here would
  // change nothing for this split, only for splits of it.
  ncclConfig_t for_split() const;
  // Whether NCCL makes the communicator's splits share its resources and its abort flag
  // (init.cc ncclCommInitChildComm: the child takes the parent's abortFlag): its splitShare,
  // which NCCL_COMM_SPLIT_SHARE_RESOURCES (`env_value`, "" when unset) replaces when set, read
  // as NCCL reads it (parseCommConfig, ncclLoadParam); anything but 1 is 0.
  bool splits_share_resources(const std::string& env_value) const;

 private:
  ncclConfig_t config_ = NCCL_CONFIG_INITIALIZER;  // its string fields stay undefined
  std::optional<std::string> net_name_, comm_name_;
};

}  // namespace topocoll::plugin::interposer
