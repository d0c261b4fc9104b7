// Where the fabric's `ip` and `tc` (iproute2) come from. In order:
//   1. TOPOCOLL_FABRIC_IPROUTE2=DIR: a directory holding them, or a prefix an iproute2 .deb
//      and its libraries were unpacked into (`dpkg -x`; perf/gpu/fetch_debs.sh): only there;
//   2. PATH, then the system's /usr/sbin, /sbin, /usr/bin, /bin; a PATH entry that is
//      relative, or a directory another user owns or may write into, is skipped (the tools
//      run as root);
//   3. BUILD_DIR/deps beside this executable, where perf/gpu/run_all.sh unpacks the .debs.
// A tool found under a prefix other than the system's runs with that prefix's library
// directories on its own LD_LIBRARY_PATH (nobody else's), so an unpacked iproute2 works
// on a machine that has none installed, and the machine's own programs keep its libraries.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace topocoll::fabric {

struct ToolLocation {
  std::string path;          // the executable
  std::string library_path;  // its LD_LIBRARY_PATH entries, ':'-separated; "" = none needed
};

// Where to look, in order (tests build their own).
struct ToolSearch {
  std::string setting;                   // TOPOCOLL_FABRIC_IPROUTE2; "" = unset
  std::vector<std::string> path;         // PATH's directories
  std::vector<std::string> system_dirs;  // /usr/sbin, /sbin, /usr/bin, /bin
  std::string bundled_prefix;            // BUILD_DIR/deps beside this executable; "" = none
  std::string library_triplet;           // x86_64-linux-gnu: the prefix's lib/<triplet>
};

// This process's search: its environment (config/env.h) and executable.
ToolSearch iproute2_search();

std::optional<ToolLocation> find_tool(const std::string& name, const ToolSearch& search);

// What to tell a user when `name` was not found: which program, every place looked in, and
// how to provide it.
std::string tool_missing(const std::string& name, const ToolSearch& search);

// `ip` or `tc` for this process, looked up once; nullopt when not found.
const std::optional<ToolLocation>& iproute2_tool(const std::string& name);

}  // namespace topocoll::fabric
