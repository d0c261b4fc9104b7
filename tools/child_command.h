// Steps that must be followed by a cleanup whatever becomes of them (the demo's fabric: up,
// bench, down) run as child processes of this executable, so an interrupt or a crash ends
// the step, not the process that has to clean up after it.
#pragma once

#include <string>
#include <vector>

namespace topocoll::cli {

// While one lives, SIGINT, SIGTERM and SIGHUP do not end this process: the first is
// recorded, and each is passed on to the child started with ChildSignals::Shared that runs
// now. SIGPIPE is ignored (a closed pipe on stdout must not skip the cleanup). One at a time;
// the destructor restores the previous dispositions.
class InterruptCatcher {
 public:
  InterruptCatcher();
  ~InterruptCatcher();
  InterruptCatcher(const InterruptCatcher&) = delete;
  InterruptCatcher& operator=(const InterruptCatcher&) = delete;
  // The first signal caught since construction (0: none).
  static int caught();
};

enum class ChildSignals {
  Shared,    // in our process group: a terminal's Ctrl-C reaches it, and what we catch is passed on
  Shielded,  // in a process group of its own, nothing passed on: a cleanup that must run to its end
};

// Runs this executable with `args` (a subcommand and its arguments), its output on ours, and
// waits for it. Returns its exit status, 128 + the signal when one ended it. Throws
// std::runtime_error when it cannot be started.
int run_child_command(const std::vector<std::string>& args, ChildSignals signals);

// "SIGINT", "SIGTERM", ... ("signal N" for others).
std::string signal_name(int signal);

}  // namespace topocoll::cli
