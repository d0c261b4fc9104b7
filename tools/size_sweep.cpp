#include "tools/size_sweep.h"

#include <cmath>
#include <stdexcept>

#include "config/value_grammar.h"
#include "tools/flag_value.h"
#include "tools/split_list.h"

namespace topocoll::cli {

std::vector<int64_t> parse_size_sweep(const std::string& text, double factor) {
  std::vector<int64_t> sizes;
  if (const auto colon = text.find(':'); colon != std::string::npos) {
    const int64_t lo = config::size_argument("--sizes", text.substr(0, colon), 0, kMaxArgumentBytes);
    const int64_t hi = config::size_argument("--sizes", text.substr(colon + 1), 0, kMaxArgumentBytes);
    if (lo < 1 || hi < lo) throw std::invalid_argument("--sizes '" + text + "': need 1 <= A <= B");
    const double rows = std::floor(std::log(double(hi) / double(lo)) / std::log(factor)) + 1;
    if (rows > double(kMaxSweepSizes))
      throw std::invalid_argument("--sizes '" + text + "' with --factor " + std::to_string(factor) +
                                  " makes " + std::to_string((long long)rows) + " sizes; at most " +
                                  std::to_string(kMaxSweepSizes) + " (raise --factor)");
    for (double s = double(lo); s <= double(hi) * 1.0000001; s *= factor)
      if (sizes.empty() || int64_t(s) != sizes.back()) sizes.push_back(int64_t(s));
  } else {
    for (const auto& part : split_list(text, ','))
      sizes.push_back(config::size_argument("--sizes", part, 0, kMaxArgumentBytes));
    if (sizes.size() > kMaxSweepSizes)
      throw std::invalid_argument("--sizes lists " + std::to_string(sizes.size()) + " sizes; at most " +
                                  std::to_string(kMaxSweepSizes));
  }
  if (sizes.empty()) throw std::invalid_argument("--sizes '" + text + "' names no size");
  return sizes;
}

}  // namespace topocoll::cli
