// The value that follows a command-line flag, shared by the subcommands' parsers. Values are
// read by config/value_grammar.h, the grammar of the environment's values too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

#include "config/value_grammar.h"

namespace topocoll::cli {

// args[i] is a flag that takes a value: returns args[i + 1] and advances i past it, or
// throws naming the flag when the value is missing. A value that is itself a flag ("--plot
// --json") is missing too, not a file to write named "--json" (a file of that name is
// "./--json"; a negative number has one dash and is checked by its grammar).
inline const std::string& flag_value(std::span<const std::string> args, std::size_t& i) {
  if (i + 1 >= args.size()) throw std::invalid_argument(args[i] + " needs a value");
  if (args[i + 1].rfind("--", 0) == 0)
    throw std::invalid_argument(args[i] + " needs a value, not the flag '" + args[i + 1] + "'");
  return args[++i];
}

// Each flag once: the parsers keep the last value given, so "--rate-mbit 1000 ... --rate-mbit
// 100" would silently run at the second rate (a script that appends an override, a pasted
// command). Flags are the words before "--" (what follows is another program's) that begin
// with "--", up to an '=' ("--shape=4x8" of generate); a value never begins with "--"
// (flag_value). `repeatable`, space-separated, names the flags that add to a list
// (Command::repeatable: --rank0-env, --relay-port).
inline void refuse_repeated_flags(std::span<const std::string> args, std::string_view repeatable) {
  std::set<std::string> seen;
  for (const std::string& a : args) {
    if (a == "--") return;
    if (a.rfind("--", 0) != 0) continue;
    const std::string flag = a.substr(0, a.find('='));
    bool listed = false;
    for (size_t at = repeatable.find(flag); at != std::string_view::npos; at = repeatable.find(flag, at + 1))
      listed = listed || ((at == 0 || repeatable[at - 1] == ' ') &&
                          (at + flag.size() == repeatable.size() || repeatable[at + flag.size()] == ' '));
    if (!listed && !seen.insert(flag).second)
      throw std::invalid_argument(flag + " is given twice: give each flag once");
  }
}

// A rate or scale where 0 inside means "not given" (the default): a 0 given is refused.
inline double positive_argument(const std::string& flag, const std::string& text) {
  const double v = config::number_argument(flag, text, 0, std::numeric_limits<double>::max());
  if (!(v > 0)) throw std::invalid_argument(flag + " " + text + ": expected a number above 0");
  return v;
}

// A size on the command line is at most 1 PiB: beyond it a typo, not a buffer.
inline constexpr int64_t kMaxArgumentBytes = int64_t(1) << 50;
// A number bound that is no bound (config::parse_number).
inline constexpr double kAny = std::numeric_limits<double>::max();

}  // namespace topocoll::cli
