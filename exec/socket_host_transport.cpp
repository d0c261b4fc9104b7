#include "exec/socket_host_transport.h"

#include <chrono>
#include <cstring>
#include <thread>

#include "exec/backend.h"
#include "net/completion_signal.h"

namespace topocoll::exec {

namespace {
using Clock = std::chrono::steady_clock;

[[noreturn]] void throw_status(int rank, const std::string& what, const net::NetStatus& st) {
  throw BackendError("rank " + std::to_string(rank) + ": " + what + ": " +
                     std::string(net::to_string(st.code)) + ": " + st.message);
}
}  // namespace

SocketHostTransport::SocketHostTransport(BootstrapClient& bootstrap, std::string local_ip,
                                         const net::TransportOptions& options)
    : rank_(bootstrap.rank()), nranks_(bootstrap.nranks()), options_(options.normalized()), group_(&bootstrap) {
  if (local_ip.empty()) local_ip = bootstrap.local_ip();
  const auto bind = net::SocketAddress::parse(local_ip, 0);
  if (!bind)
    throw BackendError("rank " + std::to_string(rank_) + ": '" + local_ip +
                       "' is not a numeric IP address to listen on");
  if (auto st = net::Listener::open(*bind, options_, &listener_, uint64_t(rank_)); !st.ok())
    throw_status(rank_, "listen on " + local_ip, st);
  listen_address_ = listener_->address().to_string();

  const uint32_t mark = options_.lane_marks.empty() ? 0 : options_.lane_marks[0];
  eager_ = std::make_unique<EagerChannel>(rank_, nranks_, *bind, mark, options_.timeout_ms);

  // One bootstrap round: the connection handle, then the eager listener's port and nonce
  // (same address as the handle's).
  const net::Handle& mine = listener_->handle();
  std::string card(reinterpret_cast<const char*>(&mine), sizeof mine);
  const uint16_t eager_port = eager_->local().address.port;
  const uint64_t eager_nonce = eager_->local().nonce;
  card.append(reinterpret_cast<const char*>(&eager_port), sizeof eager_port);
  card.append(reinterpret_cast<const char*>(&eager_nonce), sizeof eager_nonce);
  const auto all = bootstrap.allgather(card);
  handles_.resize(nranks_);
  std::vector<EagerChannel::Address> eager_peers(nranks_);
  for (int r = 0; r < nranks_; ++r) {
    const std::string& c = all[r];
    if (c.size() != card.size())
      throw BackendError("rank " + std::to_string(rank_) + ": rank " + std::to_string(r) +
                         " published " + std::to_string(c.size()) + " address bytes, expected " +
                         std::to_string(card.size()) + " (a different topocoll version?)");
    if (auto st = net::decode_handle(c.data(), sizeof(net::Handle), &handles_[r]); !st.ok())
      throw_status(rank_, "handle of rank " + std::to_string(r), st);
    eager_peers[r].address = net::handle_address(handles_[r]);
    std::memcpy(&eager_peers[r].address.port, c.data() + sizeof(net::Handle), sizeof eager_port);
    std::memcpy(&eager_peers[r].nonce, c.data() + sizeof(net::Handle) + sizeof eager_port,
                sizeof eager_nonce);
  }
  eager_->set_peers(std::move(eager_peers));
  send_.resize(nranks_);
  recv_.resize(nranks_);
  gated_.resize(std::size_t(nranks_));
  gated_eager_.assign(std::size_t(nranks_), 0);
  pending_.reserve(64);
}

SocketHostTransport::~SocketHostTransport() = default;

void SocketHostTransport::check_peer(int peer, const char* what) const {
  if (peer < 0 || peer >= nranks_ || peer == rank_)
    throw BackendError("rank " + std::to_string(rank_) + ": " + what + " invalid peer " +
                       std::to_string(peer));
}

void SocketHostTransport::fail(const Pending& p, const std::string& why) {
  throw_with_verdict(BackendError("rank " + std::to_string(rank_) + ": " +
                     (p.is_send ? "send to rank " : "receive from rank ") +
                     std::to_string(p.peer) + " (" + std::to_string(p.bytes) + " bytes): " + why));
}

template <class Call>
void SocketHostTransport::unless_broken(Call&& call) {
  if (!broken_.empty())
    throw BackendError("rank " + std::to_string(rank_) + ": this transport failed earlier and runs nothing more (" +
                       broken_ + ")");
  try {
    call();
  } catch (const std::exception& e) {
    broken_ = e.what();
    throw;
  }
}

void SocketHostTransport::post_send(int peer, const void* src, std::size_t bytes) {
  unless_broken([&] { post_send_now(peer, src, bytes); });
}

void SocketHostTransport::post_recv(int peer, void* dst, std::size_t bytes) {
  unless_broken([&] { post_recv_now(peer, dst, bytes); });
}

void SocketHostTransport::post_send_now(int peer, const void* src, std::size_t bytes) {
  check_peer(peer, "send to");
  if (is_eager(bytes)) {
    const bool needs_cts = gated(bytes);
    if (needs_cts || gated_eager_[std::size_t(peer)] > 0) {  // wait_all starts it, in order
      if (needs_cts) eager_->expect_clear_to_send(peer);
      gated_[std::size_t(peer)].push_back(Gated{-1, src, bytes, needs_cts});
      ++gated_eager_[std::size_t(peer)];
      ++gated_count_;
      return;
    }
    try {
      return eager_->post_send(peer, src, bytes);  // moves bytes now: a dead peer shows here
    } catch (const BackendError& e) {
      throw_with_verdict(e);
    }
  }
  if (!send_[peer]) {
    // connect() does not wait for the peer's accept, so opening here cannot deadlock.
    if (auto st = net::connect(handles_[peer], nullptr, options_, uint64_t(rank_), &send_[peer]);
        !st.ok())
      throw_status(rank_, "connect to rank " + std::to_string(peer), st);
  }
  Pending& p = pending_.emplace_back();
  p.peer = peer;
  p.is_send = true;
  p.ptr = const_cast<void*>(src);
  p.bytes = bytes;
  if (options_.rendezvous) {
    p.awaiting_cts = true;  // wait_all starts it when the receiver says it is ready
    eager_->expect_clear_to_send(peer);
    gated_[std::size_t(peer)].push_back(Gated{int(pending_.size()) - 1, src, bytes, true});
    ++gated_count_;
    return;
  }
  if (auto st = send_[peer]->isend(src, bytes, 0, &p.request); !st.ok()) fail(p, st.message);
}

void SocketHostTransport::post_recv_now(int peer, void* dst, std::size_t bytes) {
  check_peer(peer, "receive from");
  if (is_eager(bytes)) {
    try {
      eager_->post_recv(peer, dst, bytes);
      if (gated(bytes)) eager_->post_clear_to_send(peer, bytes);
      return;
    } catch (const BackendError& e) {
      throw_with_verdict(e);
    }
  }
  Pending& p = pending_.emplace_back();
  p.peer = peer;
  p.ptr = dst;
  p.bytes = bytes;
  // Without a connection yet the receive waits for wait_all(): accepting here could block
  // before this rank has posted the sends its peers are waiting for.
  if (recv_[peer])
    if (auto st = recv_[peer]->irecv(dst, bytes, 0, &p.request); !st.ok()) fail(p, st.message);
  if (options_.rendezvous) eager_->post_clear_to_send(peer, bytes);
}

void SocketHostTransport::accept_from(int peer) {
  // Connections arrive in any order; each says who it is through its cookie. Bounded by
  // its own deadline (the listener's idle limit restarts with every stray socket, a port
  // scanner's too), and a peer the bootstrap root knows dead is named at once.
  const auto deadline = Clock::now() + std::chrono::milliseconds(options_.timeout_ms);
  while (!recv_[peer]) {
    std::unique_ptr<net::RecvComm> comm;
    if (auto st = listener_->accept(&comm, 100); !st.ok())
      throw_status(rank_, "accept (waiting for rank " + std::to_string(peer) + ")", st);
    if (!comm) {
      check_group();
      if (Clock::now() > deadline)
        throw BackendError("rank " + std::to_string(rank_) + ": rank " + std::to_string(peer) +
                           " did not connect within " + std::to_string(options_.timeout_ms) +
                           " ms (TOPOCOLL_NET_TIMEOUT_MS); this rank waits to receive from it");
      continue;
    }
    const uint64_t from = comm->peer_cookie();
    if (from >= uint64_t(nranks_) || from == uint64_t(rank_) || recv_[from])
      throw BackendError("rank " + std::to_string(rank_) + ": unexpected connection from '" +
                         comm->peer_address().to_string() + "' claiming rank " +
                         std::to_string(from));
    recv_[from] = std::move(comm);
  }
}

void SocketHostTransport::fail_no_progress() {
  std::string what;
  for (const Pending& p : pending_)
    if (!p.done)
      what += std::string(what.empty() ? "" : "; ") + (p.is_send ? "send to rank " : "receive from rank ") +
              std::to_string(p.peer) + " (" + std::to_string(p.bytes) + " bytes)";
  for (const std::string& e : eager_->describe_pending()) what += (what.empty() ? "" : "; ") + e;
  throw BackendError("rank " + std::to_string(rank_) + ": no progress within " +
                     std::to_string(options_.timeout_ms) + " ms: " + what);
}

void SocketHostTransport::wait_all() {
  unless_broken([&] {
    try {
      wait_for_transfers();
    } catch (const BackendError& e) {
      throw_with_verdict(e);
    }
  });
}

void SocketHostTransport::check_group() {
  const auto now = Clock::now();
  if (now - last_group_check_ < std::chrono::milliseconds(500)) return;
  last_group_check_ = now;
  if (const std::string verdict = group_->group_verdict(); !verdict.empty())
    throw BackendError("rank " + std::to_string(rank_) + ": the group failed: " + verdict);
}

void SocketHostTransport::throw_with_verdict(const BackendError& e) {
  const std::string what = e.what();
  if (what.find("the group failed: ") != std::string::npos) throw e;
  // The root learns of a dead or stopped rank by itself; its word names the rank that
  // failed, where this rank's own error can only name the neighbour it was waiting for.
  const std::string verdict = group_->group_verdict(std::chrono::seconds(2));
  if (verdict.empty()) throw e;
  throw BackendError(what + "; the group failed: " + verdict);
}

// Starts every gated send whose clear-to-send has come, per peer in posting order (the
// receiver announced them in that order), and the eager sends queued behind them.
bool SocketHostTransport::start_gated_sends() {
  if (gated_count_ == 0) return false;
  bool started = false;
  for (int peer = 0; peer < nranks_; ++peer) {
    std::deque<Gated>& queue = gated_[std::size_t(peer)];
    while (!queue.empty()) {
      const Gated g = queue.front();
      if (g.needs_cts && !eager_->take_clear_to_send(peer, g.bytes)) break;
      queue.pop_front();
      --gated_count_;
      started = true;
      if (g.pending >= 0) {
        Pending& p = pending_[std::size_t(g.pending)];
        p.awaiting_cts = false;
        if (auto st = send_[peer]->isend(p.ptr, p.bytes, 0, &p.request); !st.ok()) fail(p, st.message);
      } else {
        --gated_eager_[std::size_t(peer)];
        eager_->post_send(peer, g.src, g.bytes);
      }
    }
  }
  return started;
}

void SocketHostTransport::wait_for_transfers() {
  for (Pending& p : pending_) {
    if (p.is_send || p.request) continue;
    accept_from(p.peer);
    if (auto st = recv_[p.peer]->irecv(p.ptr, p.bytes, 0, &p.request); !st.ok())
      fail(p, st.message);
  }
  std::size_t left = pending_.size();
  auto last_progress = Clock::now();
  const auto timeout = std::chrono::milliseconds(options_.timeout_ms);
  net::CompletionSignal& signal = net::completion_signal();
  while (left > 0 || !eager_->idle() || gated_count_ > 0) {
    const uint64_t generation = signal.generation();  // before testing: no wake-up is lost
    bool progressed = eager_->progress();
    if (start_gated_sends()) {
      eager_->progress();
      progressed = true;
    }
    for (Pending& p : pending_) {
      if (p.done || p.awaiting_cts) continue;
      bool done = false;
      std::size_t size = 0;
      const net::NetStatus st = p.is_send ? send_[p.peer]->test(p.request, &done, &size)
                                          : recv_[p.peer]->test(p.request, &done, &size);
      if (!st.ok()) fail(p, std::string(net::to_string(st.code)) + ": " + st.message);
      if (!done) continue;
      if (size != p.bytes)
        fail(p, (p.is_send ? "sent " : "received ") + std::to_string(size) + " bytes instead of " +
                    std::to_string(p.bytes));
      p.done = true;
      --left;
      progressed = true;
    }
    if (left == 0 && eager_->idle() && gated_count_ == 0) break;
    if (progressed) {
      last_progress = Clock::now();
      continue;
    }
    check_group();  // a stopped rank is named by the bootstrap root, not by a timeout here
    if (Clock::now() - last_progress > timeout) fail_no_progress();
    if (!eager_->idle()) {
      // The caller moves eager bytes (and clear-to-sends) itself: sleep in poll() on its
      // sockets and on the completion signal's eventfd, which the progress threads poke
      // when a connection transfer finishes.
      const int signal_fd = left > 0 ? signal.poll_descriptor() : -1;
      eager_->wait(signal_fd >= 0 || left == 0 ? 100 : 1, signal_fd);
      if (signal_fd >= 0) signal.drain();
    } else {
      // The progress threads move the bytes and say when a request finishes.
      signal.wait_for(generation, std::chrono::milliseconds(100));
    }
  }
  pending_.clear();
}

}  // namespace topocoll::exec
