// A comma- (or colon-) separated command-line value split into its items, shared by the
// subcommands' parsers (--algos ring,hd; --sizes 4K:1G).
#pragma once

#include <sstream>
#include <string>
#include <vector>

namespace topocoll::cli {

// The non-empty items of `text` between `sep`s ("a,,b" -> {"a", "b"}).
inline std::vector<std::string> split_list(const std::string& text, char sep) {
  std::vector<std::string> items;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, sep))
    if (!item.empty()) items.push_back(item);
  return items;
}

}  // namespace topocoll::cli
