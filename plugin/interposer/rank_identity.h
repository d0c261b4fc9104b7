// How the ranks of a communicator learn where each of them runs, and agree whether
// topocoll serves it.
//
// At init every rank contributes one fixed-size RankIdentity (host, GPU, whether it loaded
// the topology and which one, whether it can serve); one pncclAllGather on a temporary
// device buffer gives every rank all of them (rank_exchange.h). Each rank then runs
// agree_on_service() on identical input, so all ranks reach the same verdict without a
// second collective: the "allreduce of a flag" rides in the gathered records.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "plugin/process_context.h"
#include "sched/placement.h"
#include "topo/topology.h"

namespace topocoll::plugin::interposer {

struct RankIdentity {
  static constexpr uint32_t kMagic = 0x54435249;  // "TCRI"
  // 3: topology_hash is topo::topology_fingerprint; 4: compute_capability, settings_hash
  static constexpr uint32_t kVersion = 4;
  enum Flags : uint32_t {
    kTopologyLoaded = 1u << 0,  // TOPOCOLL_TOPO_FILE set and valid on this rank
    kCanServe = 1u << 1,        // this rank can run topocoll schedules (CUDA, blocking comm)
  };
  uint32_t magic = kMagic;
  uint32_t version = kVersion;
  int32_t gpu = -1;         // device index on the host as the topology numbers it
  uint32_t flags = 0;
  uint64_t topology_hash = 0;  // topo::topology_fingerprint of the process's topology
  // InterposerConfig::routing_fingerprint: the settings that decide what a served call
  // issues, which must be the same on every rank.
  uint64_t settings_hash = 0;
  // The GPU's compute capability, major * 10 + minor (90 for sm_90); 0 when CUDA could not
  // say. The communicator's minimum decides what NCCL refuses (ServiceAgreement).
  int32_t compute_capability = 0;
  // NUL-terminated, truncated; room for the 64 characters a topology's host name may have.
  char host[65] = {};
  // Why this rank cannot serve when it failed to prepare its part of the init (a CUDA or
  // host error): it still joins the exchange with this record so every rank falls back
  // together. NUL-terminated, truncated; empty otherwise.
  char unserved_reason[27] = {};
};
static_assert(sizeof(RankIdentity) == 128, "RankIdentity is exchanged as raw bytes");

// CUDA_VISIBLE_DEVICES (`visible_devices`, from the Env) maps the process's device ordinal
// to the host's index when it is a list of integers. When it names GPUs by UUID (GPU-...,
// MIG-...), the index is the position of the device's PCI bus id (`pci_bus_id`,
// cudaDeviceGetPCIBusId's form) among the host's NVIDIA GPUs sorted by bus id (nvidia-smi's
// default order), read from `driver_gpus_dir` (one entry per GPU, named by bus id).
// Otherwise the ordinal itself.
int host_gpu_index(int cuda_ordinal, const std::string& visible_devices, const std::string& pci_bus_id = "",
                   const std::string& driver_gpus_dir = "/proc/driver/nvidia/gpus");

// This rank's record: its host as `context` names it, its topology's fingerprint, its GPU's
// compute capability (major * 10 + minor, 0 if unknown), its routing settings' fingerprint
// (InterposerConfig::routing_fingerprint).
RankIdentity make_identity(int gpu, const ProcessContext& context, bool can_serve,
                           int compute_capability, uint64_t settings_fingerprint);
// `id` turned into the record of a rank that cannot serve because of `reason`: kCanServe
// cleared, the reason carried (truncated) so rank 0 can name it. Never throws.
void mark_unserved(RankIdentity& id, const char* reason) noexcept;

struct ServiceAgreement {
  bool served = false;
  std::string reason;  // why not (names the first rank at fault)
  sched::Placement placement;
  // The lowest compute capability of the communicator's GPUs (NCCL's comm->minCompCap):
  // NCCL 2.28 refuses fp8 reductions below 90, and topocoll leaves them to NCCL there too.
  int min_compute_capability = 0;
};
// Identical on every rank given identical `identities`.
ServiceAgreement agree_on_service(std::span<const RankIdentity> identities,
                                  const topo::Topology* topology);

}  // namespace topocoll::plugin::interposer
