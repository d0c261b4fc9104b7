// `topocoll fabric`: a topology file as a real network on this machine — namespaces,
// routers and shaped veth cables (fabric/, docs/fabric.md) — and faults on its cables.
#include <unistd.h>

#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <ctime>
#include <iostream>

#include <nlohmann/json.hpp>

#include "config/value_grammar.h"
#include "fabric/fabric_lock.h"
#include "fabric/live_fabric.h"
#include "fabric/route_walk.h"
#include "fabric/system_command.h"
#include "tools/topology_argument.h"
#include "tools/command.h"
#include "tools/fabric_launch.h"
#include "tools/fabric_verbs.h"
#include "tools/flag_value.h"
#include "topo/cable_names.h"
#include "topo/topology_json.h"

namespace topocoll::cli {
namespace {

using namespace topocoll::fabric;

constexpr const char* kUsage =
    "usage: topocoll fabric up TOPO.json [--rate-mbit R | --scale F] [--name N] [--mtu M]\n"
    "                                    [--peak-slack-us US]\n"
    "       topocoll fabric down [--name N] [--force]\n"
    "       topocoll fabric status [--name N] [--json]\n"
    "       topocoll fabric exec [--name N] ENDPOINT -- COMMAND [ARGS...]\n"
    "       topocoll fabric route [--name N] FROM TO\n"
    "       topocoll fabric degrade [--name N] CABLE --rate-mbit R\n"
    "       topocoll fabric cut [--name N] CABLE\n"
    "       topocoll fabric swap [--name N] CABLE CABLE\n"
    "       topocoll fabric restore [--name N] [CABLE]\n"
    "       topocoll fabric run | rank-exec | place | predict ...  (jobs on a fabric: --help after the verb)\n"
    "\n"
    "Builds the topology as a network on this machine (root; iproute2): a namespace per host,\n"
    "a router namespace per switch, every cable a veth pair shaped with tbf in each direction,\n"
    "routes from the topology's own routing (docs/fabric.md). `bench --fabric N` and\n"
    "`accept --fabric N` run one rank per endpoint inside it.\n"
    "  --rate-mbit R  the fastest cable runs at R Mbit/s, the others keep their ratio (default 20)\n"
    "  --scale F      every rate is the topology's times F instead\n"
    "  --name N       fabric name, a-z 0-9 _ (default tf); namespaces are tf-<N>-<node>\n"
    "  --mtu M        frame size on every cable (default 9000: fewer packets per byte)\n"
    "  --peak-slack-us US  a cable's peak bucket holds one frame plus US microseconds of its\n"
    "                 data (default 100), so a packet the kernel's timer releases late costs\n"
    "                 the cable no rate; 0 = one frame only\n"
    "  --force        down: also remove namespaces named tf-<N>-* that no record lists (made\n"
    "                 by a fabric whose record was lost, or by someone else), ending their\n"
    "                 processes; without it `down` removes only what `up` recorded\n"
    "  ENDPOINT       an endpoint id (s3.g0), a host name or an index\n"
    "  CABLE          as `topocoll describe --cables` names it: A-B (both directions; the\n"
    "                 second end is the one swap moves) or A->B (degrade one direction)\n";

struct Args {
  std::string verb;
  std::vector<std::string> positional;
  std::vector<std::string> command;  // after "--"
  std::string name;
  FabricOptions options;
  double rate_mbit = 0;
  bool rate_given = false;
  bool json = false;
  bool force = false;
};

// The fabric's own checks (fabric/fabric_plan.cpp) give each its range.
double number(const std::string& flag, const std::string& text) {
  return config::number_argument(flag, text, 0, kAny);
}

// The flags each verb reads (--name: all): another one given to it was ignored silently
// (`cut A-B --rate-mbit 5` cut the cable and said nothing of the rate).
bool verb_takes(const std::string& verb, const std::string& flag) {
  if (flag == "--name") return true;
  if (verb == "up") return flag == "--rate-mbit" || flag == "--scale" || flag == "--mtu" || flag == "--peak-slack-us";
  if (verb == "down") return flag == "--force";
  if (verb == "status") return flag == "--json";
  if (verb == "degrade") return flag == "--rate-mbit";
  return false;
}

Args parse(std::span<const std::string> args) {
  Args a;
  if (args.empty()) throw std::invalid_argument(std::string("which fabric command?\n") + kUsage);
  a.verb = args[0];
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& f = args[i];
    if (f == "--") {
      a.command.assign(args.begin() + long(i) + 1, args.end());
      break;
    }
    const bool known = f == "--name" || f == "--rate-mbit" || f == "--scale" || f == "--mtu" ||
                       f == "--peak-slack-us" || f == "--json" || f == "--force";
    if (known && !verb_takes(a.verb, f))
      throw std::invalid_argument(a.verb + " does not take " + f + "\n" + kUsage);
    if (f == "--name") {
      a.name = flag_value(args, i);
      if (std::string problem = fabric_name_problem(a.name); !problem.empty()) throw std::invalid_argument(problem);
    } else if (f == "--rate-mbit") {
      a.rate_mbit = positive_argument(f, flag_value(args, i));
      a.rate_given = true;
    } else if (f == "--scale") a.options.scale = positive_argument(f, flag_value(args, i));
    else if (f == "--mtu") a.options.mtu = int(config::count_argument(f, flag_value(args, i), 0, INT_MAX));
    else if (f == "--peak-slack-us") a.options.peak_slack_us = number(f, flag_value(args, i));
    else if (f == "--json") a.json = true;
    else if (f == "--force") a.force = true;
    else if (f.size() > 1 && f[0] == '-' && f.find("->") == std::string::npos)
      throw std::invalid_argument("unknown argument '" + f + "'\n" + kUsage);
    else a.positional.push_back(f);
  }
  return a;
}

void expect_positional(const Args& a, size_t lo, size_t hi, const char* what) {
  if (a.positional.size() < lo || a.positional.size() > hi)
    throw std::invalid_argument("fabric " + a.verb + " takes " + what + "\n" + kUsage);
}

std::string fixed(double x, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, x);
  return buf;
}

std::string describe_rate(double mbit) {
  return mbit >= 1 ? fixed(mbit, mbit < 10 ? 2 : 1) + " Mbit/s" : fixed(mbit * 1000, 1) + " kbit/s";
}

std::string fault_text(const Fault& f) {
  switch (f.kind) {
    case Fault::Kind::Degrade: return "degrade " + f.cables[0] + " to " + describe_rate(f.rate_mbit);
    case Fault::Kind::Cut: return "cut " + f.cables[0];
    case Fault::Kind::Swap: return "swap " + f.cables[0] + " " + f.cables[1];
  }
  return "";
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

int run_up(const Args& a) {
  expect_positional(a, 1, 1, "one topology file");
  FabricOptions o = a.options;
  if (!a.name.empty()) o.name = a.name;
  o.rate_mbit = a.rate_mbit;
  const topo::Topology t = load_topology_argument(a.positional[0]);
  const auto start = std::chrono::steady_clock::now();
  const FabricRecord r = fabric_up(t, a.positional[0], o, [](const std::string& s) {
    std::printf("fabric: %s\n", s.c_str());
    std::fflush(stdout);
  });
  const LiveFabric f = LiveFabric::open(r.name);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  double fastest = 0;
  for (const auto& c : f.plan().cables) fastest = std::max({fastest, c.mbit_ab, c.mbit_ba});
  std::printf("fabric %s is up in %.1f s: %s, %zu namespaces, %zu cables, fastest %s (%.3g x the "
              "topology's rates)\n",
              r.name.c_str(), seconds, t.name().c_str(), f.plan().namespaces.size(),
              f.plan().cables.size(), describe_rate(fastest).c_str(), f.plan().rate_scale);
  for (const auto& n : f.plan().notes) std::printf("note: %s\n", n.c_str());
  std::printf("try: topocoll bench --fabric %s --algos ring,ring-topo,hd --sizes 256K\n",
              r.name.c_str());
  return 0;
}

int run_down(const Args& a) {
  expect_positional(a, 0, 0, "no positional argument");
  std::string name = a.name;
  if (name.empty()) {
    const auto all = recorded_fabrics();
    name = all.size() == 1 ? all.front() : FabricOptions{}.name;
  }
  const FabricDown down = fabric_down(name, a.force);
  std::printf("fabric %s is down: %zu namespaces removed\n", name.c_str(), down.removed.size());
  if (!down.left_alone.empty())
    std::printf("left alone: %s (named like fabric %s's, but no record lists them: `topocoll fabric "
                "down --name %s --force` removes them)\n",
                joined(down.left_alone).c_str(), name.c_str(), name.c_str());
  return 0;
}

nlohmann::json status_json(const LiveFabric& f) {
  const auto& p = f.plan();
  nlohmann::json endpoints = nlohmann::json::array();
  for (const auto& e : p.endpoints)
    endpoints.push_back({{"id", e.id}, {"host", e.host}, {"namespace", p.ns_of(e).name},
                         {"address", e.address}, {"interface", e.interface}});
  nlohmann::json cables = nlohmann::json::array();
  for (const auto& c : p.cables)
    cables.push_back({{"name", c.name},
                      {"a", {{"namespace", p.namespaces[c.a.ns].name}, {"interface", c.a.interface}}},
                      {"b", {{"namespace", p.namespaces[c.b.ns].name}, {"interface", c.b.interface}}},
                      {"mbit_ab", c.mbit_ab},
                      {"mbit_ba", c.mbit_ba}});
  nlohmann::json faults = nlohmann::json::array();
  for (const auto& x : f.record().faults) faults.push_back(fault_json(x));
  int missing = 0;
  for (const auto& n : f.record().namespaces) missing += !netns_exists(n);
  return {{"name", f.name()},
          {"status", f.record().status},
          {"topology", f.topology().name()},
          {"topology_file", f.record().topology_file},
          {"rate_scale", p.rate_scale},
          {"mtu", p.mtu},
          {"peak_slack_us", p.peak_slack_us},
          {"created_unix", f.record().created_unix},
          {"namespaces", f.record().namespaces.size()},
          {"namespaces_missing", missing},
          {"management_namespace", p.namespaces[p.management_ns].name},
          {"bootstrap_address", p.management_address},
          {"lane_marks", p.lane_marks},
          {"endpoints", endpoints},
          {"cables", cables},
          {"faults", faults}};
}

int run_status(const Args& a) {
  expect_positional(a, 0, 0, "no positional argument");
  std::vector<std::string> names = a.name.empty() ? recorded_fabrics() : std::vector<std::string>{a.name};
  // What `up` would trip over and `down --force` would remove, named as such.
  const std::vector<std::string> unrecorded = unrecorded_namespaces(a.name);
  nlohmann::json all = nlohmann::json::array();
  for (const auto& n : names) {
    std::optional<LiveFabric> f;
    try {
      f.emplace(LiveFabric::open(n));
    } catch (const std::exception& e) {
      // The same words `up` and `down` use: no record is "not up", whatever namespaces exist.
      bool recorded = true;
      try {
        recorded = load_record(n).has_value();
      } catch (const std::exception&) {
      }
      if (a.json) all.push_back({{"name", n}, {"status", recorded ? "broken" : "down"}, {"error", e.what()}});
      else std::printf("fabric %s: %s\n", n.c_str(), e.what());
      continue;
    }
    const nlohmann::json j = status_json(*f);
    if (a.json) {
      all.push_back(j);
      continue;
    }
    const std::time_t created = std::time_t(f->record().created_unix);
    char when[64];
    std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", std::localtime(&created));
    std::printf("fabric %s: up since %s, topology %s (%s)\n", n.c_str(), when,
                f->topology().name().c_str(), f->record().topology_file.c_str());
    std::printf("  %zu namespaces (%d missing), %zu cables, rates x %.3g of the topology's, MTU %d, "
                "peak slack %g us\n",
                f->record().namespaces.size(), j["namespaces_missing"].get<int>(),
                f->plan().cables.size(), f->plan().rate_scale, f->plan().mtu, f->plan().peak_slack_us);
    std::printf("  management network in %s, bootstrap address %s\n",
                j["management_namespace"].get<std::string>().c_str(),
                f->plan().management_address.c_str());
    if (!f->plan().lane_marks.empty())
      std::printf("  flows stripe over %zu paths by socket mark (TOPOCOLL_NET_LANE_MARKS)\n",
                  f->plan().lane_marks.size());
    for (const auto& x : f->record().faults) std::printf("  fault: %s\n", fault_text(x).c_str());
    std::printf("  %-14s %-10s %-20s %-12s %s\n", "endpoint", "host", "namespace", "address", "interface");
    for (const auto& e : f->plan().endpoints)
      std::printf("  %-14s %-10s %-20s %-12s %s\n", e.id.c_str(), e.host.c_str(),
                  f->plan().ns_of(e).name.c_str(), e.address.c_str(), e.interface.c_str());
  }
  if (a.json) {
    if (!unrecorded.empty()) all.push_back({{"status", "unrecorded namespaces"}, {"namespaces", unrecorded}});
    std::cout << all.dump(2) << "\n";
    return 0;
  }
  if (names.empty()) std::printf("no fabric is up\n");
  if (!unrecorded.empty())
    std::printf("namespaces named like a fabric's that no record lists (left by a fabric whose record was "
                "lost, or someone else's; `topocoll fabric down --name N --force` removes those of fabric N): "
                "%s\n",
                joined(unrecorded).c_str());
  return 0;
}

int run_exec(const Args& a) {
  expect_positional(a, 1, 1, "an endpoint and -- COMMAND");
  if (a.command.empty()) throw std::invalid_argument("fabric exec: give the command after --");
  // The entry lock from before the record is read until the exec below: no `down` in between.
  const FabricForLaunch opened = open_fabric_for_launch(a.name);
  const LiveFabric& f = opened.fabric;
  const auto& e = f.plan().endpoints[f.endpoint(a.positional[0])];
  become_endpoint_host(f.plan().ns_of(e).name, e.host);
  ::setenv("TOPOCOLL_FABRIC", f.name().c_str(), 1);
  ::setenv("TOPOCOLL_FABRIC_ENDPOINT", e.id.c_str(), 1);
  ::setenv("TOPOCOLL_FABRIC_ADDRESS", e.address.c_str(), 1);
  std::vector<char*> argv;
  for (const auto& c : a.command) argv.push_back(const_cast<char*>(c.c_str()));
  argv.push_back(nullptr);
  ::execvp(argv[0], argv.data());
  throw FabricError("cannot run " + a.command[0] + ": " + std::strerror(errno));
}

int run_route(const Args& a) {
  expect_positional(a, 2, 2, "two endpoints");
  const LiveFabric f = LiveFabric::open(a.name);
  const int from = f.endpoint(a.positional[0]), to = f.endpoint(a.positional[1]);
  const auto& p = f.plan();
  const int lanes = std::max<int>(1, int(p.lane_marks.size()));
  for (int j = 0; j < lanes; ++j) {
    const auto w = walk_route(p, from, to, p.lane_marks.empty() ? 0 : p.lane_marks[j]);
    std::string line;
    for (int l : w.links) line += (line.empty() ? "" : "  ") + topo::link_name(f.topology(), l);
    if (lanes > 1) std::printf("lane %d: ", j);
    std::printf("%s\n", line.empty() ? "(same host)" : line.c_str());
  }
  return 0;
}

int run_fault(const Args& a) {
  // Under the fabric's lock, and read again under it: two faults at once would each save
  // the record without the other's, and one after `down` would bring its record back.
  const std::string name = LiveFabric::open(a.name).name();
  const FabricLock lock(name, a.verb);
  LiveFabric f = LiveFabric::open(name);
  if (a.verb == "degrade") {
    expect_positional(a, 1, 1, "one cable and --rate-mbit R");
    if (!a.rate_given) throw std::invalid_argument("fabric degrade needs --rate-mbit R");
    f.degrade(a.positional[0], a.rate_mbit);
  } else if (a.verb == "cut") {
    expect_positional(a, 1, 1, "one cable");
    f.cut(a.positional[0]);
  } else if (a.verb == "swap") {
    expect_positional(a, 2, 2, "two cables");
    f.swap(a.positional[0], a.positional[1]);
  } else {
    expect_positional(a, 0, 1, "at most one cable");
    f.restore(a.positional.empty() ? "" : a.positional[0]);
  }
  const auto& faults = f.record().faults;
  std::printf("fabric %s: %s\n", f.name().c_str(),
              faults.empty() ? "no faults" : (std::to_string(faults.size()) + " fault(s)").c_str());
  for (const auto& x : faults) std::printf("  %s\n", fault_text(x).c_str());
  return 0;
}

int run_fabric(std::span<const std::string> args) {
  const std::string verb = args.empty() ? "" : args[0];
  const bool job_verb = verb == "run" || verb == "rank-exec" || verb == "place";
  for (const auto& a : args) {
    if (a == "--") break;
    if (a == "--help" || a == "-h") {
      if (job_verb) std::printf("usage: topocoll fabric ...\n%s", kFabricJobUsage);
      else if (verb == "predict") std::printf("%s", kFabricPredictUsage);
      else std::printf("%s", kUsage);
      return 0;
    }
  }
  if (verb == "run") return fabric_run(args.subspan(1));
  if (verb == "rank-exec") return fabric_rank_exec(args.subspan(1));
  if (verb == "place") return fabric_place(args.subspan(1));
  if (verb == "predict") return fabric_predict(args.subspan(1));
  // `fabric up --topo FILE` as `fabric up FILE`, as every other command names the topology.
  const std::vector<std::string> words =
      verb == "up" ? topo_flag_as_word(args) : std::vector<std::string>(args.begin(), args.end());
  const Args a = parse(words);
  if (a.verb == "up") return run_up(a);
  if (a.verb == "down") return run_down(a);
  if (a.verb == "status") return run_status(a);
  if (a.verb == "exec") return run_exec(a);
  if (a.verb == "route") return run_route(a);
  if (a.verb == "degrade" || a.verb == "cut" || a.verb == "swap" || a.verb == "restore") return run_fault(a);
  throw std::invalid_argument("unknown fabric command '" + a.verb + "'\n" + kUsage);
}

}  // namespace

TOPOCOLL_COMMAND("fabric", "a topology as a real network of namespaces, routers and shaped links",
                 run_fabric, "--rank0-env --relay-port");

}  // namespace topocoll::cli
