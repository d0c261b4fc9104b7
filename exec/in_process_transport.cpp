#include "exec/in_process_transport.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "exec/backend.h"

namespace topocoll::exec {

struct InProcessFabric::Request {
  enum class State { Posted, Copying, Done, Failed };
  void* ptr = nullptr;  // send: source, recv: destination
  std::size_t bytes = 0;
  int src = -1, dst = -1;
  bool is_send = false;
  State state = State::Posted;
  std::string error;
};

InProcessFabric::InProcessFabric(int nranks, std::chrono::milliseconds timeout)
    : nranks_(nranks), timeout_(timeout) {
  if (nranks < 1) throw std::invalid_argument("in-process fabric needs at least one rank");
  mailboxes_.resize(std::size_t(nranks) * nranks);
}

InProcessFabric::~InProcessFabric() = default;

bool InProcessFabric::aborted() const {
  std::lock_guard lock(mutex_);
  return aborted_;
}

void InProcessFabric::abort(const std::string& why) {
  // Caller holds mutex_.
  if (!aborted_) {
    aborted_ = true;
    abort_reason_ = why;
  }
  progress_.notify_all();
}

void InProcessFabric::post(Request* req, int src, int dst, bool is_send) {
  std::unique_lock lock(mutex_);
  if (aborted_) throw BackendError("in-process transport aborted: " + abort_reason_);
  Mailbox& box = mailbox(src, dst);
  auto& waiting = is_send ? box.recvs : box.sends;
  if (waiting.empty()) {
    (is_send ? box.sends : box.recvs).push_back(req);
    return;
  }
  Request* other = waiting.front();
  waiting.pop_front();
  Request* send = is_send ? req : other;
  Request* recv = is_send ? other : req;
  if (send->bytes != recv->bytes) {
    const std::string why = "rank " + std::to_string(src) + " sends " +
                            std::to_string(send->bytes) + " bytes to rank " +
                            std::to_string(dst) + " which posted a receive of " +
                            std::to_string(recv->bytes) + " bytes";
    send->state = recv->state = Request::State::Failed;
    send->error = recv->error = why;
    abort(why);
    return;
  }
  send->state = recv->state = Request::State::Copying;
  lock.unlock();
  std::memcpy(recv->ptr, send->ptr, send->bytes);
  lock.lock();
  send->state = recv->state = Request::State::Done;
  progress_.notify_all();
}

InProcessTransport::InProcessTransport(InProcessFabric& fabric, int rank)
    : fabric_(&fabric), rank_(rank) {
  if (rank < 0 || rank >= fabric.nranks())
    throw std::invalid_argument("in-process transport: rank " + std::to_string(rank) +
                                " outside 0.." + std::to_string(fabric.nranks() - 1));
}

InProcessTransport::~InProcessTransport() {
  // Withdraw anything still posted so no peer copies into or out of freed memory.
  std::unique_lock lock(fabric_->mutex_);
  using State = InProcessFabric::Request::State;
  for (auto& box : fabric_->mailboxes_) {
    auto mine = [&](InProcessFabric::Request* r) {
      return (r->is_send ? r->src : r->dst) == rank_;
    };
    std::erase_if(box.sends, mine);
    std::erase_if(box.recvs, mine);
  }
  fabric_->progress_.wait(lock, [&] {
    return std::none_of(requests_.begin(), requests_.end(),
                        [](const auto& r) { return r.state == State::Copying; });
  });
}

void InProcessTransport::post_send(int peer, const void* src, std::size_t bytes) {
  if (peer < 0 || peer >= nranks() || peer == rank_)
    throw BackendError("rank " + std::to_string(rank_) + ": send to invalid peer " +
                       std::to_string(peer));
  auto& r = requests_.emplace_back();
  r.ptr = const_cast<void*>(src);
  r.bytes = bytes;
  r.src = rank_;
  r.dst = peer;
  r.is_send = true;
  fabric_->post(&r, rank_, peer, true);
}

void InProcessTransport::post_recv(int peer, void* dst, std::size_t bytes) {
  if (peer < 0 || peer >= nranks() || peer == rank_)
    throw BackendError("rank " + std::to_string(rank_) + ": receive from invalid peer " +
                       std::to_string(peer));
  auto& r = requests_.emplace_back();
  r.ptr = dst;
  r.bytes = bytes;
  r.src = peer;
  r.dst = rank_;
  r.is_send = false;
  fabric_->post(&r, peer, rank_, false);
}

void InProcessTransport::wait_all() {
  using State = InProcessFabric::Request::State;
  std::unique_lock lock(fabric_->mutex_);
  const auto deadline = std::chrono::steady_clock::now() + fabric_->timeout_;
  auto finished = [&] {
    return std::all_of(requests_.begin(), requests_.end(),
                       [](const auto& r) { return r.state == State::Done; });
  };
  while (!finished()) {
    for (const auto& r : requests_)
      if (r.state == State::Failed) throw BackendError(r.error);
    if (fabric_->aborted_)
      throw BackendError("in-process transport aborted: " + fabric_->abort_reason_);
    if (fabric_->progress_.wait_until(lock, deadline) == std::cv_status::timeout && !finished()) {
      const auto& r = *std::find_if(requests_.begin(), requests_.end(),
                                    [](const auto& q) { return q.state != State::Done; });
      const std::string why =
          "rank " + std::to_string(rank_) + ": " + (r.is_send ? "send to" : "receive from") +
          " rank " + std::to_string(r.is_send ? r.dst : r.src) + " (" + std::to_string(r.bytes) +
          " bytes) not matched within " + std::to_string(fabric_->timeout_.count()) + " ms";
      fabric_->abort(why);
      throw BackendError(why);
    }
  }
  requests_.clear();
}

}  // namespace topocoll::exec
