// Live fabrics: bringing a plan up on this machine (root, iproute2), taking it down, faults
// on its cables, and what a process needs to run as one of its endpoints. All-or-nothing:
// a failed `up` removes everything it made before it reports the error.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "fabric/fabric_plan.h"
#include "fabric/fabric_record.h"
#include "topo/topology.h"

namespace topocoll::fabric {

using Progress = std::function<void(const std::string&)>;

// Why this machine cannot run a fabric of `size` (not root, no namespaces, no veth or tbf,
// not enough memory: with the numbers), or "" when it can. Makes and removes a probe
// namespace.
std::string machine_cannot_run(const FabricSize& size, const std::string& probe_name);

// Builds the fabric, holding its name's lock (fabric/fabric_lock.h) throughout. Refuses a
// name with a record (up, or an `up` that did not finish) and any namespace it would make
// that exists already; namespaces that only share its prefix are left alone. Throws
// FabricError (nothing left behind) or std::invalid_argument.
FabricRecord fabric_up(const topo::Topology& topology, const std::string& topology_file,
                       const FabricOptions& options, const Progress& progress = {});

struct FabricDown {
  std::vector<std::string> removed;     // namespaces removed (their processes ended first)
  std::vector<std::string> left_alone;  // named tf-<name>-* but in no record: not removed
};
// Removes the namespaces fabric `name`'s record lists (ending the processes still inside
// them) and the record. Namespaces that only carry its prefix are someone else's as far as
// anything here knows: removed only with `force` (also when there is no record, or it is
// corrupt). Throws FabricError when there was nothing it may remove.
FabricDown fabric_down(const std::string& name, bool force = false);

// Namespaces named like fabric `name`'s (tf-<name>-*) that its record does not list (all of
// them when there is no record); with `name` empty, those of every fabric name that no
// record lists.
std::vector<std::string> unrecorded_namespaces(const std::string& name);

class LiveFabric {
 public:
  // `name` "" = the one fabric that is up (an error when there are none or several).
  static LiveFabric open(const std::string& name);

  const FabricRecord& record() const { return record_; }
  const std::string& name() const { return record_.name; }
  const topo::Topology& topology() const { return topology_; }  // as in the file
  const FabricPlan& plan() const { return plan_; }
  // The network as emulated now: the plan's rates, degraded cables at their degraded rate.
  topo::Topology modelled_topology() const;

  // A topology file of the fabric at its emulated rates (no faults: a cluster's file
  // describes it as built), for the NCCL jobs run on it (TOPOCOLL_TOPO_FILE), so that their
  // cost model sees the rates the cables have. Written once into fabric_files_dir.
  std::string emulated_topology_file() const;

  // An endpoint by id, host name (its first endpoint) or index. Throws naming the text.
  int endpoint(const std::string& name) const;

  // Faults, named as `describe --cables` names cables ("A-B" both ways, "A->B" one way).
  // The caller holds the fabric's FabricLock and opened the record under it. A cut cable
  // is restored before it is degraded (its shaper would let traffic through again).
  void degrade(const std::string& cable, double rate_mbit);
  // Drops everything at both ends of the cable (one not cut yet); the links stay up and
  // routes stay put.
  void cut(const std::string& cable);
  // The far ends of two cables exchanged (a miswired cluster): A-B and C-D become A-D and
  // C-B; routes stay as the file says.
  void swap(const std::string& first, const std::string& second);
  // Undoes the faults on `cable` ("" = every fault), newest first.
  void restore(const std::string& cable);

 private:
  LiveFabric() = default;
  const Cable& cable_of(int link) const;
  std::optional<std::string> cut_of(int link) const;  // the cut on link's cable, if any
  void set_rate(int link, double mbit) const;
  double current_mbit(int link) const;  // the plan's rate, or a degrade fault's
  void set_link_state(const Cable& cable, bool up) const;
  void rewire(const std::string& first, const std::string& second) const;
  void save() const;

  FabricRecord record_;
  topo::Topology topology_;
  FabricPlan plan_;
};

}  // namespace topocoll::fabric
