// `topocoll env`: every environment variable topocoll reads (config/env.h), with its value in
// this environment, its default and what it changes; a bad value is named with what it
// should be. The first thing to run on a new cluster, under the job's launcher.
#include <cstdio>
#include <string>

#include "config/env.h"
#include "config/value_grammar.h"
#include "tools/command.h"
#include "topo/topology_json.h"

namespace topocoll::cli {
namespace {

constexpr const char* kUsage =
    "usage: topocoll env [--all]\n"
    "\n"
    "Prints every TOPOCOLL_* variable: its value here (values are trimmed), its default and\n"
    "what it changes; a bad value is marked BAD with what was expected and what is used\n"
    "instead (docs/usage.md, \"Environment variables\"). What the environment leaves unset is\n"
    "looked up in NCCL's configuration files (NCCL_CONF_FILE or ~/.nccl.conf, /etc/nccl.conf),\n"
    "as NCCL does, and marked so.\n"
    "  --all   also the variables of NCCL, CUDA, launchers and the system that topocoll reads\n"
    "TOPOCOLL_TOPO_FILE, when set, is loaded and checked too.\n"
    "Exit status: 0 when every value is good (and the topology file loads), 1 when one is bad,\n"
    "2 for bad usage.\n";

std::string value_here(const config::EnvSetting& s) {
  const config::EnvVariable& v = *s.variable;
  const std::string where = s.from_nccl_conf ? " (from NCCL's configuration files)" : "";
  if (!s.problem.empty()) return "BAD: " + s.problem + where;
  if (s.is_set()) return *s.text + where;
  if (!v.default_value.empty()) return std::string(v.default_value) + " (default)";
  return "unset" + (v.unset_means.empty() ? std::string() : " (" + std::string(v.unset_means) + ")");
}

void print(const config::EnvSetting& s) {
  const config::EnvVariable& v = *s.variable;
  const std::string name(v.name);
  std::printf("%-32s %s\n", name.c_str(), value_here(s).c_str());
  std::printf("    %.*s", int(v.doc.size()), v.doc.data());
  if (s.is_set() && !v.default_value.empty())
    std::printf(" (default %.*s)", int(v.default_value.size()), v.default_value.data());
  std::printf("\n");
}

int run_env(std::span<const std::string> args) {
  bool all = false;
  for (const auto& a : args) {
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (a != "--all") {
      std::fprintf(stderr, "topocoll env: unknown argument %s\n\n%s", a.c_str(), kUsage);
      return 2;
    }
    all = true;
  }
  const config::Env& env = config::env();
  bool bad = false;
  std::printf("# topocoll's variables\n");
  for (const config::EnvSetting& s : env.settings)
    if (s.variable->owner == config::Owner::Topocoll) print(s);
  if (all) {
    std::printf("\n# other programs' variables topocoll reads\n");
    for (const config::EnvSetting& s : env.settings)
      if (s.variable->owner != config::Owner::Topocoll) print(s);
  }
  for (const config::EnvSetting& s : env.settings) bad |= !s.problem.empty();
  // The topology file must load: every face refuses to serve without it (the tuner fails
  // NCCL's init), so a path that is wrong is as bad as a value that is.
  if (!env.topo_file.empty()) {
    try {
      const topo::Topology t = topo::load_topology_file(env.topo_file);
      std::printf("\nTOPOCOLL_TOPO_FILE loads: %s \"%s\", %zu endpoints on %zu hosts\n",
                  std::string(topo::to_string(t.kind())).c_str(), t.name().c_str(), t.endpoints().size(),
                  t.hosts().size());
    } catch (const std::exception& e) {
      std::printf("BAD: TOPOCOLL_TOPO_FILE=%s: %s\n", config::quoted_value(env.topo_file).c_str(), e.what());
      bad = true;
    }
  }
  // A contradiction between two good values (TOPOCOLL_MIN_BYTES above TOPOCOLL_MAX_BYTES).
  for (const std::string& w : env.warnings) {
    bool of_a_setting = false;
    for (const config::EnvSetting& s : env.settings) of_a_setting |= s.problem == w;
    if (!of_a_setting) {
      std::printf("BAD: %s\n", w.c_str());
      bad = true;
    }
  }
  return bad ? 1 : 0;
}

}  // namespace

TOPOCOLL_COMMAND("env", "every TOPOCOLL_* variable: its value here, default and meaning", run_env);

}  // namespace topocoll::cli
