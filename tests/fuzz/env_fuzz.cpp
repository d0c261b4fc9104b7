// libFuzzer target for the grammar of values (config/value_grammar.h) and the Env read from
// them (config/env.h): the input is split at newlines into one value per variable of the
// table; reading yields values inside each variable's range, or one warning (or refusal)
// naming the variable; the readers above it (transport, pipelining, launcher) stay inside
// their documented ranges. The whole input also goes through each grammar directly.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "config/env.h"
#include "config/value_grammar.h"
#include "exec/bootstrap.h"
#include "exec/pipeline.h"
#include "exec/rank_environment.h"
#include "net/transport_options.h"

using namespace topocoll;

namespace {

void check(bool ok) {
  if (!ok) __builtin_trap();
}

// A value parsed by a variable's grammar lies in its range.
void check_in_range(const config::EnvVariable& v, const config::EnvValue& value) {
  if (const int64_t* n = std::get_if<int64_t>(&value)) {
    const bool zero = v.zero_is_off && *n == 0;
    check(zero || (*n >= v.min && *n <= v.max));
  }
  if (const double* d = std::get_if<double>(&value)) check(*d >= v.min_number && *d <= v.max_number);
  if (const auto* marks = std::get_if<std::vector<uint32_t>>(&value)) {
    check(!marks->empty() && marks->size() <= 16);
    for (uint32_t m : *marks) check(m != 0);
  }
}

void fuzz_grammar(std::string_view text) {
  if (const auto v = config::parse_size(text, 4096, 64 << 20)) {
    check(*v.value >= 4096 && *v.value <= (64 << 20));
    check(*config::parse_size(config::format_size(*v.value), 0, INT64_MAX).value == *v.value);
  }
  if (const auto v = config::parse_count(text, -5, 5)) check(*v.value >= -5 && *v.value <= 5);
  if (const auto v = config::parse_number(text, 1, 100)) check(*v.value >= 1 && *v.value <= 100);
  if (const auto v = config::parse_duration(text, 1, 1e6)) check(*v.value >= 1 && *v.value <= 1e6);
  if (const auto v = config::parse_marks(text)) check(!v.value->empty() && v.value->size() <= 16);
  config::parse_bool(text);
  check(config::trim(config::trim(text)) == config::trim(text));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  fuzz_grammar(text);

  std::map<std::string, std::string, std::less<>> values;
  size_t start = 0;
  for (const config::EnvVariable& v : config::env_variables()) {
    if (start > text.size()) break;
    const size_t end = std::min(text.find('\n', start), text.size());
    if (end > start) values.emplace(std::string(v.name), text.substr(start, end - start));
    start = end + 1;
  }
  const config::Env env = config::read_env(values);
  size_t problems = 0;
  for (const config::EnvSetting& s : env.settings) {
    if (!s.problem.empty()) {
      ++problems;
      check(s.is_set() && s.problem.rfind(std::string(s.variable->name) + "=", 0) == 0);
    } else {
      check_in_range(*s.variable, s.value);
    }
  }
  check(env.warnings.size() <= problems + 1);  // + the MIN/MAX_BYTES pair
  check(env.min_bytes <= env.max_bytes);

  const net::TransportOptions o = net::TransportOptions::from_env(env);
  check(o.sockets_per_conn >= 1 && o.sockets_per_conn <= 16 && o.threads_per_conn >= 1 &&
        o.threads_per_conn <= o.sockets_per_conn && o.timeout_ms >= 1 && o.chunk_bytes >= 4096 &&
        o.chunk_bytes <= (size_t(64) << 20) && o.min_stripe_bytes >= 1 && o.min_stripe_bytes <= o.chunk_bytes &&
        o.lane_marks.size() <= 16);
  // The plugin's may have no thread (its caller polls); the host backend's never.
  const net::TransportOptions plugin = net::TransportOptions::for_nccl_net_plugin(env);
  check(plugin.caller_polls && plugin.threads_per_conn >= 0 && plugin.threads_per_conn <= plugin.sockets_per_conn);
  const exec::PipelineOptions p = exec::PipelineOptions::from_env(env);
  check((p.shape.chunk_bytes == 0 ||
         (p.shape.chunk_bytes >= (size_t(64) << 10) && p.shape.chunk_bytes <= (size_t(1) << 30))) &&
        p.shape.max_chunks >= 2 && p.shape.max_chunks <= 64);
  try {
    if (const auto ranks = exec::rank_environment_from_env(env)) {
      check(ranks->rank >= 0 && ranks->rank < ranks->nranks);
      if (!ranks->bootstrap.empty()) check(exec::BootstrapAddress::parse(ranks->bootstrap).port != 0);
    }
  } catch (const std::invalid_argument&) {
  }
  try {
    exec::BootstrapAddress::parse(text.substr(0, 300));
  } catch (const std::invalid_argument&) {
  }
  return 0;
}
