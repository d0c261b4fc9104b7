// In-process transport: ranks are threads of one process and a transfer is one memcpy from
// the sender's range to the receiver's, done by whichever side posts second (rendezvous,
// so no staging copy). One mailbox per (src, dst) pair keeps posting order. Used by tests
// and anything that simulates a group inside one process.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "exec/host_transport.h"

namespace topocoll::exec {

class InProcessTransport;

// Shared by the nranks transports of one group; must outlive them.
class InProcessFabric {
 public:
  explicit InProcessFabric(int nranks,
                           std::chrono::milliseconds timeout = std::chrono::seconds(60));
  InProcessFabric(const InProcessFabric&) = delete;
  InProcessFabric& operator=(const InProcessFabric&) = delete;
  ~InProcessFabric();

  int nranks() const { return nranks_; }
  // After a failure on any rank every rank's next call fails too, instead of waiting for
  // a peer that has given up.
  bool aborted() const;

 private:
  friend class InProcessTransport;
  struct Request;
  struct Mailbox {
    std::deque<Request*> sends, recvs;
  };

  Mailbox& mailbox(int src, int dst) { return mailboxes_[std::size_t(src) * nranks_ + dst]; }
  void post(Request* req, int src, int dst, bool is_send);
  void complete(Request* send, Request* recv);
  void abort(const std::string& why);

  const int nranks_;
  const std::chrono::milliseconds timeout_;
  mutable std::mutex mutex_;
  std::condition_variable progress_;
  std::vector<Mailbox> mailboxes_;
  bool aborted_ = false;
  std::string abort_reason_;
};

class InProcessTransport final : public HostTransport {
 public:
  InProcessTransport(InProcessFabric& fabric, int rank);
  ~InProcessTransport() override;

  int rank() const override { return rank_; }
  int nranks() const override { return fabric_->nranks(); }
  void post_send(int peer, const void* src, std::size_t bytes) override;
  void post_recv(int peer, void* dst, std::size_t bytes) override;
  void wait_all() override;

 private:
  InProcessFabric* fabric_;
  int rank_;
  std::deque<InProcessFabric::Request> requests_;  // stable addresses; cleared by wait_all
};

}  // namespace topocoll::exec
