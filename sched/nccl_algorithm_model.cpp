#include "sched/nccl_algorithm_model.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "sched/cost_model.h"
#include "sched/link_load.h"
#include "sched/ring_order.h"
#include "sched/schedule.h"

namespace topocoll::sched {
namespace {

constexpr int kTree = kNcclTree, kRing = kNcclRing, kPat = kNcclPat;
constexpr int kLL = kNcclLL, kLL128 = kNcclLL128, kSimple = kNcclSimple;
constexpr int kNumAlgorithms = kNumNcclAlgorithms, kNumProtocols = kNumNcclProtocols;

// NCCL 2.28's default latency constants (src/graph/tuning.cc), microseconds.
constexpr double kBase[kNumAlgorithms][kNumProtocols] = {
    {6.8, 14.0, 8.4}, {6.6, 14.0, 8.4}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {8.0, 8.0, 8.0}};
constexpr double kNvlink[kNumAlgorithms][kNumProtocols] = {
    {.6, 1.25, 4.0}, {.6, 1.9, 3.4}, {0, 0, 3.7}, {0, 0, 2.8}, {0, 0, 25}, {0, 0, 25}, {0, 0, 4.0}};
constexpr double kNet[kNumAlgorithms][kNumProtocols] = {
    {5.0, 8.5, 14}, {2.7, 4.0, 14.0}, {0, 0, 31}, {0, 0, 30}, {0, 0, 18}, {0, 0, 20.9}, {0, 0, 14}};

// Fraction of the fabric's rate each protocol reaches (NCCL 2.28's bandwidth refinements).
double efficiency(int algo, int proto) {
  switch (algo) {
    case kRing: return proto == kLL ? 0.5 : proto == kLL128 ? 0.92 : 1.0;
    case kTree: return 0.92 * (proto == kLL ? 1.0 / 3.8 : proto == kLL128 ? 120.0 / 128.0 : 1.0);
    case kPat: return proto == kSimple ? 0.75 : 0.0;
    default: return 0.0;
  }
}

constexpr double kPatPerRankUs = 2.8;  // NCCL 2.28: PAT's "still a linear part" per rank

// One step of concurrent transfers between ranks: (src, dst, weight in units).
struct Transfer {
  int src, dst;
  int64_t units;
};

// Costs pattern steps with the project's cost model: every step a Schedule step whose sends
// carry `units` times a unit of bytes; us_per_byte is per byte of that unit. The step time
// is linear in the unit (fixed flow proportions), so two runs give both terms.
class PatternCoster {
 public:
  PatternCoster(const topo::Topology& topology, const Placement& placement)
      : placement_(placement), routes_(topology) {}

  PatternCost cost(const std::vector<Transfer>& step) {
    PatternCost c;
    if (step.empty()) return c;
    // Bandwidth term: a large unit, no latency; latency term: a one-byte unit with latency.
    constexpr int64_t kUnit = int64_t(1) << 20;
    CostParams params;
    params.alpha_us = 0;
    params.gamma_us_per_byte = 0;
    params.include_latency = false;
    double transfer = run(step, kUnit, params);
    c.us_per_byte = transfer / double(kUnit);
    params.include_latency = true;
    int64_t most_units = 0;
    for (const Transfer& t : step) most_units = std::max(most_units, t.units);
    c.latency_us = std::max(0.0, run(step, 1, params) - c.us_per_byte * double(most_units));
    return c;
  }

 private:
  // One Schedule step (schedule.h IR) whose sends are the pattern's transfers.
  double run(const std::vector<Transfer>& step, int64_t unit, const CostParams& params) {
    const int n = placement_.nranks();
    Schedule s;
    s.collective = Collective::AllGather;
    s.algo = "nccl-pattern";
    s.nranks = n;
    s.count = s.input_count = s.output_count = unit;
    s.programs.resize(size_t(n));
    for (const Transfer& t : step) {
      Op send;
      send.kind = OpKind::Send;
      send.peer = t.dst;
      send.count = t.units * unit;
      send.nsrc = 1;
      send.srcs[0] = BufRef{Buf::Input, 0};
      s.programs[size_t(t.src)].ops.push_back(send);
      Op recv;
      recv.kind = OpKind::Recv;
      recv.peer = t.src;
      recv.count = t.units * unit;
      recv.dst = BufRef{Buf::Output, 0};
      s.programs[size_t(t.dst)].ops.push_back(recv);
    }
    for (auto& prog : s.programs) prog.step_begin = {0, uint32_t(prog.ops.size())};
    return estimate_cost(s, placement_, 1, routes_, params).total_us;
  }

  const Placement& placement_;
  RouteCache routes_;
};

int parent_in_order(int node, int n, int top) {
  if (node == 0) return -1;
  if (node == top) return 0;
  int p = node;
  do {
    int bit = p & -p;
    p = (p ^ bit) | (bit << 1);
  } while (p >= n);
  return p;
}

int depth_of(const std::vector<int>& parent) {
  int worst = 0;
  for (size_t v = 0; v < parent.size(); ++v) {
    int d = 0;
    for (int p = parent[v]; p >= 0; p = parent[size_t(p)]) ++d;
    worst = std::max(worst, d);
  }
  return worst;
}

}  // namespace

const char* nccl_algorithm_name(int algo) {
  static const char* names[kNumAlgorithms] = {"Tree", "Ring", "CollNetDirect", "CollNetChain",
                                              "NVLS", "NVLSTree", "PAT"};
  return algo >= 0 && algo < kNumAlgorithms ? names[algo] : "Unknown";
}

const char* nccl_protocol_name(int proto) {
  static const char* names[kNumProtocols] = {"LL", "LL128", "Simple"};
  return proto >= 0 && proto < kNumProtocols ? names[proto] : "Unknown";
}

NcclLatencies default_nccl_latencies() {
  NcclLatencies l{};
  for (int a = 0; a < kNumAlgorithms; ++a)
    for (int p = 0; p < kNumProtocols; ++p) {
      l.base[a][p] = kBase[a][p];
      l.intra_host[a][p] = kNvlink[a][p];
      l.inter_host[a][p] = kNet[a][p];
    }
  return l;
}

std::vector<int> btree_parents(int n, int which_tree) {
  std::vector<int> parent(size_t(std::max(n, 0)), -1);
  if (n < 2) return parent;
  int top = 1;
  while (top * 2 <= n - 1) top *= 2;
  std::vector<int> tree0(static_cast<size_t>(n));
  for (int v = 0; v < n; ++v) tree0[size_t(v)] = parent_in_order(v, n, top);
  if (which_tree == 0) return tree0;
  // Tree 1 relabels tree 0 so that tree 0's inner nodes become leaves.
  auto relabel = [&](int v) { return n % 2 == 0 ? n - 1 - v : (v + 1) % n; };
  for (int v = 0; v < n; ++v) {
    int p = tree0[size_t(v)];
    parent[size_t(relabel(v))] = p < 0 ? -1 : relabel(p);
  }
  return parent;
}

NcclAlgorithmModel::NcclAlgorithmModel(const topo::Topology& topology,
                                       const Placement& placement, int nnodes,
                                       const NcclLatencies& latencies)
    : nranks_(placement.nranks()), nnodes_(std::max(nnodes, 1)), lat_(latencies) {
  const int n = nranks_;
  ranks_per_node_ = std::max(1, n / nnodes_);
  PatternCoster coster(topology, placement);

  // Ring in rank order (what NCCL builds): every position sends to the next one at once,
  // one message per step.
  const std::vector<int> ring = rank_order_ring(n);
  std::vector<Transfer> step;
  for (int i = 0; i < n; ++i) step.push_back({ring[size_t(i)], ring[size_t((i + 1) % n)], 1});
  ring_ = coster.cost(step);
  // Broadcast / reduce: the same ring cut open at the root (rank 0's view).
  step.pop_back();
  chain_ = coster.cost(step);

  // Tree: two trees over nodes, each carrying half of the buffer up and down at once
  // (NCCL pipelines reduce-up and broadcast-down); inside a node, ranks form a chain.
  // A node is represented in the trees by its first rank.
  step.clear();
  const int ppn = ranks_per_node_;
  for (int t = 0; t < 2; ++t) {
    std::vector<int> parent = btree_parents(nnodes_, t);
    tree_depth_ = std::max(tree_depth_, depth_of(parent));
    for (int v = 0; v < nnodes_; ++v) {
      if (parent[size_t(v)] >= 0) {
        step.push_back({v * ppn, parent[size_t(v)] * ppn, 1});
        step.push_back({parent[size_t(v)] * ppn, v * ppn, 1});
      }
      for (int i = 0; i + 1 < ppn; ++i) {
        step.push_back({v * ppn + i + 1, v * ppn + i, 1});
        step.push_back({v * ppn + i, v * ppn + i + 1, 1});
      }
    }
  }
  tree_ = coster.cost(step);
  tree_.us_per_byte /= 2;  // unit = the whole buffer; each tree carries half of it

  // PAT (one GPU per node): log steps, step s sends min(2^s, n-2^s) chunks 2^s ranks away.
  if (nnodes_ == n) {
    for (int dist = 1; dist < n; dist *= 2) {
      step.clear();
      int64_t chunks = std::min(dist, n - dist);
      for (int r = 0; r < n; ++r) step.push_back({r, (r + dist) % n, chunks});
      pat_steps_.push_back(coster.cost(step));
    }
  }
}

std::optional<double> NcclAlgorithmModel::predict_us(NcclCollective coll, int algo, int proto,
                                                     double nbytes, int num_pipe_ops) const {
  const std::optional<Terms> t = terms(coll, algo, proto, nbytes);
  if (!t) return std::nullopt;
  // NCCL 2.28 ncclTopoGetAlgoTime: `numPipeOps` collectives of a group share one launch; a
  // ring pays its latency once per op, the other algorithms once per batch of
  // NCCL_MAX_DEV_WORK_BATCH_COLLS (1024-byte batches of 96-byte ncclDevWorkColl: 10).
  const int ops = std::max(1, num_pipe_ops);
  const int latency_count = algo == kRing ? ops : (ops + kNcclMaxWorkBatchColls - 1) / kNcclMaxWorkBatchColls;
  return t->latency_us * latency_count + t->transfer_us;
}

std::optional<NcclAlgorithmModel::Terms> NcclAlgorithmModel::terms(NcclCollective coll, int algo, int proto,
                                                                   double nbytes) const {
  if (proto < 0 || proto >= kNumProtocols || nranks_ < 2 || !(nbytes >= 0)) return std::nullopt;
  const double eff = efficiency(algo, proto);
  if (eff <= 0) return std::nullopt;
  const double n = nranks_;
  const bool multi_node = nnodes_ > 1;

  if (algo == kRing) {
    // NCCL 2.28 src/graph/tuning.cc: with one GPU per node "latencies are fully exposed" and
    // a ring's network step costs the Tree's NET latency; on several nodes a step inside one
    // takes at least the network overhead (1 us, 3x for Simple; x86 Intel and NCCL's default).
    const double net_lat = lat_.inter_host[ranks_per_node_ == 1 ? kTree : kRing][proto];
    const double net_overhead = multi_node ? (proto == kSimple ? 3.0 : 1.0) * kNcclNetOverheadUs : 0.0;
    const double step_lat_inter = net_lat + ring_.latency_us;
    const double step_lat_intra =
        std::max(lat_.intra_host[kRing][proto], net_overhead) + (multi_node ? 0 : ring_.latency_us);
    double steps, inter_steps;
    switch (coll) {
      case NcclCollective::AllReduce:
        steps = 2 * (n - 1);
        inter_steps = multi_node ? 2.0 * (nnodes_ - 1) : 0;
        break;
      case NcclCollective::AllGather:
      case NcclCollective::ReduceScatter:
        steps = n - 1;
        inter_steps = multi_node ? nnodes_ - 1.0 : 0;
        break;
      case NcclCollective::Broadcast:
      case NcclCollective::Reduce:
        // A pipeline along the chain: fill once, then stream the buffer at the chain's rate.
        return Terms{lat_.base[kRing][proto] +
                         (multi_node ? lat_.inter_host[kRing][proto] : lat_.intra_host[kRing][proto]) +
                         (n - 1) * chain_.latency_us,
                     nbytes * chain_.us_per_byte / eff};
      default:
        return std::nullopt;
    }
    const double per_step_bytes = nbytes / n;
    return Terms{lat_.base[kRing][proto] + inter_steps * step_lat_inter + (steps - inter_steps) * step_lat_intra,
                 steps * per_step_bytes * ring_.us_per_byte / eff};
  }

  if (algo == kTree) {
    if (coll != NcclCollective::AllReduce) return std::nullopt;
    const double levels = 2.0 * ((ranks_per_node_ - 1) * lat_.intra_host[kTree][proto] +
                                 tree_depth_ * (lat_.inter_host[kTree][proto] + tree_.latency_us));
    return Terms{lat_.base[kTree][proto] + levels, nbytes * tree_.us_per_byte / eff};
  }

  if (algo == kPat) {
    if ((coll != NcclCollective::AllGather && coll != NcclCollective::ReduceScatter) ||
        pat_steps_.empty())
      return std::nullopt;
    const double chunk = nbytes / n;
    Terms t{lat_.base[kPat][proto] + n * kPatPerRankUs, 0};
    // NCCL charges a third of the network latency per log step; the fabric's own latency is
    // paid in full.
    for (const PatternCost& s : pat_steps_) {
      t.latency_us += lat_.inter_host[kTree][proto] / 3.5 + s.latency_us;
      t.transfer_us += chunk * s.us_per_byte / eff;
    }
    return t;
  }
  return std::nullopt;
}

}  // namespace topocoll::sched
