// The baseline net_plugin_pingpong measures the plugin against: the design of NCCL's own
// Socket transport as it runs on a machine without a cloud NIC (net_socket.cc starts no
// helper threads then): one TCP socket per direction, an 8-byte size before each message,
// and every byte moved by the thread that polls, without blocking. Not NCCL's code; what a
// transport of that design costs on this machine, measured in the same run as the plugin.
#pragma once

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <deque>

namespace topocoll::perf {

class CallerSocketLink {
 public:
  struct Op {
    char* data = nullptr;
    size_t size = 0;     // send: message size; receive: posted capacity, then received size
    uint64_t header = 0;
    size_t moved = 0;    // header and payload bytes moved so far
    bool receive = false;
    bool finished = false;
  };

  CallerSocketLink() = default;
  CallerSocketLink(const CallerSocketLink&) = delete;
  CallerSocketLink& operator=(const CallerSocketLink&) = delete;
  ~CallerSocketLink() {
    for (auto* q : {&sends_, &recvs_})
      for (Op* op : *q) delete op;
    if (send_fd_ >= 0) ::close(send_fd_);
    if (recv_fd_ >= 0) ::close(recv_fd_);
  }

  // Listens on loopback; returns the port (0 on failure).
  uint16_t listen() {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::listen(listen_fd_, 1) != 0 || ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      return 0;
    return ntohs(a.sin_port);
  }
  // The send direction to a peer's listener.
  bool connect(uint16_t port) {
    send_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    return send_fd_ >= 0 && ::connect(send_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && no_delay(send_fd_);
  }
  // The receive direction: the peer's connection to this listener.
  bool accept() {
    recv_fd_ = ::accept(listen_fd_, nullptr, nullptr);
    ::close(listen_fd_);
    listen_fd_ = -1;
    return recv_fd_ >= 0 && no_delay(recv_fd_);
  }

  bool post_send(void* data, size_t size, Op** op) { return post(data, size, false, op); }
  bool post_recv(void* data, size_t size, Op** op) { return post(data, size, true, op); }
  // Moves bytes until `op` is finished, as NCCL's proxy polls test(); frees it.
  bool wait(Op* op) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!op->finished) {
      if (!progress(op->receive ? recvs_ : sends_, op->receive ? recv_fd_ : send_fd_)) return false;
      if (std::chrono::steady_clock::now() > deadline) return false;
    }
    delete op;
    return true;
  }
  // One pass of test(): moves what the socket takes now; frees `op` when it is finished.
  bool test(Op* op, bool* done) {
    if (!progress(op->receive ? recvs_ : sends_, op->receive ? recv_fd_ : send_fd_)) return false;
    *done = op->finished;
    if (*done) delete op;
    return true;
  }

 private:
  static bool no_delay(int fd) {
    int one = 1;
    return ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) == 0;
  }
  bool post(void* data, size_t size, bool receive, Op** out) {
    Op* op = new Op{static_cast<char*>(data), size, receive ? 0 : uint64_t(size), 0, receive, false};
    (receive ? recvs_ : sends_).push_back(op);
    *out = op;
    return progress(receive ? recvs_ : sends_, receive ? recv_fd_ : send_fd_);  // as Socket's isend does
  }
  // Moves the queue's front messages as far as the socket takes them; false on an error.
  static bool progress(std::deque<Op*>& queue, int fd) {
    while (!queue.empty()) {
      Op& op = *queue.front();
      while (op.moved < sizeof op.header + op.size) {
        const bool in_header = op.moved < sizeof op.header;
        char* at = in_header ? reinterpret_cast<char*>(&op.header) + op.moved
                             : op.data + (op.moved - sizeof op.header);
        const size_t left = in_header ? sizeof op.header - op.moved : sizeof op.header + op.size - op.moved;
        const ssize_t n = op.receive ? ::recv(fd, at, left, MSG_DONTWAIT)
                                     : ::send(fd, at, left, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n == 0 && op.receive) return false;
        if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
        op.moved += size_t(n);
        if (op.receive && op.moved == sizeof op.header) {
          if (op.header > op.size) return false;  // larger than the posted receive
          op.size = size_t(op.header);
        }
      }
      op.finished = true;
      queue.pop_front();
    }
    return true;
  }

  int listen_fd_ = -1, send_fd_ = -1, recv_fd_ = -1;
  std::deque<Op*> sends_, recvs_;
};

}  // namespace topocoll::perf
