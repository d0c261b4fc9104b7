#include "plugin/interposer/interposer_config.h"

#include "plugin/process_context.h"

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

InterposerConfig interposer_config_from(const config::Env& env) {
  InterposerConfig c;
  c.enable = env.enable;
  c.topo_file = env.topo_file;
  c.algo = parse_algo_choice(env.algo).value_or(AlgoChoice::Auto);
  c.min_bytes = env.min_bytes;
  c.max_bytes = env.max_bytes;
  c.step_overhead_us = double(env.step_overhead_us);
  c.plan_cache_bytes = env.plan_cache_bytes;
  c.auto_margin = env.auto_margin;
  c.scratch_max_bytes = env.scratch_max_bytes;
  c.ring_comm = env.ring_comm == "lazy" ? RingCommMode::Lazy
                : env.ring_comm == "off" ? RingCommMode::Off
                                         : RingCommMode::Init;
  return c;
}

const InterposerConfig& interposer_config() {
  static const InterposerConfig config = interposer_config_from(process_context().env);
  return config;
}

}  // namespace topocoll::plugin::interposer
