// Runs a shell command line for the end-to-end tests of the CLI: its exit status and what it
// printed (stdout and stderr together).
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace topocoll::testing_support {

struct ShellResult {
  int status = -1;  // exit code; -1 when it did not exit normally
  std::string output;
};

inline ShellResult shell_run(const std::string& command) {
  ShellResult r;
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  const int st = ::pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

}  // namespace topocoll::testing_support
