// Contention analysis: every Send of every step routed over the topology's directed links;
// per step, flows and bytes on each link, the worst load and its link.
//
// Load counts flows: a flow striped over k paths puts `fraction` (1/k) of a flow on each
// path's links, so a NAP node striping one flow over its k local switches loads each port 1/k.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "sched/placement.h"
#include "sched/schedule.h"
#include "topo/topology.h"

namespace topocoll::sched {

// One path of a route without its own storage: head link, shared body, tail link (-1 when
// absent). BiGraph cross-group routes share their body per switch pair, so 65,536 endpoints
// need a few thousand cached bodies, not millions of paths.
struct PathView {
  int head = -1;
  std::span<const int> body;
  int tail = -1;
  double fraction = 1.0;

  int hops() const { return int(body.size()) + (head >= 0) + (tail >= 0); }
  template <class Fn>
  void for_each_link(Fn&& fn) const {
    if (head >= 0) fn(head);
    for (int l : body) fn(l);
    if (tail >= 0) fn(tail);
  }
};

// Routes between endpoints, computed once per pair by Topology::route() and kept.
class RouteCache {
 public:
  explicit RouteCache(const topo::Topology& topology);
  RouteCache(const RouteCache&) = delete;
  RouteCache& operator=(const RouteCache&) = delete;

  // The paths from one endpoint to another (empty for the same endpoint). `out` is reused.
  void paths(int src_endpoint, int dst_endpoint, std::vector<PathView>& out);
  const topo::Topology& topology() const { return topology_; }
  // Changes whenever a route is added, which may move the storage earlier PathViews see.
  size_t version() const { return stored_links_.size() + pairs_.size(); }

 private:
  struct Stored {
    uint32_t first_path = 0, num_paths = 0;
  };
  struct StoredPath {
    uint32_t offset = 0, size = 0;
    double fraction = 1.0;
  };
  // BiGraph switch pair: -1 not routed yet, -2 not the regular shape (route per pair),
  // else the stored body.
  struct SwitchPair {
    int32_t state = -1;  // 1: the direct inter-group cable `link` is the whole body
    int32_t link = -1;
    Stored stored;
  };
  Stored store(const std::vector<topo::Path>& route, int strip_head, int strip_tail);
  void append(const Stored& stored, int head, int tail, std::vector<PathView>& out) const;

  const topo::Topology& topology_;
  // Per endpoint, compact (the Endpoint records are large): NIC links, switch, host, group.
  std::vector<int> access_up_, access_down_, attach_, host_, group_;
  int num_switches_ = 0;
  std::vector<SwitchPair> switch_pair_;
  std::unordered_map<uint64_t, Stored> pairs_;
  std::vector<StoredPath> stored_paths_;
  std::vector<int> stored_links_;
};

// One Send of one step, between communicator ranks.
struct Flow {
  int src = -1, dst = -1;
  int64_t bytes = 0;
  // Its largest single send: the engine cuts each message on its own (exec/pipeline.cpp
  // cut_step), so this, not `bytes`, sets how many pipelined rounds the step runs.
  int64_t largest_send = 0;
};

// The flows of step `step` of a schedule, by source rank then destination: all sends from
// one rank to one peer in the step form one flow (`out` is reused).
// `local_bytes` (optional) receives the most bytes one rank's local ops read in the step
// (a Reduce of n inputs reads n x count elements, a Copy or Finalize count), and
// `any_local` whether any rank has a local op.
void step_flows(const Schedule& schedule, int step, size_t elem_size, std::vector<Flow>& out,
                double* local_bytes = nullptr, bool* any_local = nullptr);

// Per-link totals of one step, in one flat array indexed by link id (reused across steps;
// only the touched links are reset).
class StepLinkLoads {
 public:
  explicit StepLinkLoads(int num_links);
  void clear();
  // Adds one flow between endpoints over all of its paths; its paths stay in
  // scratch_paths() until the next call.
  void add(RouteCache& routes, int src_endpoint, int dst_endpoint, double bytes);

  double flows(int link) const { return links_[link].flows; }     // fractional flows
  int portions(int link) const { return links_[link].portions; }  // path portions
  double bytes(int link) const { return links_[link].bytes; }
  const std::vector<int>& touched() const { return touched_; }
  std::vector<PathView>& scratch_paths() { return paths_; }

 private:
  struct Totals {
    double flows = 0, bytes = 0;
    int portions = 0;
  };
  std::vector<Totals> links_;
  std::vector<int> touched_;
  std::vector<PathView> paths_;
};

struct LinkUse {
  int link = -1;
  double flows = 0;  // fractional flows
  double bytes = 0;
};

struct StepLoad {
  int flows = 0;          // sends in the step
  int64_t bytes = 0;      // bytes sent by all ranks
  int64_t max_flow_bytes = 0;
  int64_t max_send_bytes = 0;  // the largest single send (Flow::largest_send)
  double max_load = 0;    // worst flows on one directed link
  int bottleneck_link = -1;
  int64_t hops = 0;       // links crossed, summed over flows (striped: over paths)
  std::vector<LinkUse> links;  // every loaded link, by id (only with keep_links)
};

struct LinkLoad {
  std::vector<StepLoad> steps;
  double max_load = 0;  // worst over steps
  int worst_step = -1;
  int64_t total_hops = 0;
};

struct LinkLoadOptions {
  bool keep_links = true;  // per-link detail per step; off for large analyses
};

LinkLoad analyze_link_load(const Schedule& schedule, const Placement& placement,
                           size_t elem_size, RouteCache& routes, LinkLoadOptions options = {});

// The one per-step loop of the contention analysis, shared by analyze_link_load and the
// cost model (sched/cost_model.h): each step's flows routed once, totalled per directed
// link, the step's worst link found. The caller checks that placement and schedule agree
// on the rank count.
class StepLoadPass {
 public:
  StepLoadPass(const Schedule& schedule, const Placement& placement, size_t elem_size,
               RouteCache& routes, LinkLoadOptions options);

  // Loads step s into result().steps[s] (steps in order). `local_bytes` and `any_local` as
  // step_flows reports them.
  void run_step(int s, double* local_bytes = nullptr, bool* any_local = nullptr);
  // The last step's flows, per-link totals, and flow i's paths (valid until the next call
  // of either; routed again if new routes moved the stored ones).
  const std::vector<Flow>& flows() const { return flows_; }
  const StepLinkLoads& loads() const { return loads_; }
  std::span<const PathView> paths_of(size_t flow);

  const LinkLoad& result() const { return result_; }
  LinkLoad take_result() { return std::move(result_); }

 private:
  const Schedule& schedule_;
  const Placement& placement_;
  size_t elem_size_;
  RouteCache& routes_;
  LinkLoadOptions options_;
  StepLinkLoads loads_;
  std::vector<Flow> flows_;
  std::vector<PathView> flow_paths_, rerouted_;
  std::vector<uint32_t> flow_first_;  // flow i's paths: flow_paths_[first[i], first[i+1])
  size_t routes_version_ = 0;
  LinkLoad result_;
};

}  // namespace topocoll::sched
