// Several collectives advanced together on one backend per rank (what the interposer does
// with collectives queued inside a user's ncclGroupStart/End): different algorithms, step
// counts, types and ops in one run, every result exact.
#include <gtest/gtest.h>

#include <thread>

#include "exec/collective_check.h"
#include "exec/engine.h"
#include "exec/host_backend.h"
#include "exec/in_process_transport.h"
#include "sched/generator.h"

namespace topocoll::exec {
namespace {

using kernels::DataType;
using kernels::ReduceOp;
using sched::Collective;

struct Queued {
  std::string algo;
  CollectiveCase c;
  sched::Schedule schedule;
};

TEST(Interleaved, QueuedCollectivesAdvanceStepByStepAndAllComplete) {
  for (int p : {2, 5, 8}) {
    std::vector<Queued> queue;
    auto add = [&](std::string algo, Collective coll, DataType t, ReduceOp op, int64_t count) {
      CollectiveCase c;
      c.collective = coll;
      c.dtype = t;
      c.op = op;
      c.nranks = p;
      c.count = count;
      queue.push_back({algo, c, sched::generate(algo, coll, p, count)});
    };
    add("ring", Collective::AllReduce, DataType::Float32, ReduceOp::Sum, 1000 + p);
    add("hd", Collective::AllGather, DataType::Int8, ReduceOp::Sum, 17);
    add("hd", Collective::AllReduce, DataType::Bfloat16, ReduceOp::Avg, 333);
    add("direct", Collective::AllToAll, DataType::Float64, ReduceOp::Sum, 5);
    add("ring", Collective::ReduceScatter, DataType::Uint32, ReduceOp::Max, 9);

    InProcessFabric fabric(p, std::chrono::seconds(20));
    std::vector<std::vector<std::vector<unsigned char>>> outputs(
        p, std::vector<std::vector<unsigned char>>(queue.size()));
    std::vector<std::string> errors(p);
    auto rank_main = [&](int r) {
      try {
        InProcessTransport transport(fabric, r);
        HostBackend backend(transport);
        std::vector<RankMemory> mems;
        mems.reserve(queue.size());
        std::vector<Execution> execs;
        execs.reserve(queue.size());
        for (const auto& q : queue) {
          mems.emplace_back(q.c, q.schedule, r, q.c.input(r));
          execs.emplace_back(q.schedule, r, q.c.dtype, q.c.op, mems.back().buffers, backend);
        }
        std::vector<Execution*> ptrs;
        for (auto& e : execs) ptrs.push_back(&e);
        run_interleaved(ptrs);
        for (std::size_t k = 0; k < queue.size(); ++k) outputs[r][k] = mems[k].output(queue[k].c);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    };
    std::vector<std::thread> threads;
    for (int r = 0; r < p; ++r) threads.emplace_back(rank_main, r);
    for (auto& t : threads) t.join();
    for (int r = 0; r < p; ++r) {
      ASSERT_EQ(errors[r], "") << "rank " << r;
      for (std::size_t k = 0; k < queue.size(); ++k)
        EXPECT_TRUE(outputs[r][k] == expected_output(queue[k].c, r))
            << "P=" << p << " rank " << r << ": " << queue[k].algo << " "
            << queue[k].c.describe();
    }
  }
}

}  // namespace
}  // namespace topocoll::exec
