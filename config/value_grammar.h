// The one grammar for the values topocoll reads, from the environment (config/env.h) and
// from the command line (tools/) alike, so a value means the same wherever it is written:
//   whitespace  around a value (and around each item of a list) is ignored; inside, an error
//   booleans    1/0, true/false, yes/no, on/off, in any case
//   counts      plain decimal integers: "42", "-3"; no unit, no '+'
//   sizes       bytes as a count with an optional unit, in any case: B, K/KB/KiB, M/MB/MiB,
//               G/GB/GiB, every one a power of 1024 ("64K" = "64KiB" = 65536)
//   numbers     finite decimals: "1.3", "2e3" (no inf, no nan, no hex)
//   durations   seconds as a number with an optional unit s, m or h: "90", "30s", "5m"
//   choices     one of a list, exactly as the list writes it
// A parser returns the value, or what was expected ("expected a size from 64K to 1G, like
// 4096, 64K or 2GiB"); the caller names the variable or flag and the value it was given.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace topocoll::config {

template <typename T>
struct Parsed {
  std::optional<T> value;
  std::string expected;  // when there is no value: "expected ..."
  explicit operator bool() const { return value.has_value(); }
};

// `text` without the whitespace (space, tab, newline, CR, VT, FF) at either end.
std::string_view trim(std::string_view text);

Parsed<bool> parse_bool(std::string_view text);
Parsed<int64_t> parse_count(std::string_view text, int64_t min, int64_t max);
// zero_too: 0 is accepted besides [min, max] (a size where 0 means "off").
Parsed<int64_t> parse_size(std::string_view text, int64_t min, int64_t max, bool zero_too = false);
// std::numeric_limits<double>::max() (or its negative) as a bound means "no bound".
Parsed<double> parse_number(std::string_view text, double min, double max);
Parsed<double> parse_duration(std::string_view text, double min_seconds, double max_seconds);
Parsed<std::string> parse_choice(std::string_view text, std::span<const std::string_view> choices);
// Socket marks: a comma-separated list of 1 to 16 non-zero 32-bit integers, each decimal or
// 0x hex ("256,257", "0x100,0x101").
Parsed<std::vector<uint32_t>> parse_marks(std::string_view text);

// A byte count the way the grammar writes it: "2G", "64K", "4097" (the largest unit that
// divides it exactly).
std::string format_size(int64_t bytes);
// `"text"` with every character that is not printable ASCII written as \xHH, so a value in a
// message shows what was given, control characters included.
std::string quoted_value(std::string_view text);

// A command-line value: the parsed value, or std::invalid_argument naming the flag, the
// value and what was expected (`--bytes "2XB": expected a size ...`).
int64_t count_argument(std::string_view flag, std::string_view text, int64_t min, int64_t max);
int64_t size_argument(std::string_view flag, std::string_view text, int64_t min, int64_t max);
double number_argument(std::string_view flag, std::string_view text, double min, double max);
double duration_argument(std::string_view flag, std::string_view text, double min_seconds,
                         double max_seconds);

}  // namespace topocoll::config
