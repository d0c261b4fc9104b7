// `topocoll order`: the host order in which a rank-order ring — what NCCL builds across
// nodes — is contention-free on the topology, for launchers that number ranks by the order
// of their host list (mpirun hostfiles, torchrun node ranks, Slurm hostfiles).
#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "config/user_files.h"
#include "sched/job_placement.h"
#include "sched/plan.h"
#include "tools/topology_argument.h"
#include "tools/command.h"
#include "tools/flag_value.h"
#include "topo/topology_json.h"

namespace topocoll::cli {
namespace {

// A host list names at most 65,536 endpoints' hosts: 64 MiB is far more than any needs.
constexpr std::uint64_t kMaxHostListBytes = std::uint64_t(64) << 20;

constexpr const char* kUsage =
    "usage: topocoll order --topo FILE --hosts FILE|h1,h2,... [--format list|mpirun|torchrun|slurm|endpoints]\n"
    "\n"
    "Prints the job's hosts in the order in which a rank-order ring (NCCL's ring across nodes)\n"
    "puts every hop on its own link: the topology-aware ring of `plan --algo ring-topo`.\n"
    "--hosts lists the job's hosts: a file of them, one per line or comma-separated (an mpirun\n"
    "hostfile's 'slots=' and '#' comments are ignored), or the list itself (s0,s1,s2); every\n"
    "host must be in the topology.\n"
    "  list       one host per line (default)\n"
    "  mpirun     an mpirun hostfile: 'host slots=GPUs'\n"
    "  torchrun   'host node_rank' per line: start host h with --node-rank that number\n"
    "  slurm      a SLURM_HOSTFILE (one line per task) for srun --distribution=arbitrary\n"
    "  endpoints  endpoint ids, comma-separated, for `bench --endpoints`\n"
    "The worst link load of the ring in the given and in the printed order goes to stderr.\n";

std::vector<std::string> read_hosts(const std::string& path) {
  std::string text;
  struct stat st {};
  if ((path.find(',') != std::string::npos || path.find('/') == std::string::npos) && ::stat(path.c_str(), &st) != 0) {
    text = path;  // the list itself (or one host): no file of that name
  } else {
    try {  // a regular file of bounded size: a pipe would block, /dev/zero never end
      text = config::read_user_file(path, kMaxHostListBytes, "a host list");
    } catch (const config::UserFileError& e) {
      throw std::runtime_error("--hosts: " + std::string(e.what()));  // an input file, as --topo's (exit 1)
    }
  }
  if (text.rfind("\xEF\xBB\xBF", 0) == 0) text.erase(0, 3);  // a UTF-8 byte order mark, as topology files allow
  std::istringstream in(text);
  std::vector<std::string> hosts;
  std::string line;
  while (std::getline(in, line)) {
    line = line.substr(0, line.find('#'));
    for (char& c : line)
      if (c == ',') c = '\n';
    std::istringstream items(line);
    std::string item;
    while (std::getline(items, item)) {
      std::istringstream words(item);
      std::string host;
      if (words >> host) hosts.push_back(host);
    }
  }
  if (hosts.empty()) throw std::invalid_argument("--hosts " + path + " names no host");
  return hosts;
}

double ring_load(const topo::Topology& t, const std::vector<int>& endpoints) {
  sched::PlanRequest req;
  req.algo = "ring";
  req.bytes = int64_t(endpoints.size()) * 4096;
  req.endpoints = endpoints;
  req.verify = false;
  req.keep_link_detail = false;
  return sched::make_plan(t, req).link_load.max_load;
}

int run_order(std::span<const std::string> args) {
  std::string topo_file, hosts_file, format = "list";
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& f = args[i];
    if (f == "--help" || f == "-h") {
      std::printf("%s", kUsage);
      return 0;
    }
    if (f == "--topo") topo_file = flag_value(args, i);
    else if (f == "--hosts") hosts_file = flag_value(args, i);
    else if (f == "--format") format = flag_value(args, i);
    else throw std::invalid_argument("unknown argument '" + f + "'\n" + kUsage);
  }
  if (topo_file.empty() || hosts_file.empty()) throw std::invalid_argument(std::string("--topo and --hosts are required\n") + kUsage);
  static const std::set<std::string> formats = {"list", "mpirun", "torchrun", "slurm", "endpoints"};
  if (!formats.count(format)) throw std::invalid_argument("--format '" + format + "': one of list, mpirun, torchrun, slurm, endpoints");

  const topo::Topology t = load_topology_argument(topo_file);
  const std::vector<std::string> hosts = read_hosts(hosts_file);
  std::vector<int> endpoints;  // in the given host order, GPUs in order
  std::set<int> seen;
  for (const auto& h : hosts) {
    // As the plugin finds its host: ignoring case, a short name for a unique long one.
    const std::optional<int> index = t.find_host(h);
    if (!index) {
      if (const auto e = t.find_endpoint_by_id(h))
        throw std::invalid_argument("--hosts: '" + h + "' is an endpoint id; --hosts takes host names (its host is '" +
                                    t.endpoints()[*e].host + "')");
      throw std::invalid_argument("--hosts: host '" + h + "' is not in " + t.name() + " (" + topo_file + ")");
    }
    if (!seen.insert(*index).second) throw std::invalid_argument("--hosts: host '" + h + "' is listed twice");
    for (int e : t.hosts()[*index].endpoints) endpoints.push_back(e);
  }
  if (endpoints.size() < 2) throw std::invalid_argument("--hosts: a ring needs at least two endpoints");

  const std::vector<int> launcher_endpoints = sched::launcher_ring_order(t, endpoints);
  std::set<int> hosts_used;
  for (int e : launcher_endpoints) hosts_used.insert(t.endpoints()[e].host_index);
  std::fprintf(stderr, "order: ring over %zu endpoints on %zu hosts: worst link load %g in the given order, %g in this one\n",
               endpoints.size(), hosts_used.size(), ring_load(t, endpoints), ring_load(t, launcher_endpoints));
  std::printf("%s", sched::hostfile(t, launcher_endpoints, format).c_str());
  return 0;
}

}  // namespace

TOPOCOLL_COMMAND("order", "host order in which NCCL's rank-order ring is contention-free", run_order);

}  // namespace topocoll::cli
