#include <cstdint>
#include <cstdlib>
#include <string>

#include "plugin/interposer/interposer_params.h"
#include "plugin/log.h"
#include "plugin/param.h"

namespace topocoll::plugin::interposer {
namespace {

struct AlgoName {
  AlgoChoice choice;
  const char* name;
  const char* schedule;  // sched/ generator name, "" when not schedule-backed
};
constexpr AlgoName kAlgoNames[] = {
    {AlgoChoice::Auto, "auto", ""},        {AlgoChoice::Nccl, "nccl", ""},
    {AlgoChoice::Ring, "ring", "ring"},    {AlgoChoice::Hd, "hd", "hd"},
    {AlgoChoice::Fc, "fc", "fc"},          {AlgoChoice::FcDirect, "fc-direct", "fc-direct"},
    {AlgoChoice::Hier, "hier", "hier"},    {AlgoChoice::NcclTopoRing, "nccl-topo-ring", ""},
};

}  // namespace

std::string_view to_string(AlgoChoice c) {
  for (const auto& a : kAlgoNames)
    if (a.choice == c) return a.name;
  return "invalid";
}

std::optional<AlgoChoice> parse_algo_choice(std::string_view text) {
  for (const auto& a : kAlgoNames)
    if (text == a.name) return a.choice;
  return std::nullopt;
}

std::string_view schedule_algo_name(AlgoChoice c) {
  for (const auto& a : kAlgoNames)
    if (a.choice == c) return a.schedule;
  return "";
}

InterposerConfig read_interposer_config() {
  InterposerConfig c;
  c.enable = param_bool("TOPOCOLL_ENABLE", true);
  c.topo_file = param_string("TOPOCOLL_TOPO_FILE", "");
  const std::string algo =
      param_choice("TOPOCOLL_ALGO", "auto",
                   {"auto", "nccl", "ring", "hd", "fc", "fc-direct", "hier", "nccl-topo-ring"});
  c.algo = parse_algo_choice(algo).value_or(AlgoChoice::Auto);
  c.min_bytes = param_bytes("TOPOCOLL_MIN_BYTES", 0);
  c.max_bytes = param_bytes("TOPOCOLL_MAX_BYTES", INT64_MAX);
  if (c.min_bytes > c.max_bytes) {
    TC_WARN("TOPOCOLL_MIN_BYTES (%lld) is larger than TOPOCOLL_MAX_BYTES (%lld); ignoring both",
            static_cast<long long>(c.min_bytes), static_cast<long long>(c.max_bytes));
    c.min_bytes = 0;
    c.max_bytes = INT64_MAX;
  }
  c.step_overhead_us =
      static_cast<double>(param_int("TOPOCOLL_STEP_OVERHEAD_US", 8, 0, 1000000));
  c.plan_cache_bytes = param_bytes("TOPOCOLL_PLAN_CACHE_BYTES", c.plan_cache_bytes);
  c.scratch_max_bytes = param_bytes("TOPOCOLL_SCRATCH_MAX_BYTES", c.scratch_max_bytes);
  const std::string ring = param_choice("TOPOCOLL_RING_COMM", "init", {"init", "lazy", "off"});
  c.ring_comm = ring == "lazy" ? RingCommMode::Lazy : ring == "off" ? RingCommMode::Off : RingCommMode::Init;
  const std::string margin = param_string("TOPOCOLL_AUTO_MARGIN", "");
  if (!margin.empty()) {
    char* end = nullptr;
    const double m = std::strtod(margin.c_str(), &end);
    if (end && *end == '\0' && m >= 1.0 && m <= 100.0) c.auto_margin = m;
    else TC_WARN("TOPOCOLL_AUTO_MARGIN=%s is not a number from 1 to 100; using %.2f",
                 margin.c_str(), c.auto_margin);
  }
  return c;
}

const InterposerConfig& interposer_config() {
  static const InterposerConfig config = read_interposer_config();
  return config;
}

}  // namespace topocoll::plugin::interposer
