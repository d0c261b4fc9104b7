// The names TOPOCOLL_ALGO accepts, in the order its warnings list them: the interposer's own
// routes (auto, nccl, nccl-topo-ring: no topocoll schedule behind them), then every schedule
// algorithm of sched/'s registry (sched/algorithm_registry.h) in its list order. The one
// place that validates the variable (config/env.cpp asks here); the interposer maps each
// name onto its route (plugin/interposer/interposer_config.cpp), and its test checks both
// agree.
//
// config/ is the bottom layer and may not ask sched/, so the registry tells it: each
// algorithm's registration (at static initialisation, before anything reads the
// environment) calls add_schedule_algorithm_name. A program that does not link sched/
// accepts the routes alone.
#pragma once

#include <span>
#include <string_view>

namespace topocoll::config {

// Routes first, then the schedule algorithms.
std::span<const std::string_view> algorithm_names();
// The interposer's routes alone: auto, nccl, nccl-topo-ring.
std::span<const std::string_view> route_names();

// The registry's hook: `name` (static storage) at `list_position` among the schedule
// algorithms. A name given twice is kept once.
void add_schedule_algorithm_name(std::string_view name, int list_position);

}  // namespace topocoll::config
