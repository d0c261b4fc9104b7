#include "plugin/interposer/comm_lifecycle.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <exception>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "exec/nccl_backend.h"
#include "plugin/interposer/route_decision.h"
#include "plugin/interposer/comm_state.h"
#include "plugin/interposer/cuda_probe.h"
#include "plugin/interposer/device_guard.h"
#include "plugin/interposer/device_scratch.h"
#include "plugin/interposer/interposer.h"
#include "plugin/interposer/interposer_config.h"
#include "plugin/interposer/rank_exchange.h"
#include "plugin/interposer/release_fence.h"
#include "plugin/interposer/rank_identity.h"
#include "plugin/interposer/ring_comm.h"
#include "plugin/interposer/step_times_log.h"
#include "plugin/log.h"
#include "plugin/process_context.h"

namespace topocoll::plugin::interposer {
namespace {

// NCCL_COMM_BLOCKING is NCCL's default for configs that leave `blocking` undefined.
bool default_blocking() { return process_context().env.nccl_comm_blocking != "0"; }

bool config_blocking(const ncclConfig_t* config, ncclComm_t parent) {
  // NCCL_COMM_BLOCKING=0|1 overrides every config, a split's inherited one too (NCCL 2.28
  // init.cc envConfigOverride, after parseCommConfig / copyCommConfig).
  const std::string& forced = process_context().env.nccl_comm_blocking;
  if (forced == "0" || forced == "1") return forced == "1";
  if (config && config->blocking != NCCL_CONFIG_UNDEF_INT) return config->blocking != 0;
  if (!config && parent) {
    // A split without a config inherits the parent's.
    // Shared: an abort of the parent from another thread may release its state meanwhile.
    if (const std::shared_ptr<CommState> p = CommRegistry::instance().share(parent)) return p->blocking;
  }
  return default_blocking();
}

// Whether this build and configuration run the init exchange at all. It must come out the
// same on every rank (same environment, same build), or a rank would skip a collective its
// peers run: documented in docs/usage.md.
bool exchange_wanted() {
  const InterposerConfig& cfg = interposer_config();
  return cfg.enable && !cfg.topo_file.empty();
}

// The communicator's state, registered unserved at once: what allocates happens here, before
// topocoll's init collectives, where a failure is shared with the peers (the exchange's
// "cannot serve"); after them, serving it (serve_registered) allocates nothing.
std::shared_ptr<CommState> register_comm(ncclComm_t comm, bool blocking) {
  auto st = std::make_shared<CommState>();
  st->comm = comm;
  st->blocking = blocking;
  pncclCommCount(comm, &st->nranks);
  pncclCommUserRank(comm, &st->rank);
  pncclCommCuDevice(comm, &st->device);
  CommRegistry::instance().insert(st);
  return st;
}

// A communicator NCCL may not answer queries on yet (a non-blocking one still being made,
// one whose init failed in the user's group): registered unserved as is, never asked its
// size, rank or device (NCCL 2.28's queries warn and fail on a communicator in progress,
// init.cc ncclCommEnsureReady; a failed blocking init leaves them unset). Its blocking mode
// is kept, so a split of it with no config inherits it (config_blocking).
void register_unqueried(ncclComm_t comm, bool blocking, const char* reason) {
  auto st = std::make_shared<CommState>();
  st->comm = comm;
  st->blocking = blocking;
  st->fallback_reason = reason;
  CommRegistry::instance().insert(std::move(st));
}

// A registered communicator stays with NCCL; `reason` is kept for the logs when memory allows.
void leave_unserved(CommState& st, const std::string& reason) noexcept {
  try {
    st.fallback_reason = reason;
  } catch (...) {  // out of memory: unserved all the same, without the reason
  }
}

// The state a served communicator needs on this rank (topology, placement, scratch);
// throws on a local failure (an allocation), which the ready vote then shares.
void prepare_service(CommState& st, ServiceAgreement& a) {
  st.topology = process_context().topology;
  st.placement = std::move(a.placement);
  st.min_compute_capability = a.min_compute_capability;
  st.scratch = std::make_unique<DeviceScratch>(st.device);
  st.vote_cell = VoteCell::create(st.device);
  // Only pipelined steps use it; without one they run unoverlapped (same bytes either way).
  st.overlap_lane = exec::OverlapLane::create(st.device);
  if (!st.overlap_lane)
    TC_WARN("communicator %p: no CUDA stream for overlapping reduces with transfers; "
            "pipelined steps run without overlap", static_cast<void*>(st.comm));
  if (interposer_config().step_times)
    st.step_timeline = make_logged_step_timeline(st.comm, st.rank, st.nranks);
  st.routes.set_capacity_bytes(std::size_t(std::max<int64_t>(0, interposer_config().plan_cache_bytes)));
  if (LocalServiceCheck check = local_service_check()) check(st);
}

// Frees what prepare_service set up: the communicator goes to NCCL.
void unprepare_service(CommState& st) noexcept {
  st.scratch.reset();
  st.vote_cell.reset();
  st.overlap_lane.reset();
  st.step_timeline.reset();
  st.placement = sched::Placement{};
  st.min_compute_capability = 0;
  st.topology.reset();
}

// An exception (host memory) inside topocoll's init collectives or the split after them:
// which of them this rank joined, and what its peers decided, it cannot know, so every
// communicator of the init is reported failed (out of step, as when it cannot join them),
// the user's init call fails too (the caller rethrows), and the user aborts them.
// Allocates nothing.
void init_collective_failed(const std::vector<std::shared_ptr<CommState>>& states, const char* where) noexcept {
  for (const auto& st : states)
    if (st) {
      st->out_of_step = ncclSystemError;
      // A served one keeps its state: its calls stop at out_of_step before they use it.
      if (!st->served) unprepare_service(*st);
      TC_WARN("communicator %p rank %d: failed during topocoll's %s; the communicator is out of step "
              "with its peers and ncclCommGetAsyncError reports ncclSystemError for it: abort it",
              static_cast<void*>(st->comm), st->rank, where);
    }
}

CommState* serve_registered(CommState& st) noexcept {
  CommRegistry::instance().set_served(st);
  TC_INFO(NCCL_INIT, "communicator %p rank %d/%d served on topology '%s' (endpoint %d)",
          static_cast<void*>(st.comm), st.rank, st.nranks, st.topology->name().c_str(),
          st.placement.endpoint_of_rank[std::size_t(st.rank)]);
  return &st;
}

// The topology-ordered split at init (TOPOCOLL_RING_COMM=init): every rank of a served
// communicator reaches this alike, so the collective split matches. Off: never split, its
// route stays on the user's communicator.
void split_ring_comms_at_init(const std::vector<CommState*>& served) {
  const RingCommMode mode = interposer_config().ring_comm;
  if (mode == RingCommMode::Off) {
    for (CommState* st : served) st->ring_comm_failed = true;
    return;
  }
  if (mode == RingCommMode::Init) create_ring_comms(served, WaitLimit::after(interposer_config().init_timeout_s));
}

// cudaDeviceGetPCIBusId's form, "" when CUDA cannot say (host_gpu_index then keeps the
// ordinal).
std::string pci_bus_id(int device) {
  char id[32] = {};
  if (device < 0 || cudaDeviceGetPCIBusId(id, int(sizeof id), device) != cudaSuccess) {
    cudaGetLastError();
    return "";
  }
  return id;
}

// major * 10 + minor, as NCCL keeps comm->compCap; 0 when CUDA cannot say (the
// communicator's minimum is then 0 too, and NCCL's refusals below sm_90 are kept).
int compute_capability(int device) {
  int major = 0, minor = 0;
  if (device < 0 || quietly(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device)) != cudaSuccess ||
      quietly(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device)) != cudaSuccess)
    return 0;
  return major * 10 + minor;
}

}  // namespace

// Runs the init exchange for communicators NCCL has finished creating. Every blocking,
// multi-rank communicator here joins the exchange on every rank whatever fails on this one
// before it (its peers would otherwise wait in NCCL forever): a failure only turns its
// record into a "cannot serve" one (mark_unserved).
void finish_inits(std::vector<PendingInit>& pending) {
  if (pending.empty()) return;
  // Taken out first: if anything below throws, no communicator is left pending to be
  // exchanged later, at a point its peers would not match (a hang or a mismatched call).
  std::vector<PendingInit> inits;
  inits.swap(pending);
  std::vector<std::shared_ptr<CommState>> states;
  std::vector<IdentityExchange> batch;
  // Reserved up front so that adding an entry below cannot throw.
  states.reserve(inits.size());
  batch.reserve(inits.size());
  const ProcessContext& context = process_context();
  if (!context.topology_error.empty())
    TC_ONCE(TC_WARN("%s; every communicator falls back to NCCL", context.topology_error.c_str()));
  TC_ONCE(TC_INFO(NCCL_INIT, "routing settings, which every rank of a served communicator must share: %s",
                  interposer_config().routing_settings.c_str()));
  for (const PendingInit& p : inits) {
    IdentityExchange x;
    x.comm = p.comm;
    std::shared_ptr<CommState> st;
    try {
      st = register_comm(p.comm, p.blocking);
      st->config = p.config;
      if (st->nranks < 2) {
        leave_unserved(*st, "single-rank communicator");
        continue;
      }
      x.nranks = st->nranks;
      x.rank = st->rank;
      x.device = st->device;
      x.mine = make_identity(host_gpu_index(st->device, context.env.cuda_visible_devices, pci_bus_id(st->device)),
                             context, true, compute_capability(st->device), interposer_config().routing_fingerprint);
    } catch (...) {
      // Same skip rule as above, from NCCL's own answers (no allocation).
      x.nranks = 0;
      pncclCommCount(p.comm, &x.nranks);
      pncclCommUserRank(p.comm, &x.rank);
      pncclCommCuDevice(p.comm, &x.device);
      if (x.nranks < 2) continue;
      x.mine = RankIdentity{};
      mark_unserved(x.mine, "host error before exchange");
      // A state registered before the error stays: it is the one init reports failed if the
      // collectives below fail too.
      TC_WARN("communicator %p: topocoll init failed before the init exchange; it joins the "
              "exchange as unable to serve and every rank falls back to NCCL",
              static_cast<void*>(p.comm));
    }
    batch.push_back(std::move(x));
    states.push_back(std::move(st));
  }
  // Sized before the exchange: nothing between it and the ready vote allocates outside a
  // try, so a rank that joined the one always joins the other.
  std::vector<ServiceAgreement> agreed(batch.size());
  std::vector<ReadyVote> votes(batch.size());
  std::vector<std::string> local_errors(batch.size());
  std::vector<ReadyVote> voting;
  std::vector<CommState*> served_now;
  served_now.reserve(batch.size());
  std::vector<std::size_t> voter_of;
  voting.reserve(batch.size());
  voter_of.reserve(batch.size());
  // One limit for the exchange and the vote after it: a peer whose NCCL init failed never
  // joins, and nothing else (no watchdog) would end this wait inside the user's init.
  const WaitLimit limit = WaitLimit::after(interposer_config().init_timeout_s);
  for (IdentityExchange& x : batch) x.limit = limit;
  try {
    exchange_identities(batch);
  } catch (...) {
    init_collective_failed(states, "init exchange");
    throw;  // and the user's init fails (after_create)
  }

  // Decided from the same records on every rank; then prepared locally, which may fail on
  // one rank only, so every rank that joined the exchange votes on it (agree_ready).
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const IdentityExchange& x = batch[i];
    votes[i].comm = x.comm;
    votes[i].device = x.device;
    votes[i].limit = limit;
    try {
      if (!states[i]) states[i] = register_comm(x.comm, true);
      if (!x.error.empty()) {
        local_errors[i] = x.error;
        continue;
      }
      if (!x.prepare_error.empty())
        TC_WARN("communicator %p rank %d: %s; joined the init exchange as unable to serve, so "
                "every rank falls back to NCCL", static_cast<void*>(x.comm), x.rank,
                x.prepare_error.c_str());
      // A record marked by mark_unserved makes the agreement fall back on every rank.
      agreed[i] = agree_on_service(x.all, context.topology.get());
      if (!agreed[i].served) continue;
      prepare_service(*states[i], agreed[i]);
      votes[i].ready = 1;
    } catch (const std::exception& e) {
      if (states[i]) unprepare_service(*states[i]);
      try {
        local_errors[i] = std::string("topocoll init failed after the init exchange: ") + e.what();
      } catch (...) {  // out of memory for the reason: it votes 0 all the same
      }
    }
  }
  // Only communicators whose rank joined the allgather vote: its peers joined it too, and a
  // rank that could not read the records back cannot know whether they agreed to serve, so
  // the vote runs whatever the agreement said (one more 4-byte collective per init).
  for (std::size_t i = 0; i < batch.size(); ++i)
    if (batch[i].joined) {
      voting.push_back(std::move(votes[i]));
      voter_of.push_back(i);
    }
  try {
    agree_ready(voting);
  } catch (...) {
    init_collective_failed(states, "ready vote");
    throw;
  }
  for (std::size_t k = 0; k < voting.size(); ++k) votes[voter_of[k]] = std::move(voting[k]);

  for (std::size_t i = 0; i < batch.size(); ++i) try {
    const IdentityExchange& x = batch[i];
    std::shared_ptr<CommState>& st = states[i];
    if (!st) {  // registering threw: NCCL keeps the communicator (registered unserved, or not at all)
      TC_WARN("communicator %p: %s; falls back to NCCL", static_cast<void*>(x.comm),
              local_errors[i].c_str());
      continue;
    }
    if (x.gave_up || votes[i].gave_up) {
      // topocoll's collective stays enqueued on the communicator, before anything the user
      // runs there: reported as the communicator's error, which PyTorch's watchdog reads.
      st->out_of_step = ncclSystemError;
      const std::string& why = x.gave_up ? x.error : votes[i].error;
      TC_WARN("communicator %p rank %d: %s; it falls back to NCCL and ncclCommGetAsyncError reports "
              "ncclSystemError for it: abort it", static_cast<void*>(x.comm), x.rank, why.c_str());
      unprepare_service(*st);
      leave_unserved(*st, why);
      continue;
    }
    if (!votes[i].joined || !votes[i].known) {
      // Out of step with its peers on this communicator: they wait in topocoll's init
      // collective this rank never joined (the exchange's allgather or the vote's allreduce:
      // no device memory for it, or NCCL refused it) up to their TOPOCOLL_INIT_TIMEOUT_S,
      // and this rank's next call would meet that collective in NCCL; or it voted to serve
      // and could not read the outcome back, while its peers may serve. Reported as the
      // communicator's error, so NCCL refuses its calls and the user aborts it.
      st->out_of_step = ncclSystemError;
      const std::string why = !local_errors[i].empty() ? local_errors[i]
                              : !votes[i].error.empty() ? votes[i].error
                                                        : "it did not join topocoll's init collectives";
      TC_WARN("communicator %p rank %d: %s; the communicator is out of step with its peers and "
              "ncclCommGetAsyncError reports ncclSystemError for it: abort it",
              static_cast<void*>(x.comm), x.rank, why.c_str());
      unprepare_service(*st);
      leave_unserved(*st, why);
      continue;
    }
    if (!local_errors[i].empty() || !votes[i].error.empty()) {
      const std::string& why = local_errors[i].empty() ? votes[i].error : local_errors[i];
      TC_WARN("communicator %p rank %d: %s; falls back to NCCL", static_cast<void*>(x.comm),
              x.rank, why.c_str());
      unprepare_service(*st);
      leave_unserved(*st, why);
      continue;
    }
    if (!agreed[i].served) {
      // Every rank reaches the same verdict; rank 0 says why once per communicator.
      if (st->rank == 0) TC_WARN("communicator %p (%d ranks) falls back to NCCL: %s",
                                 static_cast<void*>(st->comm), st->nranks, agreed[i].reason.c_str());
      leave_unserved(*st, agreed[i].reason);
      continue;
    }
    if (!votes[i].all_ready) {
      const char* why = "a rank could not complete topocoll init after the agreement";
      if (st->rank == 0) TC_WARN("communicator %p (%d ranks) falls back to NCCL: %s",
                                 static_cast<void*>(st->comm), st->nranks, why);
      unprepare_service(*st);
      leave_unserved(*st, why);
      continue;
    }
    served_now.push_back(serve_registered(*st));  // reserved: neither allocates
  } catch (const std::exception& e) {
    TC_WARN("topocoll init of communicator %p failed after the ready vote: %s",
            static_cast<void*>(batch[i].comm), e.what());
  }
  try {
    split_ring_comms_at_init(served_now);
  } catch (...) {
    init_collective_failed(states, "topology-ordered split");
    throw;
  }
}

LocalServiceCheck& local_service_check() {
  static LocalServiceCheck check = nullptr;
  return check;
}

bool child_created_in_group(ncclComm_t* handle, const ncclConfig_t* config, ncclComm_t parent) {
  ThreadGroup& g = thread_group();
  if (!g.depth.inside() || !handle) return false;
  if (!interposer_enabled()) return true;
  PendingChild child;
  child.handle = handle;
  if (config) child.config.emplace(*config);
  child.parent = parent;
  g.children.push_back(std::move(child));
  return true;
}

void children_created(std::vector<PendingChild>& pending, ncclResult_t group_result) {
  std::vector<PendingChild> children;
  children.swap(pending);
  for (const PendingChild& c : children) {
    // NULL: NCCL_SPLIT_NOCOLOR, a failed group, or a non-blocking child still being made.
    const ncclComm_t comm = __atomic_load_n(c.handle, __ATOMIC_ACQUIRE);
    if (!comm) continue;
    if (group_result == ncclInProgress || created_by_nonblocking_parent(c.parent)) {
      // As outside a group (nccl_entry.cpp after_child_create): a child of a non-blocking
      // parent, or of one topocoll does not know (a child of such a parent whose handle NCCL
      // wrote late, registered on some ranks only), is left to NCCL on every rank alike,
      // never exchanged where the parent is unknown and skipped where it is known.
      comm_created_in_progress(comm);
    } else if (group_result == ncclSuccess) {
      // Queued only: group_end exchanges the group's inits and children in one batch. One
      // batch per child would differ between ranks where a child is NCCL_SPLIT_NOCOLOR on
      // some (rank A: {init, c2}; rank B: {init, c1}, then {c2}), and A, waiting for c2's
      // exchange, and B, waiting for the init's vote behind it, would wait for each other.
      const std::optional<ncclConfig_t> config = c.config ? std::optional(c.config->user()) : std::nullopt;
      comm_created(comm, config ? &*config : nullptr, c.parent, /*finish_now=*/false);
    }
  }
}

void comm_created(ncclComm_t comm, const ncclConfig_t* config, ncclComm_t parent, bool finish_now) {
  if (!comm || !interposer_enabled()) return;
  const bool blocking = config_blocking(config, parent);
  if (!blocking) {
    // Decided alike on every rank (same config), so no exchange: nobody waits. Inside a
    // group NCCL makes it only at the group's end, in progress. (Only blocking ones reach
    // finish_inits.)
    comm_created_in_progress(comm);
    return;
  }
  if (!exchange_wanted()) {
    // Inside a group NCCL makes the communicator only at the outermost end: until then its
    // size, rank and device read as zeros (device 0, where a later release would set it).
    if (thread_group().depth.inside())
      register_unqueried(comm, blocking, "no topology configured");
    else
      leave_unserved(*register_comm(comm, blocking), "no topology configured");
    return;
  }
  // NCCL gives a split without a config its parent's (init.cc copyCommConfig).
  CommConfigCopy user_config;
  if (config) {
    user_config = CommConfigCopy(*config);
  } else if (parent) {
    if (const std::shared_ptr<CommState> p = CommRegistry::instance().share(parent)) user_config = p->config;
  }
  ThreadGroup& g = thread_group();
  g.inits.push_back({comm, blocking, std::move(user_config)});
  // Inside a group the communicator is usable only after the outermost ncclGroupEnd.
  if (!g.depth.inside() && finish_now) finish_inits(g.inits);
}

void comm_created_in_progress(ncclComm_t comm) {
  if (!comm || !interposer_enabled()) return;
  // Only a non-blocking init returns ncclInProgress, and NCCL may not answer queries on the
  // communicator yet: registered as is, so a split of it with no config inherits
  // non-blocking (config_blocking) and falls back like it, never NCCL_COMM_BLOCKING.
  TC_FALLBACK_ONCE("non-blocking communicators (config blocking=0) fall back to NCCL");
  register_unqueried(comm, false, "non-blocking communicator");
}

void inits_failed_in_group(std::vector<PendingInit>& pending, ncclResult_t group_result) {
  std::vector<PendingInit> inits;
  inits.swap(pending);
  if (inits.empty()) return;
  // NCCL's failed group end left these communicators half made (a blocking init's failure
  // shows only in its initState, not in ncclCommGetAsyncError): no exchange runs on them.
  TC_WARN("ncclGroupEnd failed (%s): the %zu communicator(s) created in the group are left to NCCL unexchanged",
          pncclGetErrorString(group_result), inits.size());
  for (const PendingInit& p : inits) register_unqueried(p.comm, p.blocking, "its init's group failed");
}

void comms_created_in_simulated_group(std::vector<PendingInit>& pending_inits,
                                      std::vector<PendingChild>& pending_children, ncclResult_t group_result) {
  std::vector<PendingInit> inits;
  std::vector<PendingChild> children;
  inits.swap(pending_inits);
  children.swap(pending_children);
  const char* reason = "created in a group ended by ncclGroupSimulateEnd";
  if (group_result == ncclSuccess || group_result == ncclInProgress)
    for (const PendingInit& p : inits) register_unqueried(p.comm, p.blocking, reason);
  else if (!inits.empty())
    inits_failed_in_group(inits, group_result);
  for (const PendingChild& c : children)
    if (const ncclComm_t comm = __atomic_load_n(c.handle, __ATOMIC_ACQUIRE)) {
      const std::optional<ncclConfig_t> config = c.config ? std::optional(c.config->user()) : std::nullopt;
      register_unqueried(comm, config_blocking(config ? &*config : nullptr, c.parent), reason);
    }
  if (!inits.empty() || !children.empty())
    TC_ONCE(TC_INFO(NCCL_INIT, "communicators created in a group ended by ncclGroupSimulateEnd are left to NCCL"));
}

bool created_by_nonblocking_parent(ncclComm_t parent) {
  const std::string& forced = process_context().env.nccl_comm_blocking;
  if (forced == "0" || forced == "1") return forced == "0";
  const std::shared_ptr<CommState> p = CommRegistry::instance().share(parent);
  // Unknown to topocoll while it runs: a child of a non-blocking communicator whose handle
  // NCCL had not written yet when its split returned (so never registered), whose own
  // children NCCL makes in its own thread too.
  return !p || !p->blocking;
}

void comms_created_locally(const ncclComm_t* comms, int ndev, const int* devlist) {
  if (!interposer_enabled() || ndev < 1) return;
  if (thread_group().depth.inside()) {
    // NCCL makes them only at the user's outermost group end (init.cc ncclCommInitAll queues
    // its inits in the group): until then they have no size, rank or device to read.
    TC_FALLBACK_ONCE("ncclCommInitAll inside a group: its communicators fall back to NCCL");
    for (int i = 0; i < ndev; ++i) register_unqueried(comms[i], default_blocking(), "ncclCommInitAll inside a group");
    return;
  }
  if (!exchange_wanted()) {
    for (int i = 0; i < ndev; ++i) leave_unserved(*register_comm(comms[i], true), "no topology configured");
    return;
  }
  const ProcessContext& context = process_context();
  std::vector<RankIdentity> all(static_cast<std::size_t>(ndev));
  for (int i = 0; i < ndev; ++i) {
    const int device = devlist ? devlist[i] : i;
    all[std::size_t(i)] =
        make_identity(host_gpu_index(device, context.env.cuda_visible_devices, pci_bus_id(device)), context, true,
                      compute_capability(device), interposer_config().routing_fingerprint);
  }
  // All ranks are in this process: no exchange, and a local failure of one is known to
  // all, so every communicator of the clique falls back together.
  std::vector<std::shared_ptr<CommState>> states;
  for (int i = 0; i < ndev; ++i) states.push_back(register_comm(comms[i], default_blocking()));
  std::string why;
  if (!states[0]->blocking) {
    // ncclCommInitAll takes NCCL's default config: NCCL_COMM_BLOCKING=0 makes it
    // non-blocking, which topocoll does not serve (same rule as finish_inits).
    TC_FALLBACK_ONCE("non-blocking communicators (config blocking=0) fall back to NCCL");
    why = "non-blocking communicator";
  } else if (ndev < 2) {
    why = "single-rank communicator";
  } else {
    for (auto& st : states) {
      ServiceAgreement a = agree_on_service(all, context.topology.get());
      if (!a.served) {
        TC_WARN("communicator %p (%d ranks) falls back to NCCL: %s",
                static_cast<void*>(st->comm), st->nranks, a.reason.c_str());
        why = a.reason;
        break;
      }
      try {
        prepare_service(*st, a);
      } catch (const std::exception& e) {
        why = std::string("topocoll init of a rank failed: ") + e.what();
        TC_WARN("ncclCommInitAll communicator %p: %s; every rank falls back to NCCL",
                static_cast<void*>(st->comm), why.c_str());
        break;
      }
    }
  }
  std::vector<CommState*> served_now;
  served_now.reserve(states.size());
  for (auto& st : states) {
    if (why.empty()) {
      served_now.push_back(serve_registered(*st));
    } else {
      unprepare_service(*st);
      leave_unserved(*st, why);
    }
  }
  split_ring_comms_at_init(served_now);
}

ncclResult_t comm_finalize(ncclComm_t comm) {
  const std::shared_ptr<CommState> st = CommRegistry::instance().share(comm);
  const ncclComm_t ring = st ? st->ring_comm.load() : nullptr;
  if (!ring) return ncclSuccess;
  // NCCL refuses to finalize a revoked communicator (its revoke finalized it) or one that
  // reports an error, and the refusal would fail the user's group around the call: such a
  // split is left to the release (aborted there), the user's finalize goes on.
  ncclResult_t failed = ncclSuccess;
  if (st->revoked.load() || pncclCommGetAsyncError(ring, &failed) != ncclSuccess || failed != ncclSuccess)
    return ncclSuccess;
  return pncclCommFinalize(ring);
}

void note_finalize_called(ncclComm_t comm) noexcept {
  try {
    if (std::shared_ptr<CommState> st = CommRegistry::instance().share(comm)) st->finalize_called.store(true);
  } catch (...) {  // a lookup that could not run: a later revoke is NCCL's to refuse anyway
  }
}

ncclResult_t comm_release(ncclComm_t comm, bool abort,
                          ncclResult_t (*nccl_release)(ncclComm_t)) noexcept {
  std::shared_ptr<CommState> st;
  bool calls_left = true;  // no served call is inside st any more
  // A revoked topology-ordered split sharing the user's abort flag that reports an error:
  // aborted only after the user's release (release_ring_comm; NCCL counts the shared
  // resources and the flag, so either may go first).
  ncclComm_t abort_after_user = nullptr, abort_unused_after_user = nullptr;
  try {
    // Calls still queued in this thread's open group (an abort during error recovery) go
    // with the communicator.
    ThreadGroup& g = thread_group();
    std::erase_if(g.collectives, [&](const PendingCollective& p) { return p.call.comm == comm; });
    std::erase_if(g.inits, [&](const PendingInit& p) { return p.comm == comm; });
    st = CommRegistry::instance().remove(comm);
    // Served calls on other threads leave before NCCL frees what they use (release_fence.h).
    if (st) calls_left = fence_served_calls(*st, abort, kReleaseWaitsForCalls, kStoppedCallsLeave);
    if (ncclComm_t ring = st ? take_ring_comm_for_release(*st) : nullptr)
      abort_after_user = release_ring_comm(
          *st, ring, abort, st->config.splits_share_resources(process_context().env.nccl_comm_split_share_resources));
    // A split kept because NCCL would not destroy it (ring_comm.cpp): it shares this
    // communicator's abort flag, and goes with it: at an abort now, at a destroy once the
    // destroy has flushed the user's kernels (it ran none of its own).
    if (ncclComm_t unused = st ? st->unused_split.exchange(nullptr) : nullptr) {
      if (abort) pncclCommAbort(unused);
      else abort_unused_after_user = unused;
    }
  } catch (const std::exception& e) {
    TC_WARN("topocoll release of comm %p failed: %s", static_cast<void*>(comm), e.what());
  }
  // NCCL's own destroy/abort first: an abort ends the user's communicator's kernels, so the
  // scratch below is freed only when nothing can still be waiting on the device for it.
  const ncclResult_t r = nccl_release(comm);
  for (const ncclComm_t split : {abort_after_user, abort_unused_after_user}) {
    if (!split) continue;
    CurrentDeviceGuard device_guard;
    device_guard.use(st->device);
    if (const ncclResult_t a = pncclCommAbort(split); a != ncclSuccess)
      TC_WARN("comm %p: aborting its topology-ordered communicator %p failed: %s", static_cast<void*>(comm),
              static_cast<void*>(split), pncclGetErrorString(a));
  }
  if (st) {
    CurrentDeviceGuard device_guard;
    device_guard.use(st->device);
    // The last step times are read now (a destroy: its collectives end); an abort's may
    // never, and are dropped unread, as are those of a call still inside past the fence's
    // bound (the timeline is its thread's while it runs: it goes with the call's reference).
    if (st->step_timeline && !abort && calls_left) st->step_timeline->drain();
    // Drops the registry's reference: the scratch is freed (stream-ordered) now, or by a
    // call still running on another thread when it ends.
    st.reset();
  }
  return r;
}

}  // namespace topocoll::plugin::interposer
