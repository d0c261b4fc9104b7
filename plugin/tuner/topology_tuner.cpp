#include "plugin/tuner/topology_tuner.h"

#include <bit>
#include <cstdio>
#include <mutex>
#include <new>
#include <optional>
#include <set>
#include <string>

#include "config/value_grammar.h"
#include "plugin/log.h"
#include "plugin/split_placements.h"
#include "plugin/process_context.h"
#include "plugin/tuner/communicator_fit.h"
#include "plugin/tuner/cost_table.h"

namespace topocoll::plugin::tuner {
namespace {

// Outcome messages of init are logged once per distinct text; each names the communicator's
// shape, so a job creating many communicators says it once per shape and setting.
bool first_time(const std::string& message) {
  static std::mutex mutex;
  static std::set<std::string> seen;
  std::lock_guard<std::mutex> lock(mutex);
  if (seen.size() > 256) seen.clear();
  return seen.insert(message).second;
}

void info_once(const std::string& message) {
  if (first_time(message)) TC_INFO(NCCL_INIT | NCCL_TUNING, "tuner: %s", message.c_str());
}

void warn_once(const std::string& message) {
  if (first_time(message)) TC_WARN("tuner: %s", message.c_str());
}

int size_bucket(size_t nbytes) { return nbytes == 0 ? 0 : int(std::bit_width(nbytes)) - 1; }

std::string format_bytes(double b) {
  char buf[32];
  if (b >= double(1 << 30)) std::snprintf(buf, sizeof buf, "%gG", b / double(1 << 30));
  else if (b >= double(1 << 20)) std::snprintf(buf, sizeof buf, "%gM", b / double(1 << 20));
  else if (b >= 1024) std::snprintf(buf, sizeof buf, "%gK", b / 1024);
  else std::snprintf(buf, sizeof buf, "%g", b);
  return buf;
}

std::string entry_name(int algo, int proto) {
  return std::string(sched::nccl_algorithm_name(algo)) + "/" + sched::nccl_protocol_name(proto);
}

}  // namespace

std::unique_ptr<TopologyTuner> TopologyTuner::create(size_t nranks, size_t nnodes,
                                                     const ncclTunerConstants_v5_t* constants,
                                                     const RanksPerNode* per_node, ncclResult_t* refusal) noexcept {
  if (refusal) *refusal = ncclSystemError;
  std::unique_ptr<TopologyTuner> tuner;
  try {
    tuner.reset(new TopologyTuner());
  } catch (...) {
    return nullptr;
  }
  std::string comm, topo_file;
  auto about = [&](const std::string& what) { return "communicator of " + comm + ": " + what; };
  try {
    comm = std::to_string(nranks) + " ranks on " + std::to_string(nnodes) + " nodes";
    // Read once per process, shared with the other faces (plugin/process_context.h).
    const ProcessContext& context = process_context();
    const config::Env& env = context.env;
    if (!env.tuner) {
      info_once(about("disabled by TOPOCOLL_TUNER=0; NCCL's cost tables are left as NCCL makes them"));
      return tuner;
    }
    // NCCL reads these itself and they win: honour them by changing nothing.
    const std::string nccl_override = !env.nccl_algo.empty()    ? "NCCL_ALGO=" + env.nccl_algo
                                      : !env.nccl_proto.empty() ? "NCCL_PROTO=" + env.nccl_proto
                                                                : "";
    if (!nccl_override.empty()) {
      info_once(about(nccl_override + " is set; honouring it, the tuner changes nothing"));
      return tuner;
    }
    if (env.topo_file.empty()) {
      info_once(about("TOPOCOLL_TOPO_FILE is not set; the tuner changes nothing"));
      return tuner;
    }
    topo_file = env.topo_file;
    if (!context.topology) {
      warn_once(about(context.topology_error +
                      "; refused: this rank would keep NCCL's cost tables while ranks that read the file tune "
                      "theirs, and ranks that pick different algorithms hang (fix the file on this host, or "
                      "set TOPOCOLL_TUNER=0 on every rank)"));
      if (refusal) *refusal = ncclInvalidUsage;
      return nullptr;
    }
    // Modelling NCCL's rings and trees over every rank costs minutes at 65,536 ranks, per
    // communicator: beyond this budget the tuner steps aside.
    constexpr size_t kMaxTunedRanks = 4096;
    if (nranks > kMaxTunedRanks) {
      warn_once(about("more than the " + std::to_string(kMaxTunedRanks) +
                      " ranks the tuner models within its init budget; NCCL's cost tables are left as NCCL makes them"));
      return tuner;
    }
    if (per_node) {
      if (const std::string why = uneven_nodes(*per_node); !why.empty()) {
        info_once(about(why + "; the tuner changes nothing"));
        return tuner;
      }
    }
    std::shared_ptr<const topo::Topology> topology = context.topology;
    // A job-host list that is wrong leaves every communicator untuned, the interposer's splits
    // too: the same on every rank, and said whatever communicators the job makes.
    const std::vector<std::string> job_hosts = parse_job_hosts(env.tuner_hosts);
    if (!env.tuner_hosts.empty() && job_hosts.empty()) {
      // Set, so the launcher meant a numbering: none is not "unset" (the whole topology).
      warn_once(about("TOPOCOLL_TUNER_HOSTS=" + config::quoted_value(env.tuner_hosts) +
                      " names no host: the ranks' hosts are unknown; the tuner changes nothing"));
      return tuner;
    }
    CommunicatorFit fit = fit_communicator(*topology, nranks, nnodes, job_hosts);
    if (!fit.hosts_error.empty()) {
      warn_once(about(fit.hosts_error + ": the ranks' hosts are unknown; the tuner changes nothing"));
      return tuner;
    }
    // A topology-ordered split the interposer is making now: its counts are its parent's,
    // its rank order is not (split_placements.h).
    const SplitPlacements::Lookup split = SplitPlacements::find(*topology, nranks, nnodes);
    if (split.ambiguous) {
      info_once(about("one of several topology-ordered splits the interposer is making at once, which one is "
                      "unknown; the tuner changes nothing"));
      return tuner;
    }
    if (!split.endpoint_of_rank.empty()) {
      fit.placement = sched::explicit_endpoints(*topology, split.endpoint_of_rank);
      comm += ", the interposer's topology-ordered split";
    }
    if (!fit.placement) {
      info_once(about("topology " + topo_file + " does not describe it (" + fit.reason +
                      "); the tuner changes nothing"));
      return tuner;
    }
    sched::NcclLatencies latencies =
        constants ? nccl_latencies_from(*constants) : sched::default_nccl_latencies();
    tuner->model_.emplace(*topology, *fit.placement, int(nnodes), latencies);
    tuner->topology_ = topology;
    const auto& m = *tuner->model_;
    char line[512];
    std::snprintf(line, sizeof line,
                  "tuning NCCL's algorithms for %s on topology \"%s\" (%s): rank-order ring "
                  "%.3g us/MB per hop, double binary tree %.3g us/MB (depth %d)%s",
                  comm.c_str(), topology->name().c_str(), topo_file.c_str(),
                  m.ring().us_per_byte * 1e6, m.tree().us_per_byte * 1e6, m.tree_depth(),
                  m.pat_steps().empty() ? "" : ", PAT modelled");
    info_once(line);
  } catch (const std::bad_alloc&) {
    // The peers build the same model with memory to spare: this rank alone tuning nothing
    // would make NCCL pick other algorithms here than there. NCCL's init fails instead.
    try {
      warn_once(about("out of host memory while building the tuner's model; NCCL's init is failed "
                      "(a rank left untuned would choose other algorithms than its peers)"));
    } catch (...) {
    }
    return nullptr;
  } catch (const std::exception& e) {
    tuner->model_.reset();
    tuner->topology_.reset();
    try {
      warn_once(about("TOPOCOLL_TOPO_FILE=" + topo_file + ": " + e.what() + "; the tuner changes nothing"));
    } catch (...) {  // out of memory while reporting: stay silent rather than fail NCCL's init
    }
  } catch (...) {
    tuner->model_.reset();
    tuner->topology_.reset();
    try {
      warn_once(about("TOPOCOLL_TOPO_FILE=" + topo_file + ": unknown error; the tuner changes nothing"));
    } catch (...) {
    }
  }
  return tuner;
}

ncclResult_t TopologyTuner::init_context(size_t nranks, size_t nnodes, const ncclTunerConstants_v5_t* constants,
                                         void** context, const RanksPerNode* per_node) noexcept {
  ncclResult_t refusal = ncclSuccess;
  *context = create(nranks, nnodes, constants, per_node, &refusal).release();
  return *context ? ncclSuccess : refusal;
}

bool TopologyTuner::first_in_bucket(ncclFunc_t coll, size_t nbytes) {
  if (coll < 0 || coll >= ncclNumFuncs) return false;
  uint64_t bit = uint64_t(1) << size_bucket(nbytes);
  return !(logged_buckets_[size_t(coll)].fetch_or(bit, std::memory_order_relaxed) & bit);
}

void TopologyTuner::log_decision(ncclFunc_t coll, size_t nbytes, const CostTable& table,
                                 const char* nccl_pick) const {
  auto pick = table.best();
  std::string others;
  for (int a = 0; a < table.num_algo(); ++a)
    for (int p = 0; p < table.num_proto(); ++p) {
      if (!table.enabled(a, p) || (pick && pick->first == a && pick->second == p)) continue;
      char item[64];
      std::snprintf(item, sizeof item, "%s%s %.1f", others.empty() ? "" : ", ",
                    entry_name(a, p).c_str(), double(table.at(a, p)));
      others += item;
    }
  const double bucket = double(size_t(1) << size_bucket(nbytes));
  TC_INFO(NCCL_TUNING, "tuner: %s %sB-%sB (%zu B): %s %.1f us on the topology (NCCL alone: %s)%s%s",
          collective_name(coll), format_bytes(bucket).c_str(), format_bytes(2 * bucket).c_str(),
          nbytes, pick ? entry_name(pick->first, pick->second).c_str() : "none",
          pick ? double(table.at(pick->first, pick->second)) : 0.0, nccl_pick,
          others.empty() ? "" : "; others (us): ", others.c_str());
}

ncclResult_t TopologyTuner::tune(ncclFunc_t coll, size_t nbytes, float** table, int num_algo, int num_proto,
                                 int num_pipe_ops) noexcept {
  if (!model_ || !table || num_algo <= 0 || num_proto <= 0) return ncclSuccess;
  CostTable t(table, num_algo, num_proto);
  const auto before = t.best();
  int changed = 0;
  try {
    // Every prediction is made before the first entry is written: a throw leaves NCCL's
    // table as it was.
    changed = apply_model(t, *model_, coll, double(nbytes), num_pipe_ops);
  } catch (...) {
    // Out of memory here only: NCCL's own table on this rank and the tuned one on its peers
    // would pick different algorithms. NCCL fails the call on this rank instead.
    TC_WARN("tuner: out of host memory while tuning %s of %zu bytes; the call fails here rather than "
            "run another algorithm than its peers", collective_name(coll), nbytes);
    return ncclSystemError;
  }
  try {
    if (changed > 0 && first_in_bucket(coll, nbytes))
      log_decision(coll, nbytes, t, before ? entry_name(before->first, before->second).c_str() : "none");
  } catch (...) {  // logging alone (allocation): the table is already the tuned one
  }
  return ncclSuccess;
}

ncclResult_t TopologyTuner::choose(ncclFunc_t coll, size_t nbytes, bool collnet_support, bool nvls_support,
                                   int num_pipe_ops, int* algorithm, int* protocol) noexcept {
  if (!model_ || !algorithm || !protocol || collnet_support || nvls_support) return ncclSuccess;
  // Candidates: what NCCL 2.21, the one release that calls a v2 tuner itself, runs on every
  // machine and takes from the tuner unchecked (v2.21.5 src/enqueue.cc getTunerInfo skips
  // its own choice): Ring, and Tree for allreduce, in LL and Simple. Not PAT (2.21 has 6
  // algorithms: index 6 reads past its tables), not LL128 (2.21 enables it only on
  // NVLink-connected Volta..Hopper: "may cause silent data corruption" elsewhere), and never
  // Tree for another collective (2.21 maps a non-Ring AllGather to its NVLS kernel).
  float table[kNumAlgorithms][kNumProtocols];
  CostTable t(reinterpret_cast<float**>(table), kNumAlgorithms, kNumProtocols);
  std::optional<std::pair<int, int>> pick;
  try {
    for (int a = 0; a < kNumAlgorithms; ++a)
      for (int p = 0; p < kNumProtocols; ++p) {
        const bool candidate = (a == NCCL_ALGO_RING || (a == NCCL_ALGO_TREE && coll == ncclFuncAllReduce)) &&
                               (p == NCCL_PROTO_LL || p == NCCL_PROTO_SIMPLE);
        table[a][p] = candidate && predict_us(*model_, coll, a, p, double(nbytes)) ? 0.0f
                                                                                  : float(NCCL_ALGO_PROTO_IGNORE);
      }
    if (apply_model(t, *model_, coll, double(nbytes), num_pipe_ops) == 0) return ncclSuccess;
    pick = t.best();
  } catch (...) {
    // As in tune(): this rank alone leaving the choice to NCCL would run another algorithm
    // than its peers.
    TC_WARN("tuner: out of host memory while tuning %s of %zu bytes; the call fails here rather than "
            "run another algorithm than its peers", collective_name(coll), nbytes);
    return ncclSystemError;
  }
  if (!pick) return ncclSuccess;
  *algorithm = pick->first;
  *protocol = pick->second;
  try {
    if (first_in_bucket(coll, nbytes)) log_decision(coll, nbytes, t, "not shown to a v2 tuner");
  } catch (...) {  // logging alone
  }
  return ncclSuccess;
}

}  // namespace topocoll::plugin::tuner
