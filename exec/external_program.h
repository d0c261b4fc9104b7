// Starting another program (Graphviz's `dot`, an SVG converter) from an argument vector:
// posix_spawn, never a shell, so a file name is only ever a file name (a quote or `;` in
// a path cannot become a command, also when topocoll runs as root); the program is found in
// PATH's absolute directories, as root only in those no other user controls
// (config/trusted_paths.h).
#pragma once

#include <csignal>
#include <string>
#include <vector>

namespace topocoll::exec {

struct ProgramRun {
  bool started = false;  // false: it could not be started (`error` says why, e.g. not installed)
  int exit_code = -1;    // its exit status; 128 + signal when killed
  int signal = 0;        // the signal that killed it, 0 when it exited
  std::string error;     // why it did not start
  bool succeeded() const { return started && exit_code == 0; }
  // Ended by the terminal's interrupt (Ctrl-C, Ctrl-\): the user means us too, once our
  // caller has cleaned up (pass_on_interrupt).
  bool interrupted() const { return signal == SIGINT || signal == SIGQUIT; }
};

// Runs argv[0] (looked up as above) with argv and waits for it. Its stdout and stderr go to
// /dev/null when `quiet`, else to ours; its stdin is /dev/null. As system(3) does, we ignore
// SIGINT and SIGQUIT while it runs (a Ctrl-C reaches the whole foreground group): the
// program takes the interrupt, we learn how it ended and clean up what we made for it, then
// pass the interrupt on.
ProgramRun run_program(const std::vector<std::string>& argv, bool quiet = true);

// After cleaning up: a run ended by the terminal's interrupt ends us the same way (with our
// own disposition of that signal: default, a handler of the embedding program's, or ignored).
void pass_on_interrupt(const ProgramRun& run);

// A file name as a program's argument: "./-x" for "-x", so no name is read as an option.
std::string path_argument(const std::string& path);

// How a run ended, for an error message: "exit 3", "killed by signal 9 (Killed)", or why it
// did not start.
std::string describe_end(const ProgramRun& run);

}  // namespace topocoll::exec
