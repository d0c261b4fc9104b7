#include "config/value_grammar.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>

namespace topocoll::config {
namespace {

constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

char lower(char c) { return c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c; }

bool equals_ignoring_case(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (lower(a[i]) != lower(b[i])) return false;
  return true;
}

std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::string count_range(int64_t min, int64_t max) {
  if (min == kMin && max == kMax) return "an integer";
  if (max == kMax) return "an integer of at least " + std::to_string(min);
  if (min == kMin) return "an integer of at most " + std::to_string(max);
  return "an integer from " + std::to_string(min) + " to " + std::to_string(max);
}

// The largest finite double stands for "no bound" on either side.
std::string number_range(double min, double max) {
  constexpr double kAny = std::numeric_limits<double>::max();
  if (min == -kAny && max == kAny) return "a number";
  if (max == kAny) return "a number of at least " + number_text(min);
  if (min == -kAny) return "a number of at most " + number_text(max);
  return "a number from " + number_text(min) + " to " + number_text(max);
}

std::string size_range(int64_t min, int64_t max, bool zero_too) {
  std::string range;
  if (max == kMax) range = min <= 0 ? "a size" : "a size of at least " + format_size(min);
  else range = "a size from " + format_size(min) + " to " + format_size(max);
  return std::string(zero_too ? "0 (off) or " : "") + range + " (like 4096, 64K or 2GiB)";
}

// A whole decimal integer: every character of `text` a digit (after an optional '-').
std::optional<int64_t> whole_integer(std::string_view text) {
  int64_t v = 0;
  const char* end = text.data() + text.size();
  auto [stop, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || stop != end) return std::nullopt;
  return v;
}

std::optional<double> whole_number(std::string_view text) {
  double v = 0;
  const char* end = text.data() + text.size();
  auto [stop, ec] = std::from_chars(text.data(), end, v, std::chars_format::general);
  if (text.empty() || ec != std::errc() || stop != end || !std::isfinite(v)) return std::nullopt;
  return v;
}

}  // namespace

std::string_view trim(std::string_view text) {
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
  return text;
}

Parsed<bool> parse_bool(std::string_view text) {
  const std::string_view t = trim(text);
  for (std::string_view yes : {"1", "true", "yes", "on"})
    if (equals_ignoring_case(t, yes)) return {true, ""};
  for (std::string_view no : {"0", "false", "no", "off"})
    if (equals_ignoring_case(t, no)) return {false, ""};
  return {std::nullopt, "expected 1/0, true/false, yes/no or on/off"};
}

Parsed<int64_t> parse_count(std::string_view text, int64_t min, int64_t max) {
  const std::optional<int64_t> v = whole_integer(trim(text));
  if (!v || *v < min || *v > max) return {std::nullopt, "expected " + count_range(min, max)};
  return {*v, ""};
}

namespace {
// A size's unit as a power of two ("" and B: 0, K/KB/KiB: 10, M...: 20, G...: 30), any case;
// -1 for anything else.
int unit_shift(std::string_view unit) {
  struct Unit {
    std::string_view name;
    int shift;
  };
  for (const Unit u : {Unit{"", 0}, Unit{"b", 0}, Unit{"k", 10}, Unit{"kb", 10}, Unit{"kib", 10},
                       Unit{"m", 20}, Unit{"mb", 20}, Unit{"mib", 20}, Unit{"g", 30}, Unit{"gb", 30},
                       Unit{"gib", 30}})
    if (equals_ignoring_case(unit, u.name)) return u.shift;
  return -1;
}
}  // namespace

Parsed<int64_t> parse_size(std::string_view text, int64_t min, int64_t max, bool zero_too) {
  const std::string_view t = trim(text);
  std::size_t digits = 0;
  while (digits < t.size() && t[digits] >= '0' && t[digits] <= '9') ++digits;
  const int shift = unit_shift(t.substr(digits));
  const std::optional<int64_t> count = digits > 0 ? whole_integer(t.substr(0, digits)) : std::nullopt;
  // Compared before scaling, so 9223372036854775807G cannot wrap into range.
  if (shift < 0 || !count || *count > (kMax >> shift)) {
    // A fraction or an exponent of a unit ("1.5G", "1e3"): sizes are whole numbers of one;
    // the same size in a smaller one is named when there is one.
    std::string hint;
    std::size_t number_end = 0;
    while (number_end < t.size() && std::string_view("0123456789.eE+-").find(t[number_end]) != std::string_view::npos)
      ++number_end;
    const std::optional<double> value = whole_number(t.substr(0, number_end));
    const int shift_of_unit = unit_shift(t.substr(number_end));
    if (value && shift_of_unit >= 0 && *value >= 0 && *value < 1e18) {
      const double bytes = std::ldexp(*value, shift_of_unit);
      hint = bytes == std::floor(bytes) && bytes < 9e18
                 ? "; sizes are whole numbers of a unit: " + format_size(int64_t(bytes)) + " is that size"
                 : "; sizes are whole numbers of bytes or of a unit";
    }
    return {std::nullopt, "expected " + size_range(min, max, zero_too) + hint};
  }
  const int64_t bytes = *count << shift;
  if (!(zero_too && bytes == 0) && (bytes < min || bytes > max))
    return {std::nullopt, "expected " + size_range(min, max, zero_too)};
  return {bytes, ""};
}

Parsed<double> parse_number(std::string_view text, double min, double max) {
  const std::optional<double> v = whole_number(trim(text));
  if (!v || *v < min || *v > max) return {std::nullopt, "expected " + number_range(min, max)};
  return {*v, ""};
}

Parsed<double> parse_duration(std::string_view text, double min_seconds, double max_seconds) {
  std::string_view t = trim(text);
  double scale = 1;
  if (!t.empty()) {
    const char u = lower(t.back());
    if (u == 's' || u == 'm' || u == 'h') {
      scale = u == 'm' ? 60 : u == 'h' ? 3600 : 1;
      t.remove_suffix(1);
    }
  }
  const std::optional<double> v = whole_number(t);
  if (!v || *v * scale < min_seconds || *v * scale > max_seconds)
    return {std::nullopt, "expected a duration from " + number_text(min_seconds) + " s to " +
                              number_text(max_seconds) + " s (like 90, 30s, 5m or 1h)"};
  return {*v * scale, ""};
}

Parsed<std::string> parse_choice(std::string_view text, std::span<const std::string_view> choices) {
  const std::string_view t = trim(text);
  std::string list;
  for (std::string_view c : choices) {
    if (t == c) return {std::string(c), ""};
    list += (list.empty() ? "" : ", ") + std::string(c);
  }
  return {std::nullopt, "expected one of " + list};
}

Parsed<std::vector<uint32_t>> parse_marks(std::string_view text) {
  const Parsed<std::vector<uint32_t>> bad{
      std::nullopt, "expected a list of 1 to 16 non-zero socket marks, decimal or 0x hex, like 256,257"};
  std::vector<uint32_t> marks;
  std::string_view rest = trim(text);
  for (;;) {
    const std::size_t comma = rest.find(',');
    std::string_view item = trim(rest.substr(0, comma));
    int base = 10;
    if (item.size() > 2 && item[0] == '0' && lower(item[1]) == 'x') {
      base = 16;
      item.remove_prefix(2);
    }
    uint32_t mark = 0;
    auto [stop, ec] = std::from_chars(item.data(), item.data() + item.size(), mark, base);
    if (item.empty() || ec != std::errc() || stop != item.data() + item.size() || mark == 0 ||
        marks.size() == 16)
      return bad;
    marks.push_back(mark);
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  return {std::move(marks), ""};
}

std::string format_size(int64_t bytes) {
  for (const auto& [shift, unit] : {std::pair{30, "G"}, std::pair{20, "M"}, std::pair{10, "K"}})
    if (bytes != 0 && bytes % (int64_t(1) << shift) == 0)
      return std::to_string(bytes >> shift) + unit;
  return std::to_string(bytes);
}

std::string quoted_value(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f && c != '"' && c != '\\') {
      out += c;
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", unsigned(u));
      out += buf;
    }
  }
  return out + "\"";
}

namespace {
template <typename T>
T required(std::string_view flag, std::string_view text, Parsed<T>&& parsed) {
  if (!parsed) throw std::invalid_argument(std::string(flag) + " " + quoted_value(text) + ": " + parsed.expected);
  return *parsed.value;
}
}  // namespace

int64_t count_argument(std::string_view flag, std::string_view text, int64_t min, int64_t max) {
  return required(flag, text, parse_count(text, min, max));
}

int64_t size_argument(std::string_view flag, std::string_view text, int64_t min, int64_t max) {
  return required(flag, text, parse_size(text, min, max));
}

double number_argument(std::string_view flag, std::string_view text, double min, double max) {
  return required(flag, text, parse_number(text, min, max));
}

double duration_argument(std::string_view flag, std::string_view text, double min_seconds,
                         double max_seconds) {
  return required(flag, text, parse_duration(text, min_seconds, max_seconds));
}

}  // namespace topocoll::config
