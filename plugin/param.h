// Configuration through TOPOCOLL_* environment variables: each read once, in one place (the
// face that uses it declares it with a TOPOCOLL_PARAM_* macro), validated, and logged once
// at INFO (NCCL_ENV) when set. A bad value is a WARN naming the variable and its accepted
// values; the default is then used. Every variable is listed in docs/usage.md.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

namespace topocoll::plugin {

// Pure parsers (tested directly). Errors say what was expected.
struct ParamError { std::string message; };
std::optional<int64_t> parse_int(std::string_view text, int64_t min, int64_t max, std::string* error);
// Sizes accept K/M/G suffixes (powers of 1024): "64K", "1M".
std::optional<int64_t> parse_bytes(std::string_view text, std::string* error);
std::optional<bool> parse_bool(std::string_view text, std::string* error);

// Environment readers: value, or the default with a WARN when the value is bad.
int64_t param_int(const char* env, int64_t fallback, int64_t min, int64_t max);
int64_t param_bytes(const char* env, int64_t fallback);
bool param_bool(const char* env, bool fallback);
std::string param_string(const char* env, const char* fallback);
std::string param_choice(const char* env, const char* fallback,
                         std::initializer_list<const char*> choices);

}  // namespace topocoll::plugin

// Declares `type fn()` that reads the variable once per process.
#define TOPOCOLL_PARAM_INT(fn, ENV, fallback, min, max)                                       \
  inline int64_t fn() {                                                                       \
    static const int64_t value = ::topocoll::plugin::param_int("TOPOCOLL_" ENV, fallback, min, max); \
    return value;                                                                             \
  }
#define TOPOCOLL_PARAM_BYTES(fn, ENV, fallback)                                               \
  inline int64_t fn() {                                                                       \
    static const int64_t value = ::topocoll::plugin::param_bytes("TOPOCOLL_" ENV, fallback);  \
    return value;                                                                             \
  }
#define TOPOCOLL_PARAM_BOOL(fn, ENV, fallback)                                                \
  inline bool fn() {                                                                          \
    static const bool value = ::topocoll::plugin::param_bool("TOPOCOLL_" ENV, fallback);      \
    return value;                                                                             \
  }
#define TOPOCOLL_PARAM_STRING(fn, ENV, fallback)                                              \
  inline const std::string& fn() {                                                            \
    static const std::string value = ::topocoll::plugin::param_string("TOPOCOLL_" ENV, fallback); \
    return value;                                                                             \
  }
