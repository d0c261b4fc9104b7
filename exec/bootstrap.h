// Bootstrap: the small out-of-band rendezvous a multi-process group needs before its data
// transport exists. A root (rank 0, or the launcher that started the ranks) listens on a
// known host:port; every rank connects, says who it is, and rounds of allgather of small
// blobs follow (the first one exchanges the data transport's listen handles; later ones
// serve as barriers and to gather results). Star-shaped through the root: fine for the
// few hundred bytes per rank it carries. Every wait is bounded by a timeout.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace topocoll::exec {

struct BootstrapAddress {
  std::string host;  // name or numeric address
  uint16_t port = 0;
  // "host:port", "[v6addr]:port"; throws std::invalid_argument naming the text.
  static BootstrapAddress parse(const std::string& text);
  std::string to_string() const;
};

// Serves one group's rendezvous on its own thread until every rank has disconnected.
class BootstrapRoot {
 public:
  // Binds address (port 0 = ephemeral; port() then says which). Throws std::runtime_error.
  BootstrapRoot(const BootstrapAddress& address, int nranks,
                std::chrono::milliseconds timeout = std::chrono::seconds(60));
  // Stops waiting for ranks that have not joined yet (telling those that did), then joins
  // the serving thread; a group already running is served until its ranks leave.
  ~BootstrapRoot();
  BootstrapRoot(const BootstrapRoot&) = delete;
  BootstrapRoot& operator=(const BootstrapRoot&) = delete;

  uint16_t port() const { return port_; }
  // Empty while healthy; the reason the group failed otherwise (after the thread ended).
  std::string error() const;

 private:
  void serve();

  int listen_fd_ = -1;
  uint16_t port_ = 0;
  int nranks_;
  std::chrono::milliseconds timeout_;
  std::string error_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

class BootstrapClient {
 public:
  // Connects to the root (retrying until it is up or the timeout passes) and registers
  // rank/nranks. Throws std::runtime_error naming the address on failure.
  BootstrapClient(const BootstrapAddress& root, int rank, int nranks,
                  std::chrono::milliseconds timeout = std::chrono::seconds(60));
  ~BootstrapClient();
  BootstrapClient(const BootstrapClient&) = delete;
  BootstrapClient& operator=(const BootstrapClient&) = delete;

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  // This side's address of the connection to the root: reachable from the root's network,
  // so a good address for this rank's data listener.
  const std::string& local_ip() const { return local_ip_; }
  // Every rank contributes one blob; every rank gets all of them, indexed by rank.
  std::vector<std::string> allgather(const std::string& mine);
  void barrier() { allgather({}); }

 private:
  int fd_ = -1;
  int rank_, nranks_;
  std::string local_ip_;
  std::chrono::milliseconds timeout_;
};

}  // namespace topocoll::exec
