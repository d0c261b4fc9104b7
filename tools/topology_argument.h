// A topology file named on the command line, loaded: a problem with it names the file, so a
// command reading several inputs says which one is wrong ("topocoll plan: empty.json: invalid
// JSON at byte 1: ..."), with the file's pointer and reason from the topology layer.
#pragma once

#include <stdexcept>
#include <string>

#include "config/value_grammar.h"
#include "topo/topology_json.h"

namespace topocoll::cli {

inline topo::Topology load_topology_argument(const std::string& path) {
  try {
    return topo::load_topology_file(path);
  } catch (const topo::TopologyError& e) {
    const std::string quoted = config::quoted_value(path), what = e.what();
    // An error of reading the file names it already.
    throw std::runtime_error(what.find(quoted) != std::string::npos ? what : quoted + ": " + what);
  }
}

}  // namespace topocoll::cli
