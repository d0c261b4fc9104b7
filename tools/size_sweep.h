// The sizes of a benchmark sweep as nccl-tests gives them (-b A -e B -f F), or as a list:
// `bench --sizes` and `demo --sizes` read the same grammar, so the demo refuses a bad list
// before it builds anything.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace topocoll::cli {

// A sweep longer than this is a typo (--factor 1.0000001 would print rows for days).
inline constexpr std::size_t kMaxSweepSizes = 1000;

// "A:B" -> A, A*factor, ... up to B (nccl-tests' -b -e -f); "A,B,C" -> that list. Sizes take
// K/M/G suffixes. Throws std::invalid_argument naming the text when it is not a sweep.
std::vector<int64_t> parse_size_sweep(const std::string& text, double factor);

}  // namespace topocoll::cli
