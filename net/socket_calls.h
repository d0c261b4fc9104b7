// Thin, checked wrappers over the socket system calls, for the transport (connect(), the
// Listener) and for every other socket user above net/ (exec's bootstrap, accept's probes).
// Every wait is bounded by a deadline. The calls that return an int give 0 or the errno of
// the system call that failed, so callers word their own errors.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "net/file_descriptor.h"
#include "net/net_status.h"
#include "net/socket_address.h"

namespace topocoll::net {

using Clock = std::chrono::steady_clock;

std::string errno_text(int error_number);
// Whether accept(2) failed with an error of the connection it would have returned, not of
// the listening socket: Linux passes a new socket's pending network error to accept, which
// is then retried (accept(2); NCCL's misc/socket.cc socketTryAccept), as is ECONNABORTED.
bool is_pending_network_error(int error_number);
// Whether a connect that failed with this error may succeed if tried again, as NCCL's
// misc/socket.cc socketConnectCheck retries it: nothing listens yet or the listener's
// backlog was full (ECONNREFUSED), no neighbour for now (EHOSTUNREACH), the handshake went
// unanswered (ETIMEDOUT), EAGAIN, EINTR. No route at all (ENETUNREACH) is not retried, as
// NCCL does not: a misconfigured interface fails at once.
bool is_retryable_connect_error(int error_number);
// Whether a send/recv error on an established connection is the peer's or the path's (a
// reset, a dead host, a link down) rather than this process's (EBADF, ENOMEM, EFAULT...):
// NCCL's Socket transport reports the former as ncclRemoteError (misc/socket.cc).
bool is_peer_or_path_error(int error_number);
// The wait before try `tries` (0, 1, ...) of a retried connect: 10 ms doubling, at most
// 500 ms (NCCL waits 100 ms more each try; a listener that comes late is met sooner here).
std::chrono::milliseconds connect_retry_delay(int tries);
// "0x%08x": how magic numbers and ids appear in error messages.
std::string hex32(uint32_t value);
uint64_t random_u64();
int remaining_ms(Clock::time_point deadline);

// A non-blocking, close-on-exec TCP socket.
NetStatus open_tcp_socket(int family, FileDescriptor* out);
NetStatus set_no_delay(int fd);
SocketAddress local_address_of(int fd);
SocketAddress peer_address_of(int fd);
// Whether a connected TCP socket is connected to itself: Linux completes a connect to one's
// own local address and port (a simultaneous open), as a retry towards a local port nobody
// listens on any more can hit; what is sent there goes nowhere.
bool connected_to_itself(int fd);

// Binds to `address` with SO_REUSEADDR and listens with `backlog`. `failed_call` (optional)
// gets "bind" or "listen" when one fails.
int bind_and_listen(int fd, const SocketAddress& address, int backlog,
                    const char** failed_call = nullptr);
// Binds the local side of a socket before it connects.
int bind_local(int fd, const SocketAddress& address);
// Starts a connect on a non-blocking socket: 0 also while it is under way (EINPROGRESS).
int start_connect(int fd, const SocketAddress& peer);
// The outcome of a non-blocking connect once its socket is writable (SO_ERROR).
int connect_error(int fd);
// One pending connection, non-blocking and close-on-exec; invalid when none is pending or
// accepting failed. `peer` (optional) gets its address; `error` (optional) why it is invalid:
// 0 when none is pending, else accept's errno.
FileDescriptor accept_connection(int listen_fd, SocketAddress* peer = nullptr, int* error = nullptr);
// Whether an accept (or socket) error is this process or machine running short (descriptors,
// buffers, memory): it passes, so the caller backs off and retries, and says so if it lasts,
// instead of polling a listener that stays readable in a tight loop.
bool is_resource_shortage(int error_number);

// Whether a socket from which `received` bytes were read has sent nothing at all: none read
// and none waiting.
bool has_sent_nothing(int fd, size_t received);
// Which of the sockets still to say who they are (oldest first) a newcomer crowds out when
// their table is full: the oldest that has sent nothing (a stranger holding a slot), never
// one whose hello waits unread (the real peer's may: it connected before the flood); the
// oldest of all only when every one has bytes. Shared by the Listener, the bootstrap root
// and the eager channel, so a flood crowds out only itself wherever it lands.
template <class Waiting, class FdOf, class ReceivedOf>
size_t socket_to_crowd_out(const Waiting& waiting, FdOf fd_of, ReceivedOf received_of) {
  for (size_t k = 0; k < waiting.size(); ++k)
    if (has_sent_nothing(fd_of(waiting[k]), received_of(waiting[k]))) return k;
  return 0;
}

// Waits until `fd` is ready for `events` (POLLIN, POLLOUT...) or the deadline passes,
// retrying interrupted waits: > 0 ready, 0 at the deadline, -1 when poll failed (errno).
int wait_ready(int fd, short events, Clock::time_point deadline);
// Appends what a non-blocking socket holds now to `inbox`, at most 4 MiB a call (the rest
// stays readable for the next); false at the end of the stream or on a socket error.
bool receive_available(int fd, std::string& inbox);

// Writes all of `size` bytes to a non-blocking socket, waiting for room until the deadline:
// 0 when all went, kDeadlinePassed, or the errno of the send that failed.
inline constexpr int kDeadlinePassed = -1;
int send_fully(int fd, const void* data, size_t size, Clock::time_point deadline);
// send_fully with its outcome as a status naming `what`.
NetStatus send_all(int fd, const void* data, size_t size, Clock::time_point deadline,
                   const std::string& what);

}  // namespace topocoll::net
