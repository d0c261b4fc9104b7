#include "tests/emu/nccl_emu_failure.h"

#include <cstdio>

namespace topocoll::emu {
namespace {
thread_local std::string last_message;
}

ncclResult_t report(ncclResult_t code, const std::string& message) {
  std::fprintf(stderr, "nccl_emu WARN %s\n", message.c_str());
  last_message = message;
  return code;
}

const char* last_error() { return last_message.c_str(); }

}  // namespace topocoll::emu
