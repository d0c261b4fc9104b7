#include "fabric/live_fabric.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "config/env.h"
#include "fabric/fabric_lock.h"
#include "fabric/fabric_script.h"
#include "fabric/iproute2.h"
#include "fabric/system_command.h"
#include "topo/cable_names.h"
#include "topo/topology_json.h"

namespace topocoll::fabric {
namespace {

// SIGKILLs `pid` if it still runs in the namespace bound at `ns_path`. The pid was listed a
// moment ago: the process may have exited and its number gone to another, which must not be
// killed. A pidfd holds the process itself; its namespace is checked after the pidfd is
// taken, and the signal goes through the pidfd, so it reaches that process or none.
bool kill_if_in_netns(pid_t pid, const std::string& ns_path) {
  struct stat ns {};
  if (::stat(ns_path.c_str(), &ns) != 0) return false;
  const auto in_ns = [&] {
    struct stat its {};
    const std::string path = "/proc/" + std::to_string(pid) + "/ns/net";
    return ::stat(path.c_str(), &its) == 0 && its.st_dev == ns.st_dev && its.st_ino == ns.st_ino;
  };
  const int pidfd = int(::syscall(SYS_pidfd_open, pid, 0));
  if (pidfd < 0) return errno == ENOSYS && in_ns() && ::kill(pid, SIGKILL) == 0;  // before Linux 5.3
  const bool killed = in_ns() && ::syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, nullptr, 0) == 0;
  ::close(pidfd);
  return killed;
}

double available_memory_mib() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  long long kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit)
    if (key == "MemAvailable:") return double(kib) / 1024.0;
  return 0;
}

std::string fixed(double x, int digits = 0) {
  std::ostringstream o;
  o.setf(std::ios::fixed);
  o.precision(digits);
  o << x;
  return o.str();
}

// Writes the sysctls inside namespace `ns`; names the first one that failed and why (the
// child that writes them says which, and its errno, through a pipe).
void apply_sysctls(const std::string& ns, const std::vector<Sysctl>& sysctls) {
  struct Failure {
    std::size_t index = 0;
    int error = 0;
  };
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) throw FabricError(std::string("pipe: ") + std::strerror(errno));
  int code = 0;
  try {
    code = run_in_netns(ns, [&] {
      ::close(report[0]);
      for (std::size_t i = 0; i < sysctls.size(); ++i) {
        const std::string path = "/proc/sys/" + sysctls[i].path;
        const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
        bool ok = fd >= 0;
        if (ok) {
          ok = ::write(fd, sysctls[i].value.data(), sysctls[i].value.size()) == ssize_t(sysctls[i].value.size());
          if (!ok && errno == 0) errno = EIO;  // a short write
          const int err = errno;
          ::close(fd);
          errno = err;
        }
        if (!ok && !sysctls[i].optional) {
          const Failure f{i, errno};
          (void)!::write(report[1], &f, sizeof f);
          return 1;
        }
      }
      return 0;
    });
  } catch (...) {
    ::close(report[0]);
    ::close(report[1]);
    throw;
  }
  ::close(report[1]);
  Failure f;
  const bool said = ::read(report[0], &f, sizeof f) == ssize_t(sizeof f) && f.index < sysctls.size();
  ::close(report[0]);
  if (code != 0)
    throw FabricError("namespace " + ns + ": cannot set " +
                      (said ? "/proc/sys/" + sysctls[f.index].path + " = " + sysctls[f.index].value + " (" +
                                  std::strerror(f.error) + ")"
                            : std::string("its sysctls (exit ") + std::to_string(code) + ")"));
}

// Runs tc; when the kernel (or tc) lacks the qdisc a feature needs, says which feature and
// which qdisc. The fabric needs only tbf (every cable's rate, degrade) and pfifo (cut): no
// netem, which kernels without sch_netem refuse ("Specified qdisc kind is unknown").
void run_tc(const std::vector<std::string>& argv, const std::string& what, const std::string& feature,
            const std::string& qdisc, const std::string& input = "") {
  try {
    run_checked(argv, what, input);
  } catch (const FabricError& e) {
    const std::string text = e.what();
    if (text.find("qdisc kind is unknown") != std::string::npos || text.find("Unknown qdisc") != std::string::npos)
      throw FabricError(feature + " needs the `" + qdisc + "` qdisc, which this kernel (or its tc) does not have: " +
                        text);
    throw;
  }
}

void configure_namespace(const FabricPlan& plan, int index, bool with_rules) {
  const NamespaceScript s = namespace_script(plan, index);
  const std::string& name = plan.namespaces[index].name;
  apply_sysctls(name, s.sysctls);
  run_checked({"ip", "-n", name, "-batch", "-"}, "configuring " + name,
              s.links + (with_rules ? s.rules : "") + s.routes);
  if (!s.shapers.empty())
    run_tc({"tc", "-n", name, "-batch", "-"}, "shaping the cables of " + name, "shaping cables to their rates",
           "tbf", s.shapers);
}

// Removes namespaces, first ending the processes inside them (a crashed run's ranks).
// Returns "" when none of them is left, else which are and what `ip` said.
std::string remove_namespaces(const std::vector<std::string>& names) {
  std::string batch;
  std::vector<std::string> removing;
  std::string refused;
  for (const auto& n : names) {
    // Each name becomes a line of `ip -batch`: one with white space, a line break or a
    // leading '-' (as "-all") would be another command or option there. The fabric's own
    // names never have them; a record or a /run/netns entry someone made may.
    const bool plain = !n.empty() && n.front() != '-' && n.size() <= 255 &&
                       std::all_of(n.begin(), n.end(), [](char c) {
                         return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-' || c == '~';
                       });
    if (!plain) {
      refused += (refused.empty() ? "" : ", ") + std::string("'") + n + "'";
      continue;
    }
    if (!netns_exists(n)) continue;
    // Until none is left (a few rounds at most): a process may fork between the listing and
    // the kill, and its child, not listed, would keep running as root in the namespace.
    for (int round = 0; round < 20; ++round) {
      std::istringstream in(run_command({"ip", "netns", "pids", n}).output);
      bool any = false;
      long pid = 0;
      while (in >> pid)
        if (pid > 1 && pid != ::getpid()) any = kill_if_in_netns(pid_t(pid), netns_path(n)) || any;
      if (!any) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    batch += "netns del " + n + "\n";
    removing.push_back(n);
  }
  const std::string not_removed = refused.empty() ? "" : "left alone namespace name(s) " + refused + ", which no fabric makes";
  if (batch.empty()) return not_removed;
  const CommandResult r = run_command({"ip", "-force", "-batch", "-"}, batch);
  std::string left;
  for (const auto& n : removing)
    if (netns_exists(n)) left += (left.empty() ? "" : ", ") + n;
  if (left.empty()) return not_removed;
  return "could not remove " + left + " (`ip netns del` exit " + std::to_string(r.status) +
         (r.output.empty() ? "" : ": " + r.output.substr(0, r.output.find('\n'))) + ")" +
         (not_removed.empty() ? "" : "; " + not_removed);
}

// Which end of a cable named `text` the user named second (the end that moves in a swap).
bool named_reversed(const topo::Topology& t, const std::string& text, int link) {
  const std::string first = t.node_id(t.links()[link].from) + "-";
  return text.rfind(first, 0) != 0;
}

// What the machine lacks that a fabric needs, without making anything ("" = nothing).
std::string machine_lacks(const FabricSize& size) {
  if (::geteuid() != 0)
    return "a fabric needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN to make namespaces and "
           "shape links): run it as root or with sudo";
  for (const char* tool : {"ip", "tc"}) {
    // A copy: bound to a reference, the call with a temporary name makes GCC 13 warn.
    const std::optional<ToolLocation> found = iproute2_tool(tool);
    if (!found) return tool_missing(tool, iproute2_search());
    // Found is not enough: an unpacked binary without its libraries does not start.
    if (const CommandResult v = run_command({tool, "-V"}); v.status != 0)
      return std::string("`") + tool + "` at " + found->path + " does not run (exit " + std::to_string(v.status) +
             ": " + v.output.substr(0, v.output.find('\n')) + ")" +
             (found->library_path.empty()
                  ? "; no library directory was found beside it: a tool unpacked from a .deb needs the .debs of "
                    "its libraries unpacked into the same directory (perf/gpu/fetch_debs.sh lists them), and "
                    "TOPOCOLL_FABRIC_IPROUTE2 pointing there"
                  : "; its libraries were looked for in " + found->library_path +
                        ": unpack the .debs of the missing ones there (perf/gpu/fetch_debs.sh lists them)");
  }
  // A fabric may take half of the memory available, or TOPOCOLL_FABRIC_MEMORY_LIMIT_MIB.
  const double available = available_memory_mib();
  double limit = available / 2;
  std::string why = "this machine has " + fixed(available) + " MiB available and a fabric may use at most half";
  if (const config::EnvSetting& set = config::env().setting("TOPOCOLL_FABRIC_MEMORY_LIMIT_MIB"); set.is_set()) {
    if (!set.problem.empty()) return set.problem;  // refused, not guessed: a fabric could exhaust the machine
    limit = std::get<double>(set.value);
    why = "TOPOCOLL_FABRIC_MEMORY_LIMIT_MIB allows " + fixed(limit) + " MiB";
  }
  if (limit > 0 && size.memory_mib > limit)
    return "the fabric needs about " + fixed(size.memory_mib, 1) + " MiB of kernel memory (" +
           std::to_string(size.namespaces) + " namespaces, " + std::to_string(size.veth_pairs) +
           " veth pairs, ~" + std::to_string(size.routes) + " routes) and " + why;
  return "";
}

// Makes namespace `probe` with a shaped veth pair in it, and removes it: whether the kernel
// can ("" = it can). An existing namespace of that name is not ours to touch.
std::string probe_cannot_run(const std::string& probe) {
  if (netns_exists(probe)) return "a namespace named " + probe + " exists already; it is not this check's to remove";
  if (auto r = run_command({"ip", "netns", "add", probe}); r.status != 0)
    return "cannot create network namespaces here (" + r.output.substr(0, r.output.find('\n')) + ")";
  std::string reason;
  if (auto r = run_command({"ip", "-n", probe, "link", "add", "name", "tfprobe0", "type", "veth", "peer",
                            "name", "tfprobe1"});
      r.status != 0) {
    reason = "cannot create veth pairs here (" + r.output.substr(0, r.output.find('\n')) + ")";
  } else if (auto q = run_command({"tc", "-n", probe, "qdisc", "add", "dev", "tfprobe0", "root",
                                   "tbf", "rate", "1mbit", "burst", "20000", "limit", "80000"});
             q.status != 0) {
    reason = "the kernel cannot shape links with tbf (sch_tbf: " +
             q.output.substr(0, q.output.find('\n')) + ")";
  }
  if (std::string left = remove_namespaces({probe}); !left.empty() && reason.empty()) reason = left;
  return reason;
}

}  // namespace

std::string machine_cannot_run(const FabricSize& size, const std::string& probe) {
  if (std::string lack = machine_lacks(size); !lack.empty()) return lack;
  return probe_cannot_run(probe);
}

FabricRecord fabric_up(const topo::Topology& topology, const std::string& topology_file,
                       const FabricOptions& options, const Progress& progress) {
  auto say = [&](const std::string& s) {
    if (progress) progress(s);
  };
  // What is wrong with the request, then what the machine lacks (root, iproute2, memory),
  // before the plan, which takes a while.
  check_fabric_options(options);
  check_fabric_limits(topology);
  const FabricSize size = estimate_fabric_size(topology);
  if (const std::string lack = machine_lacks(size); !lack.empty()) throw FabricError(lack);
  const FabricPlan plan = plan_fabric(topology, options);
  const FabricLock lock(options.name, "up");
  if (const auto existing = load_record(options.name)) {
    if (existing->status == "up")
      throw FabricError("a fabric named " + options.name + " is already up: `topocoll fabric down --name " +
                        options.name + "` first, or choose another --name");
    throw FabricError("fabric " + options.name + " is incomplete (an earlier `up` did not finish): "
                      "`topocoll fabric down --name " + options.name + "` removes what it made");
  }
  // Never adopt a namespace someone else made: one of ours already there is refused.
  for (const auto& ns : plan.namespaces)
    if (netns_exists(ns.name))
      throw FabricError("namespace " + ns.name + " exists already, and no record of fabric " + options.name +
                        " lists it (left by a fabric whose record was lost, or someone else's): `topocoll "
                        "fabric down --name " + options.name + " --force` removes namespaces named " +
                        namespace_prefix(options.name) + "*, or choose another --name");

  FabricRecord record;
  record.name = options.name;
  record.status = "building";
  record.topology_file = topology_file;
  record.topology = topo::topology_to_json(topology);
  record.options = options;
  record.created_unix = std::chrono::duration_cast<std::chrono::seconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
  record.creator_pid = ::getpid();
  // The record names the probe before it is made, so a crash during the probe leaves
  // nothing `down` would not remove.
  const std::string probe = namespace_prefix(options.name) + "probe~" + std::to_string(::getpid());
  record.namespaces = {probe};
  save_record(record);
  if (const std::string reason = probe_cannot_run(probe); !reason.empty()) {
    if (!netns_exists(probe)) remove_record(record.name);  // else the record lets `down` retry
    throw FabricError(reason);
  }
  record.namespaces.clear();
  for (const auto& ns : plan.namespaces) record.namespaces.push_back(ns.name);
  save_record(record);
  try {
    say("creating " + std::to_string(plan.namespaces.size()) + " namespaces and " +
        std::to_string(plan.cables.size()) + " cables");
    run_checked({"ip", "-batch", "-"}, "creating namespaces and cables", root_batch(plan));
    say("configuring addresses, routes and shapers");
    for (int i = 0; i < int(plan.namespaces.size()); ++i) configure_namespace(plan, i, true);
  } catch (...) {
    // Kept while any namespace is left, so that `down` removes the rest.
    if (remove_namespaces(record.namespaces).empty()) remove_record(record.name);
    throw;
  }
  record.status = "up";
  save_record(record);
  return record;
}

FabricDown fabric_down(const std::string& name, bool force) {
  const FabricLock lock(name, "down");
  std::optional<FabricRecord> record;
  try {
    record = load_record(name);
  } catch (const FabricError&) {
    if (!force) throw;  // a corrupt record lists nothing we can trust
  }
  FabricDown down;
  if (record)
    for (const auto& n : record->namespaces)
      if (netns_exists(n)) down.removed.push_back(n);
  for (const auto& n : unrecorded_namespaces(name))
    (force ? down.removed : down.left_alone).push_back(n);
  if (!record && down.removed.empty()) {
    if (down.left_alone.empty())
      throw FabricError("no fabric named " + name + " is up (`topocoll fabric status` lists them)");
    std::string list;
    for (const auto& n : down.left_alone) list += (list.empty() ? "" : ", ") + n;
    throw FabricError("no fabric named " + name + " is up, and no record says it made " + list +
                      ": they only carry its prefix and may be someone else's; `topocoll fabric down --name " +
                      name + " --force` removes them and ends the processes inside");
  }
  if (std::string left = remove_namespaces(down.removed); !left.empty())
    throw FabricError("fabric " + name + ": " + left + "; its record stays, so `topocoll fabric down --name " + name +
                      "` can try again");
  remove_record(name);
  return down;
}

std::vector<std::string> unrecorded_namespaces(const std::string& name) {
  if (!name.empty()) check_fabric_name(name);  // "a-b" would list fabric a's namespaces of nodes b-*
  std::set<std::string> recorded;
  for (const auto& fabric : name.empty() ? recorded_fabrics() : std::vector<std::string>{name}) {
    try {
      if (const auto r = load_record(fabric)) recorded.insert(r->namespaces.begin(), r->namespaces.end());
    } catch (const FabricError&) {
      // A corrupt record vouches for nothing.
    }
  }
  std::vector<std::string> out;
  for (const auto& n : netns_with_prefix(name.empty() ? "tf-" : namespace_prefix(name)))
    if (!recorded.count(n)) out.push_back(n);
  std::sort(out.begin(), out.end());
  return out;
}

LiveFabric LiveFabric::open(const std::string& requested) {
  std::string name = requested;
  if (name.empty()) {
    const auto all = recorded_fabrics();
    if (all.empty()) throw FabricError("no fabric is up: `topocoll fabric up TOPO.json` makes one");
    if (all.size() > 1) {
      std::string list;
      for (const auto& n : all) list += (list.empty() ? "" : ", ") + n;
      throw FabricError("several fabrics are up (" + list + "): name one with --name");
    }
    name = all.front();
  }
  auto record = load_record(name);
  if (!record)
    throw FabricError("no fabric named " + name + " is up (`topocoll fabric status` lists them)");
  if (record->status != "up")
    throw FabricError("fabric " + name + " is incomplete (its `up` did not finish): `topocoll fabric down --name " +
                      name + "` removes what it made");
  LiveFabric f;
  f.record_ = std::move(*record);
  f.topology_ = topo::topology_from_json(f.record_.topology);
  f.plan_ = plan_fabric(f.topology_, f.record_.options);
  // Faults, jobs and routes act on the namespaces the plan names, `down` on those the record
  // lists: a record that lists others (edited, or written by a topocoll that names them
  // differently) would have the one act where the other does not clean up.
  std::vector<std::string> planned, recorded = f.record_.namespaces;
  for (const auto& ns : f.plan_.namespaces) planned.push_back(ns.name);
  std::sort(planned.begin(), planned.end());
  std::sort(recorded.begin(), recorded.end());
  if (planned != recorded) {
    std::vector<std::string> only_recorded, only_planned;
    std::set_difference(recorded.begin(), recorded.end(), planned.begin(), planned.end(),
                        std::back_inserter(only_recorded));
    std::set_difference(planned.begin(), planned.end(), recorded.begin(), recorded.end(),
                        std::back_inserter(only_planned));
    auto first = [](const std::vector<std::string>& v) { return v.empty() ? std::string("none") : v.front(); };
    throw FabricError("fabric " + name + "'s record does not list the namespaces its topology makes (" +
                      std::to_string(only_recorded.size()) + " listed but not made, first " + first(only_recorded) +
                      "; " + std::to_string(only_planned.size()) + " made but not listed, first " +
                      first(only_planned) + "): edited, or written by another topocoll version; `topocoll fabric "
                      "down --name " + name + " --force` removes it");
  }
  return f;
}

topo::Topology LiveFabric::modelled_topology() const {
  topo::Topology t = emulated_topology(topology_, plan_);
  for (const auto& f : record_.faults) {
    if (f.kind != Fault::Kind::Degrade) continue;
    const auto sel = topo::find_cable(topology_, f.cables.at(0));
    t.set_link_gbps(sel.link, f.rate_mbit / 1000.0);
    if (sel.both_directions) t.set_link_gbps(topology_.links()[sel.link].reverse, f.rate_mbit / 1000.0);
  }
  return t;
}

std::string LiveFabric::emulated_topology_file() const {
  const std::string dir = fabric_files_dir(name());
  const std::string path = dir + "/topology.json";
  const std::string text = topo::topology_to_json(emulated_topology(topology_, plan_)).dump(1) + "\n";
  {
    std::ifstream in(path);
    std::stringstream existing;
    existing << in.rdbuf();
    if (in && existing.str() == text) return path;
  }
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
    throw FabricError("cannot create " + dir + ": " + std::strerror(errno));
  // Ranks starting together each make sure of it: a whole file appears at once, or none.
  write_fabric_file(path, text);
  return path;
}

int LiveFabric::endpoint(const std::string& name) const {
  if (auto e = topology_.find_endpoint_by_id(name)) return *e;
  for (const auto& h : topology_.hosts())
    if (h.name == name && !h.endpoints.empty()) return h.endpoints.front();
  if (!name.empty() && name.find_first_not_of("0123456789") == std::string::npos && name.size() < 9) {
    const int index = std::stoi(name);
    if (index < int(topology_.endpoints().size())) return index;
  }
  throw std::invalid_argument("'" + name + "' is no endpoint id, host or endpoint index of " +
                              topology_.name());
}

const Cable& LiveFabric::cable_of(int link) const {
  for (const auto& c : plan_.cables)
    if (c.link == link || c.reverse == link) return c;
  throw FabricError("link " + std::to_string(link) + " is no cable of fabric " + name());
}

void LiveFabric::set_rate(int link, double mbit) const {
  const Cable& c = cable_of(link);
  const VethEnd& end = link == c.link ? c.a : c.b;
  std::vector<std::string> argv = {"tc", "-n", plan_.namespaces[end.ns].name};
  for (auto& a : shaper_arguments(end.interface, mbit, plan_.mtu, plan_.peak_slack_us)) argv.push_back(a);
  run_tc(argv, "shaping " + topo::link_name(topology_, link), "shaping a cable to a rate", "tbf");
}

double LiveFabric::current_mbit(int link) const {
  const Cable& c = cable_of(link);
  double mbit = link == c.link ? c.mbit_ab : c.mbit_ba;
  for (const auto& f : record_.faults)
    if (f.kind == Fault::Kind::Degrade) {
      const auto sel = topo::find_cable(topology_, f.cables.at(0));
      if (sel.link == link || (sel.both_directions && topology_.links()[sel.link].reverse == link)) mbit = f.rate_mbit;
    }
  return mbit;
}

// A cut cable drops everything at both ends (a zero-length queue): it stays up, so routes
// stay as configured and traffic for it is lost, as over a severed fibre whose ends are
// statically routed; restoring puts the shapers back.
void LiveFabric::set_link_state(const Cable& c, bool up) const {
  for (int link : {c.link, c.reverse}) {
    const VethEnd& end = link == c.link ? c.a : c.b;
    std::vector<std::string> argv = {"tc", "-n", plan_.namespaces[end.ns].name};
    if (up) {
      for (auto& a : shaper_arguments(end.interface, current_mbit(link), plan_.mtu, plan_.peak_slack_us))
        argv.push_back(a);
    } else {
      for (const char* a : {"qdisc", "replace", "dev", end.interface.c_str(), "root", "pfifo", "limit", "0"})
        argv.push_back(a);
    }
    if (up) run_tc(argv, "restoring " + c.name, "restoring a cut cable's rate", "tbf");
    else run_tc(argv, "cutting " + c.name, "cutting a cable (dropping everything at its ends)", "pfifo");
  }
}

void LiveFabric::save() const { save_record(record_); }

// The cut on the cable `link` belongs to, if any (its canonical name).
std::optional<std::string> LiveFabric::cut_of(int link) const {
  for (const auto& f : record_.faults)
    if (f.kind == Fault::Kind::Cut && cable_of(topo::find_cable(topology_, f.cables.at(0)).link).link ==
                                          cable_of(link).link)
      return f.cables.at(0);
  return std::nullopt;
}

void LiveFabric::degrade(const std::string& cable, double mbit) {
  if (!(mbit >= 0.01 && mbit <= 10000))
    throw std::invalid_argument("--rate-mbit " + std::to_string(mbit) + ": expected 0.01 to 10000");
  const auto sel = topo::find_cable(topology_, cable);
  // A shaper in place of the cut's drop-everything queue would let traffic through again.
  if (const auto cut = cut_of(sel.link))
    throw FabricError("cable " + *cut + " is cut: `topocoll fabric restore " + *cut + "` first");
  set_rate(sel.link, mbit);
  if (sel.both_directions) set_rate(topology_.links()[sel.link].reverse, mbit);
  record_.faults.push_back({Fault::Kind::Degrade,
                            {sel.both_directions ? topo::cable_name(topology_, sel.link)
                                                 : topo::link_name(topology_, sel.link)},
                            mbit});
  save();
}

void LiveFabric::cut(const std::string& cable) {
  const auto sel = topo::find_cable(topology_, cable);
  if (!sel.both_directions)
    throw std::invalid_argument("cut takes a cable ('A-B'), not one direction ('" + cable + "')");
  if (const auto cut = cut_of(sel.link)) throw FabricError("cable " + *cut + " is cut already");
  set_link_state(cable_of(sel.link), false);
  record_.faults.push_back({Fault::Kind::Cut, {topo::cable_name(topology_, sel.link)}, 0});
  save();
}

void LiveFabric::rewire(const std::string& first, const std::string& second) const {
  // Current pairs: near1-far1 and near2-far2 (as planned) or, once swapped, near1-far2 and
  // near2-far1: deleting the near ends removes whichever pairs they are in.
  const auto s1 = topo::find_cable(topology_, first), s2 = topo::find_cable(topology_, second);
  const Cable& c1 = cable_of(s1.link);
  const Cable& c2 = cable_of(s2.link);
  const bool r1 = named_reversed(topology_, first, c1.link), r2 = named_reversed(topology_, second, c2.link);
  const VethEnd near1 = r1 ? c1.b : c1.a, far1 = r1 ? c1.a : c1.b;
  const VethEnd near2 = r2 ? c2.b : c2.a, far2 = r2 ? c2.a : c2.b;
  auto ns = [&](const VethEnd& e) { return plan_.namespaces[e.ns].name; };
  const bool swapped_now = [&] {
    for (const auto& f : record_.faults)
      if (f.kind == Fault::Kind::Swap && f.cables == std::vector<std::string>{first, second}) return true;
    return false;
  }();
  const VethEnd to1 = swapped_now ? far1 : far2, to2 = swapped_now ? far2 : far1;
  run_checked({"ip", "-n", ns(near1), "link", "del", "dev", near1.interface}, "unplugging " + first);
  run_checked({"ip", "-n", ns(near2), "link", "del", "dev", near2.interface}, "unplugging " + second);
  run_checked({"ip", "-batch", "-"}, "plugging the cables in again",
              "link add name " + near1.interface + " netns " + ns(near1) + " type veth peer name " +
                  to1.interface + " netns " + ns(to1) + "\nlink add name " + near2.interface + " netns " +
                  ns(near2) + " type veth peer name " + to2.interface + " netns " + ns(to2) + "\n");
  // Deleting the veths removed their addresses, routes and shapers: put them back.
  std::set<int> touched = {near1.ns, far1.ns, near2.ns, far2.ns};
  for (int i : touched) configure_namespace(plan_, i, false);
  // Each end keeps sending to the neighbour the file names, and the node really plugged in
  // takes those frames (its MAC pinned under the planned neighbour's address), as routers
  // whose forwarding follows the file would; unswapped ends learn by ARP again.
  const auto planned_neighbour = [&](const VethEnd& e) {
    const Cable& c = e.ns == c1.a.ns && e.interface == c1.a.interface   ? c1
                     : e.ns == c1.b.ns && e.interface == c1.b.interface ? c1
                                                                          : c2;
    return e.ns == c.a.ns && e.interface == c.a.interface ? c.address_b : c.address_a;
  };
  const std::vector<std::pair<VethEnd, VethEnd>> plugged = {{near1, to1}, {to1, near1}, {near2, to2}, {to2, near2}};
  for (const auto& [end, peer] : plugged) {
    if (swapped_now) {
      run_command({"ip", "-n", ns(end), "neigh", "flush", "dev", end.interface});
      continue;
    }
    const CommandResult mac = run_command({"ip", "-n", ns(peer), "-br", "link", "show", "dev", peer.interface});
    std::istringstream words(mac.output);
    std::string device, state, address;
    words >> device >> state >> address;
    if (mac.status != 0 || address.size() != 17)
      throw FabricError("cannot read the MAC address of " + peer.interface + " in " + ns(peer) + ": " + mac.output);
    run_checked({"ip", "-n", ns(end), "neigh", "replace", planned_neighbour(end), "lladdr", address,
                 "dev", end.interface, "nud", "permanent"},
                "pinning the neighbour of " + end.interface + " in " + ns(end));
  }
  for (const auto& f : record_.faults)
    if (f.kind == Fault::Kind::Degrade) {
      const auto sel = topo::find_cable(topology_, f.cables.at(0));
      set_rate(sel.link, f.rate_mbit);
      if (sel.both_directions) set_rate(topology_.links()[sel.link].reverse, f.rate_mbit);
    }
}

void LiveFabric::swap(const std::string& first, const std::string& second) {
  const auto s1 = topo::find_cable(topology_, first), s2 = topo::find_cable(topology_, second);
  if (!s1.both_directions || !s2.both_directions)
    throw std::invalid_argument("swap takes two cables ('A-B C-D'), not directions");
  if (s1.link == s2.link) throw std::invalid_argument("swap: " + first + " and " + second + " are one cable");
  const std::string n1 = topo::cable_name(topology_, s1.link), n2 = topo::cable_name(topology_, s2.link);
  for (const auto& f : record_.faults)
    if (f.kind != Fault::Kind::Degrade)
      for (const auto& c : f.cables) {
        const int link = topo::find_cable(topology_, c).link;
        if (link == s1.link || link == s2.link)
          throw FabricError("cable " + topo::cable_name(topology_, link) + " is already " +
                            (f.kind == Fault::Kind::Cut ? "cut" : "swapped") +
                            ": `topocoll fabric restore " + topo::cable_name(topology_, link) + "` first");
      }
  // Keep the orientation the user gave: the second-named ends move.
  const std::string a = named_reversed(topology_, first, s1.link) ? first : n1;
  const std::string b = named_reversed(topology_, second, s2.link) ? second : n2;
  rewire(a, b);
  record_.faults.push_back({Fault::Kind::Swap, {a, b}, 0});
  save();
}

void LiveFabric::restore(const std::string& cable) {
  int only = -1;
  if (!cable.empty()) only = topo::find_cable(topology_, cable).link;
  auto involves = [&](const Fault& f) {
    if (only < 0) return true;
    for (const auto& c : f.cables) {
      const int link = topo::find_cable(topology_, c).link;
      if (cable_of(link).link == cable_of(only).link) return true;
    }
    return false;
  };
  bool any = false;
  for (int i = int(record_.faults.size()) - 1; i >= 0; --i) {
    const Fault f = record_.faults[i];
    if (!involves(f)) continue;
    any = true;
    const auto sel = topo::find_cable(topology_, f.cables.at(0));
    if (f.kind == Fault::Kind::Degrade) {
      record_.faults.erase(record_.faults.begin() + i);
      const Cable& c = cable_of(sel.link);
      set_rate(sel.link, sel.link == c.link ? c.mbit_ab : c.mbit_ba);
      if (sel.both_directions) set_rate(topology_.links()[sel.link].reverse, sel.link == c.link ? c.mbit_ba : c.mbit_ab);
    } else if (f.kind == Fault::Kind::Cut) {
      record_.faults.erase(record_.faults.begin() + i);
      set_link_state(cable_of(sel.link), true);
    } else {
      rewire(f.cables.at(0), f.cables.at(1));  // back to the planned pairs
      record_.faults.erase(record_.faults.begin() + i);
    }
    save();
  }
  if (!any)
    throw std::invalid_argument(cable.empty() ? "fabric " + name() + " has no fault to restore"
                                              : "no fault on cable " + cable + " of fabric " + name());
}

}  // namespace topocoll::fabric
