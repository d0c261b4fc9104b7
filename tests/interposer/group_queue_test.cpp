// Collectives queued inside a user group run at the outermost group end, step by step
// across all of them: driven here with the host backend, ranks as threads in one process.
// Checks the interleaving (step k of every queued collective is posted in one nested batch
// before any runs step k+1) and the results against a direct computation.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <numeric>
#include <thread>
#include <vector>

#include "exec/host_backend.h"
#include "exec/in_process_transport.h"
#include "plugin/interposer/collective_queue.h"
#include "sched/halving_doubling.h"
#include "sched/ring.h"

namespace topocoll::plugin::interposer {
namespace {

struct Event {
  int collective;
  int step;
  char what;  // 'b' batch begin, 'e' batch end, 'l' local op
};

// Wraps one rank's host backend and records what one queued collective does.
class RecordingBackend final : public exec::Backend {
 public:
  RecordingBackend(exec::Backend& inner, int id, std::vector<Event>& log)
      : inner_(&inner), id_(id), log_(&log) {}
  void begin_transfers() override {
    log_->push_back({id_, step_, 'b'});
    inner_->begin_transfers();
  }
  void post_send(int peer, const void* src, std::size_t bytes) override { inner_->post_send(peer, src, bytes); }
  void post_recv(int peer, void* dst, std::size_t bytes) override { inner_->post_recv(peer, dst, bytes); }
  void end_transfers() override {
    log_->push_back({id_, step_, 'e'});
    inner_->end_transfers();
    ++step_;
  }
  void reduce(const exec::CollectiveBinding& b, void* dst, const void* const* srcs, int nsrc, int64_t count) override {
    log_->push_back({id_, step_ - 1, 'l'});
    inner_->reduce(b, dst, srcs, nsrc, count);
  }
  void copy(void* dst, const void* src, std::size_t bytes) override {
    log_->push_back({id_, step_ - 1, 'l'});
    inner_->copy(dst, src, bytes);
  }
  void finalize(const exec::CollectiveBinding& b, void* dst, int64_t count) override {
    log_->push_back({id_, step_ - 1, 'l'});
    inner_->finalize(b, dst, count);
  }
  void avg_premul(const exec::CollectiveBinding& b, void* dst, const void* src,
                  int64_t count) override {
    log_->push_back({id_, step_, 'l'});
    inner_->avg_premul(b, dst, src, count);
  }

 private:
  exec::Backend* inner_;
  int id_;
  std::vector<Event>* log_;
  int step_ = 0;
};

int32_t value(int rank, int64_t i, int salt) { return int32_t((rank + 1) * 7 + i * 3 + salt) % 1000; }

TEST(GroupQueue, ThreeQueuedCollectivesRunInterleavedWithCorrectResults) {
  const int P = 6;  // not a power of two: HD uses its pre/post steps, so step counts differ
  const int64_t ar_count = 1001, rs_count = 37, ag_count = 53;
  auto allreduce = std::make_shared<const sched::Schedule>(sched::hd_allreduce(P, ar_count));
  auto reduce_scatter = std::make_shared<const sched::Schedule>(sched::ring_reduce_scatter(P, rs_count));
  auto allgather = std::make_shared<const sched::Schedule>(sched::ring_allgather(P, ag_count));
  ASSERT_NE(allreduce->num_steps(), reduce_scatter->num_steps());

  exec::InProcessFabric fabric(P, std::chrono::seconds(30));
  std::vector<std::vector<int32_t>> ar_out(P), rs_out(P), ag_out(P);
  std::vector<std::vector<Event>> logs(P);
  std::vector<std::string> errors(P);

  auto rank_main = [&](int r) {
    try {
      exec::InProcessTransport transport(fabric, r);
      exec::HostBackend host(transport);
      std::vector<int32_t> ar_in(ar_count), rs_in(rs_count * P), ag_in(ag_count);
      for (int64_t i = 0; i < ar_count; ++i) ar_in[i] = value(r, i, 0);
      for (int64_t i = 0; i < rs_count * P; ++i) rs_in[i] = value(r, i, 1);
      for (int64_t i = 0; i < ag_count; ++i) ag_in[i] = value(r, i, 2);
      ar_out[r].assign(ar_count, -1);
      rs_out[r].assign(rs_count, -1);
      ag_out[r].assign(ag_count * P, -1);
      std::vector<std::vector<char>> scratch;
      auto make = [&](std::shared_ptr<const sched::Schedule> s, kernels::ReduceOp op, const void* in,
                      void* out, int id) {
        scratch.emplace_back(exec::scratch_bytes(s->programs[r], kernels::DataType::Int32) + 1);
        QueuedCollective q;
        q.schedule = std::move(s);
        q.rank = r;
        q.dtype = kernels::DataType::Int32;
        q.op = op;
        q.buffers = {in, out, scratch.back().data()};
        q.backend = std::make_shared<RecordingBackend>(host, id, logs[r]);
        return q;
      };
      scratch.reserve(3);
      GroupDepth depth;
      CollectiveQueue queue;
      depth.enter();  // ncclGroupStart
      queue.push(make(allreduce, kernels::ReduceOp::Sum, ar_in.data(), ar_out[r].data(), 0));
      depth.enter();  // nested
      queue.push(make(reduce_scatter, kernels::ReduceOp::Max, rs_in.data(), rs_out[r].data(), 1));
      ASSERT_TRUE(depth.leave());
      EXPECT_TRUE(depth.inside());  // not the outermost end: nothing runs yet
      queue.push(make(allgather, kernels::ReduceOp::Sum, ag_in.data(), ag_out[r].data(), 2));
      EXPECT_TRUE(logs[r].empty());
      ASSERT_TRUE(depth.leave());  // outermost ncclGroupEnd
      ASSERT_FALSE(depth.inside());
      queue.run_all();
      EXPECT_TRUE(queue.empty());
    } catch (const std::exception& e) {
      errors[r] = e.what();
    }
  };
  std::vector<std::thread> threads;
  for (int r = 0; r < P; ++r) threads.emplace_back(rank_main, r);
  for (auto& t : threads) t.join();
  for (int r = 0; r < P; ++r) ASSERT_EQ(errors[r], "") << "rank " << r;

  // Results.
  for (int r = 0; r < P; ++r) {
    for (int64_t i = 0; i < ar_count; ++i) {
      int32_t sum = 0;
      for (int q = 0; q < P; ++q) sum += value(q, i, 0);
      ASSERT_EQ(ar_out[r][i], sum) << "allreduce rank " << r << " element " << i;
    }
    for (int64_t i = 0; i < rs_count; ++i) {
      int32_t mx = INT32_MIN;
      for (int q = 0; q < P; ++q) mx = std::max(mx, value(q, r * rs_count + i, 1));
      ASSERT_EQ(rs_out[r][i], mx) << "reduce-scatter rank " << r << " element " << i;
    }
    for (int q = 0; q < P; ++q)
      for (int64_t i = 0; i < ag_count; ++i)
        ASSERT_EQ(ag_out[r][q * ag_count + i], value(q, i, 2)) << "allgather rank " << r;
  }

  // Interleaving: per round, every unfinished collective begins its batch before any batch
  // ends, and all batches end before any local op of that round.
  const int steps[3] = {allreduce->num_steps(), reduce_scatter->num_steps(), allgather->num_steps()};
  for (int r = 0; r < P; ++r) {
    const auto& log = logs[r];
    std::size_t pos = 0;
    for (int k = 0; k < *std::max_element(steps, steps + 3); ++k) {
      std::vector<int> live;
      for (int c = 0; c < 3; ++c)
        if (k < steps[c]) live.push_back(c);
      for (int c : live) {
        ASSERT_LT(pos, log.size());
        EXPECT_EQ(log[pos].what, 'b') << "rank " << r << " round " << k;
        EXPECT_EQ(log[pos].collective, c);
        EXPECT_EQ(log[pos].step, k);
        ++pos;
      }
      for (auto it = live.rbegin(); it != live.rend(); ++it) {
        ASSERT_LT(pos, log.size());
        EXPECT_EQ(log[pos].what, 'e') << "rank " << r << " round " << k;
        EXPECT_EQ(log[pos].collective, *it);
        ++pos;
      }
      while (pos < log.size() && log[pos].what == 'l') {
        EXPECT_EQ(log[pos].step, k);
        ++pos;
      }
    }
    EXPECT_EQ(pos, log.size()) << "rank " << r;
  }
}

}  // namespace
}  // namespace topocoll::plugin::interposer
