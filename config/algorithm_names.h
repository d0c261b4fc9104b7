// The names TOPOCOLL_ALGO accepts, in the order its warnings list them. The one place that
// validates the variable (config/env.cpp asks here); the interposer maps each name onto its
// AlgoChoice (plugin/interposer/interposer_config.cpp), and its test checks both lists
// agree. When algorithms register themselves (issue 22 §2), this is what asks the registry.
#pragma once

#include <span>
#include <string_view>

namespace topocoll::config {

std::span<const std::string_view> algorithm_names();

}  // namespace topocoll::config
