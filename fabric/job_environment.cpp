#include "fabric/job_environment.h"

#include <stdexcept>

namespace topocoll::fabric {
namespace {

// "h0,h1,...": the hosts of the job's ranks in rank order, when they are numbered as the
// tuner assumes: each host's ranks consecutive, on its GPUs in ascending order; nullopt
// otherwise.
std::optional<std::string> hosts_in_rank_order(const FabricPlan& plan, const std::vector<int>& endpoints) {
  std::string list;
  std::vector<std::string> done;
  std::string current;
  int last_gpu = -1;
  for (int e : endpoints) {
    const FabricEndpoint& ep = plan.endpoints[size_t(e)];
    const std::string& host = ep.host;
    if (host == current) {
      if (ep.gpu <= last_gpu) return std::nullopt;
      last_gpu = ep.gpu;
      continue;
    }
    last_gpu = ep.gpu;
    for (const std::string& h : done)
      if (h == host) return std::nullopt;
    if (!current.empty()) done.push_back(current);
    current = host;
    list += (list.empty() ? "" : ",") + host;
  }
  return list;
}

}  // namespace

RankSetting rank_setting(const FabricPlan& plan, const std::string& fabric_name, const std::vector<int>& endpoints,
                         int rank, const JobOptions& options, const InheritedEnvironment& inherited) {
  const int nranks = int(endpoints.size());
  if (rank < 0 || rank >= nranks)
    throw std::invalid_argument("rank " + std::to_string(rank) + " outside the job's 0.." + std::to_string(nranks - 1));
  for (int e : endpoints)
    if (e < 0 || e >= int(plan.endpoints.size()))
      throw std::invalid_argument("endpoint " + std::to_string(e) + " is not one of fabric " + fabric_name + "'s");
  const FabricEndpoint& me = plan.endpoints[endpoints[rank]];
  const Namespace& ns = plan.ns_of(me);

  RankSetting s;
  s.rank = rank;
  s.nranks = nranks;
  s.endpoint = me.endpoint;
  s.netns = ns.name;
  s.hostname = me.host;
  auto set = [&](const std::string& key, const std::string& value) { s.environment.push_back(key + "=" + value); };
  auto set_unless_inherited = [&](const std::string& key, const std::string& value) {
    if (!inherited(key)) set(key, value);
  };

  set("TOPOCOLL_FABRIC", fabric_name);
  set("TOPOCOLL_FABRIC_ENDPOINT", me.id);
  set("TOPOCOLL_FABRIC_ADDRESS", me.address);
  // NCCL: a node of its own named as the topology's host, its sockets on exactly this
  // endpoint's address ('=': no other interface whose name starts alike).
  set("NCCL_HOSTID", me.host);
  set("NCCL_SOCKET_IFNAME", "=" + me.address_label);
  if (!options.topology_file.empty()) set("TOPOCOLL_TOPO_FILE", options.topology_file);
  // topocoll's net plugin binds each NIC of this host by name: the fabric's addresses.
  std::string planes;
  for (const FabricEndpoint& e : plan.endpoints)
    if (e.ns == me.ns) planes += (planes.empty() ? "" : ",") + e.nic + "=" + e.address;
  if (!planes.empty()) set("TOPOCOLL_NET_PLANE_ADDRS", planes);
  if (!plan.lane_marks.empty() && !inherited("TOPOCOLL_NET_LANE_MARKS")) {
    std::string marks;
    for (uint32_t m : plan.lane_marks) marks += (marks.empty() ? "" : ",") + std::to_string(m);
    set("TOPOCOLL_NET_LANE_MARKS", marks);
  }
  if (!options.preload.empty()) {
    // The dynamic loader splits LD_PRELOAD at spaces and colons: a path holding one would
    // load its pieces instead (a relative one from the rank's directory, as root), and the
    // run would measure plain NCCL. A relative path with a directory depends on where the
    // rank starts.
    if (options.preload.find_first_of(" :\t\n") != std::string::npos)
      throw std::invalid_argument("--preload '" + options.preload +
                                  "': LD_PRELOAD splits at spaces and colons; give a path without them");
    if (options.preload.find('/') != std::string::npos && options.preload.front() != '/')
      throw std::invalid_argument("--preload '" + options.preload + "': give an absolute path (or a bare library name)");
    const std::optional<std::string> before = inherited("LD_PRELOAD");
    set("LD_PRELOAD", options.preload + (before && !before->empty() ? ":" + *before : ""));
  }
  if (!options.tuner_plugin.empty()) set("NCCL_TUNER_PLUGIN", options.tuner_plugin);
  // The tuner learns from NCCL only the rank and node counts and assumes the ranks go host by
  // host, GPUs ascending (plugin/tuner/communicator_fit.h). The launcher knows the placement:
  // numbered so, the job's hosts in rank order let the tuner tune a job on part of the
  // fabric (and replace any value left in the environment by another job); numbered
  // otherwise, the tuner would model rings the job does not run, even over the whole
  // fabric, so it is turned off for the job.
  if (const std::optional<std::string> hosts = hosts_in_rank_order(plan, endpoints)) {
    set("TOPOCOLL_TUNER_HOSTS", *hosts);
  } else {
    set("TOPOCOLL_TUNER", "0");
    // Said where the tuner was asked for: its own line (disabled by TOPOCOLL_TUNER=0) is at
    // NCCL's INFO level, which a job rarely logs.
    const std::optional<std::string> inherited_tuner = inherited("NCCL_TUNER_PLUGIN");
    const std::string tuner = !options.tuner_plugin.empty() ? options.tuner_plugin
                              : inherited_tuner && *inherited_tuner != "none" ? inherited_tuner.value_or("")
                                                                              : "";
    if (!tuner.empty())
      s.notes.push_back("the ranks are not numbered host by host, GPUs ascending, so the tuner (" + tuner +
                        ") is turned off for this job (TOPOCOLL_TUNER=0) and NCCL's tables stand: "
                        "place the ranks with --placement scheduler, or give a hostfile in that order");
  }
  if (!options.net_plugin.empty()) set("NCCL_NET_PLUGIN", options.net_plugin);
  // NCCL takes the tuner from the net plugin's library when NCCL_TUNER_PLUGIN is unset
  // (src/plugin/tuner.cc): --net-plugin alone means the transport alone.
  if (!options.net_plugin.empty() && options.tuner_plugin.empty() && !inherited("NCCL_TUNER_PLUGIN"))
    set("NCCL_TUNER_PLUGIN", "none");
  // NCCL 2.28 unloads the net plugin with the last communicator using it and then forgets its
  // name (src/plugin/net.cc, ncclNetPluginUnload): communicators made after would silently
  // use NCCL's own transports. A starting reference count of 1 keeps it loaded.
  if (!options.net_plugin.empty() && !inherited("NCCL_NET_PLUGIN_REF_COUNT")) set("NCCL_NET_PLUGIN_REF_COUNT", "1");

  // Launcher variables: the job's own where the launcher gave them, else this job's.
  set_unless_inherited("RANK", std::to_string(rank));
  set_unless_inherited("WORLD_SIZE", std::to_string(nranks));
  if (!inherited("MASTER_ADDR")) {
    const FabricEndpoint& root = plan.endpoints[endpoints[0]];
    set("MASTER_ADDR", address_without_prefix(plan.ns_of(root).management_address));
    set("MASTER_PORT", std::to_string(options.master_port));
  }
  // The emulated host holds the job's endpoints on it, no others: its local ranks.
  int local_rank = 0, local_size = 0;
  for (int r = 0; r < nranks; ++r)
    if (plan.endpoints[endpoints[r]].ns == me.ns) {
      if (r < rank) ++local_rank;
      ++local_size;
    }
  set("LOCAL_RANK", std::to_string(local_rank));
  set("LOCAL_WORLD_SIZE", std::to_string(local_size));
  if (inherited("OMPI_COMM_WORLD_LOCAL_RANK")) set("OMPI_COMM_WORLD_LOCAL_RANK", std::to_string(local_rank));
  if (inherited("OMPI_COMM_WORLD_LOCAL_SIZE")) set("OMPI_COMM_WORLD_LOCAL_SIZE", std::to_string(local_size));
  // `fabric run`'s own rendezvous is on this machine's loopback, out of the namespace's reach.
  s.unset = {"TOPOCOLL_BOOTSTRAP", "TOPOCOLL_BOOTSTRAP_SERVED"};

  if (rank == 0)
    for (const auto& kv : options.rank0_environment) {
      if (kv.find('=') == std::string::npos || kv.front() == '=')
        throw std::invalid_argument("rank 0's variable '" + kv + "': expected NAME=VALUE");
      // Replaces what the fabric set (getenv takes the first of two entries of a name).
      const std::string key = kv.substr(0, kv.find('=') + 1);
      std::erase_if(s.environment, [&](const std::string& e) { return e.starts_with(key); });
      s.environment.push_back(kv);
    }
  return s;
}

}  // namespace topocoll::fabric
