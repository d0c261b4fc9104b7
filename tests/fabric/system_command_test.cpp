// The commands the fabric runs (ip, tc, sysctl in a namespace) report how they ended even
// when topocoll inherited an ignored SIGCHLD (then Linux reaps children unseen): a failed
// command must never read as exit 0. Each case runs in a forked child that ignores SIGCHLD.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <string>

#include "fabric/system_command.h"

namespace topocoll::fabric {
namespace {

// Runs `body` in a forked child with SIGCHLD ignored; its exit code (0: as expected).
int with_sigchld_ignored(const std::function<int()>& body) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::signal(SIGCHLD, SIG_IGN);
    ::_exit(body());
  }
  int st = 0;
  if (::waitpid(pid, &st, 0) != pid || !WIFEXITED(st)) return -1;
  return WEXITSTATUS(st);
}

TEST(SystemCommand, AFailedCommandNeverReadsAsSuccessWhenSigchldIsIgnored) {
  const int code = with_sigchld_ignored([] {
    try {
      return run_command({"/bin/sh", "-c", "exit 3"}).status == 3 ? 0 : 1;
    } catch (const FabricError& e) {
      return std::string(e.what()).find("SIGCHLD") != std::string::npos ? 0 : 2;
    }
  });
  EXPECT_EQ(code, 0) << "1: the failed command read as another status (0 before the fix); 2: an unclear error";
}

TEST(SystemCommand, ACommandsExitCodeAndOutputComeBack) {
  const CommandResult r = run_command({"/bin/sh", "-c", "echo out; exit 4"});
  EXPECT_EQ(r.status, 4);
  EXPECT_EQ(r.output, "out\n");
}

// A batch larger than both pipes hold (ip -batch of a large fabric) while the tool echoes
// it: fed and drained together, never both sides waiting. In a child, so a deadlock is a
// failure after 30 s, not a hung test.
TEST(SystemCommand, ALargeInputWhileTheToolWritesAsMuchDoesNotDeadlock) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::alarm(30);
    const std::string input(4 << 20, 'x');
    const CommandResult r = run_command({"cat"}, input);
    ::_exit(r.status == 0 && r.output == input ? 0 : 1);
  }
  int st = 0;
  ASSERT_EQ(::waitpid(pid, &st, 0), pid);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0)
      << (WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM ? "deadlocked: killed after 30 s" : "wrong output");
}

}  // namespace
}  // namespace topocoll::fabric
