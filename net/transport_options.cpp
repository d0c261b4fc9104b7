#include "net/transport_options.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <string_view>

namespace topocoll::net {

TransportOptions TransportOptions::normalized() const {
  TransportOptions o = *this;
  o.sockets_per_conn = std::clamp(o.sockets_per_conn, 1, 16);
  o.threads_per_conn = std::clamp(o.threads_per_conn, 1, o.sockets_per_conn);
  o.timeout_ms = std::max(o.timeout_ms, 1);
  o.chunk_bytes = std::clamp<size_t>(o.chunk_bytes, 4096, size_t(64) << 20);
  o.min_stripe_bytes = std::clamp<size_t>(o.min_stripe_bytes, 1, o.chunk_bytes);
  o.eager_bytes = std::min<size_t>(o.eager_bytes, size_t(1) << 20);
  return o;
}

void read_env_integer(const char* env, long long min, long long max, long long* value,
                      std::vector<std::string>* warnings) {
  const char* text = std::getenv(env);
  if (!text || !*text) return;
  std::string_view s(text);
  long long scale = 1;
  if (!s.empty() && (s.back() == 'K' || s.back() == 'k')) scale = 1024, s.remove_suffix(1);
  else if (!s.empty() && (s.back() == 'M' || s.back() == 'm')) scale = 1024 * 1024, s.remove_suffix(1);
  long long v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  // v is compared before it is scaled: 9223372036854775807M must not wrap into range.
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || v < min / scale ||
      v > max / scale || v * scale < min || v * scale > max) {
    if (warnings)
      warnings->push_back(std::string(env) + "=\"" + text + "\" is not an integer in [" +
                          std::to_string(min) + ", " + std::to_string(max) + "]; using " +
                          std::to_string(*value));
    return;
  }
  *value = v * scale;
}

namespace {
// A comma-separated list of socket marks (decimal or 0x hex), 1..16 of them, none zero.
void read_marks(const char* env, std::vector<uint32_t>* marks, std::vector<std::string>* warnings) {
  const char* text = std::getenv(env);
  if (!text || !*text) return;
  std::vector<uint32_t> out;
  std::string_view s(text);
  bool ok = true;
  while (ok && !s.empty()) {
    const size_t comma = s.find(',');
    std::string_view item = s.substr(0, comma);
    s = comma == std::string_view::npos ? std::string_view() : s.substr(comma + 1);
    int base = 10;
    if (item.size() > 2 && item[0] == '0' && (item[1] == 'x' || item[1] == 'X')) base = 16, item.remove_prefix(2);
    uint32_t v = 0;
    auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v, base);
    ok = !item.empty() && ec == std::errc() && end == item.data() + item.size() && v != 0;
    out.push_back(v);
  }
  if (!ok || out.empty() || out.size() > 16) {
    if (warnings)
      warnings->push_back(std::string(env) + "=\"" + text +
                          "\" is not a list of 1 to 16 non-zero socket marks; using none");
    return;
  }
  *marks = std::move(out);
}
}  // namespace

TransportOptions TransportOptions::from_environment(std::vector<std::string>* warnings) {
  TransportOptions o;
  long long sockets = o.sockets_per_conn, threads = o.threads_per_conn, timeout = o.timeout_ms,
            chunk = (long long)o.chunk_bytes, min_stripe = (long long)o.min_stripe_bytes,
            eager = (long long)o.eager_bytes, rendezvous = o.rendezvous ? 1 : 0;
  read_env_integer("TOPOCOLL_NET_SOCKETS_PER_CONN", 1, 16, &sockets, warnings);
  read_env_integer("TOPOCOLL_NET_THREADS", 1, 16, &threads, warnings);
  read_env_integer("TOPOCOLL_NET_TIMEOUT_MS", 1, 24LL * 3600 * 1000, &timeout, warnings);
  read_env_integer("TOPOCOLL_NET_CHUNK_BYTES", 4096, 64LL << 20, &chunk, warnings);
  read_env_integer("TOPOCOLL_NET_MIN_STRIPE_BYTES", 1, 64LL << 20, &min_stripe, warnings);
  read_env_integer("TOPOCOLL_NET_EAGER_BYTES", 0, 1LL << 20, &eager, warnings);
  read_env_integer("TOPOCOLL_NET_RENDEZVOUS", 0, 1, &rendezvous, warnings);
  o.sockets_per_conn = int(sockets);
  o.threads_per_conn = int(threads);
  o.timeout_ms = int(timeout);
  o.chunk_bytes = size_t(chunk);
  o.min_stripe_bytes = size_t(min_stripe);
  o.eager_bytes = size_t(eager);
  o.rendezvous = rendezvous != 0;
  read_marks("TOPOCOLL_NET_LANE_MARKS", &o.lane_marks, warnings);
  return o.normalized();
}

std::string TransportOptions::describe() const {
  std::string marks;
  for (uint32_t m : lane_marks) marks += (marks.empty() ? "" : ",") + std::to_string(m);
  return "sockets=" + std::to_string(sockets_per_conn) + " threads=" + std::to_string(threads_per_conn) +
 " chunk=" + std::to_string(chunk_bytes) +
         " stripe=" + std::to_string(min_stripe_bytes) + " eager=" + std::to_string(eager_bytes) + (rendezvous ? " rendezvous" : "") +
         " timeout_ms=" + std::to_string(timeout_ms) +
         (marks.empty() ? "" : " marks=" + marks);
}

}  // namespace topocoll::net
