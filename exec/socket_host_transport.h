// Socket transport for the host backend: ranks are processes (on one machine or many) and
// bytes move over the same socket transport core as the NCCL net plugin (net/), so one data
// path serves both. Every rank publishes its listener's handle through the bootstrap; a
// connection to a peer is opened the first time a step sends to it, and accepted the first
// time a step waits for a message from it (so a ring opens 2 connections, not P-1).
// Messages up to TransportOptions::eager_bytes skip the connection and its progress
// threads: the eager channel (exec/eager_channel.h) moves them on the caller's thread.
// Every message above 64 KiB rendezvous (TransportOptions::rendezvous): the receiver's
// clear-to-send, over the eager channel, starts each one, so no step's bytes reach a rank
// still in the step before (what keeps a contention-free schedule contention-free on a
// real network); smaller ones go at once.
#pragma once

#include <chrono>
#include <cstddef>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "exec/backend.h"
#include "exec/bootstrap.h"
#include "exec/eager_channel.h"
#include "exec/host_transport.h"
#include "net/socket_transport.h"
#include "net/transport_options.h"

namespace topocoll::exec {

class SocketHostTransport final : public HostTransport {
 public:
  // Listens on local_ip (port 0); an empty local_ip means bootstrap.local_ip(). Exchanges
  // handles with one bootstrap round (every rank must construct its transport). Throws
  // BackendError naming what failed.
  SocketHostTransport(BootstrapClient& bootstrap, std::string local_ip,
                      const net::TransportOptions& options);
  ~SocketHostTransport() override;

  int rank() const override { return rank_; }
  int nranks() const override { return nranks_; }
  // After one of these threw, every later call throws too, naming the first failure: the
  // failed step's transfers may still be posted on the connections (a receive still landing
  // in its buffer), so nothing more runs over them.
  void post_send(int peer, const void* src, std::size_t bytes) override;
  void post_recv(int peer, void* dst, std::size_t bytes) override;
  void wait_all() override;

  const std::string& listen_address() const { return listen_address_; }
  // The eager channel's listener (exec/eager_channel.h) and the strangers it turned away.
  net::SocketAddress eager_address() const { return eager_->local().address; }
  int rejected_eager_connections() const { return eager_->rejected_connections(); }

 private:
  void post_send_now(int peer, const void* src, std::size_t bytes);
  void post_recv_now(int peer, void* dst, std::size_t bytes);
  // Runs a call; on its exception, remembers it (broken_) and rethrows.
  template <class Call>
  void unless_broken(Call&& call);
  std::string broken_;  // the first failure, once a call threw

  struct Pending {
    int peer = -1;
    bool is_send = false;
    void* ptr = nullptr;
    std::size_t bytes = 0;
    net::Request* request = nullptr;  // null: receive waiting for its connection, or a send
                                      // waiting for its clear-to-send
    bool awaiting_cts = false;
    bool done = false;
  };
  // A send that waits for its clear-to-send (rendezvous), or an eager send queued behind
  // one so the eager channel keeps the pair's order. Per peer, in posting order: the
  // receiver announces its receives in that same order, whichever channel carries them.
  struct Gated {
    int pending = -1;  // index into pending_ (a connection transfer); -1: an eager send
    const void* src = nullptr;
    std::size_t bytes = 0;
    bool needs_cts = true;
  };
  void check_peer(int peer, const char* what) const;
  bool is_eager(std::size_t bytes) const { return bytes <= options_.eager_bytes; }
  // Eager messages above this wait for the receiver's clear-to-send like connection ones:
  // small enough below that a step's early bytes fit the peer's socket buffer.
  static constexpr std::size_t kUngatedEagerBytes = 64 * 1024;
  bool gated(std::size_t bytes) const { return options_.rendezvous && bytes > kUngatedEagerBytes; }
  bool start_gated_sends();
  [[noreturn]] void fail_no_progress();
  void wait_for_transfers();
  // Group health through the bootstrap (exec/bootstrap.h): throws the root's verdict when
  // the group failed (at most every 500 ms); an error of this rank gets the verdict added.
  void check_group();
  [[noreturn]] void throw_with_verdict(const BackendError& e);
  void accept_from(int peer);
  [[noreturn]] void fail(const Pending& p, const std::string& why);

  int rank_, nranks_;
  net::TransportOptions options_;
  std::unique_ptr<net::Listener> listener_;
  std::string listen_address_;
  std::vector<net::Handle> handles_;
  std::vector<std::unique_ptr<net::SendComm>> send_;
  std::vector<std::unique_ptr<net::RecvComm>> recv_;
  std::vector<Pending> pending_;  // connection transfers; capacity kept across steps
  std::vector<std::deque<Gated>> gated_;  // per peer
  std::vector<int> gated_eager_;          // per peer: eager sends in gated_
  int gated_count_ = 0;
  std::unique_ptr<EagerChannel> eager_;
  BootstrapClient* group_;
  std::chrono::steady_clock::time_point last_group_check_{};
};

}  // namespace topocoll::exec
