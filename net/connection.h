// One established connection (internal to net/): its sockets ("lanes"), the progress
// threads that move bytes, and the requests posted on it. A SendComm or RecvComm owns one.
//
// Each lane has a FIFO of work items (header or chunk of a message). Lane 0 carries the
// message headers; a receive learns the message size from its header and only then queues
// the chunks on every lane, in the same order the sender queued them (chunk i on lane
// i % lanes). Each lane is served by one progress thread (none when the caller polls and
// runs without threads, below), and one mover at a time moves its front item, so per-lane
// order is the socket's byte order.
//
// The caller's share: a message of one piece (at most min_stripe_bytes, so it travels on
// lane 0 alone) is moved by the thread that posts or tests it, without blocking, as NCCL's
// own Socket transport moves every message on its proxy thread. Through a progress thread a
// message crosses two more threads (the poster wakes the sender's thread; the receiver's
// thread reads, then the polling caller sees it done): two scheduler wake-ups per message,
// which the H100 run measured as 1.3-3.7x NCCL Socket's time for all_reduce_perf up to
// 64 KiB (perf/results/gpu-H100-20261127). Headers are read by whichever comes first. A
// progress thread claims the front item before it moves it (Lane::claimed), so the caller
// moves only what no thread holds. When the caller polls (TransportOptions::caller_polls,
// NCCL's proxy), it moves the front of every lane, several-piece messages included (their
// pieces crossed the same two wake-ups: 1.2-1.7x the Socket design's latency), and lane 0's
// one-piece items are left to it: the threads neither watch them nor are woken for them, so
// an arriving small message wakes no thread at all (a thread awake anyway may still take
// one). The threads are woken, at the end of the caller's pass, for what it could not finish
// (a full socket, pieces not yet arrived) and race it for that, so such a message need not
// wait for the caller's next call (one behind a small message on lane 0 still does). A
// polling caller may also run with no progress threads at all (TOPOCOLL_NET_THREADS=0, the
// net plugin's default): it then moves every byte, the design of NCCL's Socket transport outside cloud NICs, which
// on the 2-core build machine beat the racing threads from 128 KiB and matched them below
// (perf/results/net-plugin-caller-moves-every-piece-20261127).
#pragma once

#include <array>
#include <chrono>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "net/file_descriptor.h"
#include "net/net_status.h"
#include "net/socket_address.h"
#include "net/wire_format.h"

namespace topocoll::net {

class Connection;

class Request {
 public:
  struct Buffer {
    char* data = nullptr;
    size_t capacity = 0;  // receive: posted size; send: message size
    int tag = 0;
    size_t size = 0;      // bytes transferred (receive: learned from the header)
    bool matched = false;
  };

 private:
  friend class Connection;
  const Connection* owner = nullptr;
  uint64_t seq = 0;
  int count = 1;
  std::array<Buffer, kMaxGroupedRecvs> buffers{};
  int pending_items = 0;  // header and chunk items still to move
  bool finished = false;
  MessageHeader send_header{};  // send side: the bytes of the header item
};

class Connection {
 public:
  enum class Direction { Send, Recv };

  // stall_timeout (0 = none): a message in flight that moves no byte for this long fails
  // the connection with Timeout (a peer that accepts but never reads, or stopped mid-message).
  // caller_polls, idle_poll: TransportOptions::caller_polls, idle_poll_ms.
  Connection(Direction direction, std::vector<FileDescriptor> lanes, size_t chunk_bytes,
             size_t min_stripe_bytes, int threads, SocketAddress local, SocketAddress peer,
             std::chrono::milliseconds stall_timeout = std::chrono::milliseconds(0), bool caller_polls = false,
             std::chrono::milliseconds idle_poll = std::chrono::milliseconds(1000));
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Starts the progress threads (may fail: no threads, no eventfd).
  NetStatus start();

  NetStatus post_send(const void* data, size_t size, int tag, Request** request);
  NetStatus post_recv(int n, void* const* data, const size_t* sizes, const int* tags,
                      Request** request);
  NetStatus test(Request* request, bool* done, size_t* sizes);

  const SocketAddress& local_address() const { return local_; }
  const SocketAddress& peer_address() const { return peer_; }

 private:
  struct Item {
    enum class Kind { SendBytes, RecvBytes, RecvHeader } kind = Kind::SendBytes;
    Request* request = nullptr;
    char* data = nullptr;
    size_t length = 0;
    size_t done = 0;
    MessageHeader header{};  // RecvHeader: read into here
    bool caller_may_move = false;  // a header, or the only piece of a one-piece message
  };
  struct Lane {
    FileDescriptor socket;
    std::deque<Item> queue;  // guarded by mutex_; the front is moved by its claimer only
    bool claimed = false;    // guarded by mutex_: the lane's thread is moving the front item
    int worker = 0;          // the progress thread serving it; kCaller when there is none
    std::chrono::steady_clock::time_point stalled_since{};  // guarded by mutex_; {} = moving
  };
  struct Worker {
    FileDescriptor wake;  // eventfd: new work or stop
    std::vector<int> lanes;
    std::thread thread;
  };
  enum class IoResult { Complete, WouldBlock, Progress, Closed, Failed };

  // Who completes an item: a progress thread's index, or kCaller (a posting or testing thread).
  static constexpr int kCaller = -1;

  void run_worker(int w);
  IoResult move_bytes(Lane& lane, Item& item, int* error_number);
  // Under mutex_: the caller's share (top of file): the front items the caller may move, as
  // far as the sockets take them without blocking and at most kCallerPassBytes a lane, then
  // wakes the threads of the lanes left with their work.
  void move_on_caller();
  // What one pass of the caller moves on a lane at most without progress threads (it stops
  // after the item that crosses it), or one chunk when chunks are larger; with threads, which
  // wait on mutex_ while it runs, one chunk. A bound makes a proxy thread that
  // serves both directions of a ring turn from one socket to the other before either runs
  // dry: unbounded (the Socket design), both ways at once run 13-25 % slower than this from
  // 4 MiB on the build machine; bounded at one 512 KiB chunk (one NCCL Simple step a pass),
  // 1-10 % slower at every size (perf/results/net-plugin-caller-pass-20261128).
  static constexpr size_t kCallerPassBytes = size_t(2) << 20;
  // What the caller may move: when it polls, any lane's front (NCCL's proxy moves every byte
  // of NCCL's own Socket transport); otherwise lane 0's headers and one-piece messages only.
  bool caller_may_take(int lane_index, const Item& item) const {
    return caller_polls_ || (lane_index == 0 && item.caller_may_move);
  }
  // The bits of lanes 0..n-1 in wake_after_pass_ (at most 16 lanes).
  static uint32_t lane_bits(size_t n) { return n >= 32 ? ~0u : (1u << n) - 1; }
  // Under mutex_, after a move that found the socket not ready: fails the connection once
  // the lane's message has not moved for stall_timeout_. Waiting for the next header is not
  // a stall.
  void check_stall(int lane_index, const Item& item);
  // Under mutex_: a move of the front item of `lane_index` ended the connection (EOF, error).
  void fail_move(int lane_index, const Item& item, IoResult result, int error_number);
  // Under mutex_: the front item of `lane_index` is done; `mover` is kCaller or a worker.
  void complete_front(int lane_index, int mover);
  // Queues a message's pieces; returns how many lanes got one.
  size_t layout_message(Request* r, size_t size, char* data, bool receive_side);
  // Bytes per piece of a message: whole chunks when it fills every lane with them; else the
  // message spreads evenly over the lanes, in pieces of at least min_stripe_bytes.
  size_t stripe_unit(size_t size) const;
  bool one_piece(size_t size) const { return size <= stripe_unit(size); }
  // Under mutex_: the front of lane `index` is the polling caller's alone (caller_polls_).
  bool left_to_caller(int index) const {
    return caller_polls_ && index == 0 && !lanes_[0].queue.empty() && lanes_[0].queue.front().caller_may_move;
  }
  // Under mutex_: lane `index` holds work its progress thread must watch.
  bool thread_has_work(int index) const { return !lanes_[index].queue.empty() && !left_to_caller(index); }
  void finish_item(Request* r);
  void fail(NetStatus status);  // under mutex_: first error wins, every thread is woken
  void wake_lane(int lane_index, int current_worker);
  std::string describe_peer() const;

  const Direction direction_;
  const size_t chunk_bytes_;
  const size_t min_stripe_bytes_;
  const int thread_count_;
  const std::chrono::milliseconds stall_timeout_;
  const bool caller_polls_;
  const std::chrono::milliseconds idle_poll_;
  const SocketAddress local_, peer_;
  std::vector<Lane> lanes_;
  std::vector<Worker> workers_;

  std::mutex mutex_;
  bool stop_ = false;
  NetStatus error_;  // sticky
  uint64_t next_seq_ = 0;
  uint32_t wake_after_pass_ = 0;  // lanes (bit i = lane i) move_on_caller wakes at its end
  std::deque<Request*> inflight_;  // posting order
};

}  // namespace topocoll::net
