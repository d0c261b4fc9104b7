// Moves messages between the processes of one machine over Unix domain sockets in the Linux
// abstract namespace (no files to clean up). Each process has one background receiver
// thread; it accepts connections on every name the process listens on and reads whole
// messages into the process's Mailbox. A rank's address is the socket name of the process
// holding it; an empty address means "this process" and skips the socket.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "tests/emu/nccl_emu_mailbox.h"

namespace topocoll::emu {

// The abstract socket name of `rank` of the communicator first created with `comm`.
std::string socket_name(const CommKey& comm, int rank);

// Makes this process answer at `name` (it keeps answering until it exits). Throws Failure
// if another process already holds the name.
void listen_at(const std::string& name);

// Copies `bytes` to `address` under `key`; returns once they are handed to the kernel (or
// to the mailbox), never waiting for a receive. A peer that is not listening yet is retried
// until `timeout`, then Failure.
void send_message(const std::string& address, const MessageKey& key, const void* data,
                  std::size_t bytes, std::chrono::milliseconds timeout);

// Messages on the NetSetup and NetHandle channels go to this handler (on the receiver
// thread) instead of the mailbox.
using ControlHandler = std::function<void(const MessageKey& key, std::vector<std::byte> payload)>;
void set_control_handler(ControlHandler handler);

// A name this process answers at (the first it listened at); empty before any.
std::string process_address();

}  // namespace topocoll::emu
