#include "topo/topology_json.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <functional>
#include <algorithm>
#include <initializer_list>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include "config/user_files.h"
#include "topo/generators.h"
#include "topo/topology_builder.h"

namespace topocoll::topo {

using nlohmann::json;

namespace {

// --- Typed access with JSON-pointer errors ---------------------------------------------

std::string type_name(const json& v) {
  if (v.is_number_integer()) return "integer";
  if (v.is_number()) return "number";
  return v.type_name();
}

std::string in_quotes(const std::string& s) { return "\"" + s + "\""; }

// A field name from the file as a message shows it: in JSON quotes, a control character or a
// quote escaped (never a raw byte in a log: a forged line, a terminal escape), at most 64
// characters.
constexpr size_t kShownKeyChars = 64;
std::string quoted_key(const std::string& key) {
  const bool cut = key.size() > kShownKeyChars;
  return json(cut ? key.substr(0, kShownKeyChars) : key).dump(-1, ' ', true, json::error_handler_t::replace) +
         (cut ? "..." : "");
}
// One reference token of a JSON pointer (RFC 6901: '~' is "~0", '/' is "~1"), with the
// bytes a log must not hold escaped as quoted_key does, at most 64 characters.
std::string pointer_token(const std::string& key) {
  std::string token;
  for (size_t i = 0; i < key.size() && i < kShownKeyChars; ++i) {
    const unsigned char c = static_cast<unsigned char>(key[i]);
    if (c == '~') token += "~0";
    else if (c == '/') token += "~1";
    else if (c < 0x20 || c == 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\u%04x", c);
      token += hex;
    } else token += char(c);
  }
  return key.size() > kShownKeyChars ? token + "..." : token;
}

void expect_object(const json& v, const std::string& ptr) {
  if (!v.is_object()) throw TopologyError(ptr, "expected an object, got " + type_name(v));
}

void expect_array(const json& v, const std::string& ptr) {
  if (!v.is_array()) throw TopologyError(ptr, "expected an array, got " + type_name(v));
}

// Unknown fields are errors: a misspelt optional field would otherwise be silently ignored.
void check_fields(const json& obj, const std::string& ptr,
                  std::initializer_list<const char*> allowed) {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    bool known = false;
    for (const char* name : allowed) known = known || it.key() == name;
    if (!known) throw TopologyError(ptr, "unknown field " + quoted_key(it.key()));
  }
}

// The JSON pointer of the whole document. A named string, not a "" literal, where require()
// is bound to a reference: a temporary argument there makes GCC 13 warn (-Wdangling-reference).
const std::string kDocumentPointer;

const json& require(const json& obj, const std::string& ptr, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end()) throw TopologyError(ptr, "missing field " + in_quotes(key));
  return *it;
}

std::string as_string(const json& v, const std::string& ptr) {
  if (!v.is_string()) throw TopologyError(ptr, "expected a string, got " + type_name(v));
  const auto& s = v.get_ref<const std::string&>();
  if (s.empty()) throw TopologyError(ptr, "must not be empty");
  if (s.size() > 256) throw TopologyError(ptr, "longer than 256 characters");
  // Every string reaches a log line or a report: no line breaks or other control characters.
  for (const char c : s)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      throw TopologyError(ptr, "has a control character (line break, tab, ...)");
  return s;
}

// A host name, NIC name, switch or endpoint id: it becomes a hostname (sethostname: at most
// 64), a namespace name, a line of an mpirun hostfile and an item of comma- and '='-separated
// environment variables (TOPOCOLL_NET_PLANE_ADDRS), so only characters that mean nothing
// there: letters, digits, '_', '.', '-'.
std::string as_identifier(const json& v, const std::string& ptr) {
  std::string s = as_string(v, ptr);
  if (s.size() > 64) throw TopologyError(ptr, "longer than 64 characters");
  const size_t bad = s.find_first_not_of(
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-");
  if (bad == std::string::npos && !std::isalnum(static_cast<unsigned char>(s[0])))
    throw TopologyError(ptr, "begins with '" + s.substr(0, 1) +
                                 "': names and ids begin with a letter or digit (a leading '-' reads as an option, "
                                 "'.' and '..' as directories)");
  if (bad != std::string::npos) {
    const unsigned char c = static_cast<unsigned char>(s[bad]);
    char shown[16];
    if (c >= 0x21 && c < 0x7f) std::snprintf(shown, sizeof shown, "'%c'", c);
    else std::snprintf(shown, sizeof shown, "byte 0x%02x", unsigned(c));
    throw TopologyError(ptr, std::string("has ") + shown + " at position " + std::to_string(bad + 1) +
                                 ": names and ids take letters, digits, '_', '.' and '-' only");
  }
  return s;
}

// Host names are the machines' names, which DNS and hostfiles read ignoring case: "node1"
// and "NODE1" are one machine, never two hosts of the topology.
class HostSpellings {
 public:
  void check(const std::string& host, const std::string& ptr) {
    std::string lower = host;
    for (char& c : lower) c = char(std::tolower(static_cast<unsigned char>(c)));
    const auto [it, added] = first_.emplace(lower, host);
    if (!added && it->second != host)
      throw TopologyError(ptr, "host " + in_quotes(host) + " is host " + in_quotes(it->second) +
                                   " spelt otherwise (host names are compared ignoring case)");
  }

 private:
  std::map<std::string, std::string> first_;  // lower case -> the first spelling
};

long as_int(const json& v, const std::string& ptr, long min, long max) {
  if (!v.is_number_integer()) throw TopologyError(ptr, "expected an integer, got " + type_name(v));
  long value;
  if (v.is_number_unsigned()) {
    auto u = v.get<std::uint64_t>();
    value = u > std::uint64_t(max) ? max + 1 : long(u);
  } else {
    value = long(v.get<std::int64_t>());
  }
  if (value < min || value > max)
    throw TopologyError(ptr, "must be in [" + std::to_string(min) + ", " + std::to_string(max) +
                                 "], got " + v.dump());
  return value;
}

double as_number(const json& v, const std::string& ptr) {
  if (!v.is_number()) throw TopologyError(ptr, "expected a number, got " + type_name(v));
  return v.get<double>();
}

double gbps_field(const json& obj, const std::string& ptr, const char* key) {
  std::string p = ptr + "/" + key;
  double x = as_number(require(obj, ptr, key), p);
  check_gbps(x, p);
  return x;
}

double latency_field(const json& obj, const std::string& ptr, const char* key, double fallback) {
  auto it = obj.find(key);
  if (it == obj.end()) return fallback;
  std::string p = ptr + "/" + key;
  double x = as_number(*it, p);
  check_latency_us(x, p);
  return x;
}

template <class T>
void optional_int(const json& obj, const std::string& ptr, const char* key, T& out, long min,
                  long max) {
  if (auto it = obj.find(key); it != obj.end())
    out = T(as_int(*it, ptr + "/" + key, min, max));
}

void optional_number(const json& obj, const std::string& ptr, const char* key, double& out) {
  if (auto it = obj.find(key); it != obj.end()) out = as_number(*it, ptr + "/" + key);
}

HostFabricKind fabric_kind(const json& v, const std::string& ptr) {
  std::string s = as_string(v, ptr);
  for (auto k : {HostFabricKind::NVSwitch, HostFabricKind::NVLink, HostFabricKind::PCIe})
    if (s == to_string(k)) return k;
  throw TopologyError(ptr, "unknown host fabric " + in_quotes(s) + " (expected nvswitch, nvlink or pcie)");
}

struct Fabric {
  HostFabricKind kind = HostFabricKind::NVSwitch;
  double gbps = 2400;
  double latency_us = 0.5;
  bool operator==(const Fabric&) const = default;
};

Fabric read_fabric(const json& v, const std::string& ptr, Fabric fabric) {
  expect_object(v, ptr);
  check_fields(v, ptr, {"kind", "gbps", "latency_us"});
  if (auto it = v.find("kind"); it != v.end()) fabric.kind = fabric_kind(*it, ptr + "/kind");
  if (v.contains("gbps")) fabric.gbps = gbps_field(v, ptr, "gbps");
  fabric.latency_us = latency_field(v, ptr, "latency_us", fabric.latency_us);
  return fabric;
}

json fabric_json(const Fabric& f) {
  return {{"kind", std::string(to_string(f.kind))}, {"gbps", f.gbps}, {"latency_us", f.latency_us}};
}

Fabric fabric_of(const Host& h) { return {h.fabric, h.fabric_gbps, h.fabric_latency_us}; }

// The builder's whole-network errors (a disconnected network...) carry no pointer; with an
// explicit inter-group "links" list that list is what disconnects, so point at it.
Topology finish(TopologyBuilder&& builder, const std::string& pointer) {
  try {
    return std::move(builder).finalize();
  } catch (const TopologyError& e) {
    if (!e.pointer().empty()) throw;
    throw TopologyError(pointer, e.reason());
  }
}

// --- BiGraph ------------------------------------------------------------------------------

Topology bigraph_from_shape(const json& doc) {
  const json& shape = doc["shape"];
  expect_object(shape, "/shape");
  check_fields(shape, "/shape",
               {"switches_per_group", "endpoints_per_switch", "gpus_per_server", "nic_spread",
                "link_gbps", "link_latency_us", "switch_latency_us", "host_fabric",
                "host_fabric_gbps", "host_fabric_latency_us", "switch_ports"});
  BiGraphShape s;
  const std::string p = "/shape";
  optional_int(shape, p, "switches_per_group", s.switches_per_group, 1, 1024);
  optional_int(shape, p, "endpoints_per_switch", s.endpoints_per_switch, 1, 1024);
  optional_int(shape, p, "gpus_per_server", s.gpus_per_server, 1, 1024);
  if (auto it = shape.find("nic_spread"); it != shape.end())
    s.nic_spread = as_string(*it, p + "/nic_spread");
  optional_number(shape, p, "link_gbps", s.link_gbps);
  optional_number(shape, p, "link_latency_us", s.link_latency_us);
  optional_number(shape, p, "switch_latency_us", s.switch_latency_us);
  if (auto it = shape.find("host_fabric"); it != shape.end())
    s.host_fabric = fabric_kind(*it, p + "/host_fabric");
  optional_number(shape, p, "host_fabric_gbps", s.host_fabric_gbps);
  optional_number(shape, p, "host_fabric_latency_us", s.host_fabric_latency_us);
  optional_int(shape, p, "switch_ports", s.switch_ports, 0, 65536);
  if (auto it = doc.find("name"); it != doc.end()) s.name = as_string(*it, "/name");
  return generate_bigraph(s);
}

Topology bigraph_explicit(const json& doc) {
  check_fields(doc, "", {"kind", "name", "link_gbps", "link_latency_us", "switch_latency_us",
                         "switch_ports", "host_fabric", "switches", "links", "servers"});
  const std::string name = doc.contains("name") ? as_string(doc["name"], "/name") : "bigraph";
  const double gbps = gbps_field(doc, "", "link_gbps");
  const double latency = latency_field(doc, "", "link_latency_us", 1.0);
  const double switch_latency = latency_field(doc, "", "switch_latency_us", 0.5);
  int ports = 0;
  optional_int(doc, "", "switch_ports", ports, 0, 65536);
  Fabric fabric;
  if (doc.contains("host_fabric")) fabric = read_fabric(doc["host_fabric"], "/host_fabric", fabric);

  TopologyBuilder b(TopologyKind::BiGraph, name);
  const json& switches = require(doc, kDocumentPointer, "switches");
  const std::string switches_ptr = "/switches";
  expect_object(switches, switches_ptr);
  check_fields(switches, switches_ptr, {"upper", "lower"});
  std::map<std::string, int> switch_by_id;
  size_t group_size[2] = {0, 0};
  for (int g = 0; g < 2; ++g) {
    const char* group = g == 0 ? "upper" : "lower";
    const std::string gp = "/switches/" + std::string(group);
    const json& ids = require(switches, switches_ptr, group);
    expect_array(ids, gp);
    if (ids.empty()) throw TopologyError(gp, "a group needs at least one switch");
    if (ids.size() > 1024) throw TopologyError(gp, "more than 1024 switches");
    group_size[g] = ids.size();
    for (size_t i = 0; i < ids.size(); ++i) {
      const std::string ip = gp + "/" + std::to_string(i);
      Switch sw;
      sw.id = as_identifier(ids[i], ip);
      sw.role = g == 0 ? SwitchRole::Upper : SwitchRole::Lower;
      sw.index_in_role = int(i);
      sw.ports = ports;
      sw.latency_us = switch_latency;
      if (switch_by_id.count(sw.id)) throw TopologyError(ip, "duplicate switch " + in_quotes(sw.id));
      switch_by_id[sw.id] = b.add_switch(sw);
    }
  }
  if (group_size[0] != group_size[1])
    throw TopologyError("/switches", "the upper group has " + std::to_string(group_size[0]) +
                                         " switches and the lower " +
                                         std::to_string(group_size[1]) +
                                         "; BiGraph groups must be the same size");

  // Inter-group cables: complete bipartite unless "links" lists them.
  std::vector<std::pair<int, int>> cables;
  if (auto it = doc.find("links"); it != doc.end()) {
    expect_array(*it, "/links");
    std::set<std::pair<int, int>> seen;
    for (size_t i = 0; i < it->size(); ++i) {
      const std::string lp = "/links/" + std::to_string(i);
      const json& pair = (*it)[i];
      expect_array(pair, lp);
      if (pair.size() != 2)
        throw TopologyError(lp, "a link names two switches, got " + std::to_string(pair.size()));
      int ends[2];
      for (int k = 0; k < 2; ++k) {
        std::string id = as_identifier(pair[k], lp + "/" + std::to_string(k));
        auto sw = switch_by_id.find(id);
        if (sw == switch_by_id.end())
          throw TopologyError(lp + "/" + std::to_string(k), "unknown switch " + in_quotes(id));
        ends[k] = sw->second;
      }
      const Switch& a = b.switches()[ends[0]];
      const Switch& c = b.switches()[ends[1]];
      if (a.role == c.role)
        throw TopologyError(lp, "link inside the " + std::string(to_string(a.role)) +
                                    " group: " + in_quotes(a.id) + " - " + in_quotes(c.id) +
                                    " (BiGraph links join an upper and a lower switch)");
      int u = a.role == SwitchRole::Upper ? ends[0] : ends[1];
      int l = a.role == SwitchRole::Upper ? ends[1] : ends[0];
      if (!seen.insert({u, l}).second)
        throw TopologyError(lp, "duplicate link " + in_quotes(a.id) + " - " + in_quotes(c.id));
      cables.push_back({u, l});
    }
  } else {
    for (size_t u = 0; u < group_size[0]; ++u)
      for (size_t l = 0; l < group_size[1]; ++l) cables.push_back({int(u), int(group_size[0] + l)});
  }
  std::vector<int> used(b.switches().size(), 0);
  for (auto [u, l] : cables) {
    ++used[u];
    ++used[l];
  }
  if (ports > 0)
    for (size_t s = 0; s < used.size(); ++s)
      if (used[s] > ports)
        throw TopologyError("/switch_ports", "switch " + in_quotes(b.switches()[s].id) + " needs " +
                                                 std::to_string(used[s]) +
                                                 " ports for inter-group links but has " +
                                                 std::to_string(ports));

  const json& servers = require(doc, kDocumentPointer, "servers");
  expect_array(servers, "/servers");
  if (servers.empty()) throw TopologyError("/servers", "a topology needs at least one server");
  std::map<std::string, std::string> endpoint_ids;  // id -> pointer of its definition
  HostSpellings host_spellings;
  long nic_total = 0;
  for (size_t i = 0; i < servers.size(); ++i) {
    const std::string sp = "/servers/" + std::to_string(i);
    const json& server = servers[i];
    expect_object(server, sp);
    check_fields(server, sp, {"name", "nics", "fabric"});
    const std::string host = as_identifier(require(server, sp, "name"), sp + "/name");
    if (b.find_host(host)) throw TopologyError(sp + "/name", "duplicate server " + in_quotes(host));
    host_spellings.check(host, sp + "/name");
    Fabric f = fabric;
    if (server.contains("fabric")) f = read_fabric(server["fabric"], sp + "/fabric", fabric);
    b.add_host(host, f.kind, f.gbps, f.latency_us);
    const json& nics = require(server, sp, "nics");
    expect_array(nics, sp + "/nics");
    if (nics.empty()) throw TopologyError(sp + "/nics", "a server needs at least one NIC");
    std::map<std::string, std::string> nic_switch;  // NIC name -> switch it is cabled to
    std::map<long, std::string> gpu_endpoint;
    for (size_t n = 0; n < nics.size(); ++n) {
      const std::string np = sp + "/nics/" + std::to_string(n);
      const json& nic = nics[n];
      expect_object(nic, np);
      check_fields(nic, np, {"name", "gpu", "switch", "id"});
      if (++nic_total > kMaxEndpoints)
        throw TopologyError(np, "more than " + std::to_string(kMaxEndpoints) + " endpoints");
      Endpoint e;
      e.host = host;
      e.nic = as_identifier(require(nic, np, "name"), np + "/name");
      e.gpu = int(as_int(require(nic, np, "gpu"), np + "/gpu", 0, 1023));
      const std::string sw_id = as_identifier(require(nic, np, "switch"), np + "/switch");
      auto sw = switch_by_id.find(sw_id);
      if (sw == switch_by_id.end()) throw TopologyError(np + "/switch", "unknown switch " + in_quotes(sw_id));
      if (auto prior = nic_switch.find(e.nic); prior != nic_switch.end())
        throw TopologyError(np + "/name", "NIC " + in_quotes(e.nic) + " of server " + in_quotes(host) +
                                              " is already cabled to switch " +
                                              in_quotes(prior->second));
      nic_switch[e.nic] = sw_id;
      std::string id_ptr = np;
      if (nic.contains("id")) {
        id_ptr = np + "/id";
        e.id = as_identifier(nic["id"], id_ptr);
      } else {
        e.id = host + ".g" + std::to_string(e.gpu);
      }
      if (auto prior = gpu_endpoint.find(e.gpu); prior != gpu_endpoint.end())
        throw TopologyError(np + "/gpu", "GPU " + std::to_string(e.gpu) + " of host " +
                                             in_quotes(host) + " is already endpoint " +
                                             in_quotes(prior->second));
      gpu_endpoint[e.gpu] = e.id;
      if (endpoint_ids.count(e.id) || switch_by_id.count(e.id))
        throw TopologyError(id_ptr, "duplicate endpoint id " + in_quotes(e.id));
      endpoint_ids[e.id] = np;
      if (ports > 0 && used[sw->second] >= ports)
        throw TopologyError(np + "/switch", "switch " + in_quotes(sw_id) + " has no free port (" +
                                                std::to_string(ports) + " ports)");
      ++used[sw->second];
      int endpoint = b.add_endpoint(e);
      b.attach(endpoint, sw->second, gbps, latency);
    }
  }
  // A switch neither linked nor cabled to a NIC is a typo or a missing links entry (the
  // connectivity check looks at endpoints only, so it would pass unseen).
  for (size_t s = 0; s < used.size(); ++s)
    if (used[s] == 0) {
      const Switch& sw = b.switches()[s];
      throw TopologyError(std::string("/switches/") + (sw.role == SwitchRole::Upper ? "upper/" : "lower/") +
                              std::to_string(sw.index_in_role),
                          "switch " + in_quotes(sw.id) + " has no cable (no link, no NIC)");
    }
  for (auto [u, l] : cables)
    b.add_cable(switch_node(u), switch_node(l), LinkKind::InterGroup, gbps, latency);
  return finish(std::move(b), doc.contains("links") ? "/links" : "");
}

json bigraph_to_json(const Topology& t) {
  json doc;
  doc["kind"] = "bigraph";
  doc["name"] = t.name();
  double gbps = 0, latency = 0;
  for (const auto& l : t.links())
    if (l.kind == LinkKind::Access || l.kind == LinkKind::InterGroup) {
      gbps = l.gbps;
      latency = l.latency_us;
      break;
    }
  doc["link_gbps"] = gbps;
  doc["link_latency_us"] = latency;
  const auto& upper = t.group_switches(SwitchRole::Upper);
  const auto& lower = t.group_switches(SwitchRole::Lower);
  doc["switch_latency_us"] = upper.empty() ? 0.0 : t.switches()[upper[0]].latency_us;
  if (!upper.empty() && t.switches()[upper[0]].ports > 0)
    doc["switch_ports"] = t.switches()[upper[0]].ports;
  const Fabric fabric = fabric_of(t.hosts().front());
  doc["host_fabric"] = fabric_json(fabric);
  json up = json::array(), down = json::array();
  for (int s : upper) up.push_back(t.switches()[s].id);
  for (int s : lower) down.push_back(t.switches()[s].id);
  doc["switches"] = {{"upper", up}, {"lower", down}};
  json links = json::array();
  size_t inter = 0;
  for (const auto& l : t.links()) {
    if (l.kind != LinkKind::InterGroup || l.id > l.reverse) continue;
    ++inter;
    links.push_back({t.node_id(l.from), t.node_id(l.to)});
  }
  if (inter != upper.size() * lower.size()) doc["links"] = links;
  json servers = json::array();
  for (const auto& h : t.hosts()) {
    json server = {{"name", h.name}};
    if (!(fabric_of(h) == fabric)) server["fabric"] = fabric_json(fabric_of(h));
    json nics = json::array();
    for (int e : h.endpoints) {
      const Endpoint& ep = t.endpoints()[e];
      json nic = {{"name", ep.nic}, {"gpu", ep.gpu}, {"switch", t.switches()[ep.attach_switch].id}};
      if (ep.id != h.name + ".g" + std::to_string(ep.gpu)) nic["id"] = ep.id;
      nics.push_back(nic);
    }
    server["nics"] = nics;
    servers.push_back(server);
  }
  doc["servers"] = servers;
  return doc;
}

// --- NAP ----------------------------------------------------------------------------------

// Reads NapShape fields of `obj` (the generated form's "shape", or the explicit form itself).
NapShape read_nap_shape(const json& obj, const std::string& p, bool explicit_form) {
  NapShape s;
  if (explicit_form) {
    s.nodes_per_package = int(as_int(require(obj, p, "nodes_per_package"), p + "/nodes_per_package", 1, 1024));
    s.local_switches = int(as_int(require(obj, p, "local_switches"), p + "/local_switches", 1, 256));
    require(obj, p, "torus");
    s.intra_gbps = gbps_field(obj, p, "intra_gbps");
    s.inter_gbps = gbps_field(obj, p, "inter_gbps");
  } else {
    optional_int(obj, p, "nodes_per_package", s.nodes_per_package, 1, 1024);
    optional_int(obj, p, "local_switches", s.local_switches, 1, 256);
    optional_number(obj, p, "intra_gbps", s.intra_gbps);
    optional_number(obj, p, "inter_gbps", s.inter_gbps);
    optional_int(obj, p, "gpus_per_host", s.gpus_per_host, 1, 1024);
    if (auto it = obj.find("host_fabric"); it != obj.end())
      s.host_fabric = fabric_kind(*it, p + "/host_fabric");
    optional_number(obj, p, "host_fabric_gbps", s.host_fabric_gbps);
    optional_number(obj, p, "host_fabric_latency_us", s.host_fabric_latency_us);
  }
  if (auto it = obj.find("torus"); it != obj.end()) {
    expect_array(*it, p + "/torus");
    if (it->empty() || it->size() > 8)
      throw TopologyError(p + "/torus", "a torus needs 1 to 8 dimensions, got " +
                                            std::to_string(it->size()));
    s.torus.clear();
    for (size_t d = 0; d < it->size(); ++d)
      s.torus.push_back(int(as_int((*it)[d], p + "/torus/" + std::to_string(d), 1, 4096)));
  }
  long product = 1;
  for (int d : s.torus) product = std::min(product * d, 1L << 40);
  s.packages = product > 4096 ? 4096 : int(product);
  // "packages" is optional; when given it must agree with the torus (check_nap_shape).
  optional_int(obj, p, "packages", s.packages, 1, 4096);
  if (obj.contains("packages") && !obj.contains("torus") && long(s.packages) != product) {
    std::string dims;
    for (int d : s.torus) dims += (dims.empty() ? "" : "x") + std::to_string(d);
    throw TopologyError(p + "/packages", std::to_string(s.packages) + " packages and no \"torus\": the default torus " +
                                             dims + " holds " + std::to_string(product) + " (give the torus)");
  }
  optional_number(obj, p, "intra_latency_us", s.intra_latency_us);
  optional_number(obj, p, "inter_latency_us", s.inter_latency_us);
  optional_number(obj, p, "switch_latency_us", s.switch_latency_us);
  optional_int(obj, p, "node_ports", s.node_ports, 0, 4096);
  optional_int(obj, p, "switch_ports", s.switch_ports, 0, 65536);
  check_nap_shape(s, p);
  return s;
}

Topology nap_from_shape(const json& doc) {
  const json& shape = doc["shape"];
  expect_object(shape, "/shape");
  check_fields(shape, "/shape",
               {"packages", "nodes_per_package", "local_switches", "torus", "intra_gbps",
                "intra_latency_us", "inter_gbps", "inter_latency_us", "switch_latency_us",
                "node_ports", "switch_ports", "gpus_per_host", "host_fabric", "host_fabric_gbps",
                "host_fabric_latency_us"});
  NapShape s = read_nap_shape(shape, "/shape", false);
  if (auto it = doc.find("name"); it != doc.end()) s.name = as_string(*it, "/name");
  return generate_nap(s);
}

Topology nap_explicit(const json& doc) {
  check_fields(doc, "", {"kind", "name", "packages", "nodes_per_package", "local_switches",
                         "torus", "intra_gbps", "intra_latency_us", "inter_gbps",
                         "inter_latency_us", "switch_latency_us", "node_ports", "switch_ports",
                         "host_fabric", "nodes"});
  NapShape s = read_nap_shape(doc, "", true);
  const std::string name = doc.contains("name") ? as_string(doc["name"], "/name") : "nap";
  Fabric fabric;
  if (doc.contains("host_fabric")) fabric = read_fabric(doc["host_fabric"], "/host_fabric", fabric);

  const json& nodes = require(doc, kDocumentPointer, "nodes");
  expect_array(nodes, "/nodes");
  const long expected = long(s.packages) * s.nodes_per_package;
  if (long(nodes.size()) != expected)
    throw TopologyError("/nodes", std::to_string(nodes.size()) + " nodes listed, the shape has " +
                                      std::to_string(expected) + " (" +
                                      std::to_string(s.packages) + " packages x " +
                                      std::to_string(s.nodes_per_package) + " nodes)");
  TopologyBuilder b(TopologyKind::Nap, name);
  std::map<std::pair<int, int>, std::string> slot_id;  // (package, node) -> endpoint id
  std::set<std::string> ids;
  std::map<std::pair<std::string, int>, std::string> host_gpu;
  std::map<std::pair<std::string, std::string>, std::string> host_nic;
  std::map<std::string, std::pair<int, std::string>> host_package;  // host -> its package, first endpoint
  HostSpellings host_spellings;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const std::string np = "/nodes/" + std::to_string(i);
    const json& node = nodes[i];
    expect_object(node, np);
    check_fields(node, np, {"package", "node", "host", "gpu", "nic", "id"});
    Endpoint e;
    e.package = int(as_int(require(node, np, "package"), np + "/package", 0, s.packages - 1));
    e.node = int(as_int(require(node, np, "node"), np + "/node", 0, s.nodes_per_package - 1));
    e.host = as_identifier(require(node, np, "host"), np + "/host");
    host_spellings.check(e.host, np + "/host");
    e.gpu = int(as_int(require(node, np, "gpu"), np + "/gpu", 0, 1023));
    e.nic = as_identifier(require(node, np, "nic"), np + "/nic");
    std::string id_ptr = np;
    if (node.contains("id")) {
      id_ptr = np + "/id";
      e.id = as_identifier(node["id"], id_ptr);
    } else {
      e.id = "p" + std::to_string(e.package) + ".n" + std::to_string(e.node);
    }
    if (auto prior = slot_id.find({e.package, e.node}); prior != slot_id.end())
      throw TopologyError(np, "node " + std::to_string(e.node) + " of package " +
                                  std::to_string(e.package) + " is already endpoint " +
                                  in_quotes(prior->second));
    slot_id[{e.package, e.node}] = e.id;
    if (!ids.insert(e.id).second) throw TopologyError(id_ptr, "duplicate endpoint id " + in_quotes(e.id));
    if (auto prior = host_gpu.find({e.host, e.gpu}); prior != host_gpu.end())
      throw TopologyError(np + "/gpu", "GPU " + std::to_string(e.gpu) + " of host " +
                                           in_quotes(e.host) + " is already endpoint " +
                                           in_quotes(prior->second));
    host_gpu[{e.host, e.gpu}] = e.id;
    if (auto prior = host_nic.find({e.host, e.nic}); prior != host_nic.end())
      throw TopologyError(np + "/nic", "NIC " + in_quotes(e.nic) + " of host " + in_quotes(e.host) +
                                           " is already cabled as endpoint " +
                                           in_quotes(prior->second));
    host_nic[{e.host, e.nic}] = e.id;
    // A host's GPUs share its fabric (NVSwitch, PCIe): across packages it would be a path
    // between them that is not NAP's torus, and routing would take it.
    if (const auto [first, added] = host_package.emplace(e.host, std::pair{e.package, e.id});
        !added && first->second.first != e.package)
      throw TopologyError(np + "/package", "host " + in_quotes(e.host) + " is in package " +
                                               std::to_string(first->second.first) + " (endpoint " +
                                               in_quotes(first->second.second) +
                                               "): a host's GPUs are nodes of one package");
    b.add_host(e.host, fabric.kind, fabric.gbps, fabric.latency_us);
    b.add_endpoint(e);
  }
  // Switch ids are generated ("p<package>.s<j>"); an endpoint id must not take one.
  for (int p = 0; p < s.packages; ++p)
    for (int j = 0; j < s.local_switches; ++j) {
      const std::string switch_id = "p" + std::to_string(p) + ".s" + std::to_string(j);
      if (!ids.count(switch_id)) continue;
      for (size_t i = 0; i < nodes.size(); ++i)
        if (b.endpoints()[i].id == switch_id)
          throw TopologyError("/nodes/" + std::to_string(i) + "/id",
                              "endpoint id " + in_quotes(switch_id) + " is the name of a local switch");
    }
  add_nap_wiring(b, s);
  return finish(std::move(b), "");
}

json nap_to_json(const Topology& t) {
  json doc;
  doc["kind"] = "nap";
  doc["name"] = t.name();
  doc["packages"] = t.package_count();
  doc["nodes_per_package"] = t.nodes_per_package();
  doc["local_switches"] = t.local_switches();
  doc["torus"] = t.torus_dims();
  const Link* intra = nullptr;
  const Link* inter = nullptr;
  for (const auto& l : t.links()) {
    if (!intra && l.kind == LinkKind::IntraPackage) intra = &l;
    if (!inter && l.kind == LinkKind::InterPackage) inter = &l;
  }
  // With one package (no torus cables) the inter-package values are kept at Table II's.
  NapShape defaults;
  doc["intra_gbps"] = intra ? intra->gbps : defaults.intra_gbps;
  doc["intra_latency_us"] = intra ? intra->latency_us : defaults.intra_latency_us;
  doc["inter_gbps"] = inter ? inter->gbps : defaults.inter_gbps;
  doc["inter_latency_us"] = inter ? inter->latency_us : defaults.inter_latency_us;
  const Switch& first = t.switches()[t.local_switch(0, 0)];
  doc["switch_latency_us"] = first.latency_us;
  doc["switch_ports"] = first.ports;
  doc["host_fabric"] = fabric_json(fabric_of(t.hosts().front()));
  json nodes = json::array();
  for (const auto& e : t.endpoints()) {
    json node = {{"package", e.package}, {"node", e.node}, {"host", e.host}, {"gpu", e.gpu},
                 {"nic", e.nic}};
    if (e.id != "p" + std::to_string(e.package) + ".n" + std::to_string(e.node)) node["id"] = e.id;
    nodes.push_back(node);
  }
  doc["nodes"] = nodes;
  return doc;
}

}  // namespace

Topology topology_from_json(const json& doc) {
  expect_object(doc, "");
  const std::string kind = as_string(require(doc, "", "kind"), "/kind");
  const bool generated = doc.contains("shape");
  if (kind == "bigraph") {
    if (generated) check_fields(doc, "", {"kind", "name", "shape"});
    return generated ? bigraph_from_shape(doc) : bigraph_explicit(doc);
  }
  if (kind == "nap") {
    if (generated) check_fields(doc, "", {"kind", "name", "shape"});
    return generated ? nap_from_shape(doc) : nap_explicit(doc);
  }
  throw TopologyError("/kind", "unknown kind " + in_quotes(kind) + " (expected bigraph or nap)");
}

namespace {

// JSON allows a field twice in one object and nlohmann keeps the last; a topology file
// refuses it, as it refuses unknown fields: one of the two values would be silently ignored.
// Also bounds the nesting (a topology nests a few levels) and the number of values (memory:
// a parsed value costs tens of bytes). A SAX pass of its own before the document is built:
// nlohmann's parse with a callback walks a container's elements each time one of them
// closes, quadratic in an array of objects (a 1 MB file of "{}," took minutes).
class FileShapeCheck : public nlohmann::json_sax<json> {
 public:
  static constexpr size_t kMaxDepth = 64;
  // Room for the largest topology the loader takes (65,536 endpoints, 2,097,152 cables
  // listed as links: three values each), with margin.
  static constexpr size_t kMaxValues = size_t(8) << 20;

  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t&) override { return value(); }
  bool string(string_t&) override { return value(); }
  bool binary(binary_t&) override { return value(); }
  bool start_object(std::size_t) override { return open(true); }
  bool start_array(std::size_t) override { return open(false); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool key(string_t& name) override {
    Frame& f = frames_.back();
    f.key = name;
    if (!f.keys.insert(name).second) throw TopologyError(pointer(), "duplicate field " + quoted_key(name));
    return true;
  }
  // A syntax error: the pass stops; the parse that follows reports it with its position.
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

 private:
  struct Frame {
    bool object;
    std::set<std::string> keys;
    std::string key;  // the field being read (objects)
    long index;       // the element being read (arrays)
  };
  bool value() {
    if (!frames_.empty() && !frames_.back().object) ++frames_.back().index;
    if (++values_ > kMaxValues)
      throw TopologyError(pointer(), "more than " + std::to_string(kMaxValues) +
                                         " values (a topology holds at most " + std::to_string(kMaxEndpoints) +
                                         " endpoints and " + std::to_string(kMaxCables) + " cables)");
    return true;
  }
  bool open(bool object) {
    value();
    if (frames_.size() >= kMaxDepth)
      throw TopologyError(pointer(), "nested deeper than " + std::to_string(kMaxDepth) + " levels");
    frames_.push_back({object, {}, {}, -1});
    return true;
  }
  bool close() {
    frames_.pop_back();
    return true;
  }
  std::string pointer() const {  // JSON pointer (RFC 6901) of the current field or element
    std::string p;
    for (const Frame& f : frames_) p += "/" + (f.object ? pointer_token(f.key) : std::to_string(f.index));
    return p;
  }
  std::vector<Frame> frames_;
  size_t values_ = 0;
};

// nlohmann's message reads "[json.exception.parse_error.101] parse error at line 1,
// column 5: <what>"; keep <what> and report the byte offset.
[[noreturn]] void throw_invalid_json(const json::exception& e) {
  std::string what = e.what();
  if (const auto* parse = dynamic_cast<const json::parse_error*>(&e)) {
    auto at = what.find(": ", what.find("parse error"));
    if (at != std::string::npos) what = what.substr(at + 2);
    throw TopologyError("", "invalid JSON at byte " + std::to_string(parse->byte) + ": " + what);
  }
  // Other parse-time failures, e.g. out_of_range.406 for a number such as 1e999.
  if (auto end = what.find("] "); end != std::string::npos) what = what.substr(end + 2);
  throw TopologyError("", "invalid JSON: " + what);
}

}  // namespace

Topology load_topology_text(std::string_view text) {
  // nlohmann's lexer takes a NUL for the end of the input: what follows would be ignored.
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos)
    throw TopologyError("", "the file is empty (a topology file is a JSON object: docs/topology.md)");
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos)
    throw TopologyError("", "a NUL byte at byte " + std::to_string(nul) + " (a topology file is JSON text)");
  json doc;
  try {
    FileShapeCheck check;
    json::sax_parse(text.begin(), text.end(), &check, json::input_format_t::json, /*strict=*/true,
                    /*ignore_comments=*/true);
    doc = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/true, /*ignore_comments=*/true);
  } catch (const json::exception& e) {
    throw_invalid_json(e);
  }
  return topology_from_json(doc);
}

Topology load_topology_file(const std::string& path) {
  std::string text;
  try {
    text = config::read_user_file(path, kMaxTopologyFileBytes, "a topology file");
  } catch (const config::UserFileError& e) {
    throw TopologyError("", e.what());
  }
  return load_topology_text(text);
}

namespace {

// Field order for people (docs/topology.md); fields not listed follow alphabetically.
constexpr const char* kFieldOrder[] = {
    "kind", "name", "shape", "package", "node", "host", "gpu", "nic", "id", "switch",
    "switches_per_group", "endpoints_per_switch", "gpus_per_server", "nic_spread", "packages",
    "nodes_per_package", "local_switches", "torus", "link_gbps", "link_latency_us", "intra_gbps",
    "intra_latency_us", "inter_gbps", "inter_latency_us", "switch_latency_us", "node_ports",
    "switch_ports", "gpus_per_host", "host_fabric", "host_fabric_gbps", "host_fabric_latency_us",
    "gbps", "latency_us", "upper", "lower", "switches", "links", "fabric", "nics", "servers",
    "nodes"};

std::vector<std::string> ordered_keys(const json& obj) {
  std::vector<std::string> keys;
  for (const char* k : kFieldOrder)
    if (obj.contains(k)) keys.push_back(k);
  for (auto it = obj.begin(); it != obj.end(); ++it)
    if (std::find(keys.begin(), keys.end(), it.key()) == keys.end()) keys.push_back(it.key());
  return keys;
}

std::string inline_text(const json& v) {
  if (v.is_object()) {
    std::string out = "{";
    bool first = true;
    for (const auto& k : ordered_keys(v)) {
      out += (first ? "" : ", ") + json(k).dump() + ": " + inline_text(v[k]);
      first = false;
    }
    return out + "}";
  }
  if (v.is_array()) {
    std::string out = "[";
    for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + inline_text(v[i]);
    return out + "]";
  }
  return v.dump();
}

void block_text(const json& v, int indent, std::string& out) {
  std::string flat = inline_text(v);
  if ((!v.is_object() && !v.is_array()) || flat.size() + indent <= 96) {
    out += flat;
    return;
  }
  const std::string pad(indent + 2, ' ');
  if (v.is_object()) {
    out += "{\n";
    auto keys = ordered_keys(v);
    for (size_t i = 0; i < keys.size(); ++i) {
      out += pad + json(keys[i]).dump() + ": ";
      block_text(v[keys[i]], indent + 2, out);
      out += i + 1 < keys.size() ? ",\n" : "\n";
    }
    out += std::string(indent, ' ') + "}";
  } else {
    out += "[\n";
    for (size_t i = 0; i < v.size(); ++i) {
      out += pad;
      block_text(v[i], indent + 2, out);
      out += i + 1 < v.size() ? ",\n" : "\n";
    }
    out += std::string(indent, ' ') + "]";
  }
}

}  // namespace

std::string topology_json_text(const json& doc) {
  std::string out;
  block_text(doc, 0, out);
  return out + "\n";
}

json topology_to_json(const Topology& t) {
  return t.kind() == TopologyKind::BiGraph ? bigraph_to_json(t) : nap_to_json(t);
}

}  // namespace topocoll::topo
