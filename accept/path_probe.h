// Path probes of the wiring phase, as traceroute sends them without privileges: UDP
// datagrams with a growing TTL from the rank's NIC address (and its lane's mark), the
// errors read from the socket's error queue (IP_RECVERR). Each forwarding node that drops
// a probe answers with ICMP time exceeded from its own address; the destination answers
// with port unreachable.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace topocoll::accept {

struct PathTrace {
  std::vector<std::string> responders;  // per TTL from 1: the address that answered, "" none
  bool reached = false;                 // the destination answered
  std::string error;                    // the path ended otherwise (unreachable, no route)
};

PathTrace trace_path(const std::string& local_address, const std::string& destination,
                     uint32_t mark, int max_hops, std::chrono::milliseconds per_hop);

}  // namespace topocoll::accept
