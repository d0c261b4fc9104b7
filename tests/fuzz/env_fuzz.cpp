// libFuzzer target for the TOPOCOLL_* values (and the launcher variables a rank reads): the
// input is split at newlines into one value per variable; reading the environment either
// yields values inside their documented ranges or an error / warning naming the variable.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "exec/bootstrap.h"
#include "exec/pipeline.h"
#include "exec/rank_environment.h"
#include "net/transport_options.h"

using namespace topocoll;

namespace {
const char* const kVariables[] = {
    "TOPOCOLL_NET_SOCKETS_PER_CONN", "TOPOCOLL_NET_THREADS", "TOPOCOLL_NET_TIMEOUT_MS",
    "TOPOCOLL_NET_CHUNK_BYTES",      "TOPOCOLL_NET_MIN_STRIPE_BYTES", "TOPOCOLL_NET_EAGER_BYTES",
    "TOPOCOLL_NET_LANE_MARKS",       "TOPOCOLL_RANK",       "TOPOCOLL_NRANKS",
    "TOPOCOLL_BOOTSTRAP",            "MASTER_ADDR",         "MASTER_PORT",
    "TOPOCOLL_PIPELINE_CHUNK_BYTES", "TOPOCOLL_PIPELINE_MAX_CHUNKS"};
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  for (char& c : text)
    if (c == '\0') c = ' ';
  size_t start = 0;
  for (const char* name : kVariables) {
    const size_t end = std::min(text.find('\n', start), text.size());
    if (start <= text.size() && end > start) ::setenv(name, text.substr(start, end - start).c_str(), 1);
    else ::unsetenv(name);
    start = end + 1;
  }
  std::vector<std::string> warnings;
  const net::TransportOptions o = net::TransportOptions::from_environment(&warnings);
  if (o.sockets_per_conn < 1 || o.sockets_per_conn > 16 || o.threads_per_conn < 1 ||
      o.threads_per_conn > o.sockets_per_conn || o.timeout_ms < 1 || o.chunk_bytes < 4096 ||
      o.chunk_bytes > (size_t(64) << 20) || o.min_stripe_bytes < 1 || o.min_stripe_bytes > o.chunk_bytes ||
      o.lane_marks.size() > 16)
    __builtin_trap();
  const exec::PipelineOptions p = exec::PipelineOptions::from_environment(&warnings);
  if ((p.shape.chunk_bytes != 0 && (p.shape.chunk_bytes < (size_t(64) << 10) ||
                                    p.shape.chunk_bytes > (size_t(1) << 30))) ||
      p.shape.max_chunks < 2 || p.shape.max_chunks > 64)
    __builtin_trap();
  try {
    if (const auto env = exec::rank_environment_from_env()) {
      if (env->rank < 0 || env->rank >= env->nranks) __builtin_trap();
      if (!env->bootstrap.empty() && exec::BootstrapAddress::parse(env->bootstrap).port == 0) __builtin_trap();
    }
  } catch (const std::invalid_argument&) {
  }
  try {
    exec::BootstrapAddress::parse(text.substr(0, 300));
  } catch (const std::invalid_argument&) {
  }
  return 0;
}
