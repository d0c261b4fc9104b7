// This machine's loopback ports made reachable from inside a fabric namespace.
// Open MPI's ranks meet their local daemon over TCP on 127.0.0.1 (PMIx:
// PMIX_SERVER_URI4=...;tcp4://127.0.0.1:PORT), which a rank moved into a fabric namespace
// cannot reach: loopback is per namespace, so MPI_Init fails ("OPAL ERROR: Unreachable").
// A relay listening on the same address and port inside the namespace forwards each
// connection to the machine's loopback, so mpirun-launched programs run unchanged while
// their own traffic (shared memory, PMIx) stays off the fabric's cables.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "net/socket_address.h"

namespace topocoll::fabric {

// The loopback addresses a launcher tells its ranks to connect to: every tcp4://127.x.y.z:PORT
// in PMIX_SERVER_URI* of `environment` (KEY=VALUE entries), each once.
std::vector<net::SocketAddress> launcher_loopback_addresses(const std::vector<std::string>& environment);

// Starts a relay process that listens on each of `addresses` inside the network namespace at
// `netns_path` and forwards every connection to the same address in the caller's namespace.
// It is no child of the caller (the caller is about to exec the rank's program) and ends
// when process `owner` does. Returns once the listeners exist; throws FabricError naming the
// address when one cannot be made (another relay of the same namespace shares it:
// SO_REUSEPORT). The relay keeps none of the caller's descriptors: not the fabric's entry
// lock the caller holds until its exec, which would hold the fabric for the job's life.
void start_loopback_relay(const std::string& netns_path, const std::vector<net::SocketAddress>& addresses,
                          pid_t owner);

}  // namespace topocoll::fabric
