#include "kernels/datatype.h"

#include <array>
#include <cctype>
#include <string>

namespace topocoll::kernels {
namespace {

std::string normalise(std::string_view name) {
  std::string s;
  s.reserve(name.size());
  for (char c : name) {
    if (c == '_' || c == '-') continue;  // fp8_e4m3 == fp8e4m3 == fp8-e4m3
    s.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  if (s.rfind("nccl", 0) == 0) s.erase(0, 4);  // ncclFloat32 -> float32
  return s;
}

struct Alias {
  std::string_view name;  // already normalised
  int value;
};

constexpr std::array<std::string_view, kNumDataTypes> kTypeNames = {
    "int8", "uint8", "int32", "uint32", "int64", "uint64",
    "float16", "float32", "float64", "bfloat16", "fp8_e4m3", "fp8_e5m2"};

constexpr Alias kTypeAliases[] = {
    {"int8", 0},     {"char", 0},     {"i8", 0},
    {"uint8", 1},    {"u8", 1},
    {"int32", 2},    {"int", 2},      {"i32", 2},
    {"uint32", 3},   {"uint", 3},     {"u32", 3},
    {"int64", 4},    {"i64", 4},
    {"uint64", 5},   {"u64", 5},
    {"float16", 6},  {"half", 6},     {"f16", 6},      {"fp16", 6},
    {"float32", 7},  {"float", 7},    {"f32", 7},      {"fp32", 7},
    {"float64", 8},  {"double", 8},   {"f64", 8},      {"fp64", 8},
    {"bfloat16", 9}, {"bf16", 9},
    {"fp8e4m3", 10}, {"e4m3", 10},    {"float8e4m3", 10}, {"f8e4m3", 10},
    {"fp8e5m2", 11}, {"e5m2", 11},    {"float8e5m2", 11}, {"f8e5m2", 11},
};

constexpr std::array<std::string_view, kNumReduceOps> kOpNames = {"sum", "prod", "max", "min",
                                                                  "avg"};
constexpr Alias kOpAliases[] = {
    {"sum", 0}, {"prod", 1}, {"product", 1}, {"max", 2}, {"min", 3}, {"avg", 4}, {"average", 4},
};

}  // namespace

std::string_view datatype_name(DataType t) {
  return is_valid(t) ? kTypeNames[static_cast<int>(t)] : std::string_view("invalid");
}

std::optional<DataType> parse_datatype(std::string_view name) {
  const std::string key = normalise(name);
  for (const Alias& a : kTypeAliases)
    if (a.name == key) return static_cast<DataType>(a.value);
  return std::nullopt;
}

std::string_view reduce_op_name(ReduceOp op) {
  return is_valid(op) ? kOpNames[static_cast<int>(op)] : std::string_view("invalid");
}

std::optional<ReduceOp> parse_reduce_op(std::string_view name) {
  const std::string key = normalise(name);
  for (const Alias& a : kOpAliases)
    if (a.name == key) return static_cast<ReduceOp>(a.value);
  return std::nullopt;
}

}  // namespace topocoll::kernels
