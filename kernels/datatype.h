// Element types and reduction operators, numbered exactly like NCCL's ncclDataType_t and
// ncclRedOp_t so values convert with a cast in both directions.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace topocoll::kernels {

enum class DataType : int {
  Int8 = 0,
  Uint8 = 1,
  Int32 = 2,
  Uint32 = 3,
  Int64 = 4,
  Uint64 = 5,
  Float16 = 6,
  Float32 = 7,
  Float64 = 8,
  Bfloat16 = 9,
  Fp8E4M3 = 10,
  Fp8E5M2 = 11,
};
inline constexpr int kNumDataTypes = 12;

// NCCL's built-in ops. PreMulSum is not an enum value in NCCL either (it is a dynamic op);
// it is offered as premul_cpu/premul_cuda followed by a Sum (see reduce_cpu.h).
enum class ReduceOp : int { Sum = 0, Prod = 1, Max = 2, Min = 3, Avg = 4 };
inline constexpr int kNumReduceOps = 5;

constexpr bool is_valid(DataType t) {
  return static_cast<int>(t) >= 0 && static_cast<int>(t) < kNumDataTypes;
}
constexpr bool is_valid(ReduceOp op) {
  return static_cast<int>(op) >= 0 && static_cast<int>(op) < kNumReduceOps;
}

// Bytes per element; 0 for a value outside the enum.
constexpr std::size_t datatype_size(DataType t) {
  switch (t) {
    case DataType::Int8: case DataType::Uint8:
    case DataType::Fp8E4M3: case DataType::Fp8E5M2: return 1;
    case DataType::Float16: case DataType::Bfloat16: return 2;
    case DataType::Int32: case DataType::Uint32: case DataType::Float32: return 4;
    case DataType::Int64: case DataType::Uint64: case DataType::Float64: return 8;
  }
  return 0;
}

constexpr bool is_floating(DataType t) {
  switch (t) {
    case DataType::Float16: case DataType::Float32: case DataType::Float64:
    case DataType::Bfloat16: case DataType::Fp8E4M3: case DataType::Fp8E5M2: return true;
    default: return false;
  }
}

// Canonical names: int8 uint8 int32 uint32 int64 uint64 float16 float32 float64 bfloat16
// fp8_e4m3 fp8_e5m2; "invalid" for a value outside the enum.
std::string_view datatype_name(DataType t);
// Accepts the canonical names and common aliases, case-insensitively: char, i8, u8, int, i32,
// u32, i64, u64, half, f16, fp16, float, f32, fp32, double, f64, fp64, bf16, e4m3, e5m2,
// float8e4m3, float8e5m2, and NCCL's spellings (ncclFloat32, ncclBfloat16, ...).
std::optional<DataType> parse_datatype(std::string_view name);

// sum prod max min avg; "invalid" for a value outside the enum.
std::string_view reduce_op_name(ReduceOp op);
// Accepts sum prod max min avg (also "product", "average" and ncclSum-style), any case.
std::optional<ReduceOp> parse_reduce_op(std::string_view name);

}  // namespace topocoll::kernels
