// The algorithm registry: every schedule algorithm topocoll offers registers itself once, in
// its own file under sched/algorithms/, with TOPOCOLL_ALGORITHM (as tools/command.h registers
// CLI commands). An entry holds what is true of the algorithm everywhere: its name, the
// collectives it has a schedule for, which of them `auto` weighs it for, why it refuses a
// shape, the rank order it lays its positions on, and its builder.
//
// Every list iterates it: the planner (sched/plan.h: --algo and auto's candidates),
// topology-free generation (sched/generator.h: `bench` without --topo, the test suites), the
// interposer's TOPOCOLL_ALGO (config/algorithm_names.h: the registry plus the interposer's
// NCCL routes), `accept`, the CLI's help texts and `topocoll algorithms`, and
// docs/plan-format.md's table (a test checks it lists exactly these).
//
// A name means one thing everywhere: `ring` is the ring in rank order (what NCCL builds),
// `ring-topo` the ring in topology order, in `plan`, `bench`, `simulate`, `accept` and
// TOPOCOLL_ALGO alike. Without a topology there is no order to choose: every algorithm then
// runs in rank order (and hier, hier-hd with one rank per group).
//
// Adding an algorithm is one file, sched/algorithms/<name>.cpp, and its row in
// docs/plan-format.md; the parameterised suites (tests/exec/generator_list.h, the registry
// sweep in tests/sched) run it with no test edit. Registration happens at static
// initialisation, so nothing may read the registry before main (or before the plugin is
// loaded); sched/CMakeLists.txt links the algorithm files whole, since nothing names them.
#pragma once

#include <climits>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sched/link_load.h"
#include "sched/pattern_load.h"
#include "sched/placement.h"
#include "sched/schedule.h"
#include "topo/topology.h"

namespace topocoll::sched {

// A set of collectives.
class CollectiveSet {
 public:
  constexpr CollectiveSet() = default;
  constexpr CollectiveSet(std::initializer_list<Collective> collectives) {
    for (Collective c : collectives) bits_ |= bit(c);
  }
  constexpr bool contains(Collective c) const { return (bits_ & bit(c)) != 0; }
  constexpr bool empty() const { return bits_ == 0; }
  constexpr bool operator==(const CollectiveSet&) const = default;

 private:
  static constexpr uint8_t bit(Collective c) { return uint8_t(1u << unsigned(c)); }
  uint8_t bits_ = 0;
};

inline constexpr CollectiveSet kEveryCollective = {Collective::AllReduce, Collective::ReduceScatter,
                                                   Collective::AllGather, Collective::AllToAll};

// What an algorithm may refuse: a collective on nranks ranks, placed on a topology or on none.
struct AlgorithmShape {
  Collective collective = Collective::AllReduce;
  int nranks = 1;
  const topo::Topology* topology = nullptr;  // none: bench without --topo, the generator suites
  const Placement* placement = nullptr;      // rank -> endpoint, set with `topology`
};

// What an algorithm's order is chosen from: the planner's topology and placement.
struct OrderInput {
  const topo::Topology& topology;
  const Placement& placement;
  Collective collective;
  int64_t count;       // elements, as the builder gets them
  double bytes;        // nccl-tests size: weighs the steps of an order search
  RouteCache& routes;  // shared with the analysis that follows
};

struct BuildInput {
  AlgorithmShape shape;
  int64_t count = 0;
  std::span<const int> order{};  // position / virtual rank -> communicator rank; empty: identity
};

struct Algorithm {
  std::string_view name;
  std::string_view summary;   // one line: what it is and how it orders ranks (help texts)
  int list_position = 0;      // its place in every list; auto's ties go to the earlier
  CollectiveSet collectives;  // the collectives it has a schedule for
  CollectiveSet auto_collectives;  // those `auto` weighs it for (a subset)
  int auto_max_ranks = INT_MAX;    // ... up to this many ranks
  // Why it does not apply to a shape whose collective it has (rank limits, the topology's
  // kind or grouping), or "". Null: it applies to every such shape.
  std::string (*refuses)(const AlgorithmShape& shape) = nullptr;
  // The order it lays its positions on, given a topology. Null: rank order.
  RankOrder (*order)(const OrderInput& input) = nullptr;
  // Called only for a shape the registry does not refuse.
  Schedule (*build)(const BuildInput& input) = nullptr;
};

// TOPOCOLL_ALGORITHM's registration. Throws std::logic_error for a second entry of a name or
// of a list position, or one without a builder or with auto collectives it has not.
bool register_algorithm(const Algorithm& algorithm);

// Every registered algorithm, in list order.
std::span<const Algorithm> algorithms();
// Null when no algorithm has that name.
const Algorithm* find_algorithm(std::string_view name);
// The names, comma-separated, in list order: all, or those with a schedule for `collective`.
std::string algorithm_list();
std::string algorithm_list(Collective collective);

// "AR, RS, AG, A2A": the abbreviations (sched/schedule.h) of a set, in collective order; "-"
// for none (docs/plan-format.md's table, `topocoll algorithms`).
std::string abbreviations(CollectiveSet collectives);

// Why `algorithm` does not apply to `shape` ("" when it does): no schedule for the
// collective (naming those that have one), fewer than one rank, or its own rule.
std::string refusal(const Algorithm& algorithm, const AlgorithmShape& shape);
// Whether `auto` weighs it for `shape`, given that it applies; the reason when not.
std::string auto_refusal(const Algorithm& algorithm, const AlgorithmShape& shape);
// Its schedule, named after it. Throws std::invalid_argument "<name>: <refusal>" for a shape
// it refuses, or naming a bad count or order.
Schedule build_schedule(const Algorithm& algorithm, const BuildInput& input);

}  // namespace topocoll::sched

#define TOPOCOLL_ALGORITHM_CONCAT_INNER(a, b) a##b
#define TOPOCOLL_ALGORITHM_CONCAT(a, b) TOPOCOLL_ALGORITHM_CONCAT_INNER(a, b)
#define TOPOCOLL_ALGORITHM(...)                                                                \
  [[maybe_unused]] static const bool TOPOCOLL_ALGORITHM_CONCAT(topocoll_algorithm_, __COUNTER__) = \
      ::topocoll::sched::register_algorithm(::topocoll::sched::Algorithm __VA_ARGS__)
