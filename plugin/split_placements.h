// Where the ranks of the communicators the interposer is splitting now sit (its
// topology-ordered splits, plugin/interposer/ring_comm.h). NCCL tells its tuner only a new
// communicator's rank and node counts (tuner_v5.h init), and a split that renumbers the
// ranks has the counts of its parent: tuned from the counts alone, it would be modelled in
// the parent's rank order, exactly the order the split exists to leave. The tuner (the same
// library, when NCCL_TUNER_PLUGIN names the preloaded one) looks here first. The counts are
// all NCCL gives it: a communicator of the same counts that another thread makes during the
// splits' ncclGroupEnd is taken for the split (PyTorch makes its communicators on one thread).
// Splits of the same counts and different placements are never registered at once once a
// tuner consults this: the interposer then makes them one placement at a time (ring_comm.cpp
// split_rounds), so a split's ranks see the same lookup whatever else each is splitting.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "topo/topology.h"

namespace topocoll::plugin {

class SplitPlacements {
 public:
  // Registers the splits' placements (endpoint of each split rank) for the scope's life:
  // the splits' ncclGroupEnd, where NCCL runs their inits, and with them the tuner's.
  class Scope {
   public:
    explicit Scope(std::vector<std::vector<int>> endpoint_of_rank);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    uint64_t id_ = 0;
  };

  struct Lookup {
    std::vector<int> endpoint_of_rank;  // the one placement that fits; empty when none or several
    bool ambiguous = false;             // several that differ fit: which one NCCL tunes is unknown
  };
  // The placement registered now with `nranks` ranks on `nnodes` hosts of `topology`. Once
  // called, consulted() is true for the rest of the process.
  static Lookup find(const topo::Topology& topology, std::size_t nranks, std::size_t nnodes);
  // How many hosts of `topology` the endpoints sit on, as the tuner counts nodes; nullopt when
  // one is not in it.
  static std::optional<std::size_t> host_count(const topo::Topology& topology, const std::vector<int>& endpoints);
  // Whether a tuner of this process has looked here: NCCL loaded topocoll's tuner and it
  // tunes. Before the interposer's first split, the user's own communicators were made, each
  // with a tuner init.
  static bool consulted();
  // Room for `more` placements, so registering them allocates nothing (between splits, where
  // running out of memory on one rank would leave its peers in a split it never makes).
  static void reserve(std::size_t more);
};

}  // namespace topocoll::plugin
