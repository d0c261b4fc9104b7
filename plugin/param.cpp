#include "plugin/param.h"

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <string>

#include "plugin/log.h"

namespace topocoll::plugin {

std::optional<int64_t> parse_int(std::string_view text, int64_t min, int64_t max, std::string* error) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    if (error) *error = "expected an integer, got \"" + std::string(text) + "\"";
    return std::nullopt;
  }
  if (v < min || v > max) {
    if (error)
      *error = "value " + std::to_string(v) + " out of range [" + std::to_string(min) + ", " +
               std::to_string(max) + "]";
    return std::nullopt;
  }
  return v;
}

std::optional<int64_t> parse_bytes(std::string_view text, std::string* error) {
  int64_t scale = 1;
  std::string_view digits = text;
  if (!text.empty()) {
    switch (text.back()) {
      case 'k': case 'K': scale = int64_t(1) << 10; break;
      case 'm': case 'M': scale = int64_t(1) << 20; break;
      case 'g': case 'G': scale = int64_t(1) << 30; break;
      default: break;
    }
    if (scale != 1) digits.remove_suffix(1);
  }
  std::string inner;
  auto v = parse_int(digits, 0, INT64_MAX / scale, &inner);
  if (!v) {
    if (error) *error = "expected a size like 4096, 64K, 1M or 2G, got \"" + std::string(text) + "\"";
    return std::nullopt;
  }
  return *v * scale;
}

std::optional<bool> parse_bool(std::string_view text, std::string* error) {
  if (text == "1" || text == "true" || text == "yes" || text == "on") return true;
  if (text == "0" || text == "false" || text == "no" || text == "off") return false;
  if (error) *error = "expected 0/1 (or true/false, yes/no, on/off), got \"" + std::string(text) + "\"";
  return std::nullopt;
}

namespace {
const char* env_value(const char* env) {
  const char* v = std::getenv(env);
  return (v && *v) ? v : nullptr;
}
}  // namespace

int64_t param_int(const char* env, int64_t fallback, int64_t min, int64_t max) {
  const char* v = env_value(env);
  if (!v) return fallback;
  std::string error;
  if (auto parsed = parse_int(v, min, max, &error)) {
    TC_INFO(NCCL_ENV, "%s set by environment to %lld", env, static_cast<long long>(*parsed));
    return *parsed;
  }
  TC_WARN("%s: %s; using default %lld", env, error.c_str(), static_cast<long long>(fallback));
  return fallback;
}

int64_t param_bytes(const char* env, int64_t fallback) {
  const char* v = env_value(env);
  if (!v) return fallback;
  std::string error;
  if (auto parsed = parse_bytes(v, &error)) {
    TC_INFO(NCCL_ENV, "%s set by environment to %lld bytes", env, static_cast<long long>(*parsed));
    return *parsed;
  }
  TC_WARN("%s: %s; using default %lld", env, error.c_str(), static_cast<long long>(fallback));
  return fallback;
}

bool param_bool(const char* env, bool fallback) {
  const char* v = env_value(env);
  if (!v) return fallback;
  std::string error;
  if (auto parsed = parse_bool(v, &error)) {
    TC_INFO(NCCL_ENV, "%s set by environment to %d", env, int(*parsed));
    return *parsed;
  }
  TC_WARN("%s: %s; using default %d", env, error.c_str(), int(fallback));
  return fallback;
}

std::string param_string(const char* env, const char* fallback) {
  const char* v = env_value(env);
  if (!v) return fallback;
  TC_INFO(NCCL_ENV, "%s set by environment to %s", env, v);
  return v;
}

std::string param_choice(const char* env, const char* fallback,
                         std::initializer_list<const char*> choices) {
  const char* v = env_value(env);
  if (!v) return fallback;
  std::string accepted;
  for (const char* c : choices) {
    if (std::string_view(c) == v) {
      TC_INFO(NCCL_ENV, "%s set by environment to %s", env, v);
      return v;
    }
    accepted += accepted.empty() ? c : std::string(", ") + c;
  }
  TC_WARN("%s: unknown value \"%s\" (accepted: %s); using default %s", env, v, accepted.c_str(), fallback);
  return fallback;
}

}  // namespace topocoll::plugin
