#include "tests/emu/nccl_emu_failure.h"

#include <cstdio>
#include <mutex>

namespace topocoll::emu {
namespace {
// NCCL keeps one last error for the process, written by every WARN on any thread
// (debug.cc ncclLastError): so does the emulation.
std::mutex last_mutex;
char last_message[1024] = "";
}  // namespace

ncclResult_t report(ncclResult_t code, const std::string& message) {
  std::fprintf(stderr, "nccl_emu WARN %s\n", message.c_str());
  std::lock_guard lock(last_mutex);
  std::snprintf(last_message, sizeof last_message, "%s", message.c_str());
  return code;
}

const char* last_error() { return last_message; }

}  // namespace topocoll::emu
