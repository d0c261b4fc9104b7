// Running the system's network tools (iproute2's `ip` and `tc`) and acting inside a network
// namespace. Every failure is a FabricError carrying the command and what it printed.
#pragma once

#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "net/network_namespace.h"

namespace topocoll::fabric {

using net::netns_exists;
using net::netns_path;
using net::netns_with_prefix;

class FabricError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct CommandResult {
  int status = -1;  // exit code; 128 + signal when killed; 127 when it could not start
  std::string output;  // stdout and stderr together
};

// Runs argv[0] with `input` on its stdin: `ip` and `tc` from where fabric/iproute2.h finds
// them (with their prefix's libraries), any other program looked up in PATH, then /usr/sbin,
// /sbin, /usr/bin and /bin. Status 127 with the reason (for iproute2: where it looked, how to
// provide it) when it is not found.
CommandResult run_command(const std::vector<std::string>& argv, const std::string& input = "");
// The same, throwing FabricError("<what>: <command> failed: <output>") unless it exits 0.
void run_checked(const std::vector<std::string>& argv, const std::string& what,
                 const std::string& input = "");
// Where a program is (PATH, then the system's directories), or "" when it is not installed.
std::string find_program(const std::string& name);

// Runs `body` in a child process inside namespace `name` (its /proc/sys/net is that
// namespace's); returns the child's exit code, or throws when the namespace cannot be
// entered. `body` returns the exit code.
int run_in_netns(const std::string& name, const std::function<int()>& body);

// Moves the calling process into network namespace `name` and into a UTS namespace of its
// own under `hostname`, as `ip netns exec` with `unshare --uts` would: what it runs next sees
// the endpoint's network and host name (NCCL, nccl-tests and the acceptance inventory tell
// hosts apart by it). Throws a FabricError naming the step that failed and why.
void become_endpoint_host(const std::string& name, const std::string& hostname);

}  // namespace topocoll::fabric
