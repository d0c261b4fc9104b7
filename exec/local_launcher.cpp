#include "exec/local_launcher.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
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

volatile sig_atomic_t g_stop_signal = 0;

void note_stop_signal(int sig) { g_stop_signal = sig; }

// While the ranks run, SIGINT, SIGTERM and SIGHUP sent to the launcher alone (`kill`, a
// scheduler ending the job) reach them too, instead of ending the launcher and leaving them
// running inside their namespaces; the earlier handlers come back afterwards.
class StopSignalForwarding {
 public:
  StopSignalForwarding() {
    g_stop_signal = 0;
    struct sigaction forward {};
    forward.sa_handler = note_stop_signal;
    sigemptyset(&forward.sa_mask);
    for (int i = 0; i < kCount; ++i) ::sigaction(kSignals[i], &forward, &previous_[i]);
  }
  ~StopSignalForwarding() {
    for (int i = 0; i < kCount; ++i) ::sigaction(kSignals[i], &previous_[i], nullptr);
  }
  StopSignalForwarding(const StopSignalForwarding&) = delete;
  StopSignalForwarding& operator=(const StopSignalForwarding&) = delete;

 private:
  static constexpr int kCount = 3;
  static constexpr int kSignals[kCount] = {SIGINT, SIGTERM, SIGHUP};
  struct sigaction previous_[kCount] {};
};

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

  const StopSignalForwarding forwarding;
  const pid_t launcher = ::getpid();
  std::vector<pid_t> pids(nranks, 0);
  for (int r = 0; r < nranks; ++r) {
    const pid_t pid = ::fork();
    if (pid < 0) {
      for (pid_t p : pids)
        if (p > 0) ::kill(-p, SIGKILL);
      close_namespaces();
      throw std::runtime_error("launch: fork failed: " + std::string(std::strerror(errno)));
    }
    if (pid == 0) {
      // Only system calls between fork and exec. A launcher killed outright (SIGKILL) takes
      // its ranks with it; one that died before this line already has.
      if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != launcher) _exit(125);
      // A process group of its own: what the rank starts (a wrapper's program, workers) is
      // signalled with it, and what it leaves behind is ended with the job.
      if (::setpgid(0, 0) != 0) _exit(125);
      if (netns_fds[r] >= 0 && ::setns(netns_fds[r], CLONE_NEWNET) != 0) _exit(126);
      if (hostnames[r] && (::unshare(CLONE_NEWUTS) != 0 ||
                           ::sethostname(hostnames[r], std::strlen(hostnames[r])) != 0))
        _exit(126);
      ::execve(program.c_str(), argvs[r].data(), envps[r].data());
      _exit(127);
    }
    ::setpgid(pid, pid);  // as the child does: in place before any signal below
    pids[r] = pid;
  }
  close_namespaces();
  std::vector<pid_t> groups = pids;  // each rank's process group, kept after the rank is reaped

  int result = 0;
  int left = nranks;
  std::chrono::steady_clock::time_point kill_at = std::chrono::steady_clock::time_point::max();
  std::chrono::steady_clock::time_point stop_at = std::chrono::steady_clock::time_point::max();
  if (options.time_limit.count() > 0) stop_at = std::chrono::steady_clock::now() + options.time_limit;
  while (left > 0) {
    int st = 0;
    const pid_t pid = ::waitpid(-1, &st, WNOHANG);
    if (pid > 0) {
      for (int r = 0; r < nranks; ++r) {
        if (pids[r] != pid) continue;
        pids[r] = 0;
        --left;
        const int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        if (code != 0 && result == 0) {
          // Which rank failed first is what a reader of a many-rank job needs (the others'
          // failures often follow from it), and a rank's own 124 must not read as the limit.
          if (left > 0)
            std::fprintf(stderr, "launch: rank %d %s %d first: the other %d rank(s) get %lld s to end before they are killed\n",
                         r, WIFEXITED(st) ? "exited with" : "was killed by signal", WIFEXITED(st) ? code : WTERMSIG(st),
                         left, static_cast<long long>(options.grace.count()));
          else
            std::fprintf(stderr, "launch: rank %d %s %d\n", r, WIFEXITED(st) ? "exited with" : "was killed by signal",
                         WIFEXITED(st) ? code : WTERMSIG(st));
          result = code;
          kill_at = std::chrono::steady_clock::now() + options.grace;
        }
      }
      continue;
    }
    if (pid < 0 && errno == ECHILD) {
      // Ranks left that no wait can find: their children were reaped without us (SIGCHLD
      // ignored, inherited), so their exit statuses are lost; never reported as success.
      throw std::runtime_error("launch: " + std::to_string(left) + " rank(s) ended unseen (waitpid: no child): "
                               "their exit statuses are lost (is SIGCHLD ignored?)");
    }
    if (const int sig = g_stop_signal; sig != 0) {
      g_stop_signal = 0;
      for (pid_t p : pids)
        if (p > 0) ::kill(-p, sig);
      if (result == 0) result = 128 + sig;
      kill_at = std::min(kill_at, std::chrono::steady_clock::now() + options.grace);
    }
    if (std::chrono::steady_clock::now() > stop_at) {
      stop_at = std::chrono::steady_clock::time_point::max();
      std::fprintf(stderr, "launch: time limit of %lld s passed with %d of %d rank(s) still running: stopping them\n",
                   static_cast<long long>(options.time_limit.count()), left, nranks);
      for (pid_t p : pids)
        if (p > 0) ::kill(-p, SIGTERM);
      if (result == 0) result = kTimeLimitExitCode;
      kill_at = std::min(kill_at, std::chrono::steady_clock::now() + options.grace);
    }
    if (std::chrono::steady_clock::now() > kill_at) {
      for (pid_t p : pids)
        if (p > 0) ::kill(-p, SIGKILL);
      kill_at = std::chrono::steady_clock::time_point::max();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  // Every rank has ended: what they started and left running in their groups (a background
  // job, a worker) ends with them, not inside a namespace after the job. A group no process
  // is left in is no one's (Linux reuses no pid still naming a group).
  for (pid_t g : groups) ::kill(-g, SIGKILL);
  return result;
}

}  // namespace topocoll::exec
