// The one error type of the topology layer: a JSON pointer and a reason, so a user reads
// e.g. `/servers/3/nics/1/switch: unknown switch "U9"`; the reason alone for the whole file
// (it cannot be read, it is not JSON).
#pragma once

#include <stdexcept>
#include <string>

namespace topocoll::topo {

class TopologyError : public std::runtime_error {
 public:
  TopologyError(std::string pointer, std::string reason)
      : std::runtime_error(pointer.empty() ? reason : pointer + ": " + reason),
        pointer_(std::move(pointer)), reason_(std::move(reason)) {}
  const std::string& pointer() const { return pointer_; }
  const std::string& reason() const { return reason_; }

 private:
  std::string pointer_;
  std::string reason_;
};

}  // namespace topocoll::topo
