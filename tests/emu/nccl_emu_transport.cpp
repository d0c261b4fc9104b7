#include "tests/emu/nccl_emu_transport.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "tests/emu/nccl_emu_failure.h"

namespace topocoll::emu {
namespace {

// What precedes each message's bytes on the wire.
struct WireHeader {
  std::uint64_t comm_hi, comm_lo;
  std::int32_t source, destination, channel, unused;
  std::uint64_t bytes;
};

std::string errno_text() { return std::strerror(errno); }

sockaddr_un abstract_address(const std::string& name, socklen_t* length) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  // Abstract namespace: a leading NUL, then the name (not NUL-terminated).
  std::memcpy(addr.sun_path + 1, name.data(), name.size());
  *length = socklen_t(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  return addr;
}

bool read_fully(int fd, void* data, std::size_t bytes) {
  auto* p = static_cast<char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::read(fd, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    bytes -= std::size_t(n);
  }
  return true;
}

bool write_fully(int fd, const void* data, std::size_t bytes) {
  const auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::send(fd, p, bytes, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    bytes -= std::size_t(n);
  }
  return true;
}

// The process's listening sockets, accepted connections and the thread that serves them.
// Created on first use and never destroyed: the thread runs until the process exits.
class Receiver {
 public:
  static Receiver& process() {
    static Receiver* const receiver = new Receiver;
    return *receiver;
  }

  void add_listener(int fd) {
    {
      std::lock_guard lock(mutex_);
      new_listeners_.push_back(fd);
    }
    const char wake = 1;
    (void)!::write(wake_[1], &wake, 1);
  }

 private:
  Receiver() {
    if (::pipe2(wake_, O_CLOEXEC) != 0)
      throw Failure(ncclSystemError, "pipe: " + errno_text());
    std::thread([this] { serve(); }).detach();
  }

  void serve() {
    std::vector<int> listeners, connections;
    for (;;) {
      const std::size_t listener_count = listeners.size();
      std::vector<pollfd> fds{{wake_[0], POLLIN, 0}};
      for (int fd : listeners) fds.push_back({fd, POLLIN, 0});
      for (int fd : connections) fds.push_back({fd, POLLIN, 0});
      if (::poll(fds.data(), fds.size(), -1) < 0) continue;
      if (fds[0].revents) {
        char drain[64];
        (void)!::read(wake_[0], drain, sizeof drain);
        std::lock_guard lock(mutex_);
        listeners.insert(listeners.end(), new_listeners_.begin(), new_listeners_.end());
        new_listeners_.clear();
      }
      for (std::size_t i = 1; i < fds.size(); ++i) {
        if (!fds[i].revents) continue;
        const bool is_listener = i <= listener_count;
        if (is_listener) {
          const int fd = ::accept4(fds[i].fd, nullptr, nullptr, SOCK_CLOEXEC);
          if (fd >= 0) connections.push_back(fd);
        } else if (!read_message(fds[i].fd)) {
          ::close(fds[i].fd);
          std::erase(connections, fds[i].fd);
        }
      }
    }
  }

  // One whole message; false at end of stream or on error (the connection is closed).
  static bool read_message(int fd) {
    WireHeader header;
    if (!read_fully(fd, &header, sizeof header)) return false;
    std::vector<std::byte> bytes(header.bytes);
    if (!read_fully(fd, bytes.data(), bytes.size())) return false;
    const MessageKey key{{header.comm_hi, header.comm_lo}, header.source, header.destination,
                         Channel(header.channel)};
    if (key.channel == Channel::NetSetup || key.channel == Channel::NetHandle) {
      ControlHandler handler;
      {
        std::lock_guard lock(process().mutex_);
        handler = process().control_;
        // A peer may reach this process between its listen and its net proxy's start.
        if (!handler) process().early_controls_.emplace_back(key, std::move(bytes));
      }
      if (handler) handler(key, std::move(bytes));
      return true;
    }
    Mailbox::process().deliver(key, std::move(bytes));
    return true;
  }

 public:
  void set_control(ControlHandler handler) {
    std::vector<std::pair<MessageKey, std::vector<std::byte>>> early;
    {
      std::lock_guard lock(mutex_);
      control_ = handler;
      early.swap(early_controls_);
    }
    for (auto& [key, bytes] : early) handler(key, std::move(bytes));
  }
  void add_name(const std::string& name) {
    std::lock_guard lock(mutex_);
    if (first_name_.empty()) first_name_ = name;
  }
  std::string first_name() {
    std::lock_guard lock(mutex_);
    return first_name_;
  }

 private:

  std::mutex mutex_;
  std::vector<int> new_listeners_;
  int wake_[2] = {-1, -1};
  ControlHandler control_;
  std::vector<std::pair<MessageKey, std::vector<std::byte>>> early_controls_;
  std::string first_name_;
};

// Outgoing connections, one per destination name, reused so that messages between two
// ranks stay in order. One lock: a message is written whole before the next one starts.
class Connections {
 public:
  static Connections& process() {
    static Connections* const connections = new Connections;
    return *connections;
  }

  void send(const std::string& name, const WireHeader& header, const void* data,
            std::chrono::milliseconds timeout) {
    std::lock_guard lock(mutex_);
    const int fd = connect_to(name, timeout);
    if (!write_fully(fd, &header, sizeof header) || !write_fully(fd, data, header.bytes)) {
      const std::string why = errno_text();
      ::close(fd);
      open_.erase(name);
      throw Failure(ncclSystemError, "sending " + std::to_string(header.bytes) +
                                         " bytes to " + name + ": " + why);
    }
  }

 private:
  int connect_to(const std::string& name, std::chrono::milliseconds timeout) {
    if (auto it = open_.find(name); it != open_.end()) return it->second;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (fd < 0) throw Failure(ncclSystemError, "socket: " + errno_text());
      socklen_t length;
      const sockaddr_un addr = abstract_address(name, &length);
      if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), length) == 0) {
        open_[name] = fd;
        return fd;
      }
      const std::string why = errno_text();
      ::close(fd);
      // The peer may simply not have called ncclCommInitRank yet.
      if (std::chrono::steady_clock::now() >= deadline)
        throw Failure(ncclSystemError, "no process listens at " + name + " after " +
                                           std::to_string(timeout.count() / 1000) + " s: " + why);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

  std::mutex mutex_;
  std::map<std::string, int> open_;
};

}  // namespace

std::string socket_name(const CommKey& comm, int rank) {
  char name[96];
  std::snprintf(name, sizeof name, "topocoll-nccl-emu-%016llx%016llx-%d",
                static_cast<unsigned long long>(comm.hi),
                static_cast<unsigned long long>(comm.lo), rank);
  return name;
}

void listen_at(const std::string& name) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw Failure(ncclSystemError, "socket: " + errno_text());
  socklen_t length;
  const sockaddr_un addr = abstract_address(name, &length);
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&addr), length) != 0 ||
      ::listen(fd, 128) != 0) {
    const std::string why = errno_text();
    ::close(fd);
    throw Failure(ncclInvalidUsage, "cannot listen at " + name + " (" + why +
                                        "): is this rank initialized twice?");
  }
  Receiver::process().add_listener(fd);
  Receiver::process().add_name(name);
}

void set_control_handler(ControlHandler handler) { Receiver::process().set_control(std::move(handler)); }

std::string process_address() { return Receiver::process().first_name(); }

void send_message(const std::string& address, const MessageKey& key, const void* data,
                  std::size_t bytes, std::chrono::milliseconds timeout) {
  if (address.empty()) {
    const auto* p = static_cast<const std::byte*>(data);
    Mailbox::process().deliver(key, std::vector<std::byte>(p, p + bytes));
    return;
  }
  const WireHeader header{key.comm.hi,      key.comm.lo,
                          key.source,       key.destination,
                          std::int32_t(key.channel), 0,
                          bytes};
  Connections::process().send(address, header, data, timeout);
}

}  // namespace topocoll::emu
