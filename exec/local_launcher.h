// Starts a group of processes on this machine: nranks copies of a program, each told its
// rank through TOPOCOLL_RANK / TOPOCOLL_NRANKS / TOPOCOLL_BOOTSTRAP (exec/rank_environment.h),
// with the bootstrap rendezvous served by the launching process. The copies find each other
// exactly as they would across machines under mpirun or srun.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "exec/bootstrap.h"

namespace topocoll::exec {

// Where one rank runs when that differs from the launcher (the emulated fabric: one network
// namespace per host). Empty fields change nothing.
struct RankPlacement {
  std::string netns_path;  // network namespace to enter before exec (/run/netns/<name>)
  std::string hostname;    // its own hostname, in a fresh UTS namespace
  std::vector<std::string> extra_args;  // appended to the program's arguments
  std::vector<std::string> extra_env;   // KEY=VALUE, over the launcher's environment
};

struct LaunchOptions {
  std::string bootstrap_host = "127.0.0.1";
  // After the first rank fails, the others get this long to notice and exit before they
  // are killed: nothing hangs.
  std::chrono::seconds grace{15};
  std::chrono::seconds bootstrap_timeout{60};
  // How long a bootstrap round may wait for its last rank (exec/bootstrap.h); the ranks'
  // clients must be given the same.
  std::chrono::milliseconds round_limit = kDefaultRoundLimit;
  std::vector<RankPlacement> placements;  // empty, or one per rank
  // Serve the rendezvous inside this network namespace (reachable from the ranks'), at
  // bootstrap_host.
  std::string bootstrap_netns_path;
  // false: no rendezvous and no TOPOCOLL_BOOTSTRAP for programs that meet their own way
  // (`topocoll fabric run` starting NCCL programs); ranks still get TOPOCOLL_RANK/NRANKS.
  bool serve_bootstrap = true;
  // A job still running after this long is stopped as a stop signal would stop it (SIGTERM
  // to every rank's group, SIGKILL after `grace`) and returns kTimeLimitExitCode: a hung
  // NCCL job on the emulated fabric ends on its own. Zero: no limit.
  std::chrono::seconds time_limit{0};
  // Called once every rank has exec'd its program (or ended, or 10 s passed): to release what
  // entering the ranks' namespaces needed held (the fabric's entry lock, fabric/fabric_lock.h)
  // once they are in, not for the whole job. May be empty.
  std::function<void()> started;
};

// What a job stopped by its time limit returns: timeout(1)'s status, so scripts read it alike.
constexpr int kTimeLimitExitCode = 124;

// Runs `program` with `args` (argv[1..]) as nranks processes and waits for all of them.
// Returns 0 when every rank exited 0, else the first failing rank's exit code (128 + signal
// for a killed one). Throws std::runtime_error when the processes cannot be started or
// placed (a namespace that cannot be entered). While it waits, SIGINT, SIGTERM and SIGHUP
// sent to the launcher are passed to every rank (then 128 + that signal, the ranks killed
// after `grace`), and a launcher killed outright takes its ranks with it (PR_SET_PDEATHSIG):
// no rank outlives it inside a namespace. Each rank runs in a process group of its own,
// which the signals reach whole: what a rank started (a wrapper's program, a background
// job) is stopped with it, and what is left in the groups once every rank ended is killed. Call it from a thread that lives until it returns.
int launch_local_group(const std::string& program, const std::vector<std::string>& args,
                       int nranks, const LaunchOptions& options = {});

// The path of the running executable (/proc/self/exe), to launch more of itself.
std::string current_executable();

}  // namespace topocoll::exec
