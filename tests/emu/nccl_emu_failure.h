// How the NCCL emulation reports an error from deep inside an operation: a Failure carries
// the ncclResult_t to return and a one-line message. Exported functions catch it (no
// exception crosses the C ABI), print the message like NCCL's WARN, and return the code.
#pragma once

#include <nccl.h>

#include <stdexcept>
#include <string>

namespace topocoll::emu {

struct Failure : std::runtime_error {
  Failure(ncclResult_t code, const std::string& what) : std::runtime_error(what), code(code) {}
  ncclResult_t code;
};

// Prints `message` to stderr as NCCL's WARN does, keeps it for ncclGetLastError (one for
// the process, as NCCL's), and returns `code`.
ncclResult_t report(ncclResult_t code, const std::string& message);
const char* last_error();

}  // namespace topocoll::emu
