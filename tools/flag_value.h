// The value that follows a command-line flag, shared by the subcommands' parsers. Values are
// read by config/value_grammar.h, the grammar of the environment's values too.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

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

// "--flag=value" as "--flag value", for every command, up to "--" (what follows is another
// program's): the form getopt_long and most tools accept.
inline std::vector<std::string> split_flag_values(std::vector<std::string> args) {
  std::vector<std::string> out;
  bool theirs = false;
  for (std::string& a : args) {
    const std::size_t eq = a.find('=');
    if (!theirs && a.rfind("--", 0) == 0 && a.size() > 2 && eq != std::string::npos && eq > 2) {
      out.push_back(a.substr(0, eq));
      out.push_back(a.substr(eq + 1));
    } else {
      theirs = theirs || a == "--";
      out.push_back(std::move(a));
    }
  }
  return out;
}

// For the commands that take topology files as their words (validate, describe, draw):
// "--topo FILE" as FILE, as the other commands name it.
inline std::vector<std::string> topo_flag_as_word(std::span<const std::string> args) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--topo") {
      if (i + 1 >= args.size()) throw std::invalid_argument("--topo needs a value");
      out.push_back(args[++i]);
    } else {
      out.push_back(args[i]);
    }
  }
  return out;
}

// Each flag once: the parsers keep the last value given, so "--rate-mbit 1000 ... --rate-mbit
// 100" would silently run at the second rate (a script that appends an override, a pasted
// command). Flags are the words before "--" (what follows is another program's) that begin
// with "--", up to an '=' ("--shape=4x8" of generate), and the short names `synonyms` lists;
// a value never begins with "--" (flag_value). `repeatable`, space-separated, names the flags
// that add to a list (Command::repeatable: --rank0-env, --relay-port). `synonyms`, groups of
// space-separated names split by ',', names one flag's spellings ("-n --ranks, --algo
// --algos"): "-n 4 ... --ranks 8" is that flag given twice too.
inline void refuse_repeated_flags(std::span<const std::string> args, std::string_view repeatable,
                                  std::string_view synonyms = {}) {
  const auto words = [](std::string_view text) {
    std::vector<std::string> out;
    for (size_t at = 0; at < text.size();) {
      const size_t end = std::min(text.find(' ', at), text.size());
      if (end > at) out.emplace_back(text.substr(at, end - at));
      at = end + 1;
    }
    return out;
  };
  const std::vector<std::string> listed = words(repeatable);
  const std::set<std::string> may_repeat(listed.begin(), listed.end());
  std::map<std::string, std::string> spelling_of;  // a name -> its group's spellings, "-n or --ranks"
  for (size_t at = 0; at <= synonyms.size();) {
    const size_t end = std::min(synonyms.find(',', at), synonyms.size());
    const std::vector<std::string> group = words(synonyms.substr(at, end - at));
    std::string spelled;
    for (const std::string& name : group) spelled += (spelled.empty() ? "" : " or ") + name;
    for (const std::string& name : group) spelling_of[name] = spelled;
    at = end + 1;
  }
  std::set<std::string> seen;
  for (const std::string& a : args) {
    if (a == "--") return;
    const std::string flag = a.substr(0, a.find('='));
    const auto synonym = spelling_of.find(flag);
    if (a.rfind("--", 0) != 0 && synonym == spelling_of.end()) continue;
    if (may_repeat.count(flag)) continue;
    const std::string name = synonym == spelling_of.end() ? flag : synonym->second;
    if (!seen.insert(name).second) throw std::invalid_argument(name + " is given twice: give each flag once");
  }
}

// A rate or scale where 0 inside means "not given" (the default): a 0 given is refused.
inline double positive_argument(const std::string& flag, const std::string& text) {
  const config::Parsed<double> v = config::parse_number(text, 0, std::numeric_limits<double>::max());
  if (!v || !(*v.value > 0))
    throw std::invalid_argument(flag + " " + config::quoted_value(text) + ": expected a number above 0");
  return *v.value;
}

// A size on the command line is at most 1 PiB: beyond it a typo, not a buffer.
inline constexpr int64_t kMaxArgumentBytes = int64_t(1) << 50;
// A number bound that is no bound (config::parse_number).
inline constexpr double kAny = std::numeric_limits<double>::max();

}  // namespace topocoll::cli
