#include "net/connection.h"

#include "net/completion_signal.h"
#include "net/socket_calls.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>

namespace topocoll::net {

Connection::Connection(Direction direction, std::vector<FileDescriptor> lanes,
                       size_t chunk_bytes, size_t min_stripe_bytes, int threads,
                       SocketAddress local, SocketAddress peer, std::chrono::milliseconds stall_timeout,
                       bool caller_polls, std::chrono::milliseconds idle_poll)
    : direction_(direction),
      chunk_bytes_(std::max<size_t>(chunk_bytes, 4096)),
      min_stripe_bytes_(std::clamp<size_t>(min_stripe_bytes, 1, chunk_bytes_)),
      // No thread only where the caller polls: a caller that sleeps would wait forever.
      thread_count_(std::clamp<int>(threads, caller_polls ? 0 : 1, int(lanes.size()))),
      stall_timeout_(stall_timeout),
      caller_polls_(caller_polls),
      idle_poll_(std::max(idle_poll, std::chrono::milliseconds(1))),
      local_(local),
      peer_(peer) {
  lanes_.resize(lanes.size());
  for (size_t i = 0; i < lanes.size(); ++i) {
    lanes_[i].socket = std::move(lanes[i]);
    lanes_[i].worker = thread_count_ > 0 ? int(i) % thread_count_ : kCaller;
  }
}

NetStatus Connection::start() {
  workers_.resize(thread_count_);
  for (size_t i = 0; i < lanes_.size(); ++i)
    if (lanes_[i].worker != kCaller) workers_[lanes_[i].worker].lanes.push_back(int(i));
  for (auto& w : workers_) {
    w.wake = FileDescriptor(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    if (!w.wake.valid())
      return NetStatus::error(NetCode::SystemError, "eventfd failed: " + errno_text(errno));
  }
  for (int i = 0; i < thread_count_; ++i) {
    try {
      workers_[i].thread = std::thread([this, i] { run_worker(i); });
    } catch (const std::exception& e) {
      return NetStatus::error(NetCode::SystemError,
                              std::string("cannot start a progress thread: ") + e.what() +
                                  " (each connection runs TOPOCOLL_NET_THREADS progress threads, "
                                  "default 2 in bench and accept, 0 in the net plugin: lower it, or raise the "
                                  "process's or container's thread limit, ulimit -u / pids.max)");
    }
  }
  return {};
}

Connection::~Connection() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  for (size_t i = 0; i < workers_.size(); ++i) wake_lane(workers_[i].lanes.empty() ? 0 : workers_[i].lanes[0], -1);
  for (auto& w : workers_)
    if (w.thread.joinable()) w.thread.join();
  for (Request* r : inflight_) delete r;
  inflight_.clear();
}

std::string Connection::describe_peer() const {
  return (direction_ == Direction::Send ? "send connection " : "receive connection ") +
         local_.to_string() + (direction_ == Direction::Send ? " -> " : " <- ") + peer_.to_string();
}

void Connection::wake_lane(int lane_index, int current_worker) {
  if (lane_index < 0 || lane_index >= int(lanes_.size())) return;
  int w = lanes_[lane_index].worker;
  if (w == kCaller || w == current_worker || !workers_[w].wake.valid()) return;
  uint64_t one = 1;
  // A full counter still wakes the thread; nothing to handle.
  [[maybe_unused]] ssize_t n = ::write(workers_[w].wake.get(), &one, sizeof(one));
}

void Connection::fail(NetStatus status) {
  if (error_.ok()) error_ = std::move(status);
  for (size_t i = 0; i < lanes_.size(); ++i) wake_lane(int(i), -1);
  completion_signal().notify();
}

size_t Connection::stripe_unit(size_t size) const {
  const size_t lanes = lanes_.size();
  if (size >= chunk_bytes_ * lanes) return chunk_bytes_;
  return std::clamp<size_t>((size + lanes - 1) / lanes, min_stripe_bytes_, chunk_bytes_);
}

// Queues the chunks of one message on every lane. Lane 0's chunks go to the front of its
// queue on the receive side (they follow the header just read, before the next header).
size_t Connection::layout_message(Request* r, size_t size, char* data, bool receive_side) {
  const size_t lanes = lanes_.size();
  const size_t unit = stripe_unit(size);
  const size_t chunks = (size + unit - 1) / unit;
  std::vector<Item> lane0;
  for (size_t c = 0; c < chunks; ++c) {
    Item item;
    item.kind = receive_side ? Item::Kind::RecvBytes : Item::Kind::SendBytes;
    item.request = r;
    item.data = data + c * unit;
    item.length = std::min(unit, size - c * unit);
    item.caller_may_move = chunks == 1;
    const size_t lane = c % lanes;
    if (lane == 0 && receive_side) {
      lane0.push_back(item);
    } else {
      lanes_[lane].queue.push_back(item);
    }
  }
  for (auto it = lane0.rbegin(); it != lane0.rend(); ++it) lanes_[0].queue.push_front(*it);
  r->pending_items += int(chunks);
  return std::min(lanes, chunks);
}

NetStatus Connection::post_send(const void* data, size_t size, int tag, Request** request) {
  if (!request) return NetStatus::error(NetCode::InvalidArgument, "isend: null request pointer");
  if (!data && size > 0) return NetStatus::error(NetCode::InvalidArgument, "isend: null buffer with size > 0");
  *request = nullptr;
  if (size > kMaxMessageBytes)
    return NetStatus::error(NetCode::InvalidArgument, "isend of " + std::to_string(size) +
                                                          " bytes: a message carries at most " +
                                                          std::to_string(kMaxMessageBytes) + " bytes (64 GiB)");
  std::lock_guard lock(mutex_);
  if (!error_.ok()) return error_;
  auto* r = new Request();
  r->owner = this;
  r->seq = next_seq_++;
  r->count = 1;
  r->buffers[0] = {static_cast<char*>(const_cast<void*>(data)), size, tag, size, true};
  r->send_header.tag = tag;
  r->send_header.size = size;
  Item header;
  header.kind = Item::Kind::SendBytes;
  header.request = r;
  header.data = reinterpret_cast<char*>(&r->send_header);
  header.length = sizeof(MessageHeader);
  header.caller_may_move = one_piece(size);
  lanes_[0].queue.push_back(header);
  r->pending_items = 1;
  const size_t lanes = layout_message(r, size, r->buffers[0].data, false);
  inflight_.push_back(r);
  // The caller moves what the sockets take; the threads of the lanes left with work are
  // woken at the end of its pass (a message the sockets took whole wakes none).
  wake_after_pass_ |= lane_bits(std::max<size_t>(lanes, 1));
  move_on_caller();
  *request = r;
  return {};
}

NetStatus Connection::post_recv(int n, void* const* data, const size_t* sizes, const int* tags,
                                Request** request) {
  if (!request) return NetStatus::error(NetCode::InvalidArgument, "irecv: null request pointer");
  *request = nullptr;
  if (n < 1 || n > kMaxGroupedRecvs)
    return NetStatus::error(NetCode::InvalidArgument, "irecv: " + std::to_string(n) +
                                                          " buffers posted, supported 1.." +
                                                          std::to_string(kMaxGroupedRecvs));
  if (!data || !sizes || !tags) return NetStatus::error(NetCode::InvalidArgument, "irecv: null array argument");
  for (int i = 0; i < n; ++i)
    if (sizes[i] > kMaxMessageBytes)
      return NetStatus::error(NetCode::InvalidArgument, "irecv: buffer " + std::to_string(i) + " of " +
                                                            std::to_string(sizes[i]) + " bytes: a message carries at most " +
                                                            std::to_string(kMaxMessageBytes) + " bytes (64 GiB)");
  for (int i = 0; i < n; ++i)
    if (!data[i] && sizes[i] > 0)
      return NetStatus::error(NetCode::InvalidArgument, "irecv: buffer " + std::to_string(i) + " is null with size > 0");
  std::lock_guard lock(mutex_);
  if (!error_.ok()) return error_;
  auto* r = new Request();
  r->owner = this;
  r->seq = next_seq_++;
  r->count = n;
  for (int i = 0; i < n; ++i) r->buffers[i] = {static_cast<char*>(data[i]), sizes[i], tags[i], 0, false};
  for (int i = 0; i < n; ++i) {
    Item header;
    header.kind = Item::Kind::RecvHeader;
    header.request = r;
    header.length = sizeof(MessageHeader);
    header.data = nullptr;  // reads into item.header
    header.caller_may_move = true;
    lanes_[0].queue.push_back(header);
  }
  r->pending_items = n;
  inflight_.push_back(r);
  wake_after_pass_ |= lane_bits(1);  // lane 0's thread, if the header is its to read
  move_on_caller();                  // the message may be here already
  *request = r;
  return {};
}

NetStatus Connection::test(Request* request, bool* done, size_t* sizes) {
  if (!request || !done) return NetStatus::error(NetCode::InvalidArgument, "test: null request or done pointer");
  *done = false;
  std::lock_guard lock(mutex_);
  auto it = std::find(inflight_.begin(), inflight_.end(), request);
  if (it == inflight_.end() || request->owner != this)
    return NetStatus::error(NetCode::InvalidArgument, "test: request does not belong to this " + describe_peer());
  // Requests complete in posting order: every earlier one must be finished too.
  const auto finished_before = [&] { return std::all_of(inflight_.begin(), it, [](Request* r) { return r->finished; }); };
  bool all_before_finished = finished_before();
  if (!request->finished || !all_before_finished) {
    move_on_caller();
    all_before_finished = finished_before();
  }
  if (request->finished && all_before_finished) {
    if (sizes)
      for (int i = 0; i < request->count; ++i) sizes[i] = request->buffers[i].size;
    inflight_.erase(it);
    delete request;
    *done = true;
    return {};
  }
  if (!error_.ok()) return error_;
  return {};
}

void Connection::finish_item(Request* r) {
  if (--r->pending_items == 0) {
    r->finished = true;
    completion_signal().notify();
  }
}

void Connection::move_on_caller() {
  // A pass over the lanes in order (lane 0 first: a header read there queues the pieces that
  // follow on every lane), each as far as its socket takes without blocking and about
  // kCallerPassBytes at most, so every socket gets its share (each lane's front is the
  // oldest request's) and one call never holds the proxy thread for long.
  // With progress threads the pass holds mutex_ they wait on: one chunk, as measured there.
  const size_t pass_bytes = thread_count_ == 0 ? std::max(kCallerPassBytes, chunk_bytes_) : chunk_bytes_;
  for (int l = 0; l < int(lanes_.size()); ++l) {
    Lane& lane = lanes_[l];
    size_t moved = 0;
    while (error_.ok() && !stop_ && !lane.claimed && !lane.queue.empty() && caller_may_take(l, lane.queue.front())) {
      Item& item = lane.queue.front();
      const size_t before = item.done;
      int err = 0;
      const IoResult result = move_bytes(lane, item, &err);
      moved += item.done - before;
      if (result == IoResult::WouldBlock) {
        check_stall(l, item);  // with no thread on this lane, the caller is its only watcher
        break;
      }
      lane.stalled_since = {};
      if (result == IoResult::Progress) break;
      if (result != IoResult::Complete) {
        fail_move(l, item, result, err);
        wake_after_pass_ = 0;  // fail() woke every thread
        return;
      }
      complete_front(l, kCaller);
      wake_after_pass_ |= 1u << l;  // what follows on this lane may be its thread's
      if (moved >= pass_bytes) break;
    }
  }
  // The lanes whose work changed during the pass and that still hold work their thread must
  // watch: the pieces of a message whose header the caller read, what is left of a message
  // the socket did not take whole, a several-piece message behind the one-piece ones the
  // caller finished (when the caller polls, lane 0's thread was not watching lane 0 while
  // its front was the caller's).
  const uint32_t lanes_to_wake = std::exchange(wake_after_pass_, 0);
  if (!error_.ok()) return;  // fail() woke every thread
  for (int l = 0; l < int(lanes_.size()); ++l)
    if ((lanes_to_wake >> l & 1u) && !lanes_[l].claimed && thread_has_work(l)) wake_lane(l, kCaller);
}

void Connection::complete_front(int lane_index, int mover) {
  Lane& lane = lanes_[lane_index];
  Item item = lane.queue.front();
  lane.queue.pop_front();
  Request* r = item.request;
  if (item.kind != Item::Kind::RecvHeader) {
    finish_item(r);
    return;
  }
  const MessageHeader& h = item.header;
  if (h.magic != kMessageMagic) {
    fail(NetStatus::error(NetCode::BadHandle, "corrupt stream on " + describe_peer() +
                                                  ": message header has magic " + hex32(h.magic)));
    return;
  }
  Request::Buffer* target = nullptr;
  std::string posted;
  for (int i = 0; i < r->count; ++i) {
    auto& b = r->buffers[i];
    posted += (posted.empty() ? "" : ",") + std::to_string(b.tag);
    if (!b.matched && b.tag == h.tag && !target) target = &b;
  }
  if (!target) {
    fail(NetStatus::error(NetCode::TagMismatch, "message with tag " + std::to_string(h.tag) +
                                                    " on " + describe_peer() +
                                                    " matches no posted receive (posted tags: " +
                                                    posted + ")"));
    return;
  }
  if (h.size > target->capacity) {
    fail(NetStatus::error(NetCode::Truncated, "peer sent " + std::to_string(h.size) +
                                                  " bytes with tag " + std::to_string(h.tag) +
                                                  " but the posted receive holds only " +
                                                  std::to_string(target->capacity) + " bytes (" +
                                                  describe_peer() + ")"));
    return;
  }
  target->matched = true;
  target->size = size_t(h.size);
  const size_t lanes = layout_message(r, size_t(h.size), target->data, true);
  finish_item(r);  // the header itself
  // The lanes that now hold the message's pieces. A thread mover goes on with lane 0 and
  // wakes the others; a caller first tries them itself and wakes, at the end of its pass,
  // those it could not finish (move_on_caller).
  if (mover == kCaller) {
    wake_after_pass_ |= lane_bits(lanes);
    return;
  }
  for (size_t l = 0; l < lanes; ++l) wake_lane(int(l), mover);
}

Connection::IoResult Connection::move_bytes(Lane& lane, Item& item, int* error_number) {
  char* base = item.kind == Item::Kind::RecvHeader ? reinterpret_cast<char*>(&item.header) : item.data;
  bool moved = false;
  while (item.done < item.length) {
    ssize_t n;
    if (item.kind == Item::Kind::SendBytes) {
      n = ::send(lane.socket.get(), base + item.done, item.length - item.done, MSG_NOSIGNAL | MSG_DONTWAIT);
    } else {
      n = ::recv(lane.socket.get(), base + item.done, item.length - item.done, MSG_DONTWAIT);
      if (n == 0) return IoResult::Closed;
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return moved ? IoResult::Progress : IoResult::WouldBlock;
      *error_number = errno;
      return IoResult::Failed;
    }
    item.done += size_t(n);
    moved = true;
  }
  return IoResult::Complete;
}

void Connection::check_stall(int lane_index, const Item& item) {
  Lane& lane = lanes_[lane_index];
  const bool idle = item.kind == Item::Kind::RecvHeader && item.done == 0;
  if (idle || stall_timeout_.count() <= 0) {
    lane.stalled_since = {};
    return;
  }
  const auto now = std::chrono::steady_clock::now();
  if (lane.stalled_since == std::chrono::steady_clock::time_point{}) {
    lane.stalled_since = now;
    return;
  }
  if (now - lane.stalled_since <= stall_timeout_) return;
  fail(NetStatus::error(
      NetCode::Timeout,
      "no byte moved on socket " + std::to_string(lane_index) + " of the " + describe_peer() + " for " +
          std::to_string(stall_timeout_.count()) + " ms with a message in flight (" +
          std::to_string(item.done) + " of " + std::to_string(item.length) + " bytes of a " +
          (item.kind == Item::Kind::RecvHeader ? "header" : "chunk") +
          "): the peer stopped " + (item.kind == Item::Kind::SendBytes ? "reading" : "sending") +
          " (stopped, hung, or it never posts the matching receive)"));
}

void Connection::fail_move(int lane_index, const Item& item, IoResult result, int error_number) {
  if (result == IoResult::Closed) {
    std::string what = item.kind == Item::Kind::RecvHeader && item.done == 0
                           ? "before sending the next message"
                           : "mid-message (" + std::to_string(item.done) + " of " +
                                 std::to_string(item.length) + " bytes of a " +
                                 (item.kind == Item::Kind::RecvHeader ? "header" : "chunk") + ")";
    fail(NetStatus::error(NetCode::PeerClosed, "peer closed the " + describe_peer() + " (EOF on socket " +
                                                   std::to_string(lane_index) + ") " + what));
    return;
  }
  const NetCode code = is_peer_or_path_error(error_number) ? NetCode::PeerClosed : NetCode::SystemError;
  const char* op = item.kind == Item::Kind::SendBytes ? "send" : "recv";
  fail(NetStatus::error(code, op + (" failed on socket " + std::to_string(lane_index)) + " of the " +
                                  describe_peer() + ": " + errno_text(error_number)));
}

void Connection::run_worker(int w) {
  Worker& me = workers_[w];
  std::vector<pollfd> fds;
  for (;;) {
    bool progressed = false;
    bool failed;
    {
      std::lock_guard lock(mutex_);
      if (stop_) return;
      failed = !error_.ok();
    }
    if (!failed) {
      for (int l : me.lanes) {
        Lane& lane = lanes_[l];
        Item* item = nullptr;
        {
          std::lock_guard lock(mutex_);
          if (!error_.ok()) break;
          // Also an item left to a polling caller, while this thread is awake anyway (the
          // next header behind the piece it just moved): it is neither watched nor woken
          // for such an item (poll set below), but taking it saves the caller's round trip.
          if (!lane.queue.empty() && !lane.claimed) {
            item = &lane.queue.front();
            lane.claimed = true;  // the caller leaves it alone (move_on_caller)
          }
        }
        if (!item) continue;
        int err = 0;
        const IoResult res = move_bytes(lane, *item, &err);
        std::lock_guard lock(mutex_);
        lane.claimed = false;
        if (res == IoResult::WouldBlock) {
          check_stall(l, *item);
          continue;
        }
        lane.stalled_since = {};
        progressed = true;
        if (res == IoResult::Progress) continue;
        if (res == IoResult::Complete) {
          complete_front(l, w);
        } else {
          fail_move(l, *item, res, err);
        }
      }
    }
    if (progressed) continue;
    // Nothing moved: sleep until a socket is ready or new work / stop arrives.
    fds.clear();
    fds.push_back({me.wake.get(), POLLIN, 0});
    {
      std::lock_guard lock(mutex_);
      if (stop_) return;
      if (error_.ok()) {
        for (int l : me.lanes) {
          Lane& lane = lanes_[l];
          if (!thread_has_work(l)) continue;
          short ev = lane.queue.front().kind == Item::Kind::SendBytes ? POLLOUT : POLLIN;
          fds.push_back({lane.socket.get(), ev, 0});
        }
      }
    }
    int rc = ::poll(fds.data(), fds.size(), int(std::min<int64_t>(idle_poll_.count(), INT32_MAX)));
    if (rc > 0 && (fds[0].revents & POLLIN)) {
      uint64_t counter;
      [[maybe_unused]] ssize_t n = ::read(me.wake.get(), &counter, sizeof(counter));
    }
  }
}

}  // namespace topocoll::net
