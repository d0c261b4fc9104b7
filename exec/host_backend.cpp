#include "exec/host_backend.h"

#include <cstring>

#include "kernels/reduce_cpu.h"

namespace topocoll::exec {

void HostBackend::begin_transfers() { ++depth_; }

void HostBackend::post_send(int peer, const void* src, std::size_t bytes) {
  transport_->post_send(peer, src, bytes);
}

void HostBackend::post_recv(int peer, void* dst, std::size_t bytes) {
  transport_->post_recv(peer, dst, bytes);
}

void HostBackend::end_transfers() {
  if (depth_ == 0) throw BackendError("end_transfers without begin_transfers");
  if (--depth_ == 0) transport_->wait_all();
}

void HostBackend::reduce(const CollectiveBinding& binding, void* dst, const void* const* srcs,
                         int nsrc, int64_t count) {
  kernels::reduce_cpu(binding.dtype, binding.op, dst, srcs, nsrc, count);
}

void HostBackend::copy(void* dst, const void* src, std::size_t bytes) {
  if (dst != src) std::memmove(dst, src, bytes);
}

void HostBackend::finalize(const CollectiveBinding& binding, void* dst, int64_t count) {
  kernels::finalize_cpu(binding.dtype, binding.op, dst, count, binding.nranks);
}

void HostBackend::avg_premul(const CollectiveBinding& binding, void* dst, const void* src,
                             int64_t count) {
  kernels::avg_premul_cpu(binding.dtype, dst, src, std::size_t(count), binding.nranks);
}

}  // namespace topocoll::exec
