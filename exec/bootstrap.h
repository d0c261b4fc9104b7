// Bootstrap: the small out-of-band rendezvous a multi-process group needs before its data
// transport exists. A root (rank 0, or the launcher that started the ranks) listens on a
// known host:port; every rank connects, says who it is, and rounds of allgather of small
// blobs follow (the first one exchanges the data transport's listen handles; later ones
// serve as barriers and to gather results). Star-shaped through the root: fine for the
// few hundred bytes per rank it carries. Every wait is bounded by a timeout.
//
// Health (docs/reliability.md): every rank sends a heartbeat each second, and so does the
// root. A rank silent for the silence limit (stopped, hung, host gone), a rank whose
// connection closes without a goodbye (killed, crashed), or one that leaves while the
// others wait for a round fails the group: the root tells every rank the reason, naming
// the rank. A root silent that long is named by every rank. A round that some ranks have
// entered and others do not enter within the round limit fails the group naming the ranks
// that never contributed (their heartbeat runs, but they hang in their own work); every
// rank, waiting or not, is told. Registration is concurrent;
// strays on the port are closed after a short read deadline; a rank claimed twice or a
// hello of the wrong group size fails the group at once, and ranks joining after a failed
// registration are told the reason until the registration timeout.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "net/file_descriptor.h"

namespace topocoll::exec {

struct BootstrapAddress {
  std::string host;  // name or numeric address
  uint16_t port = 0;
  // "host:port", "[v6addr]:port"; throws std::invalid_argument naming the text.
  static BootstrapAddress parse(const std::string& text);
  std::string to_string() const;
};

// A rank or root silent this long has stopped answering (heartbeats are sent every second).
inline constexpr std::chrono::milliseconds kDefaultSilenceLimit{10000};
// A round's last contribution must come this soon after its first. Ranks of one group do the
// same work between rounds (a collective, a benchmark's iterations), so the gap is their
// skew, not the work's length; twice the data path's no-progress limit, so a rank stuck
// waiting for a transfer reports its own error first. Runs whose ranks legitimately diverge
// for longer give a longer limit (accept: its budget).
inline constexpr std::chrono::milliseconds kDefaultRoundLimit{120000};

// Serves one group's rendezvous on its own thread until every rank has disconnected.
// The largest group the bootstrap serves: the largest topology (65,536 endpoints). A size
// from a launcher's environment past it is refused before anything is allocated for it.
inline constexpr int kMaxGroupRanks = 65536;

class BootstrapRoot {
 public:
  // Binds address (port 0 = ephemeral; port() then says which). Throws std::runtime_error.
  // `timeout` bounds registration; `silence_limit` how long a joined rank may stay silent;
  // `round_limit` how long a round may wait for its last contribution after its first;
  // `max_reply_bytes` how large a round's reply (every rank's blob) may grow, at most the
  // 1 GiB a rank accepts (bootstrap_wire::kMaxReply).
  BootstrapRoot(const BootstrapAddress& address, int nranks,
                std::chrono::milliseconds timeout = std::chrono::seconds(60),
                std::chrono::milliseconds silence_limit = kDefaultSilenceLimit,
                std::chrono::milliseconds round_limit = kDefaultRoundLimit,
                uint64_t max_reply_bytes = uint64_t(1) << 30);
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

  net::FileDescriptor listener_;
  uint16_t port_ = 0;
  int nranks_;
  std::chrono::milliseconds timeout_, silence_limit_, round_limit_;
  uint64_t max_reply_bytes_;
  mutable std::mutex error_mutex_;
  std::string error_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

class BootstrapClient {
 public:
  // Connects to the root (retrying until it is up or the timeout passes), registers
  // rank/nranks and starts heartbeating. Throws std::runtime_error naming the address.
  // `round_limit` as the root's: a round neither completed nor failed by the root within it
  // (and the silence limit) after this rank's contribution is an error naming the root.
  BootstrapClient(const BootstrapAddress& root, int rank, int nranks,
                  std::chrono::milliseconds timeout = std::chrono::seconds(60),
                  std::chrono::milliseconds silence_limit = kDefaultSilenceLimit,
                  std::chrono::milliseconds round_limit = kDefaultRoundLimit);
  ~BootstrapClient();  // says goodbye: leaving is then not mistaken for a crash
  BootstrapClient(const BootstrapClient&) = delete;
  BootstrapClient& operator=(const BootstrapClient&) = delete;

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  // This side's address of the connection to the root: reachable from the root's network,
  // so a good address for this rank's data listener.
  const std::string& local_ip() const { return local_ip_; }
  // Every rank contributes one blob; every rank gets all of them, indexed by rank.
  // Throws std::runtime_error with the root's reason when the group failed, or naming the
  // root when it stopped answering.
  std::vector<std::string> allgather(const std::string& mine);
  void barrier() { allgather({}); }

  // Why the group failed, as far as the root has said (or that the root went silent); empty
  // while healthy. Waits up to `wait` for the root's word (a data-path error elsewhere may
  // be explained a moment later). Call from the thread that calls allgather.
  std::string group_verdict(std::chrono::milliseconds wait = std::chrono::milliseconds(0));

 private:
  void heartbeat_loop();
  void send_locked(const std::string& bytes, std::chrono::steady_clock::time_point deadline);
  // Reads what the root sent until `deadline`; returns a round reply or failure, nullopt
  // at the deadline. Throws when the root closed or went silent.
  bool read_root(std::chrono::steady_clock::time_point deadline, uint32_t* status, std::string* body);
  std::string root_silence_message() const;

  net::FileDescriptor socket_;  // to the root
  int rank_, nranks_;
  std::string root_name_, local_ip_;
  std::chrono::milliseconds timeout_, silence_limit_, round_limit_;
  int round_ = 0;  // rounds completed
  std::string inbox_, verdict_;
  std::chrono::steady_clock::time_point root_heard_;
  std::mutex send_mutex_;  // heartbeat thread and allgather both write
  std::mutex stop_mutex_;
  std::condition_variable stop_cv_;
  bool stop_ = false;
  std::thread heartbeat_;
};

}  // namespace topocoll::exec
