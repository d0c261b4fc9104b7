// The one grammar of values: every form each kind accepts, what it refuses and the words
// of the refusal, the same for the environment and the command line.
#include <gtest/gtest.h>

#include <array>
#include <climits>
#include <stdexcept>
#include <string>

#include "config/value_grammar.h"

namespace topocoll::config {
namespace {

constexpr int64_t kNoMax = INT64_MAX;

TEST(ValueGrammar, WhitespaceAroundAValueIsIgnoredOnBothSides) {
  EXPECT_EQ(trim(" \t 0 \n"), "0");
  EXPECT_EQ(trim(""), "");
  EXPECT_EQ(trim("   "), "");
  // TOPOCOLL_RANK=" 0" was accepted and "0 " refused: both sides are one rule now.
  for (const char* text : {"0", " 0", "0 ", "\t0\r\n"}) {
    const Parsed<int64_t> v = parse_count(text, 0, INT_MAX);
    ASSERT_TRUE(v) << '"' << text << '"';
    EXPECT_EQ(*v.value, 0);
  }
  EXPECT_EQ(*parse_size(" 64K ", 0, kNoMax).value, 64 << 10);
  EXPECT_EQ(*parse_bool(" yes ").value, true);
  EXPECT_EQ(*parse_number(" 1.5 ", 0, 2).value, 1.5);
  EXPECT_EQ(*parse_choice(" hd ", std::array<std::string_view, 2>{"ring", "hd"}).value, "hd");
  // Inside a value whitespace is an error.
  EXPECT_FALSE(parse_count("1 0", 0, 100));
  EXPECT_FALSE(parse_size("64 K", 0, kNoMax));
}

TEST(ValueGrammar, BooleansInEveryCase) {
  for (const char* yes : {"1", "true", "TRUE", "yes", "Yes", "on", "ON"}) EXPECT_EQ(parse_bool(yes).value, true) << yes;
  for (const char* no : {"0", "false", "False", "no", "NO", "off", "Off"}) EXPECT_EQ(parse_bool(no).value, false) << no;
  for (const char* bad : {"", "2", "maybe", "y", "enable"}) {
    const Parsed<bool> b = parse_bool(bad);
    EXPECT_FALSE(b) << bad;
    EXPECT_EQ(b.expected, "expected 1/0, true/false, yes/no or on/off");
  }
}

TEST(ValueGrammar, CountsArePlainIntegersInRange) {
  EXPECT_EQ(*parse_count("42", 0, 100).value, 42);
  EXPECT_EQ(*parse_count("-3", -5, 5).value, -3);
  const Parsed<int64_t> high = parse_count("101", 0, 100);
  EXPECT_FALSE(high);
  EXPECT_EQ(high.expected, "expected an integer from 0 to 100");
  // No unit on a count: K/M were applied to counts too (TOPOCOLL_NET_TIMEOUT_MS=60K).
  for (const char* bad : {"60K", "1M", "12abc", "", "+5", "0x10", "1.0", "99999999999999999999"})
    EXPECT_FALSE(parse_count(bad, INT64_MIN, kNoMax)) << bad;
  EXPECT_EQ(parse_count("x", 1, kNoMax).expected, "expected an integer of at least 1");
}

TEST(ValueGrammar, SizesTakeEveryBinaryUnitInAnyCase) {
  struct Case {
    const char* text;
    int64_t bytes;
  };
  for (const Case c : {Case{"4096", 4096}, Case{"4096B", 4096}, Case{"64K", 64 << 10}, Case{"64k", 64 << 10},
                       Case{"64KB", 64 << 10}, Case{"64KiB", 64 << 10}, Case{"64kib", 64 << 10},
                       Case{"1M", 1 << 20}, Case{"1mb", 1 << 20}, Case{"1MiB", 1 << 20},
                       Case{"2G", int64_t(2) << 30}, Case{"2GB", int64_t(2) << 30},
                       Case{"2GiB", int64_t(2) << 30}, Case{"2gib", int64_t(2) << 30}, Case{"0", 0}}) {
    const Parsed<int64_t> v = parse_size(c.text, 0, kNoMax);
    ASSERT_TRUE(v) << c.text << ": " << v.expected;
    EXPECT_EQ(*v.value, c.bytes) << c.text;
  }
  for (const char* bad : {"K", "", "-1K", "1T", "1.5M", "12Q", "1KK", "2GiBs", "99999999999999999999",
                          "9223372036854775807G"})
    EXPECT_FALSE(parse_size(bad, 0, kNoMax)) << bad;
  // A fraction or an exponent: whole numbers of a unit, and the same size in one when there is.
  EXPECT_EQ(parse_size("1.5G", 0, kNoMax).expected,
            "expected a size (like 4096, 64K or 2GiB); sizes are whole numbers of a unit: 1536M is that size");
  EXPECT_EQ(parse_size("1e3", 0, kNoMax).expected,
            "expected a size (like 4096, 64K or 2GiB); sizes are whole numbers of a unit: 1000 is that size");
  EXPECT_EQ(parse_size("0.3", 0, kNoMax).expected,
            "expected a size (like 4096, 64K or 2GiB); sizes are whole numbers of bytes or of a unit");
  const Parsed<int64_t> small = parse_size("1K", 4096, 64 << 20);
  EXPECT_FALSE(small);
  EXPECT_EQ(small.expected, "expected a size from 4K to 64M (like 4096, 64K or 2GiB)");
  // 0 as "off" besides a range.
  EXPECT_EQ(*parse_size("0", 64 << 10, 1 << 30, true).value, 0);
  const Parsed<int64_t> between = parse_size("1K", 64 << 10, 1 << 30, true);
  EXPECT_FALSE(between);
  EXPECT_EQ(between.expected, "expected 0 (off) or a size from 64K to 1G (like 4096, 64K or 2GiB)");
}

TEST(ValueGrammar, NumbersAreFiniteDecimals) {
  EXPECT_DOUBLE_EQ(*parse_number("2.5", 1, 100).value, 2.5);
  EXPECT_DOUBLE_EQ(*parse_number("1e2", 1, 100).value, 100);
  for (const char* bad : {"0.9", "fast", "1.5x", "1000", "inf", "nan", "0x10", ""})
    EXPECT_FALSE(parse_number(bad, 1, 100)) << bad;
  EXPECT_EQ(parse_number("0", 1, 100).expected, "expected a number from 1 to 100");
}

TEST(ValueGrammar, DurationsInSecondsMinutesOrHours) {
  EXPECT_DOUBLE_EQ(*parse_duration("90", 1, 1e6).value, 90);
  EXPECT_DOUBLE_EQ(*parse_duration("30s", 1, 1e6).value, 30);
  EXPECT_DOUBLE_EQ(*parse_duration("5m", 1, 1e6).value, 300);
  EXPECT_DOUBLE_EQ(*parse_duration("1H", 1, 1e6).value, 3600);
  for (const char* bad : {"", "s", "5x", "-1m", "0.5", "1e9h"}) EXPECT_FALSE(parse_duration(bad, 1, 1e6)) << bad;
}

TEST(ValueGrammar, ChoicesAreExact) {
  constexpr std::string_view kModes[] = {"init", "lazy", "off"};
  EXPECT_EQ(*parse_choice("lazy", kModes).value, "lazy");
  const Parsed<std::string> bad = parse_choice("LAZY", kModes);
  EXPECT_FALSE(bad);
  EXPECT_EQ(bad.expected, "expected one of init, lazy, off");
}

TEST(ValueGrammar, MarksAreOneToSixteenNonZeroIntegers) {
  EXPECT_EQ(*parse_marks("256,257").value, (std::vector<uint32_t>{256, 257}));
  EXPECT_EQ(*parse_marks(" 0x100 , 0X101 ").value, (std::vector<uint32_t>{256, 257}));
  for (const char* bad : {"", "0", "256,,257", "256,", "-1", "4294967296", "abc",
                          "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17"})
    EXPECT_FALSE(parse_marks(bad)) << bad;
  EXPECT_TRUE(parse_marks("1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16"));
}

TEST(ValueGrammar, SizesAreWrittenWithTheLargestExactUnit) {
  EXPECT_EQ(format_size(int64_t(2) << 30), "2G");
  EXPECT_EQ(format_size(256 << 20), "256M");
  EXPECT_EQ(format_size(65536), "64K");
  EXPECT_EQ(format_size(4097), "4097");
  EXPECT_EQ(format_size(0), "0");
  for (int64_t bytes : {int64_t(0), int64_t(1), int64_t(4096), int64_t(3) << 30, int64_t(12345)})
    EXPECT_EQ(*parse_size(format_size(bytes), 0, kNoMax).value, bytes);
}

TEST(ValueGrammar, QuotedShowsControlCharacters) {
  EXPECT_EQ(quoted_value("2GiB"), "\"2GiB\"");
  EXPECT_EQ(quoted_value("a\tb\"\\"), "\"a\\x09b\\x22\\x5c\"");
}

TEST(ValueGrammar, ArgumentsNameTheFlagTheValueAndWhatWasExpected) {
  EXPECT_EQ(size_argument("--bytes", "2GiB", 0, kNoMax), int64_t(2) << 30);
  EXPECT_EQ(count_argument("--ranks", " 8 ", 1, 4096), 8);
  try {
    count_argument("--ranks", "12abc", 1, 4096);
    FAIL() << "12abc is not a count";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "--ranks \"12abc\": expected an integer from 1 to 4096");
  }
  EXPECT_THROW(size_argument("--bytes", "2XB", 0, kNoMax), std::invalid_argument);
  EXPECT_THROW(number_argument("--factor", "nan", 1.01, 1024), std::invalid_argument);
  EXPECT_THROW(duration_argument("--budget", "0s", 1, 1e6), std::invalid_argument);
}

}  // namespace
}  // namespace topocoll::config
