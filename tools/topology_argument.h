// A topology file named on the command line, loaded: a problem with it names the file, so a
// command reading several inputs says which one is wrong ("topocoll plan: empty.json: invalid
// JSON at byte 1: ..."), with the file's pointer and reason from the topology layer. "-" is
// standard input (`topocoll generate nap | topocoll validate -`), read to the same bound as
// a file.
#pragma once

#include <cstdio>
#include <stdexcept>
#include <string>

#include "config/value_grammar.h"
#include "topo/topology_json.h"

namespace topocoll::cli {

// Standard input whole, to the bound of a topology file.
inline std::string topology_text_from_stdin() {
  std::string text;
  char chunk[65536];
  for (std::size_t n; (n = std::fread(chunk, 1, sizeof chunk, stdin)) > 0;) {
    text.append(chunk, n);
    if (text.size() > topo::kMaxTopologyFileBytes)
      throw topo::TopologyError("", "more than the " + std::to_string(topo::kMaxTopologyFileBytes >> 20) +
                                        " MiB a topology file may have");
  }
  return text;
}

inline topo::Topology load_topology_argument(const std::string& path) {
  if (path == "-") {
    try {
      return topo::load_topology_text(topology_text_from_stdin());
    } catch (const topo::TopologyError& e) {
      throw std::runtime_error(std::string("standard input: ") + e.what());
    }
  }
  try {
    return topo::load_topology_file(path);
  } catch (const topo::TopologyError& e) {
    const std::string quoted = config::quoted_value(path), what = e.what();
    // An error of reading the file names it already.
    throw std::runtime_error(what.find(quoted) != std::string::npos ? what : quoted + ": " + what);
  }
}

}  // namespace topocoll::cli
