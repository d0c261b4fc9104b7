#include "tools/child_command.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "exec/local_launcher.h"

extern char** environ;

namespace topocoll::cli {
namespace {

constexpr int kCaughtSignals[] = {SIGINT, SIGTERM, SIGHUP};

static_assert(std::atomic<int>::is_always_lock_free, "used from a signal handler");
std::atomic<int> g_caught{0};
std::atomic<int> g_shared_child{0};  // the pid signals are passed on to (0: none)
std::atomic<bool> g_catching{false};
struct sigaction g_previous[3], g_previous_pipe;

extern "C" void on_interrupt(int sig) {
  int none = 0;
  g_caught.compare_exchange_strong(none, sig);
  if (const int child = g_shared_child.load(); child > 0) ::kill(child, sig);
}

}  // namespace

InterruptCatcher::InterruptCatcher() {
  if (g_catching.exchange(true)) throw std::logic_error("one InterruptCatcher at a time");
  g_caught = 0;
  struct sigaction sa {};
  sa.sa_handler = on_interrupt;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: waitpid returns EINTR and we look again
  for (int i = 0; i < 3; ++i) ::sigaction(kCaughtSignals[i], &sa, &g_previous[i]);
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  ::sigaction(SIGPIPE, &ignore, &g_previous_pipe);
}

InterruptCatcher::~InterruptCatcher() {
  for (int i = 0; i < 3; ++i) ::sigaction(kCaughtSignals[i], &g_previous[i], nullptr);
  ::sigaction(SIGPIPE, &g_previous_pipe, nullptr);
  g_catching = false;
}

int InterruptCatcher::caught() { return g_caught.load(); }

int run_child_command(const std::vector<std::string>& args, ChildSignals signals) {
  const std::string program = exec::current_executable();
  std::vector<std::string> words = {program};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);

  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // The child starts with default dispositions and nothing blocked, whatever ours are.
  sigset_t defaults, none;
  sigemptyset(&defaults);
  for (int s : kCaughtSignals) sigaddset(&defaults, s);
  sigaddset(&defaults, SIGPIPE);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setsigmask(&attr, &none);
  short flags = POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK;
  if (signals == ChildSignals::Shielded) {
    posix_spawnattr_setpgroup(&attr, 0);  // out of the terminal's foreground group
    flags |= POSIX_SPAWN_SETPGROUP;
  }
  posix_spawnattr_setflags(&attr, flags);
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = 0;
  const int error = ::posix_spawn(&pid, program.c_str(), nullptr, &attr, argv.data(), environ);
  posix_spawnattr_destroy(&attr);
  if (error != 0)
    throw std::runtime_error("cannot start `topocoll " + (args.empty() ? std::string() : args[0]) +
                             "`: " + std::strerror(error));
  if (signals == ChildSignals::Shared) {
    g_shared_child = pid;
    // Caught between our last look and the spawn: pass it on now.
    if (const int sig = g_caught.load(); sig != 0) ::kill(pid, sig);
  }
  int status = 0;
  pid_t got;
  while ((got = ::waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
  }
  g_shared_child = 0;
  if (got < 0) throw std::runtime_error("waiting for `topocoll " + args[0] + "`: " + std::strerror(errno));
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string signal_name(int sig) {
  switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    case SIGPIPE: return "SIGPIPE";
    case SIGKILL: return "SIGKILL";
  }
  return "signal " + std::to_string(sig);
}

}  // namespace topocoll::cli
