// `topocoll fabric run | rank-exec | place`: unmodified NCCL programs (nccl-tests, torch,
// interposer_gpu_check) as jobs on an emulated fabric. Every rank runs in its endpoint's host
// namespace under the host's name, with the environment fabric/job_environment.h computes.
//   rank-exec  one rank, its number from the launcher (mpirun, srun, torchrun): the wrapper
//              `mpirun -np N topocoll fabric rank-exec -- PROG` puts before the program;
//   run        N ranks started here, each through rank-exec (programs that read RANK,
//              WORLD_SIZE and MASTER_ADDR: torch's env://, interposer_gpu_check);
//   place      which endpoint each rank gets, and the hostfile of that order.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>

#include "config/env.h"
#include "config/value_grammar.h"
#include "exec/local_launcher.h"
#include "exec/rank_environment.h"
#include "fabric/job_environment.h"
#include "fabric/fabric_record.h"
#include "fabric/live_fabric.h"
#include "fabric/loopback_relay.h"
#include "fabric/system_command.h"
#include "net/network_namespace.h"
#include "sched/job_placement.h"
#include "tools/topology_argument.h"
#include "tools/fabric_launch.h"
#include "tools/fabric_verbs.h"
#include "tools/flag_value.h"
#include "topo/topology_json.h"

extern char** environ;

namespace topocoll::cli {

const char* const kFabricJobUsage =
    "       topocoll fabric run [--name N] --ranks R [JOB OPTIONS] -- PROGRAM [ARGS...]\n"
    "       topocoll fabric rank-exec [--name N] [JOB OPTIONS] [--relay-port P]... [--show] -- PROGRAM [ARGS...]\n"
    "       topocoll fabric place [--name N | --topo FILE] --ranks R [--placement P]\n"
    "                             [--format table|list|mpirun|torchrun|slurm|endpoints] [--hostfile FILE]\n"
    "\n"
    "Jobs on a fabric: every rank in its endpoint's host namespace under the host's name, with\n"
    "NCCL_HOSTID = that host, NCCL_SOCKET_IFNAME = exactly its endpoint's address, TOPOCOLL_TOPO_FILE\n"
    "= the fabric's topology at its rates, TOPOCOLL_TUNER_HOSTS = the job's hosts in rank order,\n"
    "LOCAL_RANK as on that host, RANK/WORLD_SIZE and MASTER_ADDR/MASTER_PORT (rank 0's\n"
    "management address) unless the launcher set them.\n"
    "  rank-exec      one rank; its number from the launcher (TOPOCOLL_RANK, OMPI_COMM_WORLD_RANK,\n"
    "                 PMI_RANK, PMIX_RANK, SLURM_PROCID, RANK): mpirun -np R --mca pml ob1\n"
    "                 --mca btl self,vader topocoll fabric rank-exec -- ./all_reduce_perf ...\n"
    "                 (nccl-tests on one GPU: -x NCCL_TESTS_DEVICE=0). Open MPI's own loopback\n"
    "                 ports (PMIx) are relayed into the namespace, so MPI_Init works there.\n"
    "  run            starts R ranks itself, each through rank-exec, waits for all (the first\n"
    "                 failure ends the others after 15 s) and exits as the first failing rank\n"
    "                 (--time-limit S: stops the job after S seconds and exits 124, as timeout)\n"
    "  place          prints which endpoint each rank gets, or the hostfile of that order\n"
    "JOB OPTIONS:\n"
    "  --placement P  scheduler (default: the first R endpoints, as `bench --fabric`), spread\n"
    "                 (one per switch or package first), topology-order (the scheduler's\n"
    "                 endpoints in the order `topocoll order` prints), endpoints=ID,ID,...\n"
    "  --preload LIB  LD_PRELOAD=LIB (libnccl-topocoll.so: the interposer)\n"
    "  --tuner LIB    NCCL_TUNER_PLUGIN=LIB      --net-plugin LIB  NCCL_NET_PLUGIN=LIB\n"
    "  --topology-file FILE   TOPOCOLL_TOPO_FILE instead of the fabric's own at its rates\n"
    "  --master-port P        MASTER_ADDR = rank 0's management address and MASTER_PORT = P,\n"
    "                         also where the launcher set them (run: always, port 29500)\n"
    "  --rank0-env NAME=VALUE set for rank 0 only (NCCL_DEBUG=INFO), repeatable\n"
    "  --relay-port P         rank-exec: also relay this loopback port into the namespace\n"
    "  --relay-master         rank-exec: keep the launcher's MASTER_PORT on this machine's loopback\n"
    "                         (torchrun's agent store), relayed; MASTER_ADDR=127.0.0.1\n"
    "  --rank-args            {rank}, {nranks}, {host} and {endpoint} in the program's arguments\n"
    "                         become this rank's (interposer_gpu_check check --rank {rank} ...)\n"
    "  --show                 rank-exec: print the rank's namespace, host name and variables; run nothing\n"
    "  --hostfile FILE        run, place: also write the hostfile there (run: mpirun's; place: --format's,\n"
    "                         default mpirun)\n";

namespace {

using namespace topocoll::fabric;

struct JobArgs {
  std::string verb;
  std::string name;
  std::string topo;  // place without a fabric
  int ranks = 0;
  sched::JobPlacement placement;
  std::string placement_text = "scheduler";
  JobOptions job;
  bool master_port_given = false;
  std::vector<uint16_t> relay_ports;
  bool relay_master = false;
  bool rank_args = false;
  bool show = false;
  std::string format;
  std::string hostfile;
  std::chrono::seconds time_limit{0};  // run: none
  std::vector<std::string> command;
};

JobArgs parse_job_args(std::span<const std::string> args, const std::string& verb) {
  JobArgs a;
  a.verb = verb;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& f = args[i];
    if (f == "--") {
      a.command.assign(args.begin() + long(i) + 1, args.end());
      break;
    }
    if (f == "--name") a.name = flag_value(args, i);
    else if (f == "--topo" && verb == "place") a.topo = flag_value(args, i);
    else if (f == "--ranks" && verb != "rank-exec") a.ranks = int(config::count_argument(f, flag_value(args, i), 1, 1024));
    else if (f == "--placement") a.placement_text = flag_value(args, i);
    else if (f == "--preload" && verb != "place") a.job.preload = flag_value(args, i);
    else if (f == "--tuner" && verb != "place") a.job.tuner_plugin = flag_value(args, i);
    else if (f == "--net-plugin" && verb != "place") a.job.net_plugin = flag_value(args, i);
    else if (f == "--topology-file" && verb != "place") a.job.topology_file = flag_value(args, i);
    else if (f == "--master-port" && verb != "place") {
      a.job.master_port = int(config::count_argument(f, flag_value(args, i), 1, 65535));
      a.master_port_given = true;
    } else if (f == "--rank0-env" && verb != "place") {
      const std::string& kv = flag_value(args, i);  // checked here, not in rank 0 after every rank started
      if (kv.find('=') == std::string::npos || kv.front() == '=')
        throw std::invalid_argument("--rank0-env '" + kv + "': expected NAME=VALUE");
      a.job.rank0_environment.push_back(kv);
    } else if (f == "--relay-port" && verb == "rank-exec")
      a.relay_ports.push_back(uint16_t(config::count_argument(f, flag_value(args, i), 1, 65535)));
    else if (f == "--relay-master" && verb == "rank-exec") a.relay_master = true;
    else if (f == "--rank-args" && verb != "place") a.rank_args = true;
    else if (f == "--show" && verb == "rank-exec") a.show = true;
    else if (f == "--format" && verb == "place") a.format = flag_value(args, i);
    else if (f == "--hostfile" && verb != "rank-exec") a.hostfile = flag_value(args, i);
    else if (f == "--time-limit" && verb == "run")
      a.time_limit = std::chrono::seconds(config::count_argument(f, flag_value(args, i), 1, 7 * 24 * 3600));
    else throw std::invalid_argument("fabric " + verb + ": unknown argument '" + f + "'\nusage:" + kFabricJobUsage);
  }
  a.placement = sched::parse_job_placement(a.placement_text);
  if (verb != "place" && a.command.empty())
    throw std::invalid_argument("fabric " + verb + ": give the program after --");
  if (verb == "place" && !a.command.empty()) throw std::invalid_argument("fabric place runs nothing: drop -- ...");
  if (verb == "place" && !a.name.empty() && !a.topo.empty())
    throw std::invalid_argument("fabric place: --name or --topo, not both");
  if (a.relay_master && a.master_port_given)
    throw std::invalid_argument("fabric rank-exec: --relay-master keeps the launcher's rendezvous, --master-port "
                                "makes the job's own: choose one");
  const bool listed = a.placement.kind == sched::JobPlacement::Kind::Endpoints;
  if (verb != "rank-exec" && a.ranks == 0 && !listed)
    throw std::invalid_argument("fabric " + verb + " needs --ranks R (or --placement endpoints=...)");
  return a;
}

std::vector<std::string> process_environment() {
  std::vector<std::string> out;
  for (char** e = environ; *e; ++e) out.emplace_back(*e);
  return out;
}

InheritedEnvironment lookup_in(const std::vector<std::string>& environment) {
  return [&environment](std::string_view name) -> std::optional<std::string> {
    for (const auto& kv : environment)
      if (kv.size() > name.size() && kv[name.size()] == '=' && kv.compare(0, name.size(), name) == 0)
        return kv.substr(name.size() + 1);
    return std::nullopt;
  };
}

// The environment the rank's program gets: the inherited one, less what the setting
// removes or replaces, plus the setting's variables.
std::vector<std::string> merged_environment(const std::vector<std::string>& inherited, const RankSetting& s) {
  auto key_of = [](const std::string& kv) { return kv.substr(0, kv.find('=')); };
  std::vector<std::string> out;
  for (const auto& kv : inherited) {
    const std::string key = key_of(kv);
    bool replaced = std::find(s.unset.begin(), s.unset.end(), key) != s.unset.end();
    for (const auto& mine : s.environment) replaced = replaced || key_of(mine) == key;
    if (!replaced) out.push_back(kv);
  }
  out.insert(out.end(), s.environment.begin(), s.environment.end());
  return out;
}

// Through no link and checked to the last byte (run is root's: a link planted at the path,
// in /tmp say, must not make it overwrite the link's target): a fresh file renamed into place.
void write_hostfile(const std::string& path, const std::string& text) {
  try {
    fabric::write_fabric_file(path, text);
  } catch (const fabric::FabricError& e) {
    throw std::runtime_error("--hostfile " + path + ": " + e.what());  // the write failed: the run's (exit 1)
  }
}

std::string endpoint_list(const topo::Topology& t, const std::vector<int>& endpoints) {
  std::string out;
  for (int e : endpoints) out += (out.empty() ? "" : ",") + t.endpoints()[e].id;
  return out;
}

}  // namespace

int fabric_place(std::span<const std::string> args) {
  const JobArgs a = parse_job_args(args, "place");
  std::optional<LiveFabric> f;
  topo::Topology topology;
  if (!a.topo.empty()) {
    topology = load_topology_argument(a.topo);
  } else {
    f.emplace(LiveFabric::open(a.name));
    topology = f->topology();
  }
  const std::vector<int> endpoints = sched::place_job(topology, a.ranks, a.placement);
  if (!a.hostfile.empty())
    write_hostfile(a.hostfile, sched::hostfile(topology, endpoints, a.format.empty() || a.format == "table" ? "mpirun" : a.format));
  if (!a.format.empty() && a.format != "table") {
    std::printf("%s", sched::hostfile(topology, endpoints, a.format).c_str());
    return 0;
  }
  std::printf("# %zu ranks on %s, placement %s\n", endpoints.size(), topology.name().c_str(),
              sched::to_string(a.placement).c_str());
  std::printf("%-5s %-14s %-10s", "rank", "endpoint", "host");
  if (f) std::printf(" %-20s %-12s %s", "namespace", "address", "NCCL_SOCKET_IFNAME");
  std::printf("\n");
  for (size_t r = 0; r < endpoints.size(); ++r) {
    const auto& e = topology.endpoints()[endpoints[r]];
    std::printf("%-5zu %-14s %-10s", r, e.id.c_str(), e.host.c_str());
    if (f) {
      const FabricEndpoint& fe = f->plan().endpoints[endpoints[r]];
      std::printf(" %-20s %-12s =%s", f->plan().ns_of(fe).name.c_str(), fe.address.c_str(), fe.address_label.c_str());
    }
    std::printf("\n");
  }
  return 0;
}

int fabric_rank_exec(std::span<const std::string> args) {
  JobArgs a = parse_job_args(args, "rank-exec");
  const std::optional<exec::RankEnvironment> who = exec::rank_environment_from_env(config::env());
  if (!who)
    throw std::invalid_argument(
        "fabric rank-exec: no launcher told this process its rank (TOPOCOLL_RANK, OMPI_COMM_WORLD_RANK, "
        "PMI_RANK, PMIX_RANK, SLURM_PROCID or RANK, with the size); start it under mpirun, srun or torchrun, "
        "or start the whole job with `topocoll fabric run`");
  // The fabric's entry lock from before its record is read until the exec below: no `down`
  // (and no `up` of the same name after it) between what this rank reads and its entering.
  const FabricForLaunch opened = open_fabric_for_launch(a.name);
  const LiveFabric& f = opened.fabric;
  const std::vector<int> endpoints = sched::place_job(f.topology(), who->nranks, a.placement);
  if (a.job.topology_file.empty()) a.job.topology_file = f.emulated_topology_file();
  const std::vector<std::string> inherited = process_environment();
  // --master-port: this job's rendezvous even where the launcher named one.
  const InheritedEnvironment lookup = lookup_in(inherited);
  const InheritedEnvironment seen = a.master_port_given
                                        ? InheritedEnvironment([&](std::string_view n) -> std::optional<std::string> {
                                            if (n == "MASTER_ADDR" || n == "MASTER_PORT") return std::nullopt;
                                            return lookup(n);
                                          })
                                        : lookup;
  RankSetting s = rank_setting(f.plan(), f.name(), endpoints, who->rank, a.job, seen);
  std::vector<net::SocketAddress> relayed = launcher_loopback_addresses(inherited);
  for (uint16_t port : a.relay_ports) relayed.push_back(net::SocketAddress::loopback_ipv4(port));
  if (a.relay_master) {
    // The launcher's rendezvous on this machine (torchrun's agent store), reached through
    // the namespace's own loopback.
    const auto port = lookup("MASTER_PORT");
    if (!lookup("MASTER_ADDR") || !port)
      throw std::invalid_argument("fabric rank-exec --relay-master: the launcher set no MASTER_ADDR and MASTER_PORT");
    relayed.push_back(net::SocketAddress::loopback_ipv4(
        uint16_t(config::count_argument("MASTER_PORT", *port, 1, 65535))));
    s.environment.push_back("MASTER_ADDR=127.0.0.1");
  }
  if (a.show) {
    std::printf("rank %d/%d endpoint %s host %s namespace %s\n", s.rank, s.nranks,
                f.topology().endpoints()[s.endpoint].id.c_str(), s.hostname.c_str(), s.netns.c_str());
    for (const auto& kv : s.environment) std::printf("%s\n", kv.c_str());
    for (const auto& key : s.unset) std::printf("unset %s\n", key.c_str());
    for (const auto& address : relayed) std::printf("relay %s\n", address.to_string().c_str());
    for (const auto& note : s.notes) std::printf("note %s\n", note.c_str());
    return 0;
  }
  if (s.rank == 0)
    for (const auto& note : s.notes) std::fprintf(stderr, "topocoll fabric: %s\n", note.c_str());

  start_loopback_relay(net::netns_path(s.netns), relayed, ::getpid());  // it closes the lock's copy
  become_endpoint_host(s.netns, s.hostname);
  std::vector<std::string> environment = merged_environment(inherited, s);
  std::vector<char*> envp;
  for (auto& kv : environment) envp.push_back(kv.data());
  envp.push_back(nullptr);
  if (a.rank_args)
    for (std::string& word : a.command)
      for (const auto& [key, value] : {std::pair<std::string, std::string>{"{rank}", std::to_string(s.rank)},
                                       {"{nranks}", std::to_string(s.nranks)},
                                       {"{host}", s.hostname},
                                       {"{endpoint}", f.topology().endpoints()[s.endpoint].id}})
        for (size_t at; (at = word.find(key)) != std::string::npos;) word.replace(at, key.size(), value);
  std::vector<char*> argv;
  for (auto& c : a.command) argv.push_back(c.data());
  argv.push_back(nullptr);
  ::execvpe(argv[0], argv.data(), envp.data());
  throw FabricError("cannot run " + a.command[0] + ": " + std::strerror(errno));
}

int fabric_run(std::span<const std::string> args) {
  const JobArgs a = parse_job_args(args, "run");
  const LiveFabric f = LiveFabric::open(a.name);
  const std::vector<int> endpoints = sched::place_job(f.topology(), a.ranks, a.placement);
  const int nranks = int(endpoints.size());
  if (!a.hostfile.empty()) write_hostfile(a.hostfile, sched::hostfile(f.topology(), endpoints, "mpirun"));
  std::printf("fabric run: %d ranks of %s on fabric %s, placement %s: %s\n", nranks, a.command[0].c_str(),
              f.name().c_str(), sched::to_string(a.placement).c_str(), endpoint_list(f.topology(), endpoints).c_str());
  std::fflush(stdout);

  // Each rank is `topocoll fabric rank-exec` with the same job options, told its rank by
  // TOPOCOLL_RANK; the placement is passed as the list, so every rank agrees on it.
  std::vector<std::string> rank_args = {"fabric", "rank-exec", "--name", f.name(), "--placement",
                                        "endpoints=" + endpoint_list(f.topology(), endpoints), "--master-port",
                                        std::to_string(a.job.master_port)};
  auto add = [&](const char* flag, const std::string& value) {
    if (!value.empty()) rank_args.insert(rank_args.end(), {flag, value});
  };
  add("--preload", a.job.preload);
  add("--tuner", a.job.tuner_plugin);
  add("--net-plugin", a.job.net_plugin);
  add("--topology-file", a.job.topology_file);
  for (const auto& kv : a.job.rank0_environment) add("--rank0-env", kv);
  if (a.rank_args) rank_args.push_back("--rank-args");
  rank_args.push_back("--");
  rank_args.insert(rank_args.end(), a.command.begin(), a.command.end());
  exec::LaunchOptions launch;
  launch.serve_bootstrap = false;
  launch.time_limit = a.time_limit;
  return exec::launch_local_group(exec::current_executable(), rank_args, nranks, launch);
}

}  // namespace topocoll::cli
