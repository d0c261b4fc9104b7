#include "plugin/interposer/interposer.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <memory>
#include <string>
#include <vector>

#include "exec/engine.h"
#include "exec/nccl_backend.h"
#include "kernels/datatype.h"
#include "plugin/interposer/collective_planner.h"
#include "plugin/interposer/collective_queue.h"
#include "plugin/interposer/comm_state.h"
#include "plugin/interposer/cuda_probe.h"
#include "plugin/interposer/device_guard.h"
#include "plugin/interposer/device_scratch.h"
#include "plugin/interposer/interposer_params.h"
#include "plugin/interposer/rank_exchange.h"
#include "plugin/interposer/rank_identity.h"
#include "plugin/log.h"

namespace topocoll::plugin::interposer {
namespace {

using sched::Collective;

// A served collective waiting for the outermost ncclGroupEnd.
struct PendingCollective {
  CommState* state = nullptr;
  CollectiveCall call;
  std::shared_ptr<const Plan> plan;
};

// Communicators created inside a user group finish their topocoll init after it closes.
struct PendingInit {
  ncclComm_t comm = nullptr;
  bool blocking = true;
};

struct ThreadGroup {
  GroupDepth depth;
  std::vector<PendingInit> inits;
  std::vector<PendingCollective> collectives;
};

ThreadGroup& thread_group() {
  thread_local ThreadGroup group;
  return group;
}

const char* collective_name(Collective c) {
  switch (c) {
    case Collective::AllReduce: return "allreduce";
    case Collective::ReduceScatter: return "reducescatter";
    case Collective::AllGather: return "allgather";
    case Collective::AllToAll: return "alltoall";
  }
  return "?";
}

// NCCL_COMM_BLOCKING is NCCL's default for configs that leave `blocking` undefined.
bool default_blocking() {
  const char* v = std::getenv("NCCL_COMM_BLOCKING");
  return !(v && std::strcmp(v, "0") == 0);
}

bool config_blocking(const ncclConfig_t* config, ncclComm_t parent) {
  if (config && config->blocking != NCCL_CONFIG_UNDEF_INT) return config->blocking != 0;
  if (!config && parent) {
    // A split without a config inherits the parent's.
    if (CommState* p = CommRegistry::instance().find(parent)) return p->blocking;
  }
  return default_blocking();
}

// One WARN per process for each distinct fallback reason site.
#define TC_FALLBACK_ONCE(fmt, ...) TC_ONCE(TC_WARN(fmt, ##__VA_ARGS__))

// Whether this build and configuration run the init exchange at all. It must come out the
// same on every rank (same environment, same build), or a rank would skip a collective its
// peers run: documented in docs/usage.md.
bool exchange_wanted() {
  const InterposerConfig& cfg = interposer_config();
  return cfg.enable && !cfg.topo_file.empty();
}

std::unique_ptr<CommState> describe_comm(ncclComm_t comm, bool blocking) {
  auto st = std::make_unique<CommState>();
  st->comm = comm;
  st->blocking = blocking;
  pncclCommCount(comm, &st->nranks);
  pncclCommUserRank(comm, &st->rank);
  pncclCommCuDevice(comm, &st->device);
  return st;
}

void register_unserved(std::unique_ptr<CommState> st, std::string reason) {
  st->served = false;
  st->fallback_reason = std::move(reason);
  CommRegistry::instance().insert(std::move(st));
}

// The state a served communicator needs on this rank (topology, placement, scratch);
// throws on a local failure (an allocation), which the ready vote then shares.
void prepare_service(CommState& st, ServiceAgreement& a) {
  st.topology = configured_topology().topology;
  st.placement = std::move(a.placement);
  st.scratch = std::make_unique<DeviceScratch>(st.device);
  st.plans.set_capacity_bytes(std::size_t(std::max<int64_t>(0, interposer_config().plan_cache_bytes)));
  if (LocalServiceCheck check = local_service_check()) check(st);
}

// Frees what prepare_service set up: the communicator goes to NCCL.
void unprepare_service(CommState& st) noexcept {
  st.scratch.reset();
  st.placement = sched::Placement{};
  st.topology.reset();
}

void register_served(std::unique_ptr<CommState> st) {
  st->served = true;
  TC_INFO(NCCL_INIT, "communicator %p rank %d/%d served on topology '%s' (endpoint %d)",
          static_cast<void*>(st->comm), st->rank, st->nranks, st->topology->name().c_str(),
          st->placement.endpoint_of_rank[std::size_t(st->rank)]);
  CommRegistry::instance().insert(std::move(st));
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
  std::vector<std::unique_ptr<CommState>> states;
  std::vector<IdentityExchange> batch;
  // Reserved up front so that adding an entry below cannot throw.
  states.reserve(inits.size());
  batch.reserve(inits.size());
  const ConfiguredTopology& topo = configured_topology();
  if (!topo.error.empty()) TC_ONCE(TC_WARN("%s; every communicator falls back to NCCL", topo.error.c_str()));
  for (const PendingInit& p : inits) {
    IdentityExchange x;
    x.comm = p.comm;
    std::unique_ptr<CommState> st;
    try {
      st = describe_comm(p.comm, p.blocking);
      if (!p.blocking) {
        // Decided identically on every rank (same config), so no exchange: nobody waits.
        TC_FALLBACK_ONCE("non-blocking communicators (config blocking=0) fall back to NCCL");
        register_unserved(std::move(st), "non-blocking communicator");
        continue;
      }
      if (st->nranks < 2) {
        register_unserved(std::move(st), "single-rank communicator");
        continue;
      }
      x.nranks = st->nranks;
      x.rank = st->rank;
      x.device = st->device;
      x.mine = make_identity(local_host_name(), host_gpu_index(st->device, pci_bus_id(st->device)),
                             topo, true);
    } catch (...) {
      // Same skip rules as above, from NCCL's own answers (no allocation).
      if (!p.blocking) continue;
      x.nranks = 0;
      pncclCommCount(p.comm, &x.nranks);
      pncclCommUserRank(p.comm, &x.rank);
      pncclCommCuDevice(p.comm, &x.device);
      if (x.nranks < 2) continue;
      x.mine = RankIdentity{};
      mark_unserved(x.mine, "host error in topocoll init");
      st.reset();
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
  std::vector<std::size_t> voter_of;
  voting.reserve(batch.size());
  voter_of.reserve(batch.size());
  exchange_identities(batch);

  // Decided from the same records on every rank; then prepared locally, which may fail on
  // one rank only, so every rank that joined the exchange votes on it (agree_ready).
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const IdentityExchange& x = batch[i];
    votes[i].comm = x.comm;
    votes[i].device = x.device;
    try {
      if (!states[i]) states[i] = describe_comm(x.comm, true);
      if (!x.error.empty()) {
        local_errors[i] = x.error;
        continue;
      }
      if (!x.prepare_error.empty())
        TC_WARN("communicator %p rank %d: %s; joined the init exchange as unable to serve, so "
                "every rank falls back to NCCL", static_cast<void*>(x.comm), x.rank,
                x.prepare_error.c_str());
      // A record marked by mark_unserved makes the agreement fall back on every rank.
      agreed[i] = agree_on_service(x.all, topo.topology.get());
      if (!agreed[i].served) continue;
      prepare_service(*states[i], agreed[i]);
      votes[i].ready = 1;
    } catch (const std::exception& e) {
      local_errors[i] = std::string("topocoll init failed after the init exchange: ") + e.what();
      if (states[i]) unprepare_service(*states[i]);
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
  agree_ready(voting);
  for (std::size_t k = 0; k < voting.size(); ++k) votes[voter_of[k]] = std::move(voting[k]);

  for (std::size_t i = 0; i < batch.size(); ++i) try {
    const IdentityExchange& x = batch[i];
    std::unique_ptr<CommState>& st = states[i];
    if (!st) {  // describe_comm threw: NCCL keeps the communicator, unregistered
      TC_WARN("communicator %p: %s; falls back to NCCL", static_cast<void*>(x.comm),
              local_errors[i].c_str());
      continue;
    }
    if (!local_errors[i].empty() || (x.joined && !votes[i].error.empty())) {
      const std::string& why = local_errors[i].empty() ? votes[i].error : local_errors[i];
      TC_WARN("communicator %p rank %d: %s; falls back to NCCL", static_cast<void*>(x.comm),
              x.rank, why.c_str());
      unprepare_service(*st);
      register_unserved(std::move(st), why);
      continue;
    }
    if (!agreed[i].served) {
      // Every rank reaches the same verdict; rank 0 says why once per communicator.
      if (st->rank == 0) TC_WARN("communicator %p (%d ranks) falls back to NCCL: %s",
                                 static_cast<void*>(st->comm), st->nranks, agreed[i].reason.c_str());
      register_unserved(std::move(st), agreed[i].reason);
      continue;
    }
    if (!votes[i].all_ready) {
      const char* why = "a rank could not complete topocoll init after the agreement";
      if (st->rank == 0) TC_WARN("communicator %p (%d ranks) falls back to NCCL: %s",
                                 static_cast<void*>(st->comm), st->nranks, why);
      unprepare_service(*st);
      register_unserved(std::move(st), why);
      continue;
    }
    register_served(std::move(st));
  } catch (const std::exception& e) {
    TC_WARN("topocoll init of communicator %p failed after the ready vote: %s",
            static_cast<void*>(batch[i].comm), e.what());
  }
}

bool op_supported(ncclRedOp_t op) { return int(op) >= 0 && int(op) < int(ncclNumOps); }
// Both NCCL's header and topocoll's kernels must know the type: a newer nccl.h may number
// types the kernels have no size or reduction for (elem would be 0).
bool type_supported(ncclDataType_t t) {
  return int(t) >= 0 && int(t) < int(ncclNumTypes) && kernels::is_valid(kernels::DataType(int(t)));
}

// Logs the decision for (collective, power-of-two size) once per communicator.
void log_decision(CommState& st, const CollectiveCall& call, std::size_t bytes, const Plan& plan) {
  const int bucket = bytes <= 1 ? 0 : std::min(63, int(std::bit_width(bytes - 1)));
  const uint64_t bit = uint64_t(1) << bucket;
  auto& word = st.logged_buckets[std::size_t(call.collective)];
  // A plain load first: the read-modify-write (a locked instruction) only the first time.
  if (word.load(std::memory_order_relaxed) & bit) return;
  if (word.fetch_or(bit, std::memory_order_relaxed) & bit) return;
  TC_INFO(NCCL_COLL | NCCL_TUNING, "comm %p rank %d/%d %s up to %llu B -> %s (%s)",
          static_cast<void*>(st.comm), st.rank, st.nranks, collective_name(call.collective),
          static_cast<unsigned long long>(uint64_t(1) << bucket), plan.algo.c_str(),
          plan.reason.c_str());
}

// Aliasing NCCL does not define for the call (partial overlap, in-place all-to-all) goes to
// NCCL unchanged, so its behaviour stays NCCL's.
bool buffers_understood(const CollectiveCall& call, const CommState& st, std::size_t elem) {
  const char* in = static_cast<const char*>(call.sendbuff);
  const char* out = static_cast<const char*>(call.recvbuff);
  const std::size_t n = std::size_t(st.nranks);
  std::size_t in_bytes = call.count * elem, out_bytes = call.count * elem;
  switch (call.collective) {
    case Collective::AllReduce: if (in == out) return true; break;
    case Collective::ReduceScatter:
      in_bytes *= n;
      if (in + std::size_t(st.rank) * call.count * elem == out) return true;
      break;
    case Collective::AllGather:
      out_bytes *= n;
      if (out + std::size_t(st.rank) * call.count * elem == in) return true;
      break;
    case Collective::AllToAll:
      in_bytes *= n;
      out_bytes *= n;
      break;
  }
  const bool disjoint = in + in_bytes <= out || out + out_bytes <= in;
  return disjoint;
}

std::shared_ptr<const Plan> plan_for(CommState& st, const CollectiveCall& call, std::size_t elem) {
  const PlanKey key{call.collective, int(call.datatype), int64_t(call.count)};
  if (auto plan = st.plans.find(key)) return plan;
  PlanInput in;
  in.topology = st.topology.get();
  in.placement = &st.placement;
  in.rank = st.rank;
  in.key = key;
  in.elem_bytes = elem;
  return st.plans.insert(key, make_plan(in, interposer_config()));
}

// The communicator split from the user's in topology ring order, created on first use.
// `ring_comms` of a batch are created in one NCCL group (one thread may drive several ranks).
void create_ring_comms(const std::vector<CommState*>& states) {
  std::vector<CommState*> todo;
  for (CommState* st : states)
    if (!st->ring_comm && !st->ring_comm_failed) todo.push_back(st);
  if (todo.empty()) return;
  std::vector<ncclComm_t> made(todo.size(), nullptr);
  std::vector<ncclResult_t> results(todo.size(), ncclSuccess);
  ncclResult_t r = pncclGroupStart();
  for (std::size_t i = 0; i < todo.size() && r == ncclSuccess; ++i) {
    CommState* st = todo[i];
    st->ring_order = sched::topology_aware_ring(*st->topology, st->placement);
    // A permutation of 0..n-1 is the identity exactly when it is sorted.
    st->ring_permutes = !std::is_sorted(st->ring_order.begin(), st->ring_order.end());
    int key = 0;
    for (std::size_t pos = 0; pos < st->ring_order.size(); ++pos)
      if (st->ring_order[pos] == st->rank) key = int(pos);
    results[i] = pncclCommSplit(st->comm, 0, key, &made[i], nullptr);
  }
  const ncclResult_t end = pncclGroupEnd();
  for (std::size_t i = 0; i < todo.size(); ++i) {
    CommState* st = todo[i];
    if (r != ncclSuccess || end != ncclSuccess || results[i] != ncclSuccess || !made[i]) {
      st->ring_comm_failed = true;
      TC_WARN("comm %p: topology-ordered communicator could not be created; using NCCL on the "
              "user's communicator", static_cast<void*>(st->comm));
      continue;
    }
    st->ring_comm = made[i];
    TC_INFO(NCCL_INIT, "comm %p rank %d: topology-ordered communicator %p created",
            static_cast<void*>(st->comm), st->rank, static_cast<void*>(made[i]));
  }
}

// Scratch for one batch of calls: call i gets needs[i] bytes (none when 0), a region of
// its communicator's scratch of its own (calls of one communicator in one batch run at the
// same time, so they cannot share), ordered after the previous batch's uses. Null regions
// and false when an allocation fails (WARNed).
bool reserve_batch_scratch(const std::vector<PendingCollective>& calls,
                           const std::vector<std::size_t>& needs, CurrentDeviceGuard& device_guard,
                           std::vector<char*>& regions) {
  regions.assign(calls.size(), nullptr);
  std::vector<std::pair<CommState*, std::size_t>> totals;
  std::vector<std::size_t> offsets(calls.size(), 0);
  for (std::size_t i = 0; i < calls.size(); ++i) {
    if (needs[i] == 0) continue;
    CommState* st = calls[i].state;
    auto it = std::find_if(totals.begin(), totals.end(), [&](auto& t) { return t.first == st; });
    if (it == totals.end()) it = totals.insert(totals.end(), {st, 0});
    offsets[i] = it->second;
    it->second += (needs[i] + 255) / 256 * 256;
  }
  for (auto& [st, total] : totals) {
    if (!st->scratch) throw std::logic_error("served communicator without scratch");
    device_guard.use(st->device);
    bool captured = false;
    for (const PendingCollective& c : calls)
      if (c.state == st && stream_capturing(c.call.stream)) captured = true;
    char* base = static_cast<char*>(st->scratch->reserve(total, captured));
    if (!base) {
      TC_WARN("comm %p: cannot allocate %zu bytes of scratch", static_cast<void*>(st->comm), total);
      return false;
    }
    for (std::size_t i = 0; i < calls.size(); ++i)
      if (needs[i] > 0 && calls[i].state == st) regions[i] = base + offsets[i];
  }
  for (std::size_t i = 0; i < calls.size(); ++i) {
    if (needs[i] == 0) continue;
    device_guard.use(calls[i].state->device);
    calls[i].state->scratch->order_after_previous(calls[i].call.stream);
  }
  return true;
}

// After a batch: every communicator whose scratch a call used records the calls' streams.
void mark_batch_scratch_used(const std::vector<PendingCollective>& calls,
                             const std::vector<std::size_t>& needs, CurrentDeviceGuard& device_guard) {
  std::vector<CommState*> done;
  for (std::size_t i = 0; i < calls.size(); ++i) {
    CommState* st = calls[i].state;
    if (needs[i] == 0 || std::find(done.begin(), done.end(), st) != done.end()) continue;
    done.push_back(st);
    std::vector<cudaStream_t> streams;
    for (std::size_t k = 0; k < calls.size(); ++k)
      if (needs[k] > 0 && calls[k].state == st) streams.push_back(calls[k].call.stream);
    device_guard.use(st->device);
    st->scratch->mark_used(streams);
  }
}

// Moves `nranks` blocks of `block` bytes between the user's rank order and ring_comm's:
// to_ring: ring block j = user block ring_order[j] (before a reduce-scatter);
// otherwise: user block ring_order[j] = ring block j (after an allgather). Runs of
// consecutive ranks are one copy each.
cudaError_t permute_blocks(const std::vector<int>& ring_order, bool to_ring, char* user, char* ring,
                           std::size_t block, cudaStream_t stream) {
  const std::size_t n = ring_order.size();
  for (std::size_t j = 0; j < n;) {
    std::size_t run = 1;
    while (j + run < n && ring_order[j + run] == ring_order[j] + int(run)) ++run;
    char* u = user + std::size_t(ring_order[j]) * block;
    char* r = ring + j * block;
    const cudaError_t e = cudaMemcpyAsync(to_ring ? r : u, to_ring ? u : r, run * block,
                                          cudaMemcpyDeviceToDevice, stream);
    if (e != cudaSuccess) return e;
    j += run;
  }
  return cudaSuccess;
}

// NCCL's collective on the topology-ordered communicator. Allreduce runs there as called;
// reduce-scatter and allgather number their blocks by ring_comm's ranks, so unless that
// order is the user's, reduce-scatter reads its input permuted into scratch and allgather
// writes scratch that is then permuted into the user's buffer: results land as NCCL's
// would on the user's communicator.
ncclResult_t run_ring_calls(const std::vector<PendingCollective>& calls) {
  if (calls.empty()) return ncclSuccess;
  // Creating a communicator is not allowed while a stream is being captured (NCCL allocates
  // device memory): such calls use the user's communicator until one is created outside a
  // capture. Capture is the same on every rank of an SPMD program, so all decide alike.
  std::vector<CommState*> states;
  for (const auto& c : calls)
    if (!stream_capturing(c.call.stream)) states.push_back(c.state);
    else if (!c.state->ring_comm)
      TC_ONCE(TC_INFO(NCCL_COLL, "topology-ordered communicator not created during CUDA graph "
                                 "capture; captured calls use the user's communicator"));
  create_ring_comms(states);

  CurrentDeviceGuard device_guard;
  std::vector<std::size_t> needs(calls.size(), 0);
  std::vector<std::size_t> blocks(calls.size(), 0);
  for (std::size_t i = 0; i < calls.size(); ++i) {
    const PendingCollective& c = calls[i];
    if (!c.state->ring_comm || c.call.collective == Collective::AllReduce ||
        !c.state->ring_permutes)
      continue;
    blocks[i] = c.call.count * kernels::datatype_size(kernels::DataType(int(c.call.datatype)));
    needs[i] = blocks[i] * std::size_t(c.state->nranks);
  }
  std::vector<char*> regions;
  if (!reserve_batch_scratch(calls, needs, device_guard, regions)) return ncclSystemError;
  auto permute = [&](std::size_t i, bool to_ring) {
    const CollectiveCall& call = calls[i].call;
    char* user = static_cast<char*>(to_ring ? const_cast<void*>(call.sendbuff) : call.recvbuff);
    device_guard.use(calls[i].state->device);
    const cudaError_t e =
        permute_blocks(calls[i].state->ring_order, to_ring, user, regions[i], blocks[i], call.stream);
    if (e != cudaSuccess)
      TC_WARN("comm %p: permuting blocks for the topology-ordered communicator failed: %s",
              static_cast<void*>(calls[i].state->comm), cudaGetErrorString(e));
    return e == cudaSuccess ? ncclSuccess : ncclUnhandledCudaError;
  };

  // Stream order: reduce-scatter inputs are permuted before NCCL's group is enqueued (at
  // its end), allgather outputs after.
  ncclResult_t r = ncclSuccess;
  for (std::size_t i = 0; i < calls.size() && r == ncclSuccess; ++i)
    if (needs[i] > 0 && calls[i].call.collective == Collective::ReduceScatter) r = permute(i, true);
  if (r != ncclSuccess) return r;
  r = pncclGroupStart();
  for (std::size_t i = 0; i < calls.size() && r == ncclSuccess; ++i) {
    CollectiveCall call = calls[i].call;
    const ncclComm_t comm = calls[i].state->ring_comm ? calls[i].state->ring_comm : call.comm;
    if (needs[i] > 0 && call.collective == Collective::ReduceScatter) call.sendbuff = regions[i];
    if (needs[i] > 0 && call.collective == Collective::AllGather) call.recvbuff = regions[i];
    r = forward_collective(call, comm);
  }
  const ncclResult_t end = pncclGroupEnd();
  if (r == ncclSuccess) r = end;
  for (std::size_t i = 0; i < calls.size() && r == ncclSuccess; ++i)
    if (needs[i] > 0 && calls[i].call.collective == Collective::AllGather) r = permute(i, false);
  mark_batch_scratch_used(calls, needs, device_guard);
  return r;
}

// The kernels' op for a call: its own for reductions, Sum (unused) for data movement.
kernels::ReduceOp reduce_op_of(const CollectiveCall& call) {
  return call.collective == Collective::AllReduce || call.collective == Collective::ReduceScatter
             ? kernels::ReduceOp(int(call.op))
             : kernels::ReduceOp::Sum;
}

// Runs schedule-routed collectives on the NCCL/CUDA backend, step by step across them.
ncclResult_t run_schedules(const std::vector<PendingCollective>& calls) {
  if (calls.empty()) return ncclSuccess;
  CurrentDeviceGuard device_guard;
  std::vector<std::size_t> needs;
  for (const PendingCollective& c : calls)
    needs.push_back(exec::scratch_bytes(*c.plan->schedule, c.state->rank,
                                        kernels::DataType(int(c.call.datatype)), reduce_op_of(c.call)));
  std::vector<char*> regions;
  if (!reserve_batch_scratch(calls, needs, device_guard, regions)) return ncclSystemError;
  CollectiveQueue queue;
  std::vector<std::shared_ptr<exec::NcclBackend>> backends;
  for (std::size_t i = 0; i < calls.size(); ++i) {
    const PendingCollective& c = calls[i];
    CommState* st = c.state;
    device_guard.use(st->device);
    QueuedCollective q;
    q.schedule = c.plan->schedule;
    q.rank = st->rank;
    q.dtype = kernels::DataType(int(c.call.datatype));
    q.op = reduce_op_of(c.call);
    q.buffers = {c.call.sendbuff, c.call.recvbuff, regions[i]};
    backends.push_back(std::make_shared<exec::NcclBackend>(st->comm, c.call.stream, st->device));
    q.backend = backends.back();
    queue.push(std::move(q));
  }
  try {
    queue.run_all();
  } catch (...) {
    // Innermost first, as NCCL groups close; then the error goes to the entry point.
    for (auto it = backends.rbegin(); it != backends.rend(); ++it) (*it)->close_open_batches();
    throw;
  }
  mark_batch_scratch_used(calls, needs, device_guard);
  return ncclSuccess;
}

ncclResult_t run_pending(std::vector<PendingCollective>& pending) {
  std::vector<PendingCollective> ring, schedules;
  for (auto& p : pending) (p.plan->route == Route::NcclTopoRing ? ring : schedules).push_back(p);
  pending.clear();
  ncclResult_t r = run_ring_calls(ring);
  const ncclResult_t s = run_schedules(schedules);
  return r != ncclSuccess ? r : s;
}

}  // namespace

LocalServiceCheck& local_service_check() {
  static LocalServiceCheck check = nullptr;
  return check;
}

bool interposer_enabled() { return interposer_config().enable; }

ncclResult_t forward_collective(const CollectiveCall& c, ncclComm_t comm) {
  switch (c.collective) {
    case Collective::AllReduce:
      return pncclAllReduce(c.sendbuff, c.recvbuff, c.count, c.datatype, c.op, comm, c.stream);
    case Collective::ReduceScatter:
      return pncclReduceScatter(c.sendbuff, c.recvbuff, c.count, c.datatype, c.op, comm, c.stream);
    case Collective::AllGather:
      return pncclAllGather(c.sendbuff, c.recvbuff, c.count, c.datatype, comm, c.stream);
    case Collective::AllToAll:
      return pncclAlltoAll(c.sendbuff, c.recvbuff, c.count, c.datatype, comm, c.stream);
  }
  return ncclInvalidArgument;
}

ncclResult_t serve_collective(const CollectiveCall& call) {
  CommState* st = served_state(call.comm);
  if (!st) return forward_collective(call, call.comm);
  const bool reduces = call.collective == Collective::AllReduce ||
                       call.collective == Collective::ReduceScatter;
  if (!type_supported(call.datatype)) return forward_collective(call, call.comm);
  if (reduces && !op_supported(call.op)) {
    TC_FALLBACK_ONCE("user-defined reduction ops (ncclRedOpCreatePreMulSum) go to NCCL");
    return forward_collective(call, call.comm);
  }
  if (call.count == 0 || !call.sendbuff || !call.recvbuff) return forward_collective(call, call.comm);
  const std::size_t elem = kernels::datatype_size(kernels::DataType(int(call.datatype)));
  if (!buffers_understood(call, *st, elem)) {
    TC_FALLBACK_ONCE("partially overlapping buffers or in-place all-to-all go to NCCL");
    return forward_collective(call, call.comm);
  }
  std::shared_ptr<const Plan> plan = plan_for(*st, call, elem);
  log_decision(*st, call, call_bytes(call.collective, call.count, elem, st->nranks), *plan);

  switch (plan->route) {
    case Route::Nccl:
      return forward_collective(call, call.comm);
    case Route::NcclTopoRing:
      if (st->ring_comm_failed) return forward_collective(call, call.comm);
      // Straight through when no block needs permuting; else after NCCL's group (queued).
      if (st->ring_comm && (call.collective == Collective::AllReduce || !st->ring_permutes))
        return forward_collective(call, st->ring_comm);
      break;
    case Route::Schedule:
      break;
  }
  ThreadGroup& g = thread_group();
  std::vector<PendingCollective> one{{st, call, plan}};
  if (g.depth.inside()) {
    g.collectives.push_back(one[0]);
    return ncclSuccess;
  }
  return run_pending(one);
}

ncclResult_t group_start() {
  thread_group().depth.enter();
  return pncclGroupStart();
}

ncclResult_t group_end() {
  ThreadGroup& g = thread_group();
  if (!g.depth.leave()) return pncclGroupEnd();  // no open group: NCCL reports the misuse
  const ncclResult_t nccl = pncclGroupEnd();
  if (g.depth.inside()) return nccl;
  // Outermost end: NCCL's group is closed; finish inits, then the queued collectives.
  std::vector<PendingCollective> queued;
  queued.swap(g.collectives);  // empty afterwards even if an init or a collective throws
  try {
    finish_inits(g.inits);
  } catch (const std::exception& e) {
    // As outside a group: a failed topocoll init leaves the communicator to NCCL and never
    // fails the user's call, nor keeps the queued collectives from running.
    TC_WARN("topocoll communicator init failed: %s", e.what());
  }
  const ncclResult_t ours = run_pending(queued);
  return nccl != ncclSuccess ? nccl : ours;
}

ncclResult_t group_simulate_end(ncclSimInfo_t* info) {
  ThreadGroup& g = thread_group();
  if (!g.depth.leave()) return pncclGroupSimulateEnd(info);
  const ncclResult_t nccl = pncclGroupSimulateEnd(info);
  if (g.depth.inside()) return nccl;
  if (!g.collectives.empty() || !g.inits.empty())
    TC_ONCE(TC_WARN("ncclGroupSimulateEnd: topocoll collectives queued in the group are not run "
                    "(NCCL runs none of the group's operations); communicators created in it "
                    "are left to NCCL"));
  g.collectives.clear();
  g.inits.clear();
  return nccl;
}

void comm_created(ncclComm_t comm, const ncclConfig_t* config, ncclComm_t parent) {
  if (!comm || !interposer_enabled()) return;
  const bool blocking = config_blocking(config, parent);
  if (!exchange_wanted()) {
    register_unserved(describe_comm(comm, blocking), "no topology configured");
    return;
  }
  ThreadGroup& g = thread_group();
  g.inits.push_back({comm, blocking});
  // Inside a group the communicator is usable only after the outermost ncclGroupEnd.
  if (!g.depth.inside()) finish_inits(g.inits);
}

void comm_created_in_progress(ncclComm_t comm) {
  if (!comm || !interposer_enabled()) return;
  // Only a non-blocking init returns ncclInProgress, and NCCL may not answer queries on the
  // communicator yet: registered as is, so a split of it with no config inherits
  // non-blocking (config_blocking) and falls back like it, never NCCL_COMM_BLOCKING.
  auto st = std::make_unique<CommState>();
  st->comm = comm;
  st->blocking = false;
  TC_FALLBACK_ONCE("non-blocking communicators (config blocking=0) fall back to NCCL");
  register_unserved(std::move(st), "non-blocking communicator");
}

void comms_created_locally(const ncclComm_t* comms, int ndev, const int* devlist) {
  if (!interposer_enabled() || ndev < 1) return;
  if (!exchange_wanted()) {
    for (int i = 0; i < ndev; ++i) register_unserved(describe_comm(comms[i], true), "no topology configured");
    return;
  }
  const ConfiguredTopology& topo = configured_topology();
  std::vector<RankIdentity> all(static_cast<std::size_t>(ndev));
  const std::string host = local_host_name();
  for (int i = 0; i < ndev; ++i) {
    const int device = devlist ? devlist[i] : i;
    all[std::size_t(i)] = make_identity(host, host_gpu_index(device, pci_bus_id(device)), topo, true);
  }
  // All ranks are in this process: no exchange, and a local failure of one is known to
  // all, so every communicator of the clique falls back together.
  std::vector<std::unique_ptr<CommState>> states;
  for (int i = 0; i < ndev; ++i) states.push_back(describe_comm(comms[i], default_blocking()));
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
      ServiceAgreement a = agree_on_service(all, topo.topology.get());
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
  for (auto& st : states) {
    if (why.empty()) {
      register_served(std::move(st));
    } else {
      unprepare_service(*st);
      register_unserved(std::move(st), why);
    }
  }
}

ncclResult_t comm_finalize(ncclComm_t comm) {
  CommState* st = CommRegistry::instance().find(comm);
  if (st && st->ring_comm) return pncclCommFinalize(st->ring_comm);
  return ncclSuccess;
}

ncclResult_t comm_release(ncclComm_t comm, bool abort,
                          ncclResult_t (*nccl_release)(ncclComm_t)) noexcept {
  std::unique_ptr<CommState> st;
  try {
    // Calls still queued in this thread's open group (an abort during error recovery) go
    // with the communicator.
    ThreadGroup& g = thread_group();
    std::erase_if(g.collectives, [&](const PendingCollective& p) { return p.call.comm == comm; });
    std::erase_if(g.inits, [&](const PendingInit& p) { return p.comm == comm; });
    st = CommRegistry::instance().remove(comm);
    if (st && st->ring_comm) {
      CurrentDeviceGuard device_guard;
      device_guard.use(st->device);
      if (abort) pncclCommAbort(st->ring_comm);
      else pncclCommDestroy(st->ring_comm);
      st->ring_comm = nullptr;
    }
  } catch (const std::exception& e) {
    TC_WARN("topocoll release of comm %p failed: %s", static_cast<void*>(comm), e.what());
  }
  // NCCL's own destroy/abort first: an abort ends the user's communicator's kernels, so the
  // scratch below is freed only when nothing can still be waiting on the device for it.
  const ncclResult_t r = nccl_release(comm);
  if (st) {
    CurrentDeviceGuard device_guard;
    device_guard.use(st->device);
    st.reset();  // frees the scratch on the communicator's device
  }
  return r;
}

}  // namespace topocoll::plugin::interposer
