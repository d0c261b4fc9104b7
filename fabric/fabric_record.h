// The record of a fabric that is up (or was being built): what it emulates, with which
// options, every namespace it made and the faults applied to it. Kept as JSON in
// $TOPOCOLL_FABRIC_STATE_DIR (default /run/topocoll/fabric)/<name>.json, so `down` removes
// exactly what `up` made, also after a crash, and every command sees the same fabric.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fabric/fabric_plan.h"

namespace topocoll::fabric {

struct Fault {
  enum class Kind { Degrade, Cut, Swap };
  Kind kind = Kind::Degrade;
  std::vector<std::string> cables;  // canonical names ("A-B"; "A->B" for one direction)
  double rate_mbit = 0;             // degrade: the rate it now runs at
};

struct FabricRecord {
  std::string name;
  std::string status;         // "building" while `up` runs, then "up"
  std::string topology_file;  // as given to `up`
  nlohmann::json topology;    // the topology, explicit form
  FabricOptions options;
  std::vector<std::string> namespaces;  // every namespace `up` makes
  std::vector<Fault> faults;
  int64_t created_unix = 0;
  int creator_pid = 0;
};

void check_fabric_name(const std::string& name);  // fabric_name_problem as a FabricError
// $TOPOCOLL_FABRIC_STATE_DIR; throws FabricError when it is relative, or when a user other
// than root and this one owns or may write into it or a directory above it (a sticky one
// such as /tmp excepted above the last): root writes and trusts the records there.
std::string fabric_state_dir();
void make_state_dir();  // with every missing parent; throws FabricError
// <state dir>/<name><suffix>, the name checked first (a name like "../x" never becomes a path).
std::string fabric_file_path(const std::string& name, const std::string& suffix);
std::string fabric_record_path(const std::string& name);
std::optional<FabricRecord> load_record(const std::string& name);  // throws on a corrupt file
void save_record(const FabricRecord& record);  // atomically (temporary file, then rename)
// Files made for the fabric's jobs (its topology at the emulated rates): removed with the record.
std::string fabric_files_dir(const std::string& name);
void remove_record(const std::string& name);  // and fabric_files_dir
// Writes a file of the fabric's atomically, through no link: a fresh file renamed into place.
void write_fabric_file(const std::string& path, const std::string& text);
std::vector<std::string> recorded_fabrics();  // names, sorted

std::string to_string(Fault::Kind kind);
nlohmann::json fault_json(const Fault& fault);

}  // namespace topocoll::fabric
