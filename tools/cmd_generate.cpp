// `topocoll generate bigraph|nap [options] [-o FILE]`: a topology JSON from shape parameters.
#include <algorithm>
#include <limits>
#include <climits>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <stdexcept>

#include "config/user_files.h"
#include "config/value_grammar.h"
#include "tools/command.h"
#include "tools/flag_value.h"
#include "topo/generators.h"
#include "topo/topology_json.h"

namespace topocoll::cli {
namespace {

using namespace topocoll::topo;

constexpr const char* kUsage =
    "usage: topocoll generate bigraph [options] [-o FILE]\n"
    "       topocoll generate nap [options] [-o FILE]\n"
    "\n"
    "Writes a topology (docs/topology.md) to FILE or stdout. By default the explicit form\n"
    "(every server/node listed); --shape writes the short generated form instead.\n"
    "\n"
    "common:\n"
    "  --name NAME                    topology name\n"
    "  --shape                        write {\"kind\", \"shape\"} instead of the explicit form\n"
    "  -o, --output FILE              output file (default: stdout)\n"
    "bigraph (EFLOPS BiGraph: two switch groups, complete bipartite between them):\n"
    "  --switches-per-group N         (4)\n"
    "  --endpoints-per-switch N       access ports used per switch (4)\n"
    "  --gpus-per-server N            (1)\n"
    "  --nic-spread alternate|upper-first|single   how a server's NICs spread over the\n"
    "                                 groups (alternate: NIC i to group i%2)\n"
    "  --gbps X                       link rate, Gb/s (100)\n"
    "  --latency-us X                 link latency, us (1)\n"
    "  --switch-latency-us X          (0.5)\n"
    "  --switch-ports N               0 = endpoints per switch + switches per group (0)\n"
    "  --host-fabric nvswitch|nvlink|pcie, --host-fabric-gbps X (2400), --host-fabric-latency-us X (0.5)\n"
    "nap (packages of N nodes on k local switches, packages on a torus):\n"
    "  --packages N                   (4; default: product of --torus)\n"
    "  --nodes-per-package N          (8)\n"
    "  --local-switches N             (4)\n"
    "  --torus AxB[xC...]             torus dimensions (2x2)\n"
    "  --intra-gbps X (512)  --intra-latency-us X (0.09)   node <-> local switch, Table II\n"
    "  --inter-gbps X (256)  --inter-latency-us X (0.2)    torus links, Table II\n"
    "  --switch-latency-us X          (0.005)\n"
    "  --node-ports N                 0 = local switches (0)\n"
    "  --switch-ports N               0 = nodes per package (0)\n"
    "  --gpus-per-host N              consecutive nodes of a package share a host (1)\n"
    "  --host-fabric nvswitch|nvlink|pcie, --host-fabric-gbps X (2400), --host-fabric-latency-us X (0.5)\n";

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The shape checks (topo/generators.h) give each value its range; here only the grammar.
// A whole number; its range is the shape's to check, which names the limits of that field.
int to_int(const std::string& option, const std::string& text) {
  const config::Parsed<int64_t> v =
      config::parse_count(text, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
  if (!v) throw UsageError(option + " " + config::quoted_value(text) + ": " + v.expected);
  if (*v.value < INT_MIN || *v.value > INT_MAX)
    throw UsageError(option + " " + config::quoted_value(text) + ": far beyond any topology's size");
  return int(*v.value);
}

double to_double(const std::string& option, const std::string& text) {
  const config::Parsed<double> v = config::parse_number(text, -kAny, kAny);
  if (!v) throw UsageError(option + " " + config::quoted_value(text) + ": " + v.expected);
  return *v.value;
}

HostFabricKind to_fabric(const std::string& option, const std::string& text) {
  for (auto k : {HostFabricKind::NVSwitch, HostFabricKind::NVLink, HostFabricKind::PCIe})
    if (text == to_string(k)) return k;
  throw UsageError(option + ": expected nvswitch, nvlink or pcie, got '" + text + "'");
}

std::vector<int> to_dims(const std::string& option, const std::string& text) {
  std::vector<int> dims;
  size_t start = 0;
  while (true) {
    size_t x = text.find('x', start);
    dims.push_back(to_int(option, text.substr(start, x - start)));
    if (x == std::string::npos) break;
    start = x + 1;
  }
  return dims;
}

int run_generate(std::span<const std::string> args) {
  if (args.empty()) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  for (const auto& a : args)
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
  const std::string kind = args[0];
  if (kind != "bigraph" && kind != "nap") {
    std::fprintf(stderr, "topocoll generate: unknown kind '%s' (expected bigraph or nap)\n\n%s",
                 kind.c_str(), kUsage);
    return 2;
  }
  BiGraphShape big;
  NapShape nap;
  std::string output;
  bool shape_form = false, packages_given = false;
  using Setter = std::function<void(const std::string& option, const std::string& value)>;
  std::map<std::string, Setter> options = {{"--name", [&](auto&, auto& v) { big.name = nap.name = v; }},
                                           {"-o", [&](auto&, auto& v) { output = v; }},
                                           {"--output", [&](auto&, auto& v) { output = v; }}};
  auto fabric_options = [&](HostFabricKind& k, double& gbps, double& latency) {
    options["--host-fabric"] = [&](auto& o, auto& v) { k = to_fabric(o, v); };
    options["--host-fabric-gbps"] = [&](auto& o, auto& v) { gbps = to_double(o, v); };
    options["--host-fabric-latency-us"] = [&](auto& o, auto& v) { latency = to_double(o, v); };
  };
  if (kind == "bigraph") {
    options["--switches-per-group"] = [&](auto& o, auto& v) { big.switches_per_group = to_int(o, v); };
    options["--endpoints-per-switch"] = [&](auto& o, auto& v) { big.endpoints_per_switch = to_int(o, v); };
    options["--gpus-per-server"] = [&](auto& o, auto& v) { big.gpus_per_server = to_int(o, v); };
    options["--nic-spread"] = [&](auto&, auto& v) { big.nic_spread = v; };
    options["--gbps"] = [&](auto& o, auto& v) { big.link_gbps = to_double(o, v); };
    options["--latency-us"] = [&](auto& o, auto& v) { big.link_latency_us = to_double(o, v); };
    options["--switch-latency-us"] = [&](auto& o, auto& v) { big.switch_latency_us = to_double(o, v); };
    options["--switch-ports"] = [&](auto& o, auto& v) { big.switch_ports = to_int(o, v); };
    fabric_options(big.host_fabric, big.host_fabric_gbps, big.host_fabric_latency_us);
  } else {
    options["--packages"] = [&](auto& o, auto& v) { nap.packages = to_int(o, v); packages_given = true; };
    options["--nodes-per-package"] = [&](auto& o, auto& v) { nap.nodes_per_package = to_int(o, v); };
    options["--local-switches"] = [&](auto& o, auto& v) { nap.local_switches = to_int(o, v); };
    options["--torus"] = [&](auto& o, auto& v) { nap.torus = to_dims(o, v); };
    options["--intra-gbps"] = [&](auto& o, auto& v) { nap.intra_gbps = to_double(o, v); };
    options["--intra-latency-us"] = [&](auto& o, auto& v) { nap.intra_latency_us = to_double(o, v); };
    options["--inter-gbps"] = [&](auto& o, auto& v) { nap.inter_gbps = to_double(o, v); };
    options["--inter-latency-us"] = [&](auto& o, auto& v) { nap.inter_latency_us = to_double(o, v); };
    options["--switch-latency-us"] = [&](auto& o, auto& v) { nap.switch_latency_us = to_double(o, v); };
    options["--node-ports"] = [&](auto& o, auto& v) { nap.node_ports = to_int(o, v); };
    options["--switch-ports"] = [&](auto& o, auto& v) { nap.switch_ports = to_int(o, v); };
    options["--gpus-per-host"] = [&](auto& o, auto& v) { nap.gpus_per_host = to_int(o, v); };
    fabric_options(nap.host_fabric, nap.host_fabric_gbps, nap.host_fabric_latency_us);
  }
  try {
    for (size_t i = 1; i < args.size(); ++i) {
      const std::string& a = args[i];
      if (a == "--shape") {
        shape_form = true;
        continue;
      }
      std::string name = a, value;
      bool inline_value = false;
      if (auto eq = a.find('='); a.rfind("--", 0) == 0 && eq != std::string::npos) {
        name = a.substr(0, eq);
        value = a.substr(eq + 1);
        inline_value = true;
      }
      auto it = options.find(name);
      if (it == options.end()) throw UsageError("unknown option '" + a + "' for " + kind);
      if (!inline_value) {
        if (i + 1 >= args.size()) throw UsageError(name + " needs a value");
        value = args[++i];
      }
      it->second(name, value);
    }
  } catch (const UsageError& e) {
    std::fprintf(stderr, "topocoll generate: %s\n\n%s", e.what(), kUsage);
    return 2;
  }
  if (kind == "nap" && !packages_given) {
    long product = 1;
    for (int d : nap.torus) product = std::min(product * std::max(d, 0), 1L << 20);
    nap.packages = int(product);
  }

  // Generate (validating the shape) even for --shape, so a bad shape is reported here, as a
  // bad command line (exit 2) naming the flag: the shape's field "/shape/switches_per_group"
  // is --switches-per-group.
  Topology t;
  try {
    t = kind == "bigraph" ? generate_bigraph(big) : generate_nap(nap);
  } catch (const topo::TopologyError& e) {
    // The shape's field as the flag that set it: the same words, but for the BiGraph link's
    // (--gbps, --latency-us) and packages counted from the torus when not given.
    std::string field = e.pointer().rfind("/shape/", 0) == 0 ? e.pointer().substr(7) : std::string();
    std::string flag;
    if (field == "link_gbps") flag = "--gbps";
    else if (field == "link_latency_us") flag = "--latency-us";
    else if (field == "packages" && !packages_given) flag = "--torus";
    else if (!field.empty()) {
      flag = "--" + field;
      std::replace(flag.begin(), flag.end(), '_', '-');
    }
    std::fprintf(stderr, "topocoll generate: %s%s\n", flag.empty() ? "" : (flag + ": ").c_str(), e.reason().c_str());
    return 2;
  }
  nlohmann::json doc;
  if (!shape_form) {
    doc = topology_to_json(t);
  } else if (kind == "bigraph") {
    doc = {{"kind", "bigraph"}, {"name", t.name()},
           {"shape", {{"switches_per_group", big.switches_per_group},
                      {"endpoints_per_switch", big.endpoints_per_switch},
                      {"gpus_per_server", big.gpus_per_server},
                      {"nic_spread", big.nic_spread},
                      {"link_gbps", big.link_gbps},
                      {"link_latency_us", big.link_latency_us},
                      {"switch_latency_us", big.switch_latency_us},
                      {"switch_ports", big.switch_ports},
                      {"host_fabric", std::string(to_string(big.host_fabric))},
                      {"host_fabric_gbps", big.host_fabric_gbps},
                      {"host_fabric_latency_us", big.host_fabric_latency_us}}}};
  } else {
    doc = {{"kind", "nap"}, {"name", t.name()},
           {"shape", {{"packages", nap.packages},
                      {"nodes_per_package", nap.nodes_per_package},
                      {"local_switches", nap.local_switches},
                      {"torus", nap.torus},
                      {"intra_gbps", nap.intra_gbps},
                      {"intra_latency_us", nap.intra_latency_us},
                      {"inter_gbps", nap.inter_gbps},
                      {"inter_latency_us", nap.inter_latency_us},
                      {"switch_latency_us", nap.switch_latency_us},
                      {"node_ports", nap.node_ports},
                      {"switch_ports", nap.switch_ports},
                      {"gpus_per_host", nap.gpus_per_host},
                      {"host_fabric", std::string(to_string(nap.host_fabric))},
                      {"host_fabric_gbps", nap.host_fabric_gbps},
                      {"host_fabric_latency_us", nap.host_fabric_latency_us}}}};
  }
  const std::string text = topology_json_text(doc);
  if (output.empty()) {
    std::fputs(text.c_str(), stdout);
    return 0;
  }
  try {
    config::replace_file(output, text);
  } catch (const config::UserFileError& e) {
    std::fprintf(stderr, "topocoll generate: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "wrote %s: %s \"%s\", %zu endpoints\n", output.c_str(),
               std::string(to_string(t.kind())).c_str(), t.name().c_str(), t.endpoints().size());
  return 0;
}

}  // namespace

TOPOCOLL_COMMAND("generate", "write a BiGraph or NAP topology JSON from shape parameters",
                 run_generate, "", "-o --output");

}  // namespace topocoll::cli
