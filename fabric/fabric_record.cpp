#include "fabric/fabric_record.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "config/env.h"
#include "config/trusted_paths.h"
#include "config/user_files.h"
#include "fabric/system_command.h"

namespace topocoll::fabric {
namespace {

void make_dirs(const std::string& path) {
  std::string partial;
  std::stringstream in(path);
  std::string piece;
  while (std::getline(in, piece, '/')) {
    if (piece.empty()) continue;
    partial += "/" + piece;
    if (::mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST)
      throw FabricError("cannot create " + partial + ": " + std::strerror(errno));
  }
}

// Why root must not keep its records in `dir` ("" = it may): a directory on its path belongs
// to another user or is writable by one (config/trusted_paths.h; a sticky directory such as
// /tmp is safe above the records' directory, not as it: anyone may create names there), so
// that user could swap a record, whose namespaces `down` removes with their processes, or
// plant a link where root writes. Components that do not exist yet are made by `make_dirs`,
// 0755.
std::string unsafe_state_dir(const std::string& dir) {
  if (dir.empty() || dir[0] != '/')
    return "TOPOCOLL_FABRIC_STATE_DIR '" + dir + "' is not an absolute path";
  return config::unsafe_directory(dir, false, "change the fabric records");
}

Fault::Kind parse_kind(const std::string& s) {
  if (s == "degrade") return Fault::Kind::Degrade;
  if (s == "cut") return Fault::Kind::Cut;
  if (s == "swap") return Fault::Kind::Swap;
  throw FabricError("unknown fault kind '" + s + "'");
}

}  // namespace

std::string to_string(Fault::Kind kind) {
  switch (kind) {
    case Fault::Kind::Degrade: return "degrade";
    case Fault::Kind::Cut: return "cut";
    case Fault::Kind::Swap: return "swap";
  }
  return "?";
}

nlohmann::json fault_json(const Fault& f) {
  nlohmann::json j = {{"kind", to_string(f.kind)}, {"cables", f.cables}};
  if (f.kind == Fault::Kind::Degrade) j["rate_mbit"] = f.rate_mbit;
  return j;
}

void check_fabric_name(const std::string& name) {
  if (std::string problem = fabric_name_problem(name); !problem.empty()) throw FabricError(problem);
}

std::string fabric_state_dir() {
  const std::string dir = config::env().fabric_state_dir;
  if (std::string why = unsafe_state_dir(dir); !why.empty())
    throw FabricError("the fabric records' directory " + dir + " is not safe to use: " + why +
                      " (TOPOCOLL_FABRIC_STATE_DIR chooses another)");
  return dir;
}

void make_state_dir() { make_dirs(fabric_state_dir()); }

std::string fabric_file_path(const std::string& name, const std::string& suffix) {
  check_fabric_name(name);
  return fabric_state_dir() + "/" + name + suffix;
}

std::string fabric_record_path(const std::string& name) { return fabric_file_path(name, ".json"); }

std::optional<FabricRecord> load_record(const std::string& name) {
  std::ifstream in(fabric_record_path(name));
  if (!in) return std::nullopt;
  nlohmann::json j;
  try {
    in >> j;
    FabricRecord r;
    r.name = j.at("name").get<std::string>();
    // A record copied or linked under another name would act on that fabric's namespaces.
    if (r.name != name) throw std::runtime_error("it names fabric '" + r.name + "'");
    r.status = j.at("status").get<std::string>();
    r.topology_file = j.value("topology_file", "");
    r.topology = j.at("topology");
    const auto& o = j.at("options");
    r.options.name = r.name;
    r.options.rate_mbit = o.value("rate_mbit", 0.0);
    r.options.scale = o.value("scale", 0.0);
    r.options.mtu = o.value("mtu", 9000);
    // A record without it was written before the slack existed: its cables had one frame.
    r.options.peak_slack_us = o.value("peak_slack_us", 0.0);
    r.namespaces = j.at("namespaces").get<std::vector<std::string>>();
    // `down` kills what runs in each and deletes it: only this fabric's, never another's
    // or a container runtime's a hand-edited record names.
    for (const std::string& ns : r.namespaces)
      if (!ns.starts_with(namespace_prefix(name)) || ns.size() == namespace_prefix(name).size())
        throw std::runtime_error("it lists namespace '" + ns + "', not one of fabric '" + name + "' (" +
                                 namespace_prefix(name) + "*)");
    for (const auto& f : j.value("faults", nlohmann::json::array())) {
      Fault fault;
      fault.kind = parse_kind(f.at("kind").get<std::string>());
      fault.cables = f.at("cables").get<std::vector<std::string>>();
      fault.rate_mbit = f.value("rate_mbit", 0.0);
      r.faults.push_back(fault);
    }
    r.created_unix = j.value("created_unix", int64_t(0));
    r.creator_pid = j.value("creator_pid", 0);
    return r;
  } catch (const std::exception& e) {
    throw FabricError("fabric record " + fabric_record_path(name) + " is corrupt (" + e.what() +
                      "); `topocoll fabric down --name " + name + " --force` removes the namespaces named like its own");
  }
}

void save_record(const FabricRecord& r) {
  make_state_dir();
  nlohmann::json faults = nlohmann::json::array();
  for (const auto& f : r.faults) faults.push_back(fault_json(f));
  const nlohmann::json j = {
      {"name", r.name},
      {"status", r.status},
      {"topology_file", r.topology_file},
      {"topology", r.topology},
      {"options", {{"rate_mbit", r.options.rate_mbit}, {"scale", r.options.scale}, {"mtu", r.options.mtu},
                   {"peak_slack_us", r.options.peak_slack_us}}},
      {"namespaces", r.namespaces},
      {"faults", faults},
      {"created_unix", r.created_unix},
      {"creator_pid", r.creator_pid}};
  write_fabric_file(fabric_record_path(r.name), j.dump(1) + "\n");
}

std::string fabric_files_dir(const std::string& name) { return fabric_file_path(name, ".d"); }

void write_fabric_file(const std::string& path, const std::string& text) {
  try {
    config::replace_file(path, text);
  } catch (const config::UserFileError& e) {
    throw FabricError(e.what());
  }
}

void remove_record(const std::string& name) {
  ::unlink(fabric_record_path(name).c_str());
  std::error_code ignored;
  std::filesystem::remove_all(fabric_files_dir(name), ignored);
}

std::vector<std::string> recorded_fabrics() {
  std::vector<std::string> out;
  DIR* d = ::opendir(fabric_state_dir().c_str());
  if (!d) return out;
  while (const dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n.size() > 5 && n.compare(n.size() - 5, 5, ".json") == 0 &&
        fabric_name_problem(n.substr(0, n.size() - 5)).empty())
      out.push_back(n.substr(0, n.size() - 5));
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace topocoll::fabric
