#include "plugin/interposer/collective_queue.h"

#include <utility>

namespace topocoll::plugin::interposer {

void CollectiveQueue::run_all() {
  std::vector<QueuedCollective> batch;
  batch.swap(queued_);
  std::vector<std::unique_ptr<exec::Execution>> executions;
  executions.reserve(batch.size());
  std::vector<exec::Execution*> order;
  order.reserve(batch.size());
  for (QueuedCollective& c : batch) {
    executions.push_back(std::make_unique<exec::Execution>(*c.schedule, c.rank, c.dtype, c.op,
                                                           c.buffers, *c.backend));
    order.push_back(executions.back().get());
  }
  exec::run_interleaved(order);
}

}  // namespace topocoll::plugin::interposer
