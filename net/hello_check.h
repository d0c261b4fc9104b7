// Checks the hello a connecting socket sends (net/wire_format.h) against the listener's
// handle: the one parser of bytes a stranger can send to a data port.
#pragma once

#include <string>

#include "net/socket_transport.h"
#include "net/wire_format.h"

namespace topocoll::net {

// Empty when `hello` is a socket of a connection made with `listener`'s handle; otherwise
// what is wrong with it, for the stray-connection WARN.
std::string hello_problem(const Hello& hello, const Handle& listener);

}  // namespace topocoll::net
