#include "net/net_warning.h"

#include <atomic>
#include <cstdio>

namespace topocoll::net {

namespace {
void to_stderr(const std::string& message) { std::fprintf(stderr, "topocoll: WARN %s\n", message.c_str()); }
std::atomic<WarningSink> g_sink{&to_stderr};
}  // namespace

void set_warning_sink(WarningSink sink) { g_sink.store(sink ? sink : &to_stderr); }
void warn(const std::string& message) { g_sink.load()(message); }

}  // namespace topocoll::net
