// The EFLOPS closed-form HD order (HPCA'20, topology-aware halving-doubling), generalised
// to S = 2^a switches per group and E = 2^b ranks per switch (n = 2SE ranks).
//
// Upper-group virtual ranks (even popcount): switch = bits [0,a), slot = bits [a,a+b);
// lower-group ones: switch = bits [b,a+b), slot = bits [0,b). With a = b = m this is the
// paper's form (group = popcount(r) mod 2, upper switch = r & (2^m-1), lower switch =
// (r >> m) & (2^m-1)). Every XOR partner flips the parity, so every HD pair crosses the
// groups; for every step s the map from an upper v to its link (switch(v), switch(v ^ 2^s))
// is one-to-one when b <= a (the bits [0,a) and [b,a+b) cover v), so each directed
// inter-group link carries one flow; when b > a it carries E/S, which is also the bound
// (E flows leave a switch over S links every step).
#pragma once

#include <optional>
#include <vector>

#include "sched/placement.h"
#include "topo/topology.h"

namespace topocoll::sched {

struct ClosedFormOrder {
  std::vector<int> rank_of_virtual;
  // max(1, E/S): what every order of this shape that keeps HD pairs cross-group reaches.
  double bound = 0;
};

// nullopt unless the ranks fill a power-of-two BiGraph shape: a power-of-two count, the
// same power-of-two number S of used switches in both groups, the same power-of-two number
// E of ranks behind each, n = 2SE. Hosts are not looked at (the caller decides whether
// several ranks per host make a search better).
std::optional<ClosedFormOrder> eflops_closed_form(const topo::Topology& topology,
                                                  const Placement& placement);

}  // namespace topocoll::sched
