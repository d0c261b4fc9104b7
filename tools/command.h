// Subcommands of the `topocoll` CLI. Each lives in its own tools/cmd_*.cpp and registers
// itself with TOPOCOLL_COMMAND, so adding one touches no shared file.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace topocoll::cli {

// args excludes the program and subcommand names. Returns the process exit code.
using CommandFn = int (*)(std::span<const std::string> args);

struct Command {
  std::string_view name;
  std::string_view summary;  // one line for `topocoll help`
  CommandFn run;
  // Flags that add to a list and may be given again, space-separated ("--rank0-env
  // --relay-port"); any other flag given twice is refused (flag_value.h).
  std::string_view repeatable = {};
  // One flag's spellings, groups split by ',' ("-n --ranks, --algo --algos"): given once
  // under any of them (flag_value.h).
  std::string_view synonyms = {};
};

bool register_command(Command command);
const std::vector<Command>& commands();

}  // namespace topocoll::cli

#define TOPOCOLL_CONCAT_INNER(a, b) a##b
#define TOPOCOLL_CONCAT(a, b) TOPOCOLL_CONCAT_INNER(a, b)
#define TOPOCOLL_COMMAND(name, summary, fn, ...)                                 \
  [[maybe_unused]] static const bool TOPOCOLL_CONCAT(topocoll_registered_, __LINE__) = \
      ::topocoll::cli::register_command({name, summary, fn, __VA_ARGS__})
