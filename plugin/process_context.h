// What every face of libnccl-topocoll.so knows about its process, decided once: the
// environment (config/env.h), the topology of TOPOCOLL_TOPO_FILE loaded once (or why not),
// its fingerprint (topo/topology_fingerprint.h) and this host (config/local_host.h) with its
// place in the topology. The interposer, the tuner and the net plugin all read it, so the
// faces of one process cannot disagree on the topology or on which host they are.
//
// Built on first use; the faces read it at their init points and keep what they need
// (shared_ptr to the topology). Building it logs, once, each TOPOCOLL_* variable that is
// set (INFO, ENV) and the environment's warnings.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "config/env.h"
#include "config/local_host.h"
#include "topo/topology.h"

namespace topocoll::plugin {

struct ProcessContext {
  config::Env env;
  std::shared_ptr<const topo::Topology> topology;  // null when TOPOCOLL_TOPO_FILE is unset or bad
  uint64_t topology_fingerprint = 0;               // 0 without a topology
  // Why there is no topology: "TOPOCOLL_TOPO_FILE=<path>: <reason>"; "" when unset or loaded.
  std::string topology_error;
  // This host: the name as the topology spells it when it has the host, else as found.
  config::LocalHost host;
  std::optional<int> host_index;  // in topology->hosts(); none without a topology or the host
};

// Loads env.topo_file (the only file read) and looks this host up in it.
ProcessContext make_process_context(config::Env env);

// This process's context, built from config::env() on first use.
const ProcessContext& process_context();

// Tests only: process_context() returns `context` while this lives (not thread-safe against
// faces running at the same time; a process's context is otherwise fixed once built).
class ScopedProcessContext {
 public:
  explicit ScopedProcessContext(const ProcessContext& context);
  ~ScopedProcessContext();
  ScopedProcessContext(const ScopedProcessContext&) = delete;
  ScopedProcessContext& operator=(const ScopedProcessContext&) = delete;

 private:
  const ProcessContext* previous_;
};

}  // namespace topocoll::plugin
