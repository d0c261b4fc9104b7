// The interposer's view of its TOPOCOLL_* variables (docs/usage.md, "Environment
// variables"): the values the process's Env (config/env.h) read and validated, turned into
// the interposer's own types. Nothing here reads the environment or warns.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "config/env.h"

namespace topocoll::plugin::interposer {

// What TOPOCOLL_ALGO forces. Auto lets the cost model choose per collective and size.
enum class AlgoChoice : uint8_t {
  Auto,          // cost model: topocoll schedule, topology-ordered NCCL, or NCCL
  Nccl,          // always NCCL on the user's communicator (topocoll only observes)
  NcclTopoRing,  // NCCL's own collective on a communicator split in topology ring order
  Schedule,      // one algorithm of sched/'s registry (InterposerConfig::schedule_algo)
};

// The route's name: auto, nccl, nccl-topo-ring; "schedule" for Schedule (whose name is the
// algorithm's).
std::string_view to_string(AlgoChoice);
// One of config/algorithm_names.h (what TOPOCOLL_ALGO accepts) as the interposer's choice:
// a route by its name, Schedule for a name of sched/algorithm_registry.h.
std::optional<AlgoChoice> parse_algo_choice(std::string_view text);

// When the topology-ordered communicator (nccl-topo-ring) is split from the user's.
enum class RingCommMode : uint8_t {
  Init,  // at communicator init, on every served communicator (the default)
  Lazy,  // at the first call routed to it
  Off,   // never: nccl-topo-ring is not used
};

struct InterposerConfig {
  bool enable = true;            // TOPOCOLL_ENABLE: 0 = pure forwarding to NCCL
  std::string topo_file;         // TOPOCOLL_TOPO_FILE: empty = no topology, pure forwarding
  AlgoChoice algo = AlgoChoice::Auto;  // TOPOCOLL_ALGO
  // TOPOCOLL_ALGO when algo is Schedule: a name of sched/algorithm_registry.h, meaning there
  // what it means to `topocoll plan --algo` (ring: rank order; ring-topo: topology order).
  std::string schedule_algo;
  int64_t min_bytes = 0;         // TOPOCOLL_MIN_BYTES: smaller calls go to NCCL
  int64_t max_bytes = INT64_MAX; // TOPOCOLL_MAX_BYTES: larger calls go to NCCL (unset = none)
  // TOPOCOLL_STEP_OVERHEAD_US: host+launch cost of one schedule step on the NCCL/CUDA
  // backend (one p2p group + kernel), added to the cost model's prediction in auto mode.
  double step_overhead_us = 8.0;
  // TOPOCOLL_PLAN_CACHE_BYTES: most memory one communicator's plans may hold (least
  // recently used out beyond it; plugin/interposer/call_route_cache.h).
  int64_t plan_cache_bytes = int64_t(256) << 20;
  // TOPOCOLL_AUTO_MARGIN: in auto, another route must be predicted this many times faster
  // than NCCL's best (>= 1).
  double auto_margin = 1.3;
  // TOPOCOLL_SCRATCH_MAX_BYTES: most device scratch one communicator's calls of one batch
  // may take; beyond it the calls go to NCCL (on every rank alike).
  int64_t scratch_max_bytes = int64_t(2) << 30;
  RingCommMode ring_comm = RingCommMode::Init;  // TOPOCOLL_RING_COMM: init | lazy | off
  // TOPOCOLL_STEP_TIMES: each schedule collective's step times are logged once read
  // (exec/step_timeline.h).
  bool step_times = false;
  // TOPOCOLL_INIT_TIMEOUT_S: how long a new communicator's init exchange and ready vote wait
  // for the peers (0 = no limit; rank_exchange.h).
  int64_t init_timeout_s = 600;
  // TOPOCOLL_VOTE_TIMEOUT_S: how long a served call's vote (scratch growth, a split made at
  // first use) waits for every rank (0: no limit). Above PyTorch's own timeout by default: a
  // peer may legitimately come late (a checkpoint between steps).
  int64_t vote_timeout_s = 1800;
  // NCCL_CHECK_POINTERS (NCCL's: any integer but 0): buffers NCCL would refuse go to NCCL.
  bool check_pointers = false;
  // The settings that decide which NCCL operations a served call issues, as one canonical
  // text (TOPOCOLL_ALGO, _MIN_BYTES, _MAX_BYTES, _STEP_OVERHEAD_US, _AUTO_MARGIN,
  // _SCRATCH_MAX_BYTES, _RING_COMM, _PIPELINE_CHUNK_BYTES, _PIPELINE_MAX_CHUNKS), and its
  // 64-bit FNV-1a: every rank of a served communicator must run with the same, or one would
  // send a call to NCCL while its peers run a schedule (rank_identity.h compares them).
  std::string routing_settings;
  uint64_t routing_fingerprint = 0;
};

InterposerConfig interposer_config_from(const config::Env& env);
// The process's: from plugin/process_context.h's Env, on first use.
const InterposerConfig& interposer_config();

}  // namespace topocoll::plugin::interposer
