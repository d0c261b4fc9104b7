// Host backend: the engine's Backend on CPU memory. Transfers go through a HostTransport
// (threads in one process, or sockets between processes); reduce and finalize are the
// kernels' CPU references (kernels/reduce_cpu.h), so results are bitwise those of the CUDA
// kernels.
#pragma once

#include "exec/backend.h"
#include "exec/host_transport.h"

namespace topocoll::exec {

class HostBackend final : public Backend {
 public:
  explicit HostBackend(HostTransport& transport) : transport_(&transport) {}

  HostTransport& transport() const { return *transport_; }

  void begin_transfers() override;
  void post_send(int peer, const void* src, std::size_t bytes) override;
  void post_recv(int peer, void* dst, std::size_t bytes) override;
  void end_transfers() override;

  void reduce(const CollectiveBinding& binding, void* dst, const void* const* srcs, int nsrc,
              int64_t count) override;
  void copy(void* dst, const void* src, std::size_t bytes) override;
  void finalize(const CollectiveBinding& binding, void* dst, int64_t count) override;
  void avg_premul(const CollectiveBinding& binding, void* dst, const void* src,
                  int64_t count) override;

 private:
  HostTransport* transport_;
  int depth_ = 0;  // nested transfer batches (exec/backend.h)
};

}  // namespace topocoll::exec
