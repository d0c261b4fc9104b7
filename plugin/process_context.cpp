#include "plugin/process_context.h"

#include <atomic>
#include <exception>

#include "config/value_grammar.h"
#include "config/version.h"
#include "plugin/log.h"
#include "topo/topology_fingerprint.h"
#include "topo/topology_json.h"

namespace topocoll::plugin {
namespace {

std::atomic<const ProcessContext*> g_replacement{nullptr};

// Each TOPOCOLL_* variable set, once per process at INFO (NCCL_DEBUG_SUBSYS=ENV).
void log_settings(const config::Env& env) {
  for (const config::EnvSetting& s : env.settings)
    if (s.is_set() && s.variable->owner == config::Owner::Topocoll && s.problem.empty())
      TC_INFO(NCCL_ENV, "%s set by environment to %s", std::string(s.variable->name).c_str(), s.text->c_str());
}

}  // namespace

ProcessContext make_process_context(config::Env env) {
  ProcessContext c;
  c.host = config::local_host(env);
  if (!env.topo_file.empty()) {
    try {
      auto topology = std::make_shared<const topo::Topology>(topo::load_topology_file(env.topo_file));
      c.topology_fingerprint = topo::topology_fingerprint(*topology);
      c.host_index = topology->find_host(c.host.name);
      if (c.host_index) c.host.name = topology->hosts()[*c.host_index].name;
      c.topology = std::move(topology);
    } catch (const std::exception& e) {
      c.topology_error = "TOPOCOLL_TOPO_FILE=" + config::quoted_value(env.topo_file) + ": " + e.what();
    }
  }
  c.env = std::move(env);
  return c;
}

const ProcessContext& process_context() {
  if (const ProcessContext* replacement = g_replacement.load()) return *replacement;
  static const ProcessContext context = [] {
    const config::Env& env = config::env();  // its warnings go to NCCL's log (plugin/log.h)
    // Which build a job loaded (NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT).
    TC_INFO(NCCL_INIT, "topocoll %s", config::version());
    log_settings(env);
    return make_process_context(env);
  }();
  return context;
}

ScopedProcessContext::ScopedProcessContext(const ProcessContext& context)
    : previous_(g_replacement.exchange(&context)) {}

ScopedProcessContext::~ScopedProcessContext() { g_replacement.store(previous_); }

}  // namespace topocoll::plugin
