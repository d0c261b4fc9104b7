#include "exec/host_backend.h"

#include <array>
#include <cstring>

#include "kernels/reduce_cpu.h"

namespace topocoll::exec {

void HostBackend::begin_transfers() { ++depth_; }

// A post that throws ends every open batch: no end_transfers follows it, and a batch left
// open would make the next outermost end skip its wait (its receives read unfinished).
void HostBackend::post_send(int peer, const void* src, std::size_t bytes) {
  try {
    transport_->post_send(peer, src, bytes);
  } catch (...) {
    depth_ = 0;
    throw;
  }
}

void HostBackend::post_recv(int peer, void* dst, std::size_t bytes) {
  try {
    transport_->post_recv(peer, dst, bytes);
  } catch (...) {
    depth_ = 0;
    throw;
  }
}

void HostBackend::end_transfers() {
  if (depth_ == 0) throw BackendError("end_transfers without begin_transfers");
  if (--depth_ == 0) transport_->wait_all();
}

void HostBackend::reduce(const CollectiveBinding& binding, void* dst, const void* const* srcs,
                         int nsrc, int64_t count) {
  if (!deferring_) return kernels::reduce_cpu(binding.dtype, binding.op, dst, srcs, nsrc, count);
  std::array<const void*, sched::kMaxReduceInputs> inputs{};
  std::copy(srcs, srcs + nsrc, inputs.begin());  // the engine's array lives on its stack
  worker_.submit([dtype = binding.dtype, op = binding.op, dst, inputs, nsrc, count] {
    kernels::reduce_cpu(dtype, op, dst, inputs.data(), nsrc, count);
  });
}

void HostBackend::copy(void* dst, const void* src, std::size_t bytes) {
  if (dst == src) return;
  if (!deferring_) return void(std::memmove(dst, src, bytes));
  worker_.submit([dst, src, bytes] { std::memmove(dst, src, bytes); });
}

void HostBackend::finalize(const CollectiveBinding& binding, void* dst, int64_t count) {
  if (!deferring_)
    return kernels::finalize_cpu(binding.dtype, binding.op, dst, count, binding.nranks);
  worker_.submit([dtype = binding.dtype, op = binding.op, dst, count, n = binding.nranks] {
    kernels::finalize_cpu(dtype, op, dst, count, n);
  });
}

void HostBackend::avg_premul(const CollectiveBinding& binding, void* dst, const void* src,
                             int64_t count) {
  kernels::avg_premul_cpu(binding.dtype, dst, src, std::size_t(count), binding.nranks);
}

}  // namespace topocoll::exec
