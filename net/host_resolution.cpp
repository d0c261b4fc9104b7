#include "net/host_resolution.h"

#include <netdb.h>
#include <sys/socket.h>

#include <memory>

namespace topocoll::net {

NetStatus resolve_host(const std::string& host, uint16_t port, bool passive,
                       std::vector<SocketAddress>* out) {
  out->clear();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (passive) hints.ai_flags = AI_PASSIVE;
  addrinfo* list = nullptr;
  const std::string service = std::to_string(port);
  const int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &list);
  if (rc != 0) return NetStatus::error(NetCode::ConnectFailed, gai_strerror(rc));
  const std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> owned(list, &::freeaddrinfo);
  for (const addrinfo* a = list; a; a = a->ai_next) {
    const SocketAddress address = SocketAddress::from_sockaddr(a->ai_addr);
    if (address.is_set()) out->push_back(address);
  }
  return {};
}

}  // namespace topocoll::net
