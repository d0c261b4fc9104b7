// HostTransport: point-to-point byte transfers between the ranks of one host-backend group,
// whatever carries them (threads in one process, sockets between processes).
// Messages between one (src, dst) pair match in posting order; a receive must be posted
// with exactly the sender's size (schedules guarantee it; anything else is an error, never
// a silent truncation).
#pragma once

#include <cstddef>

namespace topocoll::exec {

class HostTransport {
 public:
  virtual ~HostTransport() = default;
  virtual int rank() const = 0;
  virtual int nranks() const = 0;
  // Non-blocking: the memory must stay valid and untouched until wait_all() returns.
  virtual void post_send(int peer, const void* src, std::size_t bytes) = 0;
  virtual void post_recv(int peer, void* dst, std::size_t bytes) = 0;
  // Blocks until every transfer posted since the last wait_all() is complete. Throws
  // BackendError (exec/backend.h) naming the peer on a size mismatch, a vanished peer, or
  // no progress within the transport's timeout: nothing hangs.
  virtual void wait_all() = 0;
};

}  // namespace topocoll::exec
