// Result of a transport call: a code the caller can branch on and a message naming what
// went wrong (peer, sizes, tags), ready to be logged as is.
#pragma once

#include <string>
#include <string_view>

namespace topocoll::net {

enum class NetCode {
  Ok = 0,
  InvalidArgument,   // caller error: null pointer, negative count, bad address
  BadHandle,         // foreign or corrupt handle / hello (magic mismatch)
  VersionMismatch,   // peer speaks another protocol version
  Timeout,           // connect / accept / handshake took longer than timeout_ms; a stall
  ConnectFailed,     // a connect this side could not make (bind, mark, an unretried errno)
  PeerClosed,        // EOF, reset, or the path to the peer failed (is_peer_or_path_error)
  Truncated,         // message larger than the posted receive
  TagMismatch,       // message tag not among the posted receive's tags
  SystemError,       // other socket / thread errors (errno text in the message)
};

std::string_view to_string(NetCode code);

struct NetStatus {
  NetCode code = NetCode::Ok;
  std::string message;
  int error_number = 0;  // the errno behind it, where a system call failed (else 0)

  bool ok() const { return code == NetCode::Ok; }
  static NetStatus success() { return {}; }
  static NetStatus error(NetCode c, std::string m, int error_number = 0) {
    return {c, std::move(m), error_number};
  }
};

}  // namespace topocoll::net
