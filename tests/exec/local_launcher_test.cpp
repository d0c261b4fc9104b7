// launch_local_group leaves no rank behind: a stop signal sent to the launcher alone reaches
// every rank, and a launcher killed outright takes its ranks with it. The launcher runs in a
// forked child, so its signals and death are the test's to cause.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <thread>

#include "exec/local_launcher.h"
#include "tests/common/scratch_dir.h"

namespace topocoll::exec {
namespace {

namespace fs = std::filesystem;
using testing_support::ScratchDir;

// Forks a launcher of `nranks` copies of `sh -c script`; returns its pid. The launcher's own
// messages go to `stderr_file` when one is named.
pid_t fork_launcher(const std::string& script, int nranks, std::chrono::seconds time_limit = {},
                    const std::string& stderr_file = "",
                    const std::function<void(LaunchOptions&)>& more_options = {}) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (!stderr_file.empty() && !std::freopen(stderr_file.c_str(), "w", stderr)) ::_exit(98);
    std::setvbuf(stderr, nullptr, _IONBF, 0);  // the child ends in _exit, which flushes nothing
    LaunchOptions options;
    options.serve_bootstrap = false;
    options.grace = std::chrono::seconds(5);
    options.time_limit = time_limit;
    if (more_options) more_options(options);
    int code = 99;
    try {
      code = launch_local_group("/bin/sh", {"-c", script}, nranks, options);
    } catch (...) {
    }
    ::_exit(code);
  }
  return pid;
}

bool wait_for(const std::function<bool()>& done, double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

long pid_in(const std::string& file) {
  std::ifstream in(file);
  long pid = 0;
  in >> pid;
  return pid;
}

// Gone, or a zombie nobody has reaped yet: either way no longer running.
bool process_ended(long pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return true;
  std::string line;
  std::getline(stat, line);
  const auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && (line[close + 2] == 'Z' || line[close + 2] == 'X');
}

// A launcher that inherited an ignored SIGCHLD (Linux then reaps the ranks unseen) never
// reports their lost exit statuses as success.
TEST(LocalLauncher, RanksEndedUnseenAreNeverASuccess) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::signal(SIGCHLD, SIG_IGN);
    LaunchOptions options;
    options.serve_bootstrap = false;
    int code = 99;  // launch_local_group threw
    try {
      code = launch_local_group("/bin/sh", {"-c", "exit 3"}, 2, options);
    } catch (const std::exception&) {
    }
    ::_exit(code);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_NE(WEXITSTATUS(status), 0) << "the ranks' failure read as success";
}

// What a rank leaves running (a background job of a wrapper script) ends with the job, as
// does what a rank started when the launcher is stopped: nothing stays inside a namespace.
TEST(LocalLauncher, WhatARankStartedEndsWithTheJob) {
  const ScratchDir scratch("launcher_descendants");
  const std::string dir = scratch.path();
  const pid_t launcher = fork_launcher(
      "exec >/dev/null 2>&1; sleep 1000 & echo $! > " + dir + "/bg.$TOPOCOLL_RANK; exit 3", 2);
  ASSERT_GT(launcher, 0);
  int status = 0;
  ASSERT_EQ(::waitpid(launcher, &status, 0), launcher);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 3) << status;
  for (int r = 0; r < 2; ++r) {
    const long bg = pid_in(dir + "/bg." + std::to_string(r));
    ASSERT_GT(bg, 0);
    EXPECT_TRUE(wait_for([&] { return process_ended(bg); }, 10)) << "rank " << r << "'s background job " << bg << " outlived the job";
    ::kill(pid_t(bg), SIGKILL);  // never left to the machine, whatever the outcome
  }
}

TEST(LocalLauncher, AStopSignalToTheLauncherReachesEveryRank) {
  const ScratchDir scratch("launcher_forward");
  const std::string dir = scratch.path();
  const pid_t launcher = fork_launcher(
      "exec >/dev/null 2>&1; trap 'echo stopped > " + dir + "/stopped.$TOPOCOLL_RANK; exit 3' TERM; echo $$ > " + dir +
          "/pid.$TOPOCOLL_RANK; while :; do sleep 0.05; done",
      3);
  ASSERT_GT(launcher, 0);
  ASSERT_TRUE(wait_for([&] { return fs::exists(dir + "/pid.0") && fs::exists(dir + "/pid.1") && fs::exists(dir + "/pid.2"); }, 20));
  ::kill(launcher, SIGTERM);
  int status = 0;
  ASSERT_EQ(::waitpid(launcher, &status, 0), launcher);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGTERM);
  for (int r = 0; r < 3; ++r) {
    EXPECT_TRUE(fs::exists(dir + "/stopped." + std::to_string(r))) << "rank " << r << " never saw the SIGTERM";
    const long pid = pid_in(dir + "/pid." + std::to_string(r));
    EXPECT_TRUE(wait_for([&] { return process_ended(pid); }, 10)) << "rank " << r;
    if (!process_ended(pid)) ::kill(pid_t(pid), SIGKILL);
  }
}

// A job past its time limit is stopped whole (a rank that ignores SIGTERM is killed after the
// grace) and reads as timed out, not as a success or as one rank's failure.
TEST(LocalLauncher, AJobPastItsTimeLimitIsStoppedAndReadsAsTimedOut) {
  const ScratchDir scratch("launcher_time_limit");
  const std::string dir = scratch.path();
  const auto start = std::chrono::steady_clock::now();
  const pid_t launcher = fork_launcher(
      "exec >/dev/null 2>&1; echo $$ > " + dir + "/pid.$TOPOCOLL_RANK; "
      "if [ $TOPOCOLL_RANK = 1 ]; then trap '' TERM; else trap 'exit 0' TERM; fi; while :; do sleep 0.05; done",
      2, std::chrono::seconds(1));
  ASSERT_GT(launcher, 0);
  int status = 0;
  ASSERT_EQ(::waitpid(launcher, &status, 0), launcher);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), kTimeLimitExitCode) << "a rank's clean exit on SIGTERM hid the timeout";
  EXPECT_LT(took, 30) << "the limit (1 s) and the grace (5 s) did not end the job";
  for (int r = 0; r < 2; ++r) {
    const long pid = pid_in(dir + "/pid." + std::to_string(r));
    ASSERT_GT(pid, 0) << "rank " << r << " never started";
    EXPECT_TRUE(wait_for([&] { return process_ended(pid); }, 10)) << "rank " << r;
    if (!process_ended(pid)) ::kill(pid_t(pid), SIGKILL);
  }
}

std::string file_text(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The launcher names the rank that failed first, so a rank's own exit 124 never reads as the
// job's time limit and a many-rank job's first failure is found without reading every log.
TEST(LocalLauncher, TheFirstFailingRankIsNamed) {
  const ScratchDir scratch("launcher_first_failure");
  const std::string err = scratch.path() + "/launcher.err";
  const pid_t launcher = fork_launcher(
      "exec >/dev/null 2>&1; if [ $TOPOCOLL_RANK = 2 ]; then exit 124; fi; sleep 0.3; exit 0", 3, {}, err);
  ASSERT_GT(launcher, 0);
  int status = 0;
  ASSERT_EQ(::waitpid(launcher, &status, 0), launcher);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 124);
  const std::string text = file_text(err);
  EXPECT_NE(text.find("rank 2 exited with 124 first"), std::string::npos) << text;
  EXPECT_EQ(text.find("time limit"), std::string::npos) << text;
}

// A rank reading its standard input reads end-of-file, never the launcher's input: in a
// process group of its own it would be stopped by a terminal, unnoticed, and a pipe the
// launcher inherited would keep it waiting.
TEST(LocalLauncher, TheRanksReadEndOfFileNotTheLaunchersInput) {
  const ScratchDir scratch("launcher_stdin");
  const std::string dir = scratch.path();
  int never_written[2];
  ASSERT_EQ(::pipe(never_written), 0);
  const pid_t launcher = fork_launcher(
      "read line; echo $? > " + dir + "/read.$TOPOCOLL_RANK", 2, std::chrono::seconds(20), "",
      [&](LaunchOptions&) { ::dup2(never_written[0], STDIN_FILENO); });
  ASSERT_GT(launcher, 0);
  int status = 0;
  ASSERT_EQ(::waitpid(launcher, &status, 0), launcher);
  ::close(never_written[0]);
  ::close(never_written[1]);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the ranks waited on the launcher's input until the time limit";
  for (int r = 0; r < 2; ++r) EXPECT_EQ(file_text(dir + "/read." + std::to_string(r)), "1\n") << "rank " << r;
}

// A rank that ended is left unreaped until the job ends: its pid, and so its process group's
// id, cannot be given to another process whose group the job's last kill would then reach.
TEST(LocalLauncher, AnEndedRanksIdStaysTakenUntilTheJobEnds) {
  const ScratchDir scratch("launcher_zombie");
  const std::string dir = scratch.path();
  const pid_t launcher = fork_launcher("echo $$ > " + dir + "/pid.$TOPOCOLL_RANK; "
                                       "if [ $TOPOCOLL_RANK = 1 ]; then sleep 2; fi; exit 0",
                                       2);
  ASSERT_GT(launcher, 0);
  ASSERT_TRUE(wait_for([&] { return fs::exists(dir + "/pid.0") && pid_in(dir + "/pid.0") > 0; }, 10));
  const long early = pid_in(dir + "/pid.0");
  ASSERT_TRUE(wait_for([&] { return process_ended(early); }, 1.5));
  EXPECT_TRUE(fs::exists("/proc/" + std::to_string(early))) << "rank 0 was reaped while rank 1 still ran";
  int status = 0;
  ASSERT_EQ(::waitpid(launcher, &status, 0), launcher);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

// What entering the namespaces needs held (the fabric's entry lock) is released once every
// rank runs its program, not held for the whole job.
TEST(LocalLauncher, StartedIsCalledOnceEveryRankRunsNotAtTheEnd) {
  const ScratchDir scratch("launcher_started");
  const std::string dir = scratch.path();
  const pid_t launcher = fork_launcher(
      "sleep 1.5; if [ -f " + dir + "/started ]; then echo yes > " + dir + "/saw.$TOPOCOLL_RANK; fi", 2, {}, "",
      [&](LaunchOptions& o) { o.started = [dir] { std::ofstream(dir + "/started") << "1"; }; });
  ASSERT_GT(launcher, 0);
  int status = 0;
  ASSERT_EQ(::waitpid(launcher, &status, 0), launcher);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  for (int r = 0; r < 2; ++r)
    EXPECT_TRUE(fs::exists(dir + "/saw." + std::to_string(r))) << "rank " << r << " ran on while `started` was not called";
}

// A signal the launcher's caller ignores (SIGHUP under nohup) stays ignored: the launcher
// does not catch and forward it, and its ranks inherit it ignored.
TEST(LocalLauncher, ASignalTheCallerIgnoresStaysIgnored) {
  const ScratchDir scratch("launcher_nohup");
  const std::string dir = scratch.path();
  const pid_t launcher = fork_launcher("kill -HUP $$; kill -HUP $PPID; sleep 0.2; echo alive > " + dir +
                                           "/alive.$TOPOCOLL_RANK",
                                       2, std::chrono::seconds(20), "",
                                       [](LaunchOptions&) { ::signal(SIGHUP, SIG_IGN); });
  ASSERT_GT(launcher, 0);
  int status = 0;
  ASSERT_EQ(::waitpid(launcher, &status, 0), launcher);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the ignored SIGHUP ended the job";
  for (int r = 0; r < 2; ++r) EXPECT_TRUE(fs::exists(dir + "/alive." + std::to_string(r))) << "rank " << r;
}

TEST(LocalLauncher, ALauncherKilledOutrightTakesItsRanksWithIt) {
  const ScratchDir scratch("launcher_killed");
  const std::string dir = scratch.path();
  const pid_t launcher = fork_launcher("exec >/dev/null 2>&1; echo $$ > " + dir + "/pid.$TOPOCOLL_RANK; exec sleep 60", 2);
  ASSERT_GT(launcher, 0);
  ASSERT_TRUE(wait_for([&] { return pid_in(dir + "/pid.0") > 0 && pid_in(dir + "/pid.1") > 0; }, 20));
  ::kill(launcher, SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(launcher, &status, 0), launcher);
  for (int r = 0; r < 2; ++r) {
    const long pid = pid_in(dir + "/pid." + std::to_string(r));
    EXPECT_TRUE(wait_for([&] { return process_ended(pid); }, 10)) << "rank " << r << " (pid " << pid << ") outlived its launcher";
    if (!process_ended(pid)) ::kill(pid_t(pid), SIGKILL);
  }
}

}  // namespace
}  // namespace topocoll::exec
