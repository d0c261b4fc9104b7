#include "exec/benchmark.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "exec/collective_check.h"
#include "exec/engine.h"
#include "sched/nccl_tests_sizes.h"

namespace topocoll::exec {

namespace {

using Clock = std::chrono::steady_clock;

// FNV-1a over raw values.
struct Fingerprint {
  uint64_t h = 1469598103934665603ull;
  template <class T>
  void add(const T& v) {
    const auto* p = reinterpret_cast<const unsigned char*>(&v);
    for (std::size_t i = 0; i < sizeof v; ++i) h = (h ^ p[i]) * 1099511628211ull;
  }
};

template <class T>
std::string pack(const T& v) {
  return std::string(reinterpret_cast<const char*>(&v), sizeof v);
}
template <class T>
T unpack(const std::string& s) {
  T v{};
  if (s.size() == sizeof v) std::memcpy(&v, s.data(), sizeof v);
  return v;
}

}  // namespace

uint64_t schedule_fingerprint(const sched::Schedule& s) {
  Fingerprint f;
  f.add(s.collective);
  f.add(s.nranks);
  f.add(s.count);
  for (const auto& p : s.programs) {
    f.add(p.scratch_elems);
    for (uint32_t b : p.step_begin) f.add(b);
    for (const auto& op : p.ops) {
      f.add(op.kind);
      f.add(op.peer);
      f.add(op.count);
      f.add(op.dst.buf);
      f.add(op.dst.offset);
      for (int k = 0; k < std::max(1, int(op.nsrc)); ++k) {
        f.add(op.srcs[k].buf);
        f.add(op.srcs[k].offset);
      }
    }
  }
  return f.h;
}

BenchmarkRow measure_collective(const sched::Schedule& schedule, const std::string& algo,
                                const BenchmarkSettings& settings,
                                HostBackend& backend, BootstrapClient& group,
                                BenchmarkBuffers& buffers) {
  const int rank = group.rank();
  const int nranks = group.nranks();
  if (schedule.nranks != nranks)
    throw std::invalid_argument("schedule for " + std::to_string(schedule.nranks) +
                                " ranks in a group of " + std::to_string(nranks));
  const auto prints = group.allgather(pack(schedule_fingerprint(schedule)));
  for (int r = 0; r < nranks; ++r)
    if (prints[r] != prints[0])
      throw std::runtime_error("rank " + std::to_string(r) + " planned a different " + algo +
                               " schedule than rank 0 (placement or order not deterministic)");

  CollectiveCase c;
  c.collective = schedule.collective;
  c.dtype = settings.dtype;
  c.op = settings.op;
  c.nranks = nranks;
  c.count = schedule.count;
  const std::size_t e = c.elem();
  const std::size_t in_bytes = std::size_t(c.input_elems()) * e;
  const std::size_t out_bytes = std::size_t(c.output_elems()) * e;
  const std::size_t scratch = scratch_bytes(schedule, rank, c.dtype, c.op);
  // Grown only when a larger case comes; never inside the timed loop.
  if (buffers.input.size() < in_bytes + 1) buffers.input.resize(in_bytes + 1);
  if (buffers.output.size() < out_bytes + 1) buffers.output.resize(out_bytes + 1);
  if (buffers.scratch.size() < scratch + 1) buffers.scratch.resize(scratch + 1);
  {
    const auto in = c.input(rank);
    std::memcpy(buffers.input.data(), in.data(), in.size());
  }
  const std::vector<unsigned char> expected =
      settings.check ? expected_output(c, rank) : std::vector<unsigned char>{};
  const Buffers bufs{buffers.input.data(), buffers.output.data(), buffers.scratch.data()};

  int64_t wrong = 0;
  // Checked once; pipelined as the host backend's settings say (exec/pipeline.h).
  Execution execution(schedule, rank, c.dtype, c.op, bufs, backend, PipelineOptions::host_default());
  // Results are checked on the warm-up iterations and once after the timed ones, as
  // nccl-tests' -c does, never between timed iterations: with more ranks than cores one
  // rank's check (a memset and a compare of its whole output) ran while the other ranks
  // timed their collective, and took a third of the machine's CPU at 2 MiB (perf record,
  // 8 ranks on 2 cores).
  auto one_iteration = [&](bool checked) -> double {
    checked = checked && settings.check && !expected.empty();
    if (checked) std::memset(buffers.output.data(), 0xA5, out_bytes);  // stale = wrong
    execution.restart();
    const auto t0 = Clock::now();
    execution.run();
    const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    if (checked && std::memcmp(buffers.output.data(), expected.data(), out_bytes) != 0)
      for (std::size_t i = 0; i < out_bytes; i += e)  // count the wrong elements
        wrong += std::memcmp(buffers.output.data() + i, expected.data() + i, e) != 0;
    return us;
  };

  double warm_us = 0;
  for (int i = 0; i < std::max(1, settings.warmup); ++i) warm_us = one_iteration(true);
  // Every rank runs the same number of iterations: decided from the slowest warm-up.
  double slowest_warm = 0;
  for (const auto& s : group.allgather(pack(warm_us)))
    slowest_warm = std::max(slowest_warm, unpack<double>(s));
  int iters = settings.iters;
  if (slowest_warm > 0)  // clamped as a double: a sub-microsecond warm-up overflows an int
    iters = int(std::clamp(settings.target_seconds * 1e6 / slowest_warm, 2.0, double(std::max(2, settings.iters))));
  group.barrier();
  std::vector<double> times(iters);
  for (int i = 0; i < iters; ++i) times[i] = one_iteration(false);
  one_iteration(true);  // the timed iterations' result, checked
  // Median per rank: robust to the odd descheduled iteration on a shared machine.
  std::sort(times.begin(), times.end());
  const double median_us = iters % 2 ? times[iters / 2]
                                     : 0.5 * (times[iters / 2 - 1] + times[iters / 2]);

  struct Report {
    double median_us;
    int64_t wrong;
  };
  BenchmarkRow row;
  row.algo = algo;
  row.collective = schedule.collective;
  row.nranks = nranks;
  // The size the collective moves, which is what its bandwidth is of: a requested size
  // that is not a whole number of elements (x P for the gathers) runs rounded down.
  row.bytes = sched::size_of_count(schedule.collective, schedule.count, e, nranks);
  row.count = schedule.count;
  row.dtype = c.dtype;
  row.op = c.op;
  row.iters = iters;
  row.wrong = settings.check ? 0 : -1;
  for (const auto& s : group.allgather(pack(Report{median_us, wrong}))) {
    const auto rep = unpack<Report>(s);
    row.time_us = std::max(row.time_us, rep.median_us);
    if (settings.check) row.wrong += rep.wrong;
  }
  if (settings.check && expected.empty()) row.wrong = -1;
  row.algbw_gbs = sched::algbw_gbs(double(row.bytes), row.time_us);
  row.busbw_gbs = sched::busbw_gbs(row.collective, nranks, double(row.bytes), row.time_us);
  return row;
}

}  // namespace topocoll::exec
