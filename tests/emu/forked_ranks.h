// Ranks of the NCCL emulation as forked processes of a test: each runs its part and exits
// 0 only if all its results are right; the test asserts that every one did.
#pragma once

#include <nccl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

// In a rank's body: when `cond` is false, say where and why on stderr and fail the rank.
#define CHECK_OR_FAIL(cond, ...)                                      \
  do {                                                                \
    if (!(cond)) {                                                    \
      std::fprintf(stderr, "%s:%d: %s: ", __FILE__, __LINE__, #cond); \
      std::fprintf(stderr, __VA_ARGS__);                              \
      std::fprintf(stderr, "\n");                                     \
      return false;                                                   \
    }                                                                 \
  } while (0)

namespace topocoll::emu::testing {

// One child process's part: returns true when all its results are right.
using RankBody = std::function<bool(int rank, int nranks, const ncclUniqueId& id)>;

// Forks `nranks` children sharing one ncclUniqueId made here; each runs `body` and exits
// 0 only if it returned true. A child still running after `limit` is killed (a failure).
inline ::testing::AssertionResult run_ranks(int nranks, const RankBody& body,
                                            std::chrono::seconds limit = std::chrono::seconds(20)) {
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) return ::testing::AssertionFailure() << "no unique id";
  std::fflush(nullptr);
  std::vector<pid_t> children;
  for (int rank = 0; rank < nranks; ++rank) {
    const pid_t pid = fork();
    if (pid < 0) return ::testing::AssertionFailure() << "fork failed";
    if (pid == 0) {
      bool ok = false;
      try {
        ok = body(rank, nranks, id);
      } catch (...) {
        ok = false;
      }
      std::fflush(nullptr);
      std::exit(ok ? 0 : 1);  // exit, not _exit: a sanitizer build checks leaks here
    }
    children.push_back(pid);
  }
  std::string failures;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (int rank = 0; rank < nranks; ++rank) {
    int status = 0;
    pid_t done = 0;
    while ((done = waitpid(children[rank], &status, WNOHANG)) == 0 &&
           std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    if (done == 0) {
      kill(children[rank], SIGKILL);
      waitpid(children[rank], &status, 0);
      failures += " rank " + std::to_string(rank) + " hung;";
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      failures += " rank " + std::to_string(rank) + " failed;";
    }
  }
  if (failures.empty()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << nranks << " ranks:" << failures;
}

}  // namespace topocoll::emu::testing
