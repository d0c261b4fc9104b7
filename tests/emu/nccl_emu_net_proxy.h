// NCCL's network proxy, emulated: with NCCL_NET_PLUGIN set, every message between ranks of
// different processes crosses the net plugin, called the way NCCL 2.28.9's proxy calls it
// (src/transport/net.cc) — so a plugin that works under this emulation answers the calls
// real NCCL makes, in the order it makes them:
//
//  init(&ctx, commHash, config, logger, profiler)   per communicator (finalize at destroy)
//  devices, getProperties                            maxP2pBytes in (0, 1 TiB], host device
//  recv side: listen(ctx, dev) -> handle to the sender (here over the Unix sockets the
//             emulation uses as NCCL uses its bootstrap); accept(listenComm, &recvComm,
//             &devHandle) again until it returns a comm; closeListen
//  send side: connect(ctx, dev, handle, &sendComm, &devHandle) again until it returns a
//             comm (the handle buffer is the same memory on every call)
//  regMr of each protocol's staging buffer (LL, SIMPLE) with NCCL_PTR_HOST; getDeviceMr only
//             where NCCL would call it (a device handle, a non-host device type)
//  per message: setNetAttr on its first step; NCCL_STEPS = 8 slots per connection; a step
//             is at most stepSize bytes (SIMPLE 512 KiB, LL 64 KiB: messages up to 16 KiB,
//             NCCL_P2P_LL_THRESHOLD, take LL); isend(sendComm, slot, size, tag = own rank,
//             mhandle, phandle, &request) and irecv(recvComm, 1, &slot, &stepSize, &tag =
//             peer rank, &mhandle, &phandle, &request), a null request meaning "try again";
//             LL receives carry NCCL_NET_OPTIONAL_RECV_COMPLETION in *request; test() on the
//             oldest request of each direction; once a received slot has been read (the GPU's
//             part), irecvConsumed(recvComm, 1, request) on the request test() completed, if
//             the entry is set
//  destroy: the communicator's sends drained, deregMr, closeSend / closeRecv, finalize(ctx).
//
// Receives are posted only for messages the emulated rank receives (as NCCL posts them for
// the operations it runs), with the sizes it expects; a message of another size fails with
// a Failure naming both. The calls come from the threads NCCL makes them on: init, devices
// and getProperties from the thread that makes the communicator; setup, listen, connect,
// accept, regMr, deregMr and close from the proxy's service thread; isend, irecv, test,
// irecvConsumed and setNetAttr from its progress thread; finalize from the thread that
// destroys the communicator, after both have stopped. Each communicator has its proxy (both
// threads) and its context; a split of a communicator made with splitShare=1 shares them
// (NCCL decides by the parent's config), and the context is finalized with the last of
// them. The plugin is called without the emulation's lock, so its state sees the
// concurrency NCCL gives it (the ThreadSanitizer build checks it). Any plugin error is
// sticky for the proxy and is reported, with the plugin's own code, by the next send,
// receive or destroy of its communicators and by ncclCommGetAsyncError, as NCCL reports a
// proxy error.
#pragma once

#include <nccl.h>

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "tests/emu/nccl_emu_mailbox.h"

namespace topocoll::emu {

class NetProxy {
 public:
  // The process's proxy, or null when no NCCL_NET_PLUGIN is set. Throws Failure when one is
  // named but cannot be used.
  static NetProxy* active();

  // The communicator (and rank) a split shares its proxy and context with.
  struct SharedFrom {
    CommKey comm;
    int rank = 0;
  };
  // A communicator's rank of this process: init(&ctx) with the plugin and a proxy of its
  // own, or, given `parent`, the parent's proxy and context. `device` picks the plugin
  // device (modulo their number), as NCCL picks the NIC nearest the GPU.
  void open_comm(const CommKey& comm, int rank, int device,
                 const std::optional<SharedFrom>& parent = std::nullopt);
  // Waits (up to `timeout`) for the rank's sends to complete. With the last communicator
  // of its proxy, stops the proxy (connections closed) and finalizes the context.
  void close_comm(const CommKey& comm, int rank, std::chrono::milliseconds timeout);

  // Eager, as the emulation's sends are: the bytes are copied; the proxy moves them.
  // `address` is the destination process's socket name (for the connection setup).
  void send(const std::string& address, const MessageKey& key, const void* data,
            std::size_t bytes);
  // Receives the next message under `key` (source -> destination) into `into`; Failure
  // after `timeout`, on a size other than `bytes`, or on a plugin error.
  void receive(const MessageKey& key, void* into, std::size_t bytes,
               std::chrono::milliseconds timeout);

  // The plugin error the rank's proxy keeps (ncclSuccess when none), as NCCL's proxy stores
  // it in comm->asyncResult for ncclCommGetAsyncError (proxy.cc).
  ncclResult_t async_error(const CommKey& comm, int rank) const;

  // Connection setup messages from the transport's receiver thread.
  void on_control(const MessageKey& key, std::vector<std::byte> payload);

 private:
  NetProxy() = default;
  struct State;
  State* state_ = nullptr;
  friend struct NetProxyAccess;
};

}  // namespace topocoll::emu
