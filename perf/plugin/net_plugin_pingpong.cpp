// The net plugin through its C ABI, the way NCCL's proxy thread uses it: two forked ranks
// dlopen libnccl-topocoll.so, connect with listen/connect/accept, and move bytes with
// isend/irecv while polling test().
//   latency:   ping-pong, one message in flight; one-way time = round trip / 2
//   bandwidth: rank 0 streams messages to rank 1 with up to 8 requests in flight (NCCL's
//              NCCL_STEPS), rank 1 acknowledges the last one; GB/s = bytes / time
//   duplex:    both ranks stream to each other at once, 8 requests in flight each way, one
//              thread testing the oldest send and the oldest receive in turn, as NCCL's proxy
//              progresses a ring's send and receive (every rank of a ring allreduce does
//              both); GB/s one way = bytes received / time
// --baseline measures the same loops over perf/plugin/caller_socket_link.h instead (the
// design of NCCL's own Socket transport: one socket, every byte moved by the poller), for a
// side-by-side run (perf/plugin/pingpong_ab.sh).
// --tests picks the patterns (a comma-separated list; all three by default), e.g. to profile one;
// --step the factor from one size to the next (4 by default; 2 adds NCCL's 512 KiB Simple step).
// Every message carries its iteration's stamp in its first and last 8 bytes, checked where it
// is received (16 bytes each way: nothing the timing sees), and each size is followed by one
// message of every byte patterned, checked whole, outside the timed span: a transport that
// completes requests without moving the payload, or reorders pieces, fails the run instead of
// giving clean figures. --lose-payload receives into a buffer nobody checks (the checks'
// own test: the run must fail).
// Prints a table and writes JSON (--json FILE). Timing is a record, never a test.
//   net_plugin_pingpong [--json FILE] [--seconds S] [--baseline] [--tests latency,bandwidth,duplex]
//                       [--step FACTOR] [--lose-payload]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "perf/plugin/caller_socket_link.h"
#include "tests/plugin/net_plugin_harness.h"

using namespace topocoll::testing;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int kInFlight = 8;

struct Row {
  std::string kind;
  size_t bytes = 0;
  int iters = 0;
  double value = 0;  // latency: one-way us; bandwidth: GB/s
};

// The plugin's send and receive comm to the peer, through its C ABI.
struct PluginLink {
  using Op = void;
  const ncclNet_v11_t* net = nullptr;
  void* send = nullptr;
  void* recv = nullptr;

  bool post_send(void* data, size_t size, void** r) {
    *r = nullptr;
    return net->isend(send, data, size, 0, nullptr, nullptr, r) == ncclSuccess && *r;
  }
  bool post_recv(void* data, size_t size, void** r) {
    int tag = 0;
    *r = nullptr;
    return net->irecv(recv, 1, &data, &size, &tag, nullptr, nullptr, r) == ncclSuccess && *r;
  }
  // Spins on test() as NCCL's proxy does.
  bool wait(void* request) { return wait_request(net, request, nullptr, 60000) == ncclSuccess; }
  // One test(), as one pass of NCCL's proxy; a finished request is freed by the plugin.
  bool test(void* request, bool* done) {
    int finished = 0, size = 0;
    if (net->test(request, &finished, &size) != ncclSuccess) return false;
    *done = finished != 0;
    return true;
  }
};

// The stamp of message `iteration` of a pattern: in its first and last 8 bytes (one copy for
// a message of 8 bytes or fewer, cut to its size).
uint64_t stamp_value(size_t bytes, int64_t iteration, int direction) {
  return (uint64_t(bytes) << 32) ^ (uint64_t(iteration) << 1) ^ uint64_t(direction) ^ 0x5EED5EED00000000ull;
}
void stamp(char* buf, size_t bytes, uint64_t v) {
  const size_t n = std::min<size_t>(8, bytes);
  std::memcpy(buf, &v, n);
  if (bytes > 8) std::memcpy(buf + bytes - n, &v, n);
}
bool has_stamp(const char* buf, size_t bytes, uint64_t v) {
  char want[16];
  const size_t n = std::min<size_t>(8, bytes);
  std::memcpy(want, &v, n);
  return std::memcmp(buf, want, n) == 0 && (bytes <= 8 || std::memcmp(buf + bytes - n, want, n) == 0);
}
// Byte i of the whole-message check of a size.
char pattern_byte(size_t i, size_t bytes) { return char((i * 131 + bytes + (i >> 12)) & 0xff); }

// The checks' own test (--lose-payload): receives land in a scratch buffer nobody checks.
bool g_lose_payload = false;

int iterations_for(size_t bytes, double seconds, double guess_gbs) {
  const double per = 20e-6 + double(bytes) / (guess_gbs * 1e9);
  return std::max(5, std::min(20000, int(seconds / per)));
}

// The ping-pong and the stream over `link`, rank 0's rows to `result_fd`.
// What to measure: the patterns, and the factor between one size and the next.
struct Sweep {
  bool latency = true, bandwidth = true, duplex = true;
  size_t step = 4;
};

// One message of `bytes`, every byte patterned, rank 0 to rank 1 and back, each checked whole
// where it arrives; outside any timed span.
template <typename Link>
bool check_whole(Link& link, int rank, size_t bytes, std::vector<char>& out, std::vector<char>& in) {
  using Op = typename Link::Op;
  for (size_t i = 0; i < bytes; ++i) out[i] = pattern_byte(i, bytes);
  std::vector<char> lost(g_lose_payload ? bytes : 0);
  char* into = g_lose_payload ? lost.data() : in.data();
  for (int direction = 0; direction < 2; ++direction) {
    Op* r;
    if (rank == direction) {
      if (!link.post_send(out.data(), bytes, &r) || !link.wait(r)) return false;
    } else {
      std::memset(in.data(), 0, bytes);
      if (!link.post_recv(into, bytes, &r) || !link.wait(r)) return false;
      for (size_t i = 0; i < bytes; ++i)
        if (in[i] != pattern_byte(i, bytes)) {
          std::fprintf(stderr, "rank %d: a message of %zu bytes arrived wrong at byte %zu\n", rank, bytes, i);
          return false;
        }
    }
  }
  return true;
}

template <typename Link>
int measure(Link& link, int rank, double seconds, const Sweep& tests, int result_fd) {
  using Op = typename Link::Op;
  std::vector<char> out(64 << 20, 1), in(64 << 20, 0);
  // Where receives land: `in`, or with --lose-payload a buffer nobody checks.
  std::vector<char> lost(g_lose_payload ? in.size() : 0);
  char* const landing = g_lose_payload ? lost.data() : in.data();
  std::vector<Row> rows;
  // Latency: ping-pong.
  for (size_t bytes = 8; tests.latency && bytes <= (1u << 20); bytes *= tests.step) {
    const int iters = iterations_for(2 * bytes, seconds / 2, 0.5);
    auto t0 = Clock::now();
    for (int i = -5; i < iters; ++i) {
      if (i == 0) t0 = Clock::now();
      Op *rs, *rr;
      // The ping carries direction 0's stamp of the iteration, the pong direction 1's.
      const int from = rank, to = 1 - rank;
      auto send = [&] {
        stamp(out.data(), bytes, stamp_value(bytes, i, from));
        RANK_REQUIRE(link.post_send(out.data(), bytes, &rs) && link.wait(rs));
        return 0;
      };
      auto receive = [&] {
        RANK_REQUIRE(link.post_recv(landing, bytes, &rr) && link.wait(rr));
        RANK_REQUIRE(has_stamp(in.data(), bytes, stamp_value(bytes, i, to)),
                     "latency message %d of %zu bytes arrived without its stamp", i, bytes);
        return 0;
      };
      if (rank == 0) {
        if (send() || receive()) return 1;
      } else {
        if (receive() || send()) return 1;
      }
    }
    const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    rows.push_back({"latency", bytes, iters, us / iters / 2});
    RANK_REQUIRE(check_whole(link, rank, bytes, out, in), "the whole-message check of %zu bytes failed", bytes);
  }
  // Bandwidth: a stream with kInFlight requests outstanding, then one acknowledgement.
  for (size_t bytes = 64 << 10; tests.bandwidth && bytes <= (64u << 20); bytes *= tests.step) {
    const int iters = iterations_for(bytes, seconds, 0.5);
    const size_t slots = std::min<size_t>(kInFlight, (64u << 20) / bytes);
    auto t0 = Clock::now();
    std::vector<Op*> reqs(slots, nullptr);
    std::vector<int> posted_as(slots, -1);  // the iteration each slot's request carries
    // A receive done: its slot holds that iteration's stamp.
    auto received = [&](size_t k) {
      RANK_REQUIRE(rank == 0 || has_stamp(in.data() + k * bytes, bytes, stamp_value(bytes, posted_as[k], 0)),
                   "stream message %d of %zu bytes arrived without its stamp", posted_as[k], bytes);
      return 0;
    };
    for (int i = 0; i < iters; ++i) {
      const size_t k = size_t(i) % slots;
      Op*& r = reqs[k];
      if (r) {
        RANK_REQUIRE(link.wait(r));
        if (received(k)) return 1;
      }
      posted_as[k] = i;
      if (rank == 0) {
        stamp(out.data() + k * bytes, bytes, stamp_value(bytes, i, 0));
        RANK_REQUIRE(link.post_send(out.data() + k * bytes, bytes, &r));
      } else {
        RANK_REQUIRE(link.post_recv(landing + k * bytes, bytes, &r));
      }
    }
    for (size_t k = 0; k < slots; ++k)
      if (reqs[k]) {
        RANK_REQUIRE(link.wait(reqs[k]));
        if (received(k)) return 1;
      }
    char ack = 0;
    Op* ra;
    if (rank == 1) {
      RANK_REQUIRE(link.post_send(&ack, 1, &ra) && link.wait(ra));
    } else {
      RANK_REQUIRE(link.post_recv(&ack, 1, &ra) && link.wait(ra));
    }
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    rows.push_back({"bandwidth", bytes, iters, double(bytes) * iters / s / 1e9});
    RANK_REQUIRE(check_whole(link, rank, bytes, out, in), "the whole-message check of %zu bytes failed", bytes);
  }
  // Duplex: both directions at once, the oldest request of each tested once per pass.
  for (size_t bytes = 64 << 10; tests.duplex && bytes <= (64u << 20); bytes *= tests.step) {
    const int iters = iterations_for(bytes, seconds, 0.5);
    const size_t slots = std::min<size_t>(kInFlight, (64u << 20) / bytes);
    struct Stream {
      std::vector<Op*> ring;
      int posted = 0, done = 0;
    } sends{std::vector<Op*>(slots)}, recvs{std::vector<Op*>(slots)};
    const auto t0 = Clock::now();
    const auto deadline = t0 + std::chrono::seconds(60);
    while (sends.done < iters || recvs.done < iters) {
      for (Stream* st : {&sends, &recvs}) {
        const bool send = st == &sends;
        while (st->posted < iters && st->posted - st->done < int(slots)) {
          const size_t k = size_t(st->posted) % slots;
          if (send) {
            stamp(out.data() + k * bytes, bytes, stamp_value(bytes, st->posted, rank));
            RANK_REQUIRE(link.post_send(out.data() + k * bytes, bytes, &st->ring[k]));
          } else {
            RANK_REQUIRE(link.post_recv(landing + k * bytes, bytes, &st->ring[k]));
          }
          ++st->posted;
        }
        if (st->done < st->posted) {
          bool finished = false;
          const size_t k = size_t(st->done) % slots;
          RANK_REQUIRE(link.test(st->ring[k], &finished));
          if (finished) {
            RANK_REQUIRE(send || has_stamp(in.data() + k * bytes, bytes, stamp_value(bytes, st->done, 1 - rank)),
                         "duplex message %d of %zu bytes arrived without its stamp", st->done, bytes);
            ++st->done;
          }
        }
      }
      RANK_REQUIRE(Clock::now() < deadline, "duplex stream of %zu bytes stalled", bytes);
    }
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    rows.push_back({"duplex", bytes, iters, double(bytes) * iters / s / 1e9});
    RANK_REQUIRE(check_whole(link, rank, bytes, out, in), "the whole-message check of %zu bytes failed", bytes);
  }
  if (rank == 0) {
    for (const Row& r : rows) {
      char line[160];
      const int n = std::snprintf(line, sizeof line, "%s %zu %d %.6f\n", r.kind.c_str(), r.bytes,
                                  r.iters, r.value);
      if (::write(result_fd, line, size_t(n)) != n) return 1;
    }
  }
  return 0;
}

int run_plugin_rank(int rank, RankMesh& mesh, double seconds, const Sweep& tests, int result_fd) {
  const ncclNet_v11_t* net = net_v11();
  RANK_REQUIRE(net, "ncclNetPlugin_v11 not found");
  PeerComms comms;
  RANK_REQUIRE(connect_all(net, rank, mesh, 0, &comms), "connections not established");
  const int peer = 1 - rank;
  PluginLink link{net, comms.send[peer], comms.recv[peer]};
  const int rc = measure(link, rank, seconds, tests, result_fd);
  close_all(net, &comms);
  return rc;
}

// Each rank listens, tells the peer its port over the mesh, connects to the peer's, accepts.
int run_baseline_rank(int rank, RankMesh& mesh, double seconds, const Sweep& tests, int result_fd) {
  const int peer = 1 - rank;
  topocoll::perf::CallerSocketLink link;
  const uint16_t port = link.listen();
  RANK_REQUIRE(port != 0, "listen failed: %s", std::strerror(errno));
  uint16_t peer_port = 0;
  RANK_REQUIRE(mesh.send(rank, peer, &port, sizeof port) && mesh.recv(peer, rank, &peer_port, sizeof peer_port));
  RANK_REQUIRE(link.connect(peer_port) && link.accept(), "baseline connection failed: %s", std::strerror(errno));
  return measure(link, rank, seconds, tests, result_fd);
}

// "latency,duplex" -> those patterns only; false on an unknown name or an empty list.
bool parse_tests(const std::string& list, Sweep* tests) {
  tests->latency = tests->bandwidth = tests->duplex = false;
  size_t pos = 0;
  while (pos <= list.size()) {
    const size_t comma = std::min(list.find(',', pos), list.size());
    const std::string name = list.substr(pos, comma - pos);
    if (name == "latency") tests->latency = true;
    else if (name == "bandwidth") tests->bandwidth = true;
    else if (name == "duplex") tests->duplex = true;
    else return false;
    pos = comma + 1;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::string json;
  double seconds = 0.5;
  bool baseline = false;
  Sweep tests;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--json" && i + 1 < argc) json = argv[++i];
    else if (a == "--seconds" && i + 1 < argc) seconds = std::stod(argv[++i]);
    else if (a == "--baseline") baseline = true;
    else if (a == "--lose-payload") g_lose_payload = true;
    else if (a == "--tests" && i + 1 < argc && parse_tests(argv[++i], &tests)) continue;
    else if (a == "--step" && i + 1 < argc && (tests.step = std::strtoul(argv[++i], nullptr, 10)) >= 2) continue;
    else {
      std::fprintf(stderr,
                   "usage: net_plugin_pingpong [--json FILE] [--seconds S] [--baseline] "
                   "[--tests latency,bandwidth,duplex] [--step FACTOR] [--lose-payload]\n");
      return 2;
    }
  }
  int fds[2];
  if (::pipe(fds) != 0) return 1;
  const auto results = run_ranks(2, [&](int rank, RankMesh& mesh) {
    ::close(fds[0]);
    return baseline ? run_baseline_rank(rank, mesh, seconds, tests, fds[1])
                    : run_plugin_rank(rank, mesh, seconds, tests, fds[1]);
  });
  ::close(fds[1]);
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) text.append(buf, size_t(n));
  ::close(fds[0]);
  for (const RankResult& r : results)
    if (!r.exited || r.exit_code != 0) {
      std::fprintf(stderr, "net_plugin_pingpong: %s\n", describe(results).c_str());
      return 1;
    }
  std::vector<Row> rows;
  for (size_t pos = 0; pos < text.size();) {
    const size_t end = text.find('\n', pos);
    char kind[32];
    Row r;
    if (std::sscanf(text.c_str() + pos, "%31s %zu %d %lf", kind, &r.bytes, &r.iters, &r.value) == 4) {
      r.kind = kind;
      rows.push_back(r);
    }
    pos = end == std::string::npos ? text.size() : end + 1;
  }
  std::printf("%-10s %12s %8s %14s\n", "test", "bytes", "iters", "one-way us | GB/s");
  for (const Row& r : rows)
    std::printf("%-10s %12zu %8d %14.3f\n", r.kind.c_str(), r.bytes, r.iters, r.value);
  if (!json.empty()) {
    FILE* f = std::fopen(json.c_str(), "w");
    if (!f) return 1;
    std::fprintf(f, "[\n");
    for (size_t i = 0; i < rows.size(); ++i)
      std::fprintf(f, "  {\"test\": \"%s\", \"bytes\": %zu, \"iters\": %d, \"%s\": %.6f}%s\n",
                   rows[i].kind.c_str(), rows[i].bytes, rows[i].iters,
                   rows[i].kind == "latency" ? "one_way_us" : "gbs", rows[i].value,
                   i + 1 < rows.size() ? "," : "");
    std::fprintf(f, "]\n");
    if (std::fclose(f) != 0) return 1;
  }
  return 0;
}
