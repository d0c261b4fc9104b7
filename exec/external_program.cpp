#include "exec/external_program.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstring>
#include <mutex>

#include "config/env.h"
#include "config/trusted_paths.h"

extern char** environ;

namespace topocoll::exec {
namespace {

// SIGINT and SIGQUIT ignored for a scope, as system(3) does while its child runs; the child
// gets back the disposition we had (default, or ignored when we were started ignoring them,
// e.g. under nohup; a handler of ours cannot cross exec and becomes the default). Counted
// across threads, as glibc's system() counts: the first in saves and ignores, the last out
// restores, so two programs run at once never leave the other's "ignored" behind.
class InterruptsIgnored {
 public:
  InterruptsIgnored() {
    std::lock_guard lock(mutex_);
    if (users_++ == 0) {
      struct sigaction ignore {};
      ignore.sa_handler = SIG_IGN;
      sigemptyset(&ignore.sa_mask);
      ::sigaction(SIGINT, &ignore, &old_int_);
      ::sigaction(SIGQUIT, &ignore, &old_quit_);
    }
    sigemptyset(&child_defaults_);
    if (old_int_.sa_handler != SIG_IGN) sigaddset(&child_defaults_, SIGINT);
    if (old_quit_.sa_handler != SIG_IGN) sigaddset(&child_defaults_, SIGQUIT);
  }
  ~InterruptsIgnored() {
    std::lock_guard lock(mutex_);
    if (--users_ == 0) {
      ::sigaction(SIGINT, &old_int_, nullptr);
      ::sigaction(SIGQUIT, &old_quit_, nullptr);
    }
  }
  InterruptsIgnored(const InterruptsIgnored&) = delete;
  InterruptsIgnored& operator=(const InterruptsIgnored&) = delete;

  // The signals the child gets back at their default.
  const sigset_t& child_defaults() const { return child_defaults_; }

 private:
  static inline std::mutex mutex_;
  static inline int users_ = 0;
  static inline struct sigaction old_int_ {}, old_quit_ {};
  sigset_t child_defaults_;
};

}  // namespace

ProgramRun run_program(const std::vector<std::string>& argv, bool quiet) {
  ProgramRun run;
  if (argv.empty() || argv[0].empty()) {
    run.error = "no program named";
    return run;
  }
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  if (quiet) {
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
  }
  // Found in PATH's absolute directories (as root, only those no other user controls):
  // config/trusted_paths.h. A "." or empty entry would run whatever lies in the working
  // directory, often /tmp.
  const std::string& search = config::env().path;
  const std::string program = config::find_executable(argv[0], search.empty() ? "/usr/bin:/bin" : search);
  if (program.empty()) {
    posix_spawn_file_actions_destroy(&actions);
    run.error = argv[0] + ": not installed (not in PATH's directories" +
                (config::writes_as_root() ? std::string(" that only root controls)") : std::string(")"));
    return run;
  }
  const InterruptsIgnored interrupts;
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setsigdefault(&attributes, &interrupts.child_defaults());
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGDEF);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, program.c_str(), &actions, &attributes, args.data(), environ);
  posix_spawnattr_destroy(&attributes);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    run.error = argv[0] + ": " + std::strerror(rc);
    return run;
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      run.error = argv[0] + ": waitpid: " + std::strerror(errno);
      return run;
    }
  }
  run.started = true;
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  run.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  return run;
}

void pass_on_interrupt(const ProgramRun& run) {
  if (run.interrupted()) ::raise(run.signal);
}

std::string describe_end(const ProgramRun& run) {
  if (!run.started) return run.error;
  if (run.signal != 0)
    return "killed by signal " + std::to_string(run.signal) + " (" + ::strsignal(run.signal) + ")";
  return "exit " + std::to_string(run.exit_code);
}

std::string path_argument(const std::string& path) {
  return !path.empty() && path.front() == '-' ? "./" + path : path;
}

}  // namespace topocoll::exec
