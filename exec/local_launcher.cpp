#include "exec/local_launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <iterator>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>
#include <thread>

#include "exec/bootstrap.h"
#include "net/network_namespace.h"

extern char** environ;

namespace topocoll::exec {
namespace {

// Exchanged, never read then cleared: a second signal between the two would be lost.
std::atomic<int> g_stop_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "set from a signal handler");

void note_stop_signal(int sig) { g_stop_signal.store(sig); }

constexpr int kForwardedSignals[] = {SIGINT, SIGTERM, SIGHUP};

// Sleeps until a rank ends, a stop signal interrupts, or `most` passes: poll(2) on each
// running rank's pidfd (readable once it has ended, its zombie still ours). Polling every
// rank with waitid every 5 ms cost 200 x ranks system calls a second beside the job being
// measured; where pidfds are missing (kernels before 5.3) it still sleeps 5 ms.
class RankExitWait {
 public:
  explicit RankExitWait(const std::vector<pid_t>& pids) {
    for (pid_t p : pids) fds_.push_back(int(::syscall(SYS_pidfd_open, p, 0)));
  }
  ~RankExitWait() {
    for (int fd : fds_)
      if (fd >= 0) ::close(fd);
  }
  RankExitWait(const RankExitWait&) = delete;
  RankExitWait& operator=(const RankExitWait&) = delete;

  void wait(const std::vector<bool>& ended, std::chrono::milliseconds most) {
    std::vector<pollfd> watch;
    for (size_t r = 0; r < fds_.size(); ++r) {
      if (ended[r]) continue;
      if (fds_[r] < 0) {  // no pidfd for this rank: look again soon
        most = std::min(most, std::chrono::milliseconds(5));
        continue;
      }
      watch.push_back({fds_[r], POLLIN, 0});
    }
    ::poll(watch.data(), nfds_t(watch.size()), int(std::max<int64_t>(0, most.count())));  // EINTR: a signal
  }

 private:
  std::vector<int> fds_;
};

// Blocks the forwarded signals in this thread while a rank is forked: a child must not run
// the launcher's handler, which would only note the signal in its own copy of the memory and
// then lose it at exec.
class ForwardedSignalsBlocked {
 public:
  ForwardedSignalsBlocked() {
    sigset_t set;
    sigemptyset(&set);
    for (int sig : kForwardedSignals) sigaddset(&set, sig);
    ::pthread_sigmask(SIG_BLOCK, &set, &previous_);
  }
  ~ForwardedSignalsBlocked() { ::pthread_sigmask(SIG_SETMASK, &previous_, nullptr); }
  ForwardedSignalsBlocked(const ForwardedSignalsBlocked&) = delete;
  ForwardedSignalsBlocked& operator=(const ForwardedSignalsBlocked&) = delete;
  // In the child, before exec: the signals' default actions (ignored where the launcher's
  // caller ignored them: nohup), then the mask the rank inherits (a signal sent to its group
  // meanwhile is delivered then and ends it).
  void restore_in_child(const bool* ignored) const {
    for (std::size_t i = 0; i < std::size(kForwardedSignals); ++i) {
      struct sigaction action {};
      action.sa_handler = ignored[i] ? SIG_IGN : SIG_DFL;
      sigemptyset(&action.sa_mask);
      ::sigaction(kForwardedSignals[i], &action, nullptr);
    }
    ::pthread_sigmask(SIG_SETMASK, &previous_, nullptr);
  }

 private:
  sigset_t previous_;
};

// While the ranks run, SIGINT, SIGTERM and SIGHUP sent to the launcher alone (`kill`, a
// scheduler ending the job) reach them too, instead of ending the launcher and leaving them
// running inside their namespaces; the earlier handlers come back afterwards. A signal the
// launcher's caller ignores (SIGHUP under nohup, SIGINT in a background job) stays ignored,
// by the launcher and its ranks.
class StopSignalForwarding {
 public:
  StopSignalForwarding() {
    g_stop_signal.store(0);
    struct sigaction forward {};
    forward.sa_handler = note_stop_signal;
    sigemptyset(&forward.sa_mask);
    for (int i = 0; i < kCount; ++i) {
      ::sigaction(kForwardedSignals[i], nullptr, &previous_[i]);
      ignored_[i] = previous_[i].sa_handler == SIG_IGN;
      if (!ignored_[i]) ::sigaction(kForwardedSignals[i], &forward, nullptr);
    }
  }
  const bool* ignored() const { return ignored_; }
  ~StopSignalForwarding() {
    for (int i = 0; i < kCount; ++i) ::sigaction(kForwardedSignals[i], &previous_[i], nullptr);
  }
  StopSignalForwarding(const StopSignalForwarding&) = delete;
  StopSignalForwarding& operator=(const StopSignalForwarding&) = delete;

 private:
  static constexpr int kCount = int(std::size(kForwardedSignals));
  struct sigaction previous_[kCount] {};
  bool ignored_[kCount] = {};
};

// Waits until every child has exec'd or ended: each holds the write end of a close-on-exec
// pipe, which reads as EOF once its last copy is gone. Bounded: a child stopped before its
// exec is not waited for beyond `limit`.
void wait_until_exec(std::vector<int>& read_ends, std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  for (int& fd : read_ends) {
    while (fd >= 0) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
      pollfd p{fd, POLLIN, 0};
      const int ready = ::poll(&p, 1, int(std::max<int64_t>(left.count(), 0)));
      if (ready < 0 && errno == EINTR) continue;
      char byte;
      if (ready == 0 || ready < 0 || ::read(fd, &byte, 1) <= 0) {
        ::close(fd);
        fd = -1;
      }
    }
  }
}

}  // namespace

std::string current_executable() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) throw std::runtime_error("cannot find the running executable: " +
                                       std::string(std::strerror(errno)));
  return std::string(buf, std::size_t(n));
}

int launch_local_group(const std::string& program, const std::vector<std::string>& args,
                       int nranks, const LaunchOptions& options) {
  if (nranks < 1) throw std::invalid_argument("launch: nranks must be >= 1");
  if (!options.placements.empty() && int(options.placements.size()) != nranks)
    throw std::invalid_argument("launch: " + std::to_string(options.placements.size()) +
                                " placements for " + std::to_string(nranks) + " ranks");
  std::unique_ptr<BootstrapRoot> served;
  if (options.serve_bootstrap) {
    // The root's listening socket is made inside the ranks' rendezvous namespace.
    std::optional<net::ThreadNetnsScope> in_namespace;
    if (!options.bootstrap_netns_path.empty()) in_namespace.emplace(options.bootstrap_netns_path);
    served = std::make_unique<BootstrapRoot>(BootstrapAddress{options.bootstrap_host, 0}, nranks,
                                             options.bootstrap_timeout, kDefaultSilenceLimit,
                                             options.round_limit);
  }
  const std::string address =
      served ? BootstrapAddress{options.bootstrap_host, served->port()}.to_string() : std::string();

  // Everything the children need is built before fork: between fork and exec a child of a
  // multi-threaded process may only make async-signal-safe calls.
  auto set_by_launcher = [](const std::string& kv) {
    for (const char* prefix : {"TOPOCOLL_RANK=", "TOPOCOLL_NRANKS=", "TOPOCOLL_BOOTSTRAP=",
                               "TOPOCOLL_BOOTSTRAP_SERVED=", "OMPI_COMM_WORLD_", "PMI_RANK=",
                               "PMI_SIZE=", "PMIX_RANK=", "SLURM_PROCID=", "SLURM_NTASKS=",
                               "RANK=", "WORLD_SIZE="})
      if (kv.rfind(prefix, 0) == 0) return true;
    return false;
  };
  std::vector<std::string> base_env;
  for (char** e = environ; *e; ++e)
    if (!set_by_launcher(*e)) base_env.emplace_back(*e);
  std::vector<std::vector<std::string>> envs(nranks, base_env);
  for (int r = 0; r < nranks; ++r) {
    envs[r].push_back("TOPOCOLL_RANK=" + std::to_string(r));
    envs[r].push_back("TOPOCOLL_NRANKS=" + std::to_string(nranks));
    if (!served) continue;
    envs[r].push_back("TOPOCOLL_BOOTSTRAP=" + address);
    envs[r].push_back("TOPOCOLL_BOOTSTRAP_SERVED=1");
  }
  std::vector<std::vector<std::string>> rank_args(nranks, args);
  std::vector<int> netns_fds(nranks, -1);
  auto close_namespaces = [&] {
    for (int& fd : netns_fds)
      if (fd >= 0) ::close(fd), fd = -1;
  };
  for (int r = 0; r < int(options.placements.size()); ++r) {
    const RankPlacement& p = options.placements[r];
    for (const auto& kv : p.extra_env) {
      const std::string key = kv.substr(0, kv.find('=') + 1);
      std::erase_if(envs[r], [&](const std::string& e) { return e.rfind(key, 0) == 0; });
      envs[r].push_back(kv);
    }
    rank_args[r].insert(rank_args[r].end(), p.extra_args.begin(), p.extra_args.end());
    if (!p.netns_path.empty()) {
      netns_fds[r] = ::open(p.netns_path.c_str(), O_RDONLY | O_CLOEXEC);
      if (netns_fds[r] < 0) {
        const int err = errno;
        close_namespaces();
        throw std::runtime_error("launch: rank " + std::to_string(r) + ": network namespace " +
                                 p.netns_path + ": " + std::strerror(err));
      }
    }
  }
  std::vector<std::vector<char*>> argvs(nranks), envps(nranks);
  std::vector<const char*> hostnames(nranks, nullptr);
  for (int r = 0; r < nranks; ++r) {
    argvs[r].push_back(const_cast<char*>(program.c_str()));
    for (auto& a : rank_args[r]) argvs[r].push_back(a.data());
    argvs[r].push_back(nullptr);
    for (auto& kv : envs[r]) envps[r].push_back(kv.data());
    envps[r].push_back(nullptr);
    if (r < int(options.placements.size()) && !options.placements[r].hostname.empty())
      hostnames[r] = options.placements[r].hostname.c_str();
  }

  // The ranks' standard input: a job of N ranks has no one terminal to read, and a rank
  // reading the launcher's (a debugger prompt) would be stopped by the terminal, in a process
  // group of its own, where nothing notices: it reads end-of-file instead.
  const int no_input = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (no_input < 0) {
    const int err = errno;
    close_namespaces();
    throw std::runtime_error("launch: /dev/null: " + std::string(std::strerror(err)));
  }
  std::vector<int> exec_pipes;  // read ends: EOF once the rank has exec'd (wait_until_exec)
  auto close_launch_fds = [&] {
    close_namespaces();
    ::close(no_input);
    for (int fd : exec_pipes)
      if (fd >= 0) ::close(fd);  // wait_until_exec closed the ones it read to the end
    exec_pipes.clear();
  };

  const StopSignalForwarding forwarding;
  const pid_t launcher = ::getpid();
  std::vector<pid_t> pids(nranks, 0);
  for (int r = 0; r < nranks; ++r) {
    int exec_pipe[2];
    if (::pipe2(exec_pipe, O_CLOEXEC) != 0) {
      const int err = errno;
      for (pid_t p : pids)
        if (p > 0) ::kill(-p, SIGKILL);
      close_launch_fds();
      throw std::runtime_error("launch: pipe failed: " + std::string(std::strerror(err)));
    }
    const ForwardedSignalsBlocked blocked;
    const pid_t pid = ::fork();
    if (pid < 0) {
      const int err = errno;
      ::close(exec_pipe[0]);
      ::close(exec_pipe[1]);
      for (pid_t p : pids)
        if (p > 0) ::kill(-p, SIGKILL);
      close_launch_fds();
      throw std::runtime_error("launch: fork failed: " + std::string(std::strerror(err)));
    }
    if (pid == 0) {
      // Only system calls between fork and exec. A launcher killed outright (SIGKILL) takes
      // its ranks with it; one that died before this line already has.
      if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != launcher) _exit(125);
      // A process group of its own: what the rank starts (a wrapper's program, workers) is
      // signalled with it, and what it leaves behind is ended with the job.
      if (::setpgid(0, 0) != 0) _exit(125);
      // /dev/null may be fd 0 itself (the launcher's stdin was closed): then only its
      // close-on-exec flag goes.
      if (no_input == STDIN_FILENO ? ::fcntl(STDIN_FILENO, F_SETFD, 0) < 0 : ::dup2(no_input, STDIN_FILENO) < 0)
        _exit(125);
      if (netns_fds[r] >= 0 && ::setns(netns_fds[r], CLONE_NEWNET) != 0) _exit(126);
      if (hostnames[r] && (::unshare(CLONE_NEWUTS) != 0 ||
                           ::sethostname(hostnames[r], std::strlen(hostnames[r])) != 0))
        _exit(126);
      blocked.restore_in_child(forwarding.ignored());
      ::execve(program.c_str(), argvs[r].data(), envps[r].data());
      _exit(127);
    }
    ::setpgid(pid, pid);  // as the child does: in place before any signal below
    pids[r] = pid;
    ::close(exec_pipe[1]);
    exec_pipes.push_back(exec_pipe[0]);
  }
  // What entering the namespaces needed (the fabric's entry lock: no `down` while a rank is
  // on its way in) is released once every rank is inside, running its program.
  wait_until_exec(exec_pipes, std::chrono::seconds(10));
  close_launch_fds();
  if (options.started) options.started();

  int result = 0;
  int left = nranks;
  std::chrono::steady_clock::time_point kill_at = std::chrono::steady_clock::time_point::max();
  std::chrono::steady_clock::time_point stop_at = std::chrono::steady_clock::time_point::max();
  if (options.time_limit.count() > 0) stop_at = std::chrono::steady_clock::now() + options.time_limit;
  // An ended rank is seen but left unreaped (WNOWAIT) until the job ends: its zombie keeps its
  // pid, and so its process group's id, from being reused, so the last kill below reaches
  // what the rank left behind and never another process's group.
  std::vector<bool> ended(nranks, false);
  RankExitWait exits(pids);
  while (left > 0) {
    bool any_ended = false;
    for (int r = 0; r < nranks; ++r) {
      if (ended[r]) continue;
      siginfo_t info{};
      if (::waitid(P_PID, id_t(pids[r]), &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
        const int err = errno;
        if (err == EINTR) continue;
        // A rank no wait can find: it was reaped without us (SIGCHLD ignored, inherited), so
        // its exit status is lost; never reported as success.
        for (pid_t p : pids) ::kill(-p, SIGKILL);  // each rank's process group: its pid
        throw std::runtime_error("launch: " + std::to_string(left) + " rank(s) ended unseen (waitid: " +
                                 std::strerror(err) + "): their exit statuses are lost (is SIGCHLD ignored?)");
      }
      if (info.si_pid != pids[r]) continue;  // still running
      ended[r] = true;
      any_ended = true;
      --left;
      const bool exited = info.si_code == CLD_EXITED;
      const int code = exited ? info.si_status : 128 + info.si_status;
      if (code != 0 && result == 0) {
        // Which rank failed first is what a reader of a many-rank job needs (the others'
        // failures often follow from it), and a rank's own 124 must not read as the limit.
        if (left > 0)
          std::fprintf(stderr, "launch: rank %d %s %d first: the other %d rank(s) get %lld s to end before they are killed\n",
                       r, exited ? "exited with" : "was killed by signal", info.si_status, left,
                       static_cast<long long>(options.grace.count()));
        else
          std::fprintf(stderr, "launch: rank %d %s %d\n", r, exited ? "exited with" : "was killed by signal",
                       info.si_status);
        result = code;
        kill_at = std::chrono::steady_clock::now() + options.grace;
      }
    }
    if (any_ended) continue;
    if (const int sig = g_stop_signal.exchange(0); sig != 0) {
      for (int r = 0; r < nranks; ++r)
        if (!ended[r]) ::kill(-pids[r], sig);
      // A rank stopped (by the terminal, a debugger) would hold the signal pending until the
      // grace ran out; continued, it acts on it now.
      for (int r = 0; r < nranks; ++r)
        if (!ended[r]) ::kill(-pids[r], SIGCONT);
      if (result == 0) result = 128 + sig;
      kill_at = std::min(kill_at, std::chrono::steady_clock::now() + options.grace);
    }
    if (std::chrono::steady_clock::now() > stop_at) {
      stop_at = std::chrono::steady_clock::time_point::max();
      std::fprintf(stderr, "launch: time limit of %lld s passed with %d of %d rank(s) still running: stopping them\n",
                   static_cast<long long>(options.time_limit.count()), left, nranks);
      for (int r = 0; r < nranks; ++r)
        if (!ended[r]) ::kill(-pids[r], SIGTERM), ::kill(-pids[r], SIGCONT);
      if (result == 0) result = kTimeLimitExitCode;
      kill_at = std::min(kill_at, std::chrono::steady_clock::now() + options.grace);
    }
    if (std::chrono::steady_clock::now() > kill_at) {
      for (int r = 0; r < nranks; ++r)
        if (!ended[r]) ::kill(-pids[r], SIGKILL);
      kill_at = std::chrono::steady_clock::time_point::max();
    }
    // Until a rank ends or the next deadline; a stop signal handled by another thread of
    // this process does not interrupt the poll, so it is looked at every 50 ms at least.
    const auto now = std::chrono::steady_clock::now();
    auto most = std::chrono::milliseconds(50);
    for (const auto at : {stop_at, kill_at})
      if (at != std::chrono::steady_clock::time_point::max())
        most = std::min(most, std::chrono::ceil<std::chrono::milliseconds>(at - now) + std::chrono::milliseconds(1));
    exits.wait(ended, most);
  }
  // Every rank has ended: what they started and left running in their groups (a background
  // job, a worker) ends with them, not inside a namespace after the job; then the ranks'
  // zombies are reaped, which frees their ids.
  for (pid_t p : pids) ::kill(-p, SIGKILL);
  for (pid_t p : pids)
    while (::waitpid(p, nullptr, 0) < 0 && errno == EINTR) {
    }
  return result;
}

}  // namespace topocoll::exec
