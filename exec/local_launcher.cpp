#include "exec/local_launcher.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "exec/bootstrap.h"

extern char** environ;

namespace topocoll::exec {

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
  BootstrapRoot root({options.bootstrap_host, 0}, nranks, options.bootstrap_timeout);
  const std::string address = BootstrapAddress{options.bootstrap_host, root.port()}.to_string();

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
    envs[r].push_back("TOPOCOLL_BOOTSTRAP=" + address);
    envs[r].push_back("TOPOCOLL_BOOTSTRAP_SERVED=1");
  }
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(program.c_str()));
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<std::vector<char*>> envps(nranks);
  for (int r = 0; r < nranks; ++r) {
    for (auto& kv : envs[r]) envps[r].push_back(kv.data());
    envps[r].push_back(nullptr);
  }

  std::vector<pid_t> pids(nranks, 0);
  for (int r = 0; r < nranks; ++r) {
    const pid_t pid = ::fork();
    if (pid < 0) {
      for (pid_t p : pids)
        if (p > 0) ::kill(p, SIGKILL);
      throw std::runtime_error("launch: fork failed: " + std::string(std::strerror(errno)));
    }
    if (pid == 0) {
      ::execve(program.c_str(), argv.data(), envps[r].data());
      _exit(127);
    }
    pids[r] = pid;
  }

  int result = 0;
  int left = nranks;
  std::chrono::steady_clock::time_point kill_at = std::chrono::steady_clock::time_point::max();
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
          result = code;
          kill_at = std::chrono::steady_clock::now() + options.grace;
        }
      }
      continue;
    }
    if (pid < 0 && errno == ECHILD) break;
    if (std::chrono::steady_clock::now() > kill_at) {
      for (pid_t p : pids)
        if (p > 0) ::kill(p, SIGKILL);
      kill_at = std::chrono::steady_clock::time_point::max();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return result;
}

}  // namespace topocoll::exec
