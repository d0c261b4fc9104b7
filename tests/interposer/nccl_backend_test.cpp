// The NCCL/CUDA backend's transport half against the stub libnccl (no GPU needed): a step is
// one NCCL group holding exactly the step's sends and receives, as bytes, on the user's
// communicator and stream; nested batches nest NCCL groups; a failure leaves no group open.
// The kernel half (reduce/copy/finalize on the stream) is covered on a GPU
// (perf/gpu/run_all.sh).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "exec/engine.h"
#include "exec/nccl_backend.h"
#include "sched/ring.h"
#include "tests/interposer/stub_nccl.h"

namespace topocoll::exec {
namespace {

ncclComm_t fake_comm() { return reinterpret_cast<ncclComm_t>(0x7000); }
cudaStream_t fake_stream() { return reinterpret_cast<cudaStream_t>(0x7100); }

TEST(NcclBackend, AStepIsOneGroupOfByteTransfers) {
  stub_nccl::reset();
  NcclBackend b(fake_comm(), fake_stream(), 0);
  char buf[64];
  b.begin_transfers();
  b.post_send(3, buf, 24);
  b.post_recv(1, buf + 32, 24);
  b.end_transfers();
  const auto calls = stub_nccl::calls();
  ASSERT_EQ(calls.size(), 4u);
  EXPECT_EQ(calls[0].fn, "pncclGroupStart");
  EXPECT_EQ(calls[1].fn, "pncclSend");
  EXPECT_EQ(calls[1].sendbuff, buf);
  EXPECT_EQ(calls[1].count, 24u);
  EXPECT_EQ(calls[1].datatype, int(ncclUint8));
  EXPECT_EQ(calls[1].peer, 3);
  EXPECT_EQ(calls[1].comm, fake_comm());
  EXPECT_EQ(calls[1].stream, fake_stream());
  EXPECT_EQ(calls[2].fn, "pncclRecv");
  EXPECT_EQ(calls[2].recvbuff, buf + 32);
  EXPECT_EQ(calls[2].peer, 1);
  EXPECT_EQ(calls[3].fn, "pncclGroupEnd");
  EXPECT_EQ(stub_nccl::group_depth(), 0);
}

TEST(NcclBackend, NestedBatchesNestGroupsAndFailuresCloseThem) {
  stub_nccl::reset();
  NcclBackend a(fake_comm(), fake_stream(), 0), b(fake_comm(), fake_stream(), 0);
  a.begin_transfers();
  b.begin_transfers();
  EXPECT_EQ(stub_nccl::group_depth(), 2);
  b.close_open_batches();
  a.close_open_batches();
  EXPECT_EQ(stub_nccl::group_depth(), 0);
  EXPECT_THROW(a.end_transfers(), BackendError);  // nothing open
  a.close_open_batches();                         // and nothing to close
  EXPECT_EQ(stub_nccl::group_depth(), 0);
}

// A failed NCCL call keeps NCCL's result class, so the interposed entry point can return it
// (a peer's failure is ncclRemoteError to the caller, not a generic internal error).
TEST(NcclBackend, FailedNcclCallsCarryNcclsResult) {
  stub_nccl::reset();
  stub_nccl::set_failure("pncclSend", ncclRemoteError);
  NcclBackend b(fake_comm(), fake_stream(), 0);
  char buf[8] = {};
  b.begin_transfers();
  try {
    b.post_send(1, buf, sizeof buf);
    ADD_FAILURE() << "post_send did not throw";
  } catch (const NcclCallError& e) {
    EXPECT_EQ(e.result(), ncclRemoteError);
    EXPECT_NE(std::string(e.what()).find("peer 1"), std::string::npos) << e.what();
  }
  b.close_open_batches();
  EXPECT_EQ(stub_nccl::group_depth(), 0);
  stub_nccl::reset();
}

// A whole in-place ring allgather (no reductions; the ring forwards in place) through the
// engine: per step, one group with exactly that step's transfers, at the schedule's offsets.
TEST(NcclBackend, EngineStepsMapOntoGroupsOfTheSchedulesTransfers) {
  const int P = 5, rank = 2;
  const int64_t count = 7;
  const sched::Schedule s = sched::ring_allgather(P, count);
  const sched::RankProgram& prog = s.programs[rank];
  // In place, the program's only local op copies the rank's own block onto itself, which
  // the backend skips (dst == src): nothing here needs a GPU.
  for (const sched::Op& op : prog.ops)
    ASSERT_TRUE(op.kind == sched::OpKind::Send || op.kind == sched::OpKind::Recv ||
                op.kind == sched::OpKind::Copy)
        << "this check needs a program without reductions";
  std::vector<float> out(std::size_t(count) * P);
  stub_nccl::reset();
  NcclBackend b(fake_comm(), fake_stream(), 0);
  Buffers bufs{out.data() + rank * count, out.data(), nullptr};
  Execution e(s, rank, kernels::DataType::Float32, kernels::ReduceOp::Sum, bufs, b);
  e.run();
  const auto calls = stub_nccl::calls();
  std::size_t pos = 0;
  for (int step = 0; step < prog.num_steps(); ++step) {
    ASSERT_LT(pos, calls.size());
    EXPECT_EQ(calls[pos++].fn, "pncclGroupStart");
    for (const sched::Op& op : prog.step(step)) {
      if (op.count == 0 || (op.kind != sched::OpKind::Send && op.kind != sched::OpKind::Recv)) continue;
      ASSERT_LT(pos, calls.size());
      const auto& c = calls[pos++];
      const sched::BufRef ref = op.kind == sched::OpKind::Send ? op.src() : op.dst;
      const char* base = reinterpret_cast<const char*>(ref.buf == sched::Buf::Input ? bufs.input : bufs.output);
      EXPECT_EQ(c.fn, op.kind == sched::OpKind::Send ? "pncclSend" : "pncclRecv");
      EXPECT_EQ(c.peer, op.peer);
      EXPECT_EQ(c.count, std::size_t(op.count) * 4);
      const void* ptr = op.kind == sched::OpKind::Send ? c.sendbuff : static_cast<const void*>(c.recvbuff);
      EXPECT_EQ(ptr, base + ref.offset * 4);
    }
    ASSERT_LT(pos, calls.size());
    EXPECT_EQ(calls[pos++].fn, "pncclGroupEnd");
  }
  EXPECT_EQ(pos, calls.size());
}

}  // namespace
}  // namespace topocoll::exec
