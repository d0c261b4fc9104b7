// `topocoll describe FILE`: what a topology holds, and the numbers that bound collectives
// on it (diameter, bisection bandwidth).
#include <cstdio>
#include <map>
#include <sstream>
#include <tuple>

#include "tools/flag_value.h"
#include "tools/topology_argument.h"
#include "tools/command.h"
#include "topo/bisection.h"
#include "topo/cable_names.h"
#include "topo/topology_json.h"

namespace topocoll::cli {
namespace {

using namespace topocoll::topo;

constexpr const char* kUsage =
    "usage: topocoll describe FILE [--cables]     (or --topo FILE)\n"
    "\n"
    "Prints the kind, hosts, endpoints, switches per group (BiGraph) or package (NAP), ports\n"
    "used per switch, link rates and latencies, the diameter in hops and the bisection\n"
    "bandwidth of a topology file (docs/topology.md). Rates are Gb/s in one direction,\n"
    "latencies microseconds.\n"
    "  --cables   also list every cable by name (A-B; one direction is A->B), the names the\n"
    "             fabric's fault commands and the acceptance report use\n";

std::string num(double x) {
  std::ostringstream out;
  out.precision(12);
  out << x;
  return out.str();
}

void print_links(const Topology& t) {
  // kind, rate, latency -> cables
  std::map<std::tuple<LinkKind, double, double>, int> classes;
  for (const auto& l : t.links())
    if (l.id < l.reverse) ++classes[{l.kind, l.gbps, l.latency_us}];
  std::printf("links (cables, each direction at the rate shown; latency per cable):\n");
  bool host_fabric = false;
  for (const auto& [key, count] : classes) {
    auto [kind, gbps, latency] = key;
    std::printf("  %-14s %5d cables  %8s Gb/s  %6s us\n", std::string(to_string(kind)).c_str(),
                count, num(gbps).c_str(), num(latency).c_str());
    host_fabric |= kind == LinkKind::HostFabric;
  }
  // The file's host-fabric latency is GPU to GPU: two cables of the host's fabric.
  if (host_fabric) std::printf("  (GPU to GPU on a host crosses two host-fabric cables)\n");
}

// Ports used per switch, collapsed over switches that look the same.
void print_ports(const Topology& t) {
  struct Usage {
    int endpoints = 0, switches = 0, ports = 0;
    auto operator<=>(const Usage&) const = default;
  };
  std::map<std::pair<SwitchRole, Usage>, std::vector<std::string>> groups;
  for (int s = 0; s < int(t.switches().size()); ++s) {
    const Switch& sw = t.switches()[s];
    if (sw.role == SwitchRole::HostFabric) continue;
    Usage u;
    u.ports = sw.ports;
    for (int l : t.out_links({NodeRef::Type::Switch, s})) {
      if (t.links()[l].to.type == NodeRef::Type::Endpoint) ++u.endpoints;
      else ++u.switches;
    }
    groups[{sw.role, u}].push_back(sw.id);
  }
  std::printf("ports used per switch:\n");
  for (const auto& [key, ids] : groups) {
    const auto& [role, u] = key;
    std::string names = ids.front();
    if (ids.size() > 1) names += " .. " + ids.back();
    std::string capacity = u.ports > 0 ? " of " + std::to_string(u.ports) : " (no port limit)";
    std::printf("  %-6s %3zu switch%s (%s): %d used%s = %d %s", std::string(to_string(role)).c_str(),
                ids.size(), ids.size() == 1 ? "" : "es", names.c_str(), u.endpoints + u.switches,
                capacity.c_str(), u.endpoints, role == SwitchRole::Local ? "nodes" : "endpoints");
    if (u.switches > 0) std::printf(" + %d inter-group", u.switches);
    std::printf("\n");
  }
}

void print_cables(const Topology& t) {
  std::printf("cables (name, kind, Gb/s each way, latency us):\n");
  for (int link : cable_links(t)) {
    const Link& l = t.links()[link];
    const Link& back = t.links()[l.reverse];
    const std::string rate =
        l.gbps == back.gbps ? num(l.gbps) : num(l.gbps) + "/" + num(back.gbps);
    std::printf("  %-24s %-14s %10s %8s\n", cable_name(t, link).c_str(),
                std::string(to_string(l.kind)).c_str(), rate.c_str(), num(l.latency_us).c_str());
  }
}

int run_describe(std::span<const std::string> given) {
  const std::vector<std::string> words = topo_flag_as_word(given);  // --topo FILE too
  const std::span<const std::string> args(words);
  std::string file;
  bool cables = false;
  for (const auto& a : args) {
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (a == "--cables") {
      cables = true;
      continue;
    }
    if ((a.size() > 1 && a[0] == '-') || !file.empty()) {
      std::fprintf(stderr, "topocoll describe: unexpected argument %s\n\n%s", a.c_str(), kUsage);
      return 2;
    }
    file = a;
  }
  if (file.empty()) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  Topology t = load_topology_argument(file);
  std::printf("topology: \"%s\" (%s)\n", t.name().c_str(), std::string(to_string(t.kind())).c_str());
  size_t max_per_host = 0;
  for (const auto& h : t.hosts()) max_per_host = std::max(max_per_host, h.endpoints.size());
  std::printf("hosts: %zu (%s%zu GPU%s each)\n", t.hosts().size(),
              max_per_host > 1 ? "up to " : "", max_per_host, max_per_host > 1 ? "s" : "");
  std::printf("endpoints: %zu (GPU + NIC)\n", t.endpoints().size());
  if (t.kind() == TopologyKind::BiGraph) {
    std::printf("switches: %zu upper + %zu lower = %zu\n",
                t.group_switches(SwitchRole::Upper).size(), t.group_switches(SwitchRole::Lower).size(),
                t.group_switches(SwitchRole::Upper).size() + t.group_switches(SwitchRole::Lower).size());
  } else {
    std::string dims;
    for (size_t d = 0; d < t.torus_dims().size(); ++d)
      dims += (d ? "x" : "") + std::to_string(t.torus_dims()[d]);
    std::printf("packages: %d on a %s torus, %d nodes each\n", t.package_count(), dims.c_str(),
                t.nodes_per_package());
    std::printf("switches: %d local per package = %d\n", t.local_switches(),
                t.local_switches() * t.package_count());
  }
  int fabrics = 0;
  for (const auto& h : t.hosts()) fabrics += h.fabric_switch >= 0;
  if (fabrics > 0)
    std::printf("host fabrics: %d (%s, %s Gb/s per GPU)\n", fabrics,
                std::string(to_string(t.hosts()[0].fabric)).c_str(), num(t.hosts()[0].fabric_gbps).c_str());
  print_ports(t);
  print_links(t);
  int diameter = t.diameter_hops();
  std::printf("diameter: %d hops (%d links; hops = switches and forwarding nodes passed)\n",
              diameter, diameter > 0 ? diameter + 1 : 0);
  Bisection b = bisection(t);
  std::printf("bisection bandwidth: %s Gb/s per direction (%d cables cut)\n", num(b.gbps).c_str(),
              b.cables);
  std::printf("  method: %s\n", b.method.c_str());
  if (cables) print_cables(t);
  return 0;
}

}  // namespace

TOPOCOLL_COMMAND("describe", "print hosts, switches, ports, rates, diameter, bisection", run_describe);

}  // namespace topocoll::cli
