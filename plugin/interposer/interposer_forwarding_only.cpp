// The interposer of a build without CUDA: nothing can run on a device, so every call goes
// to NCCL unchanged (the entry points then cost one branch more than NCCL's own).
#include "plugin/interposer/buffer_registration.h"
#include "plugin/interposer/interposer.h"
#include "plugin/interposer/interposer_config.h"
#include "plugin/log.h"

namespace topocoll::plugin::interposer {

bool interposer_enabled() { return false; }

ncclResult_t forward_collective(const CollectiveCall& c, ncclComm_t comm) {
  switch (c.collective) {
    case sched::Collective::AllReduce:
      return pncclAllReduce(c.sendbuff, c.recvbuff, c.count, c.datatype, c.op, comm, c.stream);
    case sched::Collective::ReduceScatter:
      return pncclReduceScatter(c.sendbuff, c.recvbuff, c.count, c.datatype, c.op, comm, c.stream);
    case sched::Collective::AllGather:
      return pncclAllGather(c.sendbuff, c.recvbuff, c.count, c.datatype, comm, c.stream);
    case sched::Collective::AllToAll:
      return pncclAlltoAll(c.sendbuff, c.recvbuff, c.count, c.datatype, comm, c.stream);
  }
  return ncclInvalidArgument;
}

ncclResult_t serve_collective(const CollectiveCall& call) { return forward_collective(call, call.comm); }
// Every call is NCCL's own here: NCCL itself fails the group of one that fails.
ncclResult_t fail_users_group(ncclResult_t r, const char*) { return r; }
ncclResult_t group_start() { return pncclGroupStart(); }
ncclResult_t group_end() { return pncclGroupEnd(); }
ncclResult_t group_simulate_end(ncclSimInfo_t* info) { return pncclGroupSimulateEnd(info); }

void comm_created(ncclComm_t, const ncclConfig_t*, ncclComm_t, bool) {
  if (!interposer_config().topo_file.empty())
    TC_ONCE(TC_WARN("this libnccl-topocoll.so was built without CUDA; all calls go to NCCL"));
}
void comm_created_in_progress(ncclComm_t) {}
bool created_by_nonblocking_parent(ncclComm_t) { return false; }
bool child_created_in_group(ncclComm_t*, const ncclConfig_t*, ncclComm_t) { return false; }
void comms_created_locally(const ncclComm_t*, int, const int*) {}
ncclResult_t comm_finalize(ncclComm_t) { return ncclSuccess; }
void note_finalize_called(ncclComm_t) noexcept {}
ncclResult_t comm_release(ncclComm_t comm, bool, ncclResult_t (*nccl_release)(ncclComm_t)) noexcept {
  return nccl_release(comm);
}
ncclResult_t comm_register(ncclComm_t comm, void* buff, std::size_t size, void** handle) {
  return pncclCommRegister(comm, buff, size, handle);
}
ncclResult_t comm_deregister(ncclComm_t comm, void* handle) { return pncclCommDeregister(comm, handle); }
ncclResult_t comm_async_error(ncclComm_t comm, ncclResult_t* e) { return pncclCommGetAsyncError(comm, e); }
ncclResult_t comm_revoke(ncclComm_t comm, int flags) { return pncclCommRevoke(comm, flags); }
void revoke_ring_comm(ncclComm_t) {}
void leave_to_nccl_for_shrink_abort(ncclComm_t) {}

}  // namespace topocoll::plugin::interposer
