// libnccl_emu.so: NCCL's API (2.28, nccl.h) for host-only tests. Ranks are processes of
// this machine (or, with ncclCommInitAll, ranks of this one process) that exchange eager
// messages over Unix sockets; buffers are host memory (cudart_emu's cudaMalloc). Like the
// real library it defines the strong pnccl* symbols and makes each nccl* a weak alias, so an
// interposer can define nccl* and call pnccl*.
#include <cuda_runtime_api.h>
#include <cstdio>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "kernels/datatype.h"
#include "tests/emu/nccl_emu_collectives.h"
#include "tests/emu/nccl_emu_comm.h"
#include "tests/emu/nccl_emu_failure.h"
#include "tests/emu/nccl_emu_group.h"
#include "tests/emu/nccl_emu_net_proxy.h"
#include "tests/emu/nccl_emu_transport.h"

#define NCCL_EMU_EXPORT __attribute__((visibility("default")))

namespace emu = topocoll::emu;
using emu::Failure;

namespace {

[[noreturn]] void invalid(const std::string& what) {
  throw Failure(ncclInvalidArgument, what);
}

// No exception crosses the C ABI: a Failure becomes its code and a WARN line.
template <class Body>
ncclResult_t guarded(Body&& body) {
  try {
    return body();
  } catch (const Failure& f) {
    return emu::report(f.code, f.what());
  } catch (const std::exception& e) {
    return emu::report(ncclInternalError, e.what());
  } catch (...) {
    return emu::report(ncclInternalError, "unknown exception");
  }
}

// An operation NCCL enqueues into the thread's group (collectives, point-to-point, a split or
// shrink): one that fails inside a group fails the whole group at its end, as NCCL's
// ncclGroupErrCheck does (group.h), and the group then launches none of its operations.
template <class Body>
ncclResult_t enqueued(Body&& body) {
  return emu::group_error_check(guarded(std::forward<Body>(body)));
}

void check_comm(const ncclComm* comm, const char* call) {
  if (!comm) invalid(std::string(call) + ": comm is NULL");
}

// NCCL 2.28 asks every operation's communicator for its asynchronous error before enqueuing
// it (enqueue.cc ncclEnqueueCheck -> init.cc ncclCommEnsureReady), through the exported,
// interposable ncclCommGetAsyncError (a PLT call in libnccl.so.2): an interposer's
// definition answers, and an error it reports fails the operation.
void ensure_ready(ncclComm* comm, const char* call) {
  ncclResult_t async = ncclSuccess;
  const ncclResult_t r = ncclCommGetAsyncError(comm, &async);
  if (r != ncclSuccess) throw emu::Failure(r, std::string(call) + ": ncclCommGetAsyncError failed");
  if (async == ncclInProgress)
    invalid(std::string(call) + ": Attempt to use communicator before the previous operation returned ncclSuccess");
  if (async != ncclSuccess)
    throw emu::Failure(async, std::string(call) + ": the communicator reports an asynchronous error");
}

// Before an operation is enqueued: its communicator, not revoked (refused first, enqueue.cc
// ncclEnqueueCheck), then ready.
void check_enqueue(ncclComm* comm, const char* call) {
  check_comm(comm, call);
  if (comm->revoked) throw emu::Failure(ncclInvalidUsage, std::string(call) + ": communicator was revoked");
  ensure_ready(comm, call);
}

void check_config(const ncclConfig_t* config, const char* call) {
  // NCCL refuses a config not made from NCCL_CONFIG_INITIALIZER.
  if (config && config->magic != 0xcafebeef)
    invalid(std::string(call) + ": config was not initialized with NCCL_CONFIG_INITIALIZER");
}

std::size_t element_size(ncclDataType_t type, const char* call) {
  // kernels::DataType is numbered like ncclDataType_t.
  const std::size_t size = topocoll::kernels::datatype_size(topocoll::kernels::DataType(type));
  if (size == 0) invalid(std::string(call) + ": invalid datatype " + std::to_string(int(type)));
  return size;
}

// The emulated GPUs' compute capability (cudart_emu: TOPOCOLL_EMU_COMPUTE_CAPABILITY), the
// same for all of them: asked of device 0, since ncclCommInitAll here may name more devices
// than the eight the emulated runtime lists.
int compute_capability() {
  int major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0) != cudaSuccess)
    invalid("cudaDeviceGetAttribute: no compute capability for the emulated GPUs");
  return major * 10 + minor;
}

// NCCL 2.28's taskAppend (src/enqueue.cc), after the argument checks: an empty collective
// is dropped, and an fp8 reduction on a communicator with a GPU below sm_90 is refused.
void check_reduction_type(const ncclComm* comm, ncclDataType_t type, std::size_t count, const char* call) {
  if (count > 0 && (type == ncclFloat8e4m3 || type == ncclFloat8e5m2) && comm->min_compute_capability < 90)
    invalid(std::string(call) + ": FP8 reduction support begins with sm90 capable devices.");
}

void check_op(ncclRedOp_t op, const char* call) {
  if (int(op) < 0 || int(op) >= int(ncclNumOps))
    invalid(std::string(call) + ": invalid or unsupported reduction op " +
            std::to_string(int(op)) + " (only the built-in ops are emulated)");
}

void check_rank(const ncclComm* comm, int rank, const char* what, const char* call) {
  if (rank < 0 || rank >= comm->nranks)
    invalid(std::string(call) + ": " + what + " " + std::to_string(rank) + " is not a rank of a " +
            std::to_string(comm->nranks) + "-rank communicator");
}

// `count` elements of `type`, `blocks` times over, must fit in memory addresses, and a
// buffer that holds any of them must not be NULL.
// NCCL_CHECK_POINTERS, as NCCL reads an integer parameter (param.cc: strtoll, base 0).
bool checks_pointers() {
  static const bool on = [] {
    const char* v = std::getenv("NCCL_CHECK_POINTERS");
    return v && std::strtoll(v, nullptr, 0) != 0;
  }();
  return on;
}

void check_buffer(const ncclComm* comm, const void* buffer, std::size_t count, std::size_t size, int blocks,
                  const char* name, const char* call) {
  std::size_t bytes = 0;
  if (__builtin_mul_overflow(count, size, &bytes) ||
      __builtin_mul_overflow(bytes, std::size_t(blocks), &bytes))
    invalid(std::string(call) + ": count " + std::to_string(count) + " overflows the " + name +
            " size");
  if (bytes > 0 && !buffer) invalid(std::string(call) + ": " + name + " is NULL");
  // argcheck.cc CudaPtrCheck: memory the device cannot reach, or another GPU's.
  if (bytes > 0 && checks_pointers()) {
    cudaPointerAttributes attr{};
    char where[64];
    std::snprintf(where, sizeof where, "%p", buffer);
    if (cudaPointerGetAttributes(&attr, buffer) != cudaSuccess || !attr.devicePointer)
      invalid(std::string(call) + " : " + name + " " + where + " is not a valid pointer");
    if (attr.type == cudaMemoryTypeDevice && attr.device != comm->cuda_device)
      invalid(std::string(call) + " : " + name + " allocated on device " + std::to_string(attr.device) +
              " mismatchs with NCCL device " + std::to_string(comm->cuda_device));
  }
}

// The caller's config as NCCL keeps it: copied at the call, at most its `size` bytes (the
// fields of a shorter, older config stay undefined).
std::optional<ncclConfig_t> copy_config(const ncclConfig_t* config) {
  if (!config) return std::nullopt;
  ncclConfig_t copy = NCCL_CONFIG_INITIALIZER;
  std::memcpy(&copy, config, std::min(config->size, sizeof copy));
  return copy;
}
// NCCL_COMM_SPLIT_SHARE_RESOURCES / NCCL_COMM_SHRINK_SHARE_RESOURCES override the config
// (init.cc envConfigOverride); anything but 1 means no sharing.
bool overridden(bool configured, const char* env) {
  if (const char* v = std::getenv(env); v && *v) return std::atoi(v) == 1;
  return configured;
}
// comm->config.splitShare / shrinkShare: the caller's config when one is given (undefined
// is 0), else the parent's (copyCommConfig), else 0.
void set_sharing(ncclComm& comm, const std::optional<ncclConfig_t>& config, const ncclComm* parent) {
  comm.split_share = overridden(config ? config->splitShare == 1 : parent && parent->split_share,
                                "NCCL_COMM_SPLIT_SHARE_RESOURCES");
  comm.shrink_share = overridden(config ? config->shrinkShare == 1 : parent && parent->shrink_share,
                                 "NCCL_COMM_SHRINK_SHARE_RESOURCES");
}

// NCCL initializes its net plugin for every communicator (a v11 context each), except a
// child sharing its parent's resources, which takes the parent's (ncclNetInitFromParent).
void open_on_net(const ncclComm& comm, const ncclComm* shares_with = nullptr) {
  if (emu::NetProxy* proxy = emu::NetProxy::active(); proxy && emu::has_remote_ranks(comm)) {
    std::optional<emu::NetProxy::SharedFrom> parent;
    if (shares_with) parent = emu::NetProxy::SharedFrom{shares_with->key, shares_with->rank};
    proxy->open_comm(comm.key, comm.rank, comm.cuda_device, parent);
  }
}

ncclResult_t init_rank(ncclComm_t* newcomm, int nranks, const ncclUniqueId& id, int rank,
                       const ncclConfig_t* config, const char* call) {
  return guarded([&] {
    if (!newcomm) invalid(std::string(call) + ": newcomm is NULL");
    if (nranks < 1) invalid(std::string(call) + ": nranks " + std::to_string(nranks) + " < 1");
    if (rank < 0 || rank >= nranks)
      invalid(std::string(call) + ": rank " + std::to_string(rank) + " is outside 0.." +
              std::to_string(nranks - 1));
    emu::NetProxy::active();  // before this process listens: peers may set up connections at once
    auto comm = std::make_unique<ncclComm>();
    comm->key = emu::key_of(id);
    comm->rank = rank;
    comm->nranks = nranks;
    set_sharing(*comm, copy_config(config), nullptr);
    if (cudaGetDevice(&comm->cuda_device) != cudaSuccess) comm->cuda_device = 0;
    comm->min_compute_capability = compute_capability();
    comm->addresses.resize(std::size_t(nranks));
    for (int p = 0; p < nranks; ++p)
      if (p != rank) comm->addresses[std::size_t(p)] = emu::socket_name(comm->key, p);
    if (nranks > 1) emu::listen_at(emu::socket_name(comm->key, rank));
    open_on_net(*comm);
    *newcomm = comm.release();
    return ncclSuccess;
  });
}

// A child communicator holding `members` (parent ranks, in child rank order), with the
// caller's config or else the parent's, sharing the parent's resources when `shared`.
std::unique_ptr<ncclComm> make_child(const ncclComm& parent, const emu::CommKey& key,
                                     const std::vector<int>& members,
                                     const std::optional<ncclConfig_t>& config, bool shared) {
  auto child = std::make_unique<ncclComm>();
  child->key = key;
  set_sharing(*child, config, &parent);
  child->nranks = int(members.size());
  child->cuda_device = parent.cuda_device;
  child->min_compute_capability = parent.min_compute_capability;
  for (std::size_t i = 0; i < members.size(); ++i) {
    if (members[i] == parent.rank) child->rank = int(i);
    // Child messages reuse the parent's process addresses.
    child->addresses.push_back(parent.addresses[std::size_t(members[i])]);
  }
  open_on_net(*child, shared ? &parent : nullptr);
  return child;
}

// A child opened on the net for an exchange that may fail (a shrink's members check they
// agree): unless the exchange hands the child to the caller, its net membership is closed
// once the exchange is done with it, so a failed shrink leaves no proxy behind.
struct NetMembershipGuard {
  emu::CommKey key;
  int rank = 0;
  bool kept = false;
  ~NetMembershipGuard() {
    if (kept) return;
    try {
      if (emu::NetProxy* proxy = emu::NetProxy::active()) proxy->close_comm(key, rank, std::chrono::milliseconds(0));
    } catch (...) {
      // Its sends cannot drain: the exchange failed. Closed all the same.
    }
  }
};

// Keys of children: a split's salt is its color (>= 0), a shrink's has the top bit set.
constexpr std::uint64_t kShrinkSalt = std::uint64_t(1) << 63;

}  // namespace

extern "C" {

// --- versions, ids, errors ------------------------------------------------------------------

NCCL_EMU_EXPORT ncclResult_t pncclGetVersion(int* version) {
  if (!version) return emu::report(ncclInvalidArgument, "ncclGetVersion: version is NULL");
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

NCCL_EMU_EXPORT ncclResult_t pncclGetUniqueId(ncclUniqueId* uniqueId) {
  if (!uniqueId) return emu::report(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
  return guarded([&] {
    *uniqueId = emu::make_unique_id();
    return ncclSuccess;
  });
}

NCCL_EMU_EXPORT const char* pncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

NCCL_EMU_EXPORT const char* pncclGetLastError(ncclComm_t) { return emu::last_error(); }

// --- communicators --------------------------------------------------------------------------

NCCL_EMU_EXPORT ncclResult_t pncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId,
                                               int rank) {
  return init_rank(comm, nranks, commId, rank, nullptr, "ncclCommInitRank");
}

// Blocking or not, initialization completes before the call returns.
NCCL_EMU_EXPORT ncclResult_t pncclCommInitRankConfig(ncclComm_t* comm, int nranks,
                                                     ncclUniqueId commId, int rank,
                                                     ncclConfig_t* config) {
  const ncclResult_t checked = guarded([&] {
    check_config(config, "ncclCommInitRankConfig");
    return ncclSuccess;
  });
  if (checked != ncclSuccess) return checked;
  return init_rank(comm, nranks, commId, rank, config, "ncclCommInitRankConfig");
}

// Several ids only spread NCCL's bootstrap load; one is enough here.
NCCL_EMU_EXPORT ncclResult_t pncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank,
                                                       int nId, ncclUniqueId* commIds,
                                                       ncclConfig_t* config) {
  const ncclResult_t checked = guarded([&] {
    check_config(config, "ncclCommInitRankScalable");
    if (nId < 1 || !commIds) invalid("ncclCommInitRankScalable: no ncclUniqueId given");
    return ncclSuccess;
  });
  if (checked != ncclSuccess) return checked;
  return init_rank(newcomm, nranks, commIds[0], myrank, config, "ncclCommInitRankScalable");
}

// All ranks in this process: their messages go straight to the mailbox.
NCCL_EMU_EXPORT ncclResult_t pncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  return guarded([&] {
    if (!comms) invalid("ncclCommInitAll: comms is NULL");
    if (ndev < 1) invalid("ncclCommInitAll: ndev " + std::to_string(ndev) + " < 1");
    const emu::CommKey key = emu::key_of(emu::make_unique_id());
    for (int i = 0; i < ndev; ++i) {
      auto* comm = new ncclComm;
      comm->key = key;
      comm->rank = i;
      comm->nranks = ndev;
      comm->cuda_device = devlist ? devlist[i] : i;
      comm->min_compute_capability = compute_capability();
      comm->addresses.assign(std::size_t(ndev), std::string());
      comms[i] = comm;
    }
    return ncclSuccess;
  });
}

NCCL_EMU_EXPORT ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                                            ncclConfig_t* config) {
  return enqueued([&] {
    check_comm(comm, "ncclCommSplit");
    check_config(config, "ncclCommSplit");
    if (!newcomm) invalid("ncclCommSplit: newcomm is NULL");
    ensure_ready(comm, "ncclCommSplit");  // init.cc ncclCommInitChildComm
    if (color < 0 && color != NCCL_SPLIT_NOCOLOR)
      invalid("ncclCommSplit: color " + std::to_string(color) + " is negative");
    *newcomm = nullptr;
    const std::uint64_t sequence = comm->children_made++;
    auto x = std::make_shared<emu::Exchange>(
        "CommSplit rank " + std::to_string(comm->rank) + "/" + std::to_string(comm->nranks) +
            " color " + std::to_string(color) + " key " + std::to_string(key),
        comm, emu::Channel::Collective);
    // Every rank learns every rank's (color, key).
    const std::int32_t mine[2] = {color, key};
    std::byte* own = x->scratch(sizeof mine);
    std::memcpy(own, mine, sizeof mine);
    std::vector<const std::byte*> all;
    for (int p = 0; p < comm->nranks; ++p) {
      x->send(p, own, sizeof mine);
      std::byte* theirs = x->scratch(sizeof mine);
      x->receive(p, theirs, sizeof mine);
      all.push_back(theirs);
    }
    // NCCL copies the config at the call; whether the child shares the parent's resources
    // is the parent's splitShare (init.cc ncclCommInitChildComm).
    const std::optional<ncclConfig_t> child_config = copy_config(config);
    x->then([comm, newcomm, color, sequence, all, child_config] {
      if (color == NCCL_SPLIT_NOCOLOR) return;
      struct Member {
        std::int32_t key;
        int parent_rank;
      };
      std::vector<Member> members;
      for (int p = 0; p < comm->nranks; ++p) {
        std::int32_t theirs[2];
        std::memcpy(theirs, all[std::size_t(p)], sizeof theirs);
        if (theirs[0] == color) members.push_back({theirs[1], p});
      }
      // NCCL orders the child's ranks by key, ties by parent rank.
      std::sort(members.begin(), members.end(), [](const Member& a, const Member& b) {
        return a.key != b.key ? a.key < b.key : a.parent_rank < b.parent_rank;
      });
      std::vector<int> ranks;
      for (const Member& m : members) ranks.push_back(m.parent_rank);
      *newcomm = make_child(*comm, emu::child_key(comm->key, sequence, std::uint64_t(color)), ranks,
                            child_config, comm->split_share)
                     .release();
    });
    return emu::submit(std::move(x), std::nullopt);
  });
}

// The remaining ranks agree on the child without the excluded ones: its members and key
// follow from the parent and the exclusion list, which they check they share.
NCCL_EMU_EXPORT ncclResult_t pncclCommShrink(ncclComm_t comm, int* excludeRanksList,
                                             int excludeRanksCount, ncclComm_t* newcomm,
                                             ncclConfig_t* config, int shrinkFlags) {
  return enqueued([&] {
    check_comm(comm, "ncclCommShrink");
    check_config(config, "ncclCommShrink");
    if (!newcomm) invalid("ncclCommShrink: newcomm is NULL");
    // NCCL 2.28 refuses an empty list too (init.cc ncclCommInitChildComm).
    if (excludeRanksCount <= 0 || !excludeRanksList)
      invalid("ncclCommShrink: bad exclusion list (count " + std::to_string(excludeRanksCount) +
              "; NCCL needs at least one rank to exclude)");
    std::set<int> excluded;
    for (int i = 0; i < excludeRanksCount; ++i) {
      check_rank(comm, excludeRanksList[i], "excluded rank", "ncclCommShrink");
      excluded.insert(excludeRanksList[i]);
    }
    if (excluded.count(comm->rank))
      invalid("ncclCommShrink: rank " + std::to_string(comm->rank) + " excludes itself");
    ensure_ready(comm, "ncclCommShrink");  // init.cc ncclCommInitChildComm, after the abort's reset
    *newcomm = nullptr;
    std::vector<int> members;
    for (int p = 0; p < comm->nranks; ++p)
      if (!excluded.count(p)) members.push_back(p);
    std::uint64_t list_hash = 0xcbf29ce484222325ull;  // FNV-1a over the sorted list
    for (int r : excluded) list_hash = (list_hash ^ std::uint64_t(r)) * 0x100000001b3ull;

    // A shrink shares the parent's resources when the parent's shrinkShare says so, never
    // with NCCL_SHRINK_ABORT (init.cc ncclCommInitChildComm).
    std::shared_ptr<ncclComm> child =
        make_child(*comm, emu::child_key(comm->key, comm->children_made++, kShrinkSalt), members, copy_config(config),
                   comm->shrink_share && !(shrinkFlags & NCCL_SHRINK_ABORT));
    auto x = std::make_shared<emu::Exchange>(
        "CommShrink rank " + std::to_string(comm->rank) + "/" + std::to_string(comm->nranks) +
            " excluding " + std::to_string(excluded.size()),
        child.get(), emu::Channel::Collective);
    std::byte* own = x->scratch(sizeof list_hash);
    std::memcpy(own, &list_hash, sizeof list_hash);
    std::vector<const std::byte*> all;
    for (int p = 0; p < child->nranks; ++p) {
      x->send(p, own, sizeof list_hash);
      std::byte* theirs = x->scratch(sizeof list_hash);
      x->receive(p, theirs, sizeof list_hash);
      all.push_back(theirs);
    }
    auto guard = std::make_shared<NetMembershipGuard>();  // made in place: a copy's end would close it
    guard->key = child->key;
    guard->rank = child->rank;
    x->then([child, newcomm, list_hash, all, guard] {
      for (int p = 0; p < child->nranks; ++p)
        if (std::memcmp(all[std::size_t(p)], &list_hash, sizeof list_hash) != 0)
          throw Failure(ncclInvalidArgument,
                        "ncclCommShrink: the remaining ranks passed different "
                        "exclusion lists (child rank " + std::to_string(p) + " differs)");
      *newcomm = new ncclComm(*child);
      guard->kept = true;
    });
    return emu::submit(std::move(x), std::nullopt);
  });
}

// Operations complete synchronously, so there is nothing left to flush.
NCCL_EMU_EXPORT ncclResult_t pncclCommFinalize(ncclComm_t comm) {
  return enqueued([&] {  // a refused finalize fails the group around it (init.cc: ncclGroupErrCheck)
    if (!comm) return ncclSuccess;  // as NCCL's (init.cc: a NULL comm finalizes nothing)
    ensure_ready(comm, "ncclCommFinalize");
    if (comm->finalize_called) invalid("ncclCommFinalize: the communicator was finalized already");
    comm->finalize_called = true;
    return ncclSuccess;
  });
}

namespace {
// ncclCommDestroy reports the communicator's asynchronous error (init.cc: NCCLCHECK of
// ncclCommEnsureReady); ncclCommAbort ignores it ((void)ncclCommEnsureReady), since aborting
// is what a caller does about that error. (NCCL's destroy then leaves the communicator to an
// abort; the emulation frees it either way.)
ncclResult_t release(ncclComm_t comm, bool abort) {
  if (!comm) return ncclSuccess;  // as NCCL
  emu::Mailbox::process().discard(comm->key, comm->rank);
  const std::unique_ptr<ncclComm> owned(comm);
  return guarded([&] {
    if (emu::NetProxy* proxy = emu::NetProxy::active(); proxy && emu::has_remote_ranks(*comm)) {
      try {
        proxy->close_comm(comm->key, comm->rank, emu::timeout());
      } catch (const Failure&) {
        if (!abort) throw;
      }
    }
    return ncclSuccess;
  });
}
}  // namespace

NCCL_EMU_EXPORT ncclResult_t pncclCommDestroy(ncclComm_t comm) { return release(comm, false); }

NCCL_EMU_EXPORT ncclResult_t pncclCommAbort(ncclComm_t comm) { return release(comm, true); }

// Registration has no effect on the emulated transport: the buffer is its own handle.
NCCL_EMU_EXPORT ncclResult_t pncclCommRegister(const ncclComm_t comm, void* buff, size_t, void** handle) {
  if (!comm || !handle) return ncclInvalidArgument;
  *handle = buff;
  return ncclSuccess;
}

NCCL_EMU_EXPORT ncclResult_t pncclCommDeregister(const ncclComm_t comm, void*) {
  return comm ? ncclSuccess : ncclInvalidArgument;
}

// Revocation is not emulated (no operation is ever in flight across calls here).
// As NCCL 2.28's (init.cc ncclCommRevoke): nothing for a NULL comm; only
// NCCL_REVOKE_DEFAULT; not after a finalize or another revoke. It finalizes the
// communicator, whose later operations are refused (enqueue.cc: "communicator was revoked").
NCCL_EMU_EXPORT ncclResult_t pncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  if (!comm) return ncclSuccess;
  return guarded([&] {
    if (revokeFlags != NCCL_REVOKE_DEFAULT) invalid("ncclCommRevoke: unsupported flags " + std::to_string(revokeFlags));
    if (comm->finalize_called || comm->revoked) invalid("ncclCommRevoke: the communicator was finalized or revoked");
    comm->revoked = true;
    comm->finalize_called = true;
    return ncclSuccess;
  });
}

NCCL_EMU_EXPORT ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  return guarded([&] {
    check_comm(comm, "ncclCommGetAsyncError");
    if (!asyncError) invalid("ncclCommGetAsyncError: asyncError is NULL");
    const emu::NetProxy* proxy = emu::NetProxy::active();
    *asyncError = proxy ? proxy->async_error(comm->key, comm->rank) : ncclSuccess;
    return ncclSuccess;
  });
}

NCCL_EMU_EXPORT ncclResult_t pncclCommCount(const ncclComm_t comm, int* count) {
  return guarded([&] {
    check_comm(comm, "ncclCommCount");
    if (!count) invalid("ncclCommCount: count is NULL");
    // NCCL 2.28 asks the communicator's readiness first (init.cc: ncclCommEnsureReady).
    ensure_ready(comm, "ncclCommCount");
    *count = comm->nranks;
    return ncclSuccess;
  });
}

NCCL_EMU_EXPORT ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int* device) {
  return guarded([&] {
    check_comm(comm, "ncclCommCuDevice");
    if (!device) invalid("ncclCommCuDevice: device is NULL");
    // NCCL 2.28 asks the communicator's readiness first (init.cc: ncclCommEnsureReady).
    ensure_ready(comm, "ncclCommCuDevice");
    *device = comm->cuda_device;
    return ncclSuccess;
  });
}

NCCL_EMU_EXPORT ncclResult_t pncclCommUserRank(const ncclComm_t comm, int* rank) {
  return guarded([&] {
    check_comm(comm, "ncclCommUserRank");
    if (!rank) invalid("ncclCommUserRank: rank is NULL");
    // NCCL 2.28 asks the communicator's readiness first (init.cc: ncclCommEnsureReady).
    ensure_ready(comm, "ncclCommUserRank");
    *rank = comm->rank;
    return ncclSuccess;
  });
}

// --- groups ---------------------------------------------------------------------------------

NCCL_EMU_EXPORT ncclResult_t pncclGroupStart() { return emu::group_start(); }
NCCL_EMU_EXPORT ncclResult_t pncclGroupEnd() { return guarded([] { return emu::group_end(); }); }

// Like NCCL: the group's operations are not run; there is no cost model to estimate with.
// Without a simInfo NCCL launches the group as ncclGroupEnd does (group.cc
// ncclGroupEndInternal simulates only for a given simInfo).
NCCL_EMU_EXPORT ncclResult_t pncclGroupSimulateEnd(ncclSimInfo_t* simInfo) {
  if (!simInfo) return pncclGroupEnd();
  const bool initialized = simInfo->magic == 0x74685283;
  if (initialized) simInfo->estimatedTime = 0.0f;
  return guarded([&] { return emu::group_discard(initialized); });
}

// --- collectives and point-to-point ---------------------------------------------------------

NCCL_EMU_EXPORT ncclResult_t pncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                            ncclDataType_t datatype, ncclRedOp_t op,
                                            ncclComm_t comm, cudaStream_t stream) {
  return enqueued([&] {
    const char* call = "ncclAllReduce";
    check_enqueue(comm, call);
    const std::size_t size = element_size(datatype, call);
    check_op(op, call);
    check_buffer(comm, sendbuff, count, size, 1, "sendbuff", call);
    check_buffer(comm, recvbuff, count, size, 1, "recvbuff", call);
    check_reduction_type(comm, datatype, count, call);
    if (count == 0) return ncclSuccess;  // NCCL discards an empty collective (enqueue.cc taskAppend)
    return emu::submit(emu::all_reduce(comm, sendbuff, recvbuff, count, datatype, op), stream);
  });
}

NCCL_EMU_EXPORT ncclResult_t pncclReduceScatter(const void* sendbuff, void* recvbuff,
                                                size_t recvcount, ncclDataType_t datatype,
                                                ncclRedOp_t op, ncclComm_t comm,
                                                cudaStream_t stream) {
  return enqueued([&] {
    const char* call = "ncclReduceScatter";
    check_enqueue(comm, call);
    const std::size_t size = element_size(datatype, call);
    check_op(op, call);
    check_buffer(comm, sendbuff, recvcount, size, comm->nranks, "sendbuff", call);
    check_buffer(comm, recvbuff, recvcount, size, 1, "recvbuff", call);
    check_reduction_type(comm, datatype, recvcount, call);
    if (recvcount == 0) return ncclSuccess;  // NCCL discards an empty collective (enqueue.cc taskAppend)
    return emu::submit(emu::reduce_scatter(comm, sendbuff, recvbuff, recvcount, datatype, op),
                          stream);
  });
}

NCCL_EMU_EXPORT ncclResult_t pncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                            ncclDataType_t datatype, ncclComm_t comm,
                                            cudaStream_t stream) {
  return enqueued([&] {
    const char* call = "ncclAllGather";
    check_enqueue(comm, call);
    const std::size_t size = element_size(datatype, call);
    check_buffer(comm, sendbuff, sendcount, size, 1, "sendbuff", call);
    check_buffer(comm, recvbuff, sendcount, size, comm->nranks, "recvbuff", call);
    if (sendcount == 0) return ncclSuccess;  // NCCL discards an empty collective (enqueue.cc taskAppend)
    return emu::submit(emu::all_gather(comm, sendbuff, recvbuff, sendcount, datatype), stream);
  });
}

NCCL_EMU_EXPORT ncclResult_t pncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                                           ncclDataType_t datatype, ncclComm_t comm,
                                           cudaStream_t stream) {
  return enqueued([&] {
    const char* call = "ncclAlltoAll";
    check_enqueue(comm, call);
    const std::size_t size = element_size(datatype, call);
    check_buffer(comm, sendbuff, count, size, comm->nranks, "sendbuff", call);
    check_buffer(comm, recvbuff, count, size, comm->nranks, "recvbuff", call);
    if (count == 0) return ncclSuccess;  // NCCL discards an empty collective (enqueue.cc taskAppend)
    return emu::submit(emu::all_to_all(comm, sendbuff, recvbuff, count, datatype), stream);
  });
}

NCCL_EMU_EXPORT ncclResult_t pncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                                            ncclDataType_t datatype, int root, ncclComm_t comm,
                                            cudaStream_t stream) {
  return enqueued([&] {
    const char* call = "ncclBroadcast";
    check_enqueue(comm, call);
    const std::size_t size = element_size(datatype, call);
    check_rank(comm, root, "root", call);
    if (comm->rank == root) check_buffer(comm, sendbuff, count, size, 1, "sendbuff", call);
    check_buffer(comm, recvbuff, count, size, 1, "recvbuff", call);
    if (count == 0) return ncclSuccess;  // NCCL discards an empty collective (enqueue.cc taskAppend)
    return emu::submit(emu::broadcast(comm, sendbuff, recvbuff, count, datatype, root), stream);
  });
}

NCCL_EMU_EXPORT ncclResult_t pncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root,
                                        ncclComm_t comm, cudaStream_t stream) {
  return pncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}

NCCL_EMU_EXPORT ncclResult_t pncclReduce(const void* sendbuff, void* recvbuff, size_t count,
                                         ncclDataType_t datatype, ncclRedOp_t op, int root,
                                         ncclComm_t comm, cudaStream_t stream) {
  return enqueued([&] {
    const char* call = "ncclReduce";
    check_enqueue(comm, call);
    const std::size_t size = element_size(datatype, call);
    check_op(op, call);
    check_rank(comm, root, "root", call);
    check_buffer(comm, sendbuff, count, size, 1, "sendbuff", call);
    if (comm->rank == root) check_buffer(comm, recvbuff, count, size, 1, "recvbuff", call);
    check_reduction_type(comm, datatype, count, call);
    if (count == 0) return ncclSuccess;  // NCCL discards an empty collective (enqueue.cc taskAppend)
    return emu::submit(emu::reduce(comm, sendbuff, recvbuff, count, datatype, op, root), stream);
  });
}

NCCL_EMU_EXPORT ncclResult_t pncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype,
                                       int peer, ncclComm_t comm, cudaStream_t stream) {
  return enqueued([&] {
    const char* call = "ncclSend";
    check_enqueue(comm, call);
    const std::size_t size = element_size(datatype, call);
    check_rank(comm, peer, "peer", call);
    check_buffer(comm, sendbuff, count, size, 1, "sendbuff", call);
    return emu::submit(emu::send(comm, sendbuff, count, datatype, peer), stream);
  });
}

NCCL_EMU_EXPORT ncclResult_t pncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype,
                                       int peer, ncclComm_t comm, cudaStream_t stream) {
  return enqueued([&] {
    const char* call = "ncclRecv";
    check_enqueue(comm, call);
    const std::size_t size = element_size(datatype, call);
    check_rank(comm, peer, "peer", call);
    check_buffer(comm, recvbuff, count, size, 1, "recvbuff", call);
    return emu::submit(emu::recv(comm, recvbuff, count, datatype, peer), stream);
  });
}

}  // extern "C"

// As in the real library, every nccl* is a weak alias of its pnccl*: an interposer's strong
// nccl* wins, and its calls to pnccl* still reach the emulation.
#define NCCL_EMU_WEAK_ALIAS(name) \
  extern "C" NCCL_EMU_EXPORT __attribute__((weak, alias("p" #name))) decltype(p##name) name;

NCCL_EMU_WEAK_ALIAS(ncclGetVersion)
NCCL_EMU_WEAK_ALIAS(ncclGetUniqueId)
NCCL_EMU_WEAK_ALIAS(ncclGetErrorString)
NCCL_EMU_WEAK_ALIAS(ncclGetLastError)
NCCL_EMU_WEAK_ALIAS(ncclCommInitRank)
NCCL_EMU_WEAK_ALIAS(ncclCommInitRankConfig)
NCCL_EMU_WEAK_ALIAS(ncclCommInitRankScalable)
NCCL_EMU_WEAK_ALIAS(ncclCommInitAll)
NCCL_EMU_WEAK_ALIAS(ncclCommSplit)
NCCL_EMU_WEAK_ALIAS(ncclCommShrink)
NCCL_EMU_WEAK_ALIAS(ncclCommFinalize)
NCCL_EMU_WEAK_ALIAS(ncclCommDestroy)
NCCL_EMU_WEAK_ALIAS(ncclCommAbort)
NCCL_EMU_WEAK_ALIAS(ncclCommRevoke)
NCCL_EMU_WEAK_ALIAS(ncclCommGetAsyncError)
NCCL_EMU_WEAK_ALIAS(ncclCommCount)
NCCL_EMU_WEAK_ALIAS(ncclCommCuDevice)
NCCL_EMU_WEAK_ALIAS(ncclCommUserRank)
NCCL_EMU_WEAK_ALIAS(ncclGroupStart)
NCCL_EMU_WEAK_ALIAS(ncclGroupEnd)
NCCL_EMU_WEAK_ALIAS(ncclGroupSimulateEnd)
NCCL_EMU_WEAK_ALIAS(ncclAllReduce)
NCCL_EMU_WEAK_ALIAS(ncclReduceScatter)
NCCL_EMU_WEAK_ALIAS(ncclAllGather)
NCCL_EMU_WEAK_ALIAS(ncclAlltoAll)
NCCL_EMU_WEAK_ALIAS(ncclBroadcast)
NCCL_EMU_WEAK_ALIAS(ncclBcast)
NCCL_EMU_WEAK_ALIAS(ncclReduce)
NCCL_EMU_WEAK_ALIAS(ncclSend)
NCCL_EMU_WEAK_ALIAS(ncclRecv)
