// Whether `topocoll demo` can measure on an emulated fabric here (docs/fabric.md), and its
// claim on the fabric's name while it does: a second demo started meanwhile falls back to
// loopback instead of sharing, or tearing down, the first one's fabric.
#pragma once

#include <string>

#include "topo/topology.h"

namespace topocoll::cli {

class DemoFabricAccess {
 public:
  // Checks, in this order: root, `ip` and `tc`, memory, that namespaces, veth pairs and tbf
  // can be made (fabric::machine_cannot_run, which makes and removes a probe namespace);
  // that no other demo holds `name`; and that no fabric of that name is up (a demo stopped
  // by SIGKILL, or a user's own: never ours to remove).
  static DemoFabricAccess check(const topo::Topology& topology, const std::string& name);
  // Not asked for: `reason` says why (e.g. --loopback).
  static DemoFabricAccess refused(const std::string& reason);

  // Granted: the claim is held until this object is destroyed (an flock beside the fabric
  // records, dropped by the kernel however the process ends).
  bool granted() const { return fd_ >= 0; }
  // Why not, in one line ("" when granted).
  const std::string& reason() const { return reason_; }

  DemoFabricAccess(DemoFabricAccess&& other) noexcept;
  DemoFabricAccess& operator=(DemoFabricAccess&&) = delete;
  DemoFabricAccess(const DemoFabricAccess&) = delete;
  ~DemoFabricAccess();

 private:
  DemoFabricAccess() = default;
  std::string reason_;
  int fd_ = -1;
};

}  // namespace topocoll::cli
