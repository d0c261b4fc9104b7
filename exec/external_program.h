// Starting another program (Graphviz's `dot`, an SVG converter) from an argument vector:
// posix_spawn, never a shell, so a file name is only ever a file name (a quote or `;` in
// a path cannot become a command, also when topocoll runs as root); the program is found in
// PATH's absolute directories, as root only in those no other user controls
// (config/trusted_paths.h).
#pragma once

#include <string>
#include <vector>

namespace topocoll::exec {

struct ProgramRun {
  bool started = false;  // false: it could not be started (`error` says why, e.g. not installed)
  int exit_code = -1;    // its exit status; 128 + signal when killed
  int signal = 0;        // the signal that killed it, 0 when it exited
  std::string error;     // why it did not start
  bool succeeded() const { return started && exit_code == 0; }
};

// Runs argv[0] (looked up as above) with argv and waits for it. Its stdout and stderr go to
// /dev/null when `quiet`, else to ours; its stdin is /dev/null.
ProgramRun run_program(const std::vector<std::string>& argv, bool quiet = true);

// A file name as a program's argument: "./-x" for "-x", so no name is read as an option.
std::string path_argument(const std::string& path);

// How a run ended, for an error message: "exit 3", "killed by signal 9 (Killed)", or why it
// did not start.
std::string describe_end(const ProgramRun& run);

}  // namespace topocoll::exec
