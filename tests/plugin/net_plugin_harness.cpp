#include "tests/plugin/net_plugin_harness.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sched.h>

namespace topocoll::testing {

RankMesh::RankMesh(int ranks) : ranks_(ranks), read_fd_(ranks * ranks, -1), write_fd_(ranks * ranks, -1) {
  for (int i = 0; i < ranks * ranks; ++i) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) == 0) {
      read_fd_[i] = fds[0];
      write_fd_[i] = fds[1];
    }
  }
}

RankMesh::~RankMesh() { close_all(); }

void RankMesh::close_all() {
  for (auto* v : {&read_fd_, &write_fd_})
    for (int& fd : *v) {
      if (fd >= 0) ::close(fd);
      fd = -1;
    }
}

void RankMesh::keep_ends_of(int rank) {
  for (int from = 0; from < ranks_; ++from)
    for (int to = 0; to < ranks_; ++to) {
      int i = from * ranks_ + to;
      if (from != rank && write_fd_[i] >= 0) ::close(write_fd_[i]), write_fd_[i] = -1;
      if (to != rank && read_fd_[i] >= 0) ::close(read_fd_[i]), read_fd_[i] = -1;
    }
}

bool RankMesh::send(int from, int to, const void* data, size_t size) {
  int fd = write_fd_[from * ranks_ + to];
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= size_t(n);
  }
  return true;
}

bool RankMesh::recv(int from, int to, void* data, size_t size, int timeout_ms) {
  int fd = read_fd_[from * ranks_ + to];
  char* p = static_cast<char*>(data);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (size > 0) {
    int left = int(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count());
    if (left <= 0) return false;
    pollfd pfd{fd, POLLIN, 0};
    if (::poll(&pfd, 1, left) <= 0) continue;
    ssize_t n = ::read(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= size_t(n);
  }
  return true;
}

bool RankMesh::wait_for_exit(int from, int to, int timeout_ms) {
  char c;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    int left = int(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count());
    pollfd pfd{read_fd_[from * ranks_ + to], POLLIN, 0};
    if (::poll(&pfd, 1, std::max(left, 1)) <= 0) continue;
    ssize_t n = ::read(pfd.fd, &c, 1);
    if (n == 0) return true;  // EOF: every write end is closed
    if (n < 0 && errno != EINTR) return false;
  }
  return false;
}

std::vector<RankResult> run_ranks(int ranks, const std::function<int(int, RankMesh&)>& body, int watchdog_s) {
  RankMesh mesh(ranks);
  std::fflush(nullptr);
  std::vector<pid_t> pids;
  for (int r = 0; r < ranks; ++r) {
    pid_t pid = ::fork();
    if (pid == 0) {
      ::alarm(unsigned(watchdog_s));  // a stuck rank dies with SIGALRM: a failure, not a hang
      mesh.keep_ends_of(r);
      int code = 1;
      try {
        code = body(r, mesh);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d: exception: %s\n", r, e.what());
      }
      mesh.close_all();
      std::fflush(nullptr);
      std::exit(code);  // runs atexit handlers, so LeakSanitizer checks the rank too
    }
    pids.push_back(pid);
  }
  mesh.close_all();
  std::vector<RankResult> results;
  for (int r = 0; r < ranks; ++r) {
    RankResult res;
    res.rank = r;
    int status = 0;
    if (pids[r] > 0 && ::waitpid(pids[r], &status, 0) == pids[r]) {
      res.exited = WIFEXITED(status);
      res.exit_code = res.exited ? WEXITSTATUS(status) : -1;
      res.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    }
    results.push_back(res);
  }
  return results;
}

bool all_ok(const std::vector<RankResult>& results) {
  for (const auto& r : results)
    if (!r.exited || r.exit_code != 0) return false;
  return true;
}

std::string describe(const std::vector<RankResult>& results) {
  std::string text;
  for (const auto& r : results)
    text += "rank " + std::to_string(r.rank) +
            (r.exited ? " exit " + std::to_string(r.exit_code) : " signal " + std::to_string(r.signal)) + "; ";
  return text;
}

namespace {
std::mutex g_log_mutex;
std::vector<std::pair<ncclDebugLogLevel, std::string>> g_log;
}  // namespace

void* plugin_library() {
  static void* handle = [] {
    void* h = ::dlopen(TOPOCOLL_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
    if (!h) std::fprintf(stderr, "dlopen(%s): %s\n", TOPOCOLL_PLUGIN_PATH, ::dlerror());
    return h;
  }();
  return handle;
}

const void* plugin_symbol(const char* name) {
  void* lib = plugin_library();
  return lib ? ::dlsym(lib, name) : nullptr;
}

const ncclNet_v11_t* net_v11() { return static_cast<const ncclNet_v11_t*>(plugin_symbol("ncclNetPlugin_v11")); }

void test_logger(ncclDebugLogLevel level, unsigned long, const char* file, int line, const char* fmt, ...) {
  char text[2048];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(text, sizeof text, fmt, args);
  va_end(args);
  if (level == NCCL_LOG_WARN || std::getenv("TOPOCOLL_TEST_VERBOSE"))
    std::fprintf(stderr, "[pid %d] %s:%d %s\n", int(::getpid()), file, line, text);
  std::lock_guard lock(g_log_mutex);
  g_log.emplace_back(level, text);
}

std::vector<std::string> logged(ncclDebugLogLevel level) {
  std::lock_guard lock(g_log_mutex);
  std::vector<std::string> out;
  for (const auto& [l, t] : g_log)
    if (l == level) out.push_back(t);
  return out;
}

bool logged_contains(ncclDebugLogLevel level, const std::string& text) {
  for (const auto& line : logged(level))
    if (line.find(text) != std::string::npos) return true;
  return false;
}

void rank_failure(const char* file, int line, const char* condition, const char* fmt, ...) {
  char text[1024] = "";
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(text, sizeof text, fmt, args);
  va_end(args);
  std::fprintf(stderr, "[pid %d] %s:%d: failed: %s %s\n", int(::getpid()), file, line, condition, text);
}

void fill_pattern(std::vector<uint8_t>& buffer, int from, int to, int k) {
  uint32_t x = uint32_t(from * 7919 + to * 104729 + k * 1299709 + 1);
  for (auto& b : buffer) {
    x = x * 1664525u + 1013904223u;
    b = uint8_t(x >> 24);
  }
}

bool check_pattern(const std::vector<uint8_t>& buffer, size_t size, int from, int to, int k) {
  std::vector<uint8_t> expected(size);
  fill_pattern(expected, from, to, k);
  return size <= buffer.size() && std::equal(expected.begin(), expected.end(), buffer.begin());
}

bool connect_all(const ncclNet_v11_t* net, int rank, RankMesh& mesh, int dev, PeerComms* comms, int timeout_ms) {
  const int n = mesh.ranks();
  comms->send.assign(n, nullptr);
  comms->recv.assign(n, nullptr);
  if (!comms->ctx && net->init(&comms->ctx, 1, nullptr, test_logger, nullptr) != ncclSuccess) return false;
  std::vector<void*> listens(n, nullptr);
  std::vector<std::vector<char>> handles(n, std::vector<char>(NCCL_NET_HANDLE_MAXSIZE));
  for (int q = 0; q < n; ++q) {
    if (q == rank) continue;
    char handle[NCCL_NET_HANDLE_MAXSIZE];
    if (net->listen(comms->ctx, dev, handle, &listens[q]) != ncclSuccess) return false;
    if (!mesh.send(rank, q, handle, sizeof handle)) return false;
  }
  for (int q = 0; q < n; ++q)
    if (q != rank && !mesh.recv(q, rank, handles[q].data(), NCCL_NET_HANDLE_MAXSIZE, timeout_ms)) return false;
  // Non-blocking connect/accept, polled round-robin as NCCL's proxy does.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    bool all = true;
    for (int q = 0; q < n; ++q) {
      if (q == rank) continue;
      if (!comms->send[q] && net->connect(comms->ctx, dev, handles[q].data(), &comms->send[q], nullptr) != ncclSuccess)
        return false;
      if (!comms->recv[q] && net->accept(listens[q], &comms->recv[q], nullptr) != ncclSuccess) return false;
      all = all && comms->send[q] && comms->recv[q];
    }
    if (all) break;
    if (std::chrono::steady_clock::now() > deadline) return false;
  }
  for (void* l : listens)
    if (l) net->closeListen(l);
  return true;
}

void close_all(const ncclNet_v11_t* net, PeerComms* comms) {
  for (void*& c : comms->send)
    if (c) net->closeSend(c), c = nullptr;
  for (void*& c : comms->recv)
    if (c) net->closeRecv(c), c = nullptr;
  if (comms->ctx) net->finalize(comms->ctx), comms->ctx = nullptr;
}

ncclResult_t wait_requests(const ncclNet_v11_t* net, const std::vector<void*>& requests, std::vector<int>* sizes,
                           int timeout_ms, size_t* failed) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  std::vector<bool> done(requests.size(), false);
  if (sizes) sizes->assign(requests.size(), -1);
  for (size_t left = requests.size(); left > 0;) {
    for (size_t i = 0; i < requests.size(); ++i) {
      if (done[i]) continue;
      int finished = 0;
      const ncclResult_t r = net->test(requests[i], &finished, sizes ? &(*sizes)[i] : nullptr);
      if (r != ncclSuccess) {
        if (failed) *failed = i;
        return r;
      }
      if (finished) done[i] = true, --left;
    }
    if (left > 0 && std::chrono::steady_clock::now() > deadline) {
      if (failed) *failed = size_t(std::find(done.begin(), done.end(), false) - done.begin());
      return ncclInProgress;
    }
    sched_yield();
  }
  return ncclSuccess;
}

ncclResult_t wait_request(const ncclNet_v11_t* net, void* request, int* sizes, int timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    int done = 0;
    ncclResult_t r = net->test(request, &done, sizes);
    if (r != ncclSuccess || done) return r;
    if (std::chrono::steady_clock::now() > deadline) return ncclInProgress;  // never finished
    sched_yield();
  }
}

}  // namespace topocoll::testing
