// `topocoll validate FILE...`: load and check topology descriptions (docs/topology.md).
#include <cstdio>

#include "tools/topology_argument.h"
#include "tools/flag_value.h"
#include "tools/command.h"
#include "topo/topology_json.h"

namespace topocoll::cli {
namespace {

constexpr const char* kUsage =
    "usage: topocoll validate FILE...     (or --topo FILE; - is standard input)\n"
    "\n"
    "Checks topology descriptions (docs/topology.md). Prints one summary line per valid\n"
    "file; for an invalid one prints the JSON pointer of the problem and the reason.\n"
    "Exit status: 0 when every file is valid, 1 otherwise, 2 for bad usage.\n";

int cables(const topo::Topology& t) {
  int n = 0;
  for (const auto& l : t.links()) n += l.kind != topo::LinkKind::HostFabric && l.id < l.reverse;
  return n;
}

int run_validate(std::span<const std::string> given) {
  const std::vector<std::string> words = topo_flag_as_word(given);  // --topo FILE too
  const std::span<const std::string> args(words);
  std::vector<std::string> files;
  for (const auto& a : args) {
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (a.size() > 1 && a[0] == '-') {
      std::fprintf(stderr, "topocoll validate: unknown option %s\n\n%s", a.c_str(), kUsage);
      return 2;
    }
    files.push_back(a);
  }
  if (files.empty()) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  int status = 0;
  for (const auto& file : files) {
    try {
      topo::Topology t =
          file == "-" ? topo::load_topology_text(topology_text_from_stdin()) : topo::load_topology_file(file);
      int network_switches = 0;
      for (const auto& s : t.switches()) network_switches += s.role != topo::SwitchRole::HostFabric;
      std::printf("%s: ok: %s \"%s\", %zu endpoints on %zu hosts, %d switches, %d cables\n",
                  file.c_str(), std::string(to_string(t.kind())).c_str(), t.name().c_str(),
                  t.endpoints().size(), t.hosts().size(), network_switches, cables(t));
    } catch (const topo::TopologyError& e) {
      std::fprintf(stderr, "%s: error: %s\n", file.c_str(), e.what());
      status = 1;
    }
  }
  return status;
}

}  // namespace

TOPOCOLL_COMMAND("validate", "check topology files and print a one-line summary", run_validate);

}  // namespace topocoll::cli
