#include "net/net_status.h"

namespace topocoll::net {

std::string_view to_string(NetCode code) {
  switch (code) {
    case NetCode::Ok: return "ok";
    case NetCode::InvalidArgument: return "invalid argument";
    case NetCode::BadHandle: return "bad handle";
    case NetCode::VersionMismatch: return "version mismatch";
    case NetCode::Timeout: return "timeout";
    case NetCode::ConnectFailed: return "connect failed";
    case NetCode::PeerClosed: return "peer closed";
    case NetCode::Truncated: return "truncated";
    case NetCode::TagMismatch: return "tag mismatch";
    case NetCode::SystemError: return "system error";
  }
  return "unknown";
}

}  // namespace topocoll::net
