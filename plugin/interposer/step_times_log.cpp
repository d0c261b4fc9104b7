#include "plugin/interposer/step_times_log.h"

#include <algorithm>
#include <cstdio>
#include <numeric>

#include "plugin/log.h"

namespace topocoll::plugin::interposer {

std::vector<uint64_t> step_bytes_sent(const sched::Schedule& schedule, int rank, std::size_t elem_bytes) {
  const sched::RankProgram& program = schedule.programs.at(std::size_t(rank));
  std::vector<uint64_t> bytes(std::size_t(program.num_steps()), 0);
  for (int s = 0; s < program.num_steps(); ++s)
    for (const sched::Op& o : program.step(s))
      if (o.kind == sched::OpKind::Send) bytes[std::size_t(s)] += uint64_t(o.count) * elem_bytes;
  return bytes;
}

std::vector<std::string> step_times_lines(const void* comm, int rank, int nranks,
                                          const exec::StepTimes& times) {
  const std::size_t steps = times.step_us.size();
  const double total = std::accumulate(times.step_us.begin(), times.step_us.end(), 0.0);
  std::vector<std::string> lines;
  for (std::size_t first = 0; first < steps; first += kStepsPerLine) {
    const std::size_t last = std::min(steps, first + kStepsPerLine) - 1;
    char head[256];
    std::snprintf(head, sizeof head, "comm %p rank %d/%d step times of %s (%zu steps, %.1f us in all), steps %zu-%zu (us@bytes sent):",
                  comm, rank, nranks, times.label.c_str(), steps, total, first, last);
    std::string line = head;
    for (std::size_t k = first; k <= last; ++k) {
      char one[48];
      std::snprintf(one, sizeof one, " %.1f@%llu", times.step_us[k],
                    static_cast<unsigned long long>(k < times.step_bytes.size() ? times.step_bytes[k] : 0));
      line += one;
    }
    lines.push_back(std::move(line));
  }
  return lines;
}

std::unique_ptr<exec::StepTimeline> make_logged_step_timeline(const void* comm, int rank, int nranks) {
  auto sink = [comm, rank, nranks](const exec::StepTimes& t) {
    for (const std::string& line : step_times_lines(comm, rank, nranks, t))
      TC_INFO(NCCL_TUNING, "%s", line.c_str());
  };
  auto warn = [comm](const std::string& what) {
    TC_WARN("communicator %p: %s", comm, what.c_str());
  };
  return std::make_unique<exec::StepTimeline>(sink, warn);
}

}  // namespace topocoll::plugin::interposer
