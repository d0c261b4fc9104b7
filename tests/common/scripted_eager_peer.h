// A scripted peer on a rank's eager port (exec/eager_channel.h): a plain TCP socket that
// says the hello a rank would (or any bytes at all) and then exactly what a test or fuzz
// input writes, so the channel can be driven by a peer that breaks the protocol.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "exec/eager_channel.h"
#include "exec/eager_wire.h"

namespace topocoll::testing_support {

class ScriptedEagerPeer {
 public:
  // Connects to an IPv4 eager listener; says nothing yet. valid() is false when it cannot.
  explicit ScriptedEagerPeer(const exec::EagerChannel::Address& to) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(to.address.port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd_ >= 0 && ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) close();
  }
  ~ScriptedEagerPeer() { close(); }
  ScriptedEagerPeer(const ScriptedEagerPeer&) = delete;
  ScriptedEagerPeer& operator=(const ScriptedEagerPeer&) = delete;

  bool valid() const { return fd_ >= 0; }
  // "127.0.0.1:PORT": where the channel sees this peer come from.
  std::string address() const {
    sockaddr_in a{};
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    return "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  }
  // The hello rank `rank` says to a listener of nonce `nonce`.
  bool hello(uint32_t rank, uint64_t nonce) {
    exec::eager_wire::Hello h;
    h.rank = rank;
    h.nonce = nonce;
    return write(&h, sizeof h);
  }
  bool clear_to_send(uint32_t bytes) { return header(exec::eager_wire::kClearToSendMagic, bytes); }
  bool header(uint32_t magic, uint32_t size) {
    const exec::eager_wire::Header h{magic, size};
    return write(&h, sizeof h);
  }
  // Writes every byte (blocking); false when the channel closed the connection.
  bool write(const void* data, std::size_t n) {
    const char* p = static_cast<const char*>(data);
    while (n > 0) {
      const ssize_t w = ::send(fd_, p, n, MSG_NOSIGNAL);
      if (w <= 0) return false;
      p += w;
      n -= std::size_t(w);
    }
    return true;
  }
  // Closes at once with a reset, leaving no TIME_WAIT behind (a fuzzer makes thousands).
  void reset() {
    const linger hard{1, 0};
    if (fd_ >= 0) ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
    close();
  }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
};

}  // namespace topocoll::testing_support
