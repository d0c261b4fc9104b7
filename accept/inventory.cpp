#include "accept/inventory.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <set>

#include "config/env.h"
#include "config/local_host.h"
#include "config/warnings.h"
#include "net/interface_list.h"
#include "net/nic_resolver.h"

namespace topocoll::accept {

nlohmann::json identity_json(const RankIdentity& r) {
  nlohmann::json ifs = nlohmann::json::array();
  for (const auto& [name, address] : r.interfaces) ifs.push_back({name, address});
  return {{"rank", r.rank},       {"host", r.host},
          {"gpu", r.gpu},         {"gpus_visible", r.gpus_visible},
          {"interfaces", ifs},    {"address", r.address},
          {"address_source", r.address_source}, {"flow_port", r.flow_port}};
}

RankIdentity identity_from_json(const nlohmann::json& j) {
  try {
    RankIdentity r;
    r.rank = j.at("rank").get<int>();
    r.host = j.at("host").get<std::string>();
    r.gpu = j.at("gpu").get<int>();
    r.gpus_visible = j.at("gpus_visible").get<int>();
    for (const auto& i : j.at("interfaces")) r.interfaces.emplace_back(i.at(0).get<std::string>(), i.at(1).get<std::string>());
    r.address = j.at("address").get<std::string>();
    r.address_source = j.at("address_source").get<std::string>();
    r.flow_port = j.at("flow_port").get<int>();
    return r;
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string("malformed rank identity: ") + e.what());
  }
}

int launcher_local_gpu(const config::Env& env) {
  // A bad value was warned about when the Env was read; the next variable is used.
  for (std::string_view v : {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID"})
    if (const config::EnvSetting& s = env.setting(v); s.is_set() && s.problem.empty())
      return int(std::get<int64_t>(s.value));
  return 0;
}

namespace {

int count_nvidia_gpus() {
  int n = 0;
  if (DIR* d = ::opendir("/proc/driver/nvidia/gpus")) {
    while (const dirent* e = ::readdir(d))
      if (e->d_name[0] != '.') ++n;
    ::closedir(d);
  }
  return n;
}

}  // namespace

RankIdentity describe_this_rank(int rank, int gpu, const std::string& bind,
                                const topo::Topology& t) {
  RankIdentity r;
  r.rank = rank;
  r.gpu = gpu;
  r.host = config::local_host(config::env()).name;
  r.gpus_visible = count_nvidia_gpus();
  const auto interfaces = net::list_interfaces();
  for (const auto& i : interfaces)
    if (i.address.is_set()) r.interfaces.emplace_back(i.name, i.address.ip_string());
  if (!bind.empty()) {
    r.address = bind;
    r.address_source = "given (--bind)";
    return r;
  }
  const auto endpoint = t.find_endpoint(r.host, gpu);
  if (!endpoint) {
    r.address_source = "host " + r.host + " GPU " + std::to_string(gpu) + " is not in the topology";
    return r;
  }
  // As the net plugin resolves it (plugin/net/net_device.cpp): TOPOCOLL_NET_PLANE_ADDRS first.
  std::vector<std::string> bad_entries;
  net::NicResolver resolver(net::parse_plane_addresses(config::env().net_plane_addrs, &bad_entries), interfaces);
  for (const std::string& e : bad_entries) config::warn_once("TOPOCOLL_NET_PLANE_ADDRS: " + e);
  const auto nic = resolver.resolve(t.endpoints()[*endpoint].nic);
  if (nic.ok()) {
    r.address = nic.address.ip_string();
    r.address_source = nic.source;
    if (nic.port_down) r.address_source += " (its RDMA port is not ACTIVE: flows through it will fail)";
  } else {
    r.address_source = nic.error;
  }
  return r;
}

InventoryMatch match_inventory(const topo::Topology& t, const std::vector<RankIdentity>& ranks,
                               const std::vector<int>& expected_in) {
  InventoryMatch m;
  m.endpoint_of_rank.assign(ranks.size(), -1);
  std::map<int, int> owner;  // endpoint -> first rank
  for (size_t i = 0; i < ranks.size(); ++i) {
    const RankIdentity& r = ranks[i];
    std::string gpus;
    const std::optional<int> host = t.find_host(r.host);
    if (host)
      for (int e : t.hosts()[*host].endpoints)
        gpus += (gpus.empty() ? "" : ", ") + std::to_string(t.endpoints()[e].gpu);
    if (!host) {
      m.problems.push_back({"extra host", r.rank, -1,
                            "rank " + std::to_string(r.rank) + " runs on host '" + r.host +
                                "', which the topology does not list"});
      continue;
    }
    const auto e = t.find_endpoint(r.host, r.gpu);
    if (!e) {
      m.problems.push_back({"unknown GPU", r.rank, -1,
                            "rank " + std::to_string(r.rank) + " stands for GPU " + std::to_string(r.gpu) +
                                " of " + r.host + ", but the topology places GPUs " + gpus + " there"});
      continue;
    }
    if (const auto it = owner.find(*e); it != owner.end()) {
      m.problems.push_back({"duplicate", r.rank, *e,
                            "ranks " + std::to_string(it->second) + " and " + std::to_string(r.rank) +
                                " both stand for " + t.endpoints()[*e].id + " (" + r.host + " GPU " +
                                std::to_string(r.gpu) + ")"});
      continue;
    }
    owner[*e] = r.rank;
    if (r.address.empty()) {
      m.problems.push_back({"no NIC address", r.rank, *e,
                            "rank " + std::to_string(r.rank) + " (" + t.endpoints()[*e].id + ") has no address for NIC '" +
                                t.endpoints()[*e].nic + "': " + r.address_source});
      continue;
    }
    m.endpoint_of_rank[i] = *e;
    m.present.push_back(*e);
  }
  std::sort(m.present.begin(), m.present.end());
  std::vector<int> expected = expected_in;
  if (expected.empty())
    for (int e = 0; e < int(t.endpoints().size()); ++e) expected.push_back(e);
  for (int e : expected)
    if (!owner.count(e)) {
      m.missing.push_back(e);
      m.problems.push_back({"missing", -1, e,
                            t.endpoints()[e].id + " (" + t.hosts()[t.endpoints()[e].host_index].name + " GPU " +
                                std::to_string(t.endpoints()[e].gpu) + ") has no rank in the job"});
    }
  return m;
}

}  // namespace topocoll::accept
