// Runs one collective case on P threads over the in-process transport and returns every
// rank's output (throws the first rank's error).
#pragma once

#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "exec/engine.h"
#include "exec/host_backend.h"
#include "exec/in_process_transport.h"
#include "exec/collective_check.h"

namespace topocoll::exec::testing {

using kernels::DataType;
using kernels::ReduceOp;
using sched::Collective;

inline std::vector<std::vector<unsigned char>> run_on_threads(
    const CollectiveCase& c, const sched::Schedule& s,
    const std::vector<std::vector<unsigned char>>& inputs) {
  InProcessFabric fabric(c.nranks, std::chrono::seconds(20));
  std::vector<std::vector<unsigned char>> outputs(c.nranks);
  std::exception_ptr error;
  std::mutex error_mutex;
  auto rank_main = [&](int r) {
    try {
      RankMemory mem(c, s, r, inputs[r]);
      InProcessTransport transport(fabric, r);
      HostBackend backend(transport);
      Execution(s, r, c.dtype, c.op, mem.buffers, backend).run();
      outputs[r] = mem.output(c);
      if (mem.scratch.back() != 0) throw std::runtime_error("scratch overrun");
    } catch (...) {
      std::lock_guard lock(error_mutex);
      if (!error) error = std::current_exception();
    }
  };
  std::vector<std::thread> threads;
  for (int r = 1; r < c.nranks; ++r) threads.emplace_back(rank_main, r);
  rank_main(0);
  for (auto& t : threads) t.join();
  if (error) std::rethrow_exception(error);
  return outputs;
}

}  // namespace topocoll::exec::testing
