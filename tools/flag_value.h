// The value that follows a command-line flag, shared by the subcommands' parsers.
#pragma once

#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>

namespace topocoll::cli {

// args[i] is a flag that takes a value: returns args[i + 1] and advances i past it, or
// throws naming the flag when the value is missing.
inline const std::string& flag_value(std::span<const std::string> args, std::size_t& i) {
  if (i + 1 >= args.size()) throw std::invalid_argument(args[i] + " needs a value");
  return args[++i];
}

}  // namespace topocoll::cli
