#include "plugin/interposer/interposer_config.h"

#include <cstdlib>
#include <sstream>

#include "plugin/process_context.h"
#include "sched/algorithm_registry.h"

namespace topocoll::plugin::interposer {
namespace {

// The routes that are not a schedule of the registry (config/algorithm_names.h lists their
// names for TOPOCOLL_ALGO; the config test checks both lists agree).
struct RouteName {
  AlgoChoice choice;
  std::string_view name;
};
constexpr RouteName kRoutes[] = {
    {AlgoChoice::Auto, "auto"},
    {AlgoChoice::Nccl, "nccl"},
    {AlgoChoice::NcclTopoRing, "nccl-topo-ring"},
};

std::string routing_settings_of(const InterposerConfig& c, const config::Env& env) {
  std::ostringstream text;
  text.precision(17);
  text << "algo=" << (c.algo == AlgoChoice::Schedule ? std::string_view(c.schedule_algo) : to_string(c.algo))
       << " min_bytes=" << c.min_bytes << " max_bytes=" << c.max_bytes
       << " step_overhead_us=" << c.step_overhead_us << " auto_margin=" << c.auto_margin
       << " scratch_max_bytes=" << c.scratch_max_bytes << " ring_comm="
       << (c.ring_comm == RingCommMode::Lazy ? "lazy" : c.ring_comm == RingCommMode::Off ? "off" : "init")
       << " pipeline_chunk_bytes=" << (env.pipeline_chunk_bytes ? std::to_string(*env.pipeline_chunk_bytes) : "default")
       << " pipeline_max_chunks=" << env.pipeline_max_chunks;
  return text.str();
}

uint64_t fnv1a(const std::string& text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char ch : text) {
    h ^= ch;
    h *= 0x100000001b3ull;
  }
  return h == 0 ? 1 : h;
}

}  // namespace

std::string_view to_string(AlgoChoice c) {
  for (const RouteName& r : kRoutes)
    if (r.choice == c) return r.name;
  return c == AlgoChoice::Schedule ? "schedule" : "invalid";
}

std::optional<AlgoChoice> parse_algo_choice(std::string_view text) {
  for (const RouteName& r : kRoutes)
    if (text == r.name) return r.choice;
  if (sched::find_algorithm(text)) return AlgoChoice::Schedule;
  return std::nullopt;
}

InterposerConfig interposer_config_from(const config::Env& env) {
  InterposerConfig c;
  c.enable = env.enable;
  c.topo_file = env.topo_file;
  c.algo = parse_algo_choice(env.algo).value_or(AlgoChoice::Auto);
  if (c.algo == AlgoChoice::Schedule) c.schedule_algo = env.algo;
  c.min_bytes = env.min_bytes;
  c.max_bytes = env.max_bytes;
  c.step_overhead_us = double(env.step_overhead_us);
  c.plan_cache_bytes = env.plan_cache_bytes;
  c.auto_margin = env.auto_margin;
  c.scratch_max_bytes = env.scratch_max_bytes;
  c.ring_comm = env.ring_comm == "lazy" ? RingCommMode::Lazy
                : env.ring_comm == "off" ? RingCommMode::Off
                                         : RingCommMode::Init;
  c.step_times = env.step_times;
  c.init_timeout_s = env.init_timeout_s;
  c.vote_timeout_s = env.vote_timeout_s;
  // As NCCL reads its integer parameters (param.cc: strtoll, base 0): anything but 0 is on.
  c.check_pointers = std::strtoll(env.nccl_check_pointers.c_str(), nullptr, 0) != 0;
  c.routing_settings = routing_settings_of(c, env);
  c.routing_fingerprint = fnv1a(c.routing_settings);
  return c;
}

const InterposerConfig& interposer_config() {
  static const InterposerConfig config = interposer_config_from(process_context().env);
  return config;
}

}  // namespace topocoll::plugin::interposer
