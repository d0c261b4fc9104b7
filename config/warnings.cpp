#include "config/warnings.h"

#include <atomic>
#include <cstdio>
#include <mutex>
#include <set>

namespace topocoll::config {
namespace {

void to_stderr(const std::string& message) { std::fprintf(stderr, "topocoll: WARN %s\n", message.c_str()); }

std::atomic<WarningSink> g_sink{&to_stderr};

// The texts warned once so far. Bounded: a peer that makes every text distinct must not
// grow a rank's memory; past the bound a text may be warned again.
bool first_time(const std::string& message) {
  constexpr std::size_t kMaxRemembered = 1024;
  static std::mutex mutex;
  static std::set<std::string> seen;
  std::lock_guard<std::mutex> lock(mutex);
  if (seen.size() >= kMaxRemembered) seen.clear();
  return seen.insert(message).second;
}

}  // namespace

void set_warning_sink(WarningSink sink) { g_sink.store(sink ? sink : &to_stderr); }

void warn(const std::string& message) { g_sink.load()(message); }

void warn_once(const std::string& message) {
  if (first_time(message)) warn(message);
}

}  // namespace topocoll::config
