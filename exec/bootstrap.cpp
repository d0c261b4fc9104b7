#include "exec/bootstrap.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace topocoll::exec {

namespace {

constexpr uint32_t kBootstrapMagic = 0x54434231;  // "TCB1"
constexpr uint32_t kBootstrapVersion = 1;
// Rounds may be far apart (a benchmark runs between barriers); a vanished peer still shows
// up at once as EOF, so this only bounds a peer that is alive but stuck.
constexpr std::chrono::minutes kRoundTimeout{30};
constexpr uint64_t kMaxBlob = 1 << 20;

using Clock = std::chrono::steady_clock;

struct Hello {
  uint32_t magic, version;
  int32_t rank, nranks;
};

std::string errno_text() { return std::strerror(errno); }

// Returns false on timeout; throws on EOF or a socket error.
bool wait_fd(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd p{fd, events, 0};
    const int r = ::poll(&p, 1, int(std::min<int64_t>(left, 1000)));
    if (r > 0) return true;
    if (r < 0 && errno != EINTR) throw std::runtime_error("bootstrap poll: " + errno_text());
  }
}

void write_all(int fd, const void* data, size_t n, Clock::time_point deadline) {
  auto* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w > 0) {
      p += w;
      n -= size_t(w);
    } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      if (!wait_fd(fd, POLLOUT, deadline)) throw std::runtime_error("bootstrap send timed out");
    } else {
      throw std::runtime_error("bootstrap send: " + errno_text());
    }
  }
}

void read_all(int fd, void* data, size_t n, Clock::time_point deadline) {
  auto* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t r = ::recv(fd, p, n, 0);
    if (r > 0) {
      p += r;
      n -= size_t(r);
    } else if (r == 0) {
      throw std::runtime_error("bootstrap peer closed the connection");
    } else if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      if (!wait_fd(fd, POLLIN, deadline)) throw std::runtime_error("bootstrap receive timed out");
    } else {
      throw std::runtime_error("bootstrap receive: " + errno_text());
    }
  }
}

void set_nonblocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

void set_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

struct AddrInfo {
  addrinfo* list = nullptr;
  ~AddrInfo() {
    if (list) ::freeaddrinfo(list);
  }
};

void resolve(const BootstrapAddress& a, bool passive, AddrInfo* out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (passive) hints.ai_flags = AI_PASSIVE;
  const std::string port = std::to_string(a.port);
  const int rc = ::getaddrinfo(a.host.empty() ? nullptr : a.host.c_str(), port.c_str(), &hints,
                               &out->list);
  if (rc != 0)
    throw std::runtime_error("bootstrap: cannot resolve '" + a.host + "': " + gai_strerror(rc));
}

// A frame is a 64-bit length and the bytes; a reply frame carries a status first.
void write_blob(int fd, const std::string& s, Clock::time_point deadline) {
  const uint64_t n = s.size();
  write_all(fd, &n, sizeof n, deadline);
  write_all(fd, s.data(), s.size(), deadline);
}

std::string read_blob(int fd, Clock::time_point deadline) {
  uint64_t n = 0;
  read_all(fd, &n, sizeof n, deadline);
  if (n > kMaxBlob * 1024) throw std::runtime_error("bootstrap: oversized frame");
  std::string s(n, '\0');
  read_all(fd, s.data(), n, deadline);
  return s;
}

}  // namespace

BootstrapAddress BootstrapAddress::parse(const std::string& text) {
  BootstrapAddress a;
  std::string port;
  if (!text.empty() && text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':')
      throw std::invalid_argument("bootstrap address '" + text + "': expected [addr]:port");
    a.host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    const auto colon = text.rfind(':');
    if (colon == std::string::npos)
      throw std::invalid_argument("bootstrap address '" + text + "': expected host:port");
    a.host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  if (port.empty() || port.size() > 5 ||
      !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
      std::stoi(port) > 65535)
    throw std::invalid_argument("bootstrap address '" + text + "': bad port '" + port + "'");
  a.port = uint16_t(std::stoi(port));
  return a;
}

std::string BootstrapAddress::to_string() const {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

// --- root ----------------------------------------------------------------------------------

BootstrapRoot::BootstrapRoot(const BootstrapAddress& address, int nranks,
                             std::chrono::milliseconds timeout)
    : nranks_(nranks), timeout_(timeout) {
  if (nranks < 1) throw std::invalid_argument("bootstrap root: nranks must be >= 1");
  AddrInfo ai;
  resolve(address, true, &ai);
  std::string last_error = "no address";
  for (addrinfo* p = ai.list; p; p = p->ai_next) {
    const int fd = ::socket(p->ai_family, p->ai_socktype | SOCK_CLOEXEC, p->ai_protocol);
    if (fd < 0) continue;
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, p->ai_addr, p->ai_addrlen) == 0 && ::listen(fd, 1024) == 0) {
      sockaddr_storage ss{};
      socklen_t len = sizeof ss;
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
      port_ = ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                                             : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
      listen_fd_ = fd;
      break;
    }
    last_error = errno_text();
    ::close(fd);
  }
  if (listen_fd_ < 0)
    throw std::runtime_error("bootstrap root: cannot listen on " + address.to_string() + ": " +
                             last_error);
  set_nonblocking(listen_fd_);
  thread_ = std::thread([this] { serve(); });
}

BootstrapRoot::~BootstrapRoot() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

std::string BootstrapRoot::error() const { return error_; }

void BootstrapRoot::serve() {
  std::vector<int> fds(nranks_, -1);
  auto close_all = [&] {
    for (int& fd : fds)
      if (fd >= 0) {
        ::close(fd);
        fd = -1;
      }
  };
  // Tells every connected rank why the group failed, so nobody waits for a round that
  // will not come.
  auto fail = [&](const std::string& why) {
    error_ = why;
    const auto deadline = Clock::now() + std::chrono::seconds(1);
    for (int fd : fds) {
      if (fd < 0) continue;
      try {
        const uint32_t status = 1;
        write_all(fd, &status, sizeof status, deadline);
        write_blob(fd, why, deadline);
      } catch (const std::exception&) {
      }
    }
    close_all();
  };
  try {
    // Registration.
    const auto deadline = Clock::now() + timeout_;
    int joined = 0;
    while (joined < nranks_) {
      if (stopping_) return fail("bootstrap: the root was shut down before every rank joined");
      const auto slice = std::min(deadline, Clock::now() + std::chrono::milliseconds(100));
      if (!wait_fd(listen_fd_, POLLIN, slice)) {
        if (Clock::now() < deadline) continue;
        return fail("bootstrap: only " + std::to_string(joined) + " of " +
                    std::to_string(nranks_) + " ranks joined within " +
                    std::to_string(timeout_.count()) + " ms");
      }
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) continue;
      set_nodelay(fd);
      Hello h{};
      try {
        read_all(fd, &h, sizeof h, Clock::now() + std::chrono::seconds(5));
      } catch (const std::exception&) {
        ::close(fd);  // a port scanner or a client that died: not one of ours
        continue;
      }
      if (h.magic != kBootstrapMagic || h.version != kBootstrapVersion) {
        ::close(fd);
        continue;
      }
      if (h.nranks != nranks_ || h.rank < 0 || h.rank >= nranks_ || fds[h.rank] >= 0) {
        fds.push_back(fd);  // so fail() tells it too
        return fail("bootstrap: rank " + std::to_string(h.rank) + " of " +
                    std::to_string(h.nranks) + " does not fit a group of " +
                    std::to_string(nranks_) + (h.rank >= 0 && h.rank < nranks_ && fds[h.rank] >= 0
                                                   ? " (rank already joined)"
                                                   : ""));
      }
      fds[h.rank] = fd;
      ++joined;
    }
    // Rounds until everyone leaves.
    for (;;) {
      const auto round_deadline = Clock::now() + kRoundTimeout;
      std::vector<std::string> blobs(nranks_);
      int left = 0;
      for (int r = 0; r < nranks_; ++r) {
        try {
          blobs[r] = read_blob(fds[r], round_deadline);
        } catch (const std::exception&) {
          ::close(fds[r]);
          fds[r] = -1;
          ++left;
        }
      }
      if (left == nranks_) return;  // normal end: every rank closed
      if (left > 0)
        return fail("bootstrap: " + std::to_string(left) + " rank(s) left the group mid-run");
      std::string reply;
      for (const auto& b : blobs) {
        const uint64_t n = b.size();
        reply.append(reinterpret_cast<const char*>(&n), sizeof n);
        reply += b;
      }
      for (int r = 0; r < nranks_; ++r) {
        const uint32_t status = 0;
        write_all(fds[r], &status, sizeof status, round_deadline);
        write_blob(fds[r], reply, round_deadline);
      }
    }
  } catch (const std::exception& e) {
    fail(std::string("bootstrap root: ") + e.what());
  }
  close_all();
}

// --- client --------------------------------------------------------------------------------

BootstrapClient::BootstrapClient(const BootstrapAddress& root, int rank, int nranks,
                                 std::chrono::milliseconds timeout)
    : rank_(rank), nranks_(nranks), timeout_(timeout) {
  if (nranks < 1 || rank < 0 || rank >= nranks)
    throw std::invalid_argument("bootstrap: rank " + std::to_string(rank) + " of " +
                                std::to_string(nranks) + " is not a valid rank");
  const auto deadline = Clock::now() + timeout;
  std::string last_error;
  while (fd_ < 0) {
    AddrInfo ai;
    resolve(root, false, &ai);
    for (addrinfo* p = ai.list; p && fd_ < 0; p = p->ai_next) {
      const int fd = ::socket(p->ai_family, p->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                              p->ai_protocol);
      if (fd < 0) continue;
      // Non-blocking connect bounded by the deadline: an unreachable host must not hold
      // us for the kernel's SYN retries (minutes).
      int rc = ::connect(fd, p->ai_addr, p->ai_addrlen);
      if (rc != 0 && errno == EINPROGRESS) {
        const auto slice = std::min(deadline, Clock::now() + std::chrono::seconds(2));
        int err = ETIMEDOUT;
        socklen_t len = sizeof err;
        if (wait_fd(fd, POLLOUT, slice)) ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
        rc = err == 0 ? 0 : -1;
        errno = err;
      }
      if (rc == 0) {
        fd_ = fd;
      } else {
        last_error = errno_text();
        ::close(fd);
      }
    }
    if (fd_ >= 0) break;
    if (Clock::now() > deadline)
      throw std::runtime_error("bootstrap: cannot reach root " + root.to_string() + " within " +
                               std::to_string(timeout.count()) + " ms: " + last_error);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // root not up yet
  }
  set_nonblocking(fd_);
  set_nodelay(fd_);
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  char ip[INET6_ADDRSTRLEN] = {};
  if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&ss), &len) == 0) {
    if (ss.ss_family == AF_INET)
      ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&ss)->sin_addr, ip, sizeof ip);
    else
      ::inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&ss)->sin6_addr, ip, sizeof ip);
  }
  local_ip_ = ip;
  const Hello h{kBootstrapMagic, kBootstrapVersion, rank, nranks};
  write_all(fd_, &h, sizeof h, deadline);
}

BootstrapClient::~BootstrapClient() {
  if (fd_ >= 0) ::close(fd_);
}

std::vector<std::string> BootstrapClient::allgather(const std::string& mine) {
  if (mine.size() > kMaxBlob) throw std::invalid_argument("bootstrap: blob too large");
  const auto deadline = Clock::now() + kRoundTimeout;
  try {
    write_blob(fd_, mine, deadline);
    uint32_t status = 0;
    read_all(fd_, &status, sizeof status, deadline);
    std::string reply = read_blob(fd_, deadline);
    if (status != 0) throw std::runtime_error(reply);
    std::vector<std::string> out;
    size_t pos = 0;
    while (pos + sizeof(uint64_t) <= reply.size()) {
      uint64_t n;
      std::memcpy(&n, reply.data() + pos, sizeof n);
      pos += sizeof n;
      if (pos + n > reply.size()) break;
      out.emplace_back(reply.substr(pos, n));
      pos += n;
    }
    if (int(out.size()) != nranks_) throw std::runtime_error("bootstrap: malformed reply");
    return out;
  } catch (const std::exception& e) {
    throw std::runtime_error("rank " + std::to_string(rank_) + ": " + e.what());
  }
}

}  // namespace topocoll::exec
