#include "kernels/datatype.h"

#include <gtest/gtest.h>

namespace topocoll::kernels {
namespace {

TEST(KernelsDatatype, NumberingMatchesNccl) {
  // ncclDataType_t and ncclRedOp_t values (nccl.h, NCCL 2.28).
  EXPECT_EQ(static_cast<int>(DataType::Int8), 0);
  EXPECT_EQ(static_cast<int>(DataType::Uint8), 1);
  EXPECT_EQ(static_cast<int>(DataType::Int32), 2);
  EXPECT_EQ(static_cast<int>(DataType::Uint32), 3);
  EXPECT_EQ(static_cast<int>(DataType::Int64), 4);
  EXPECT_EQ(static_cast<int>(DataType::Uint64), 5);
  EXPECT_EQ(static_cast<int>(DataType::Float16), 6);
  EXPECT_EQ(static_cast<int>(DataType::Float32), 7);
  EXPECT_EQ(static_cast<int>(DataType::Float64), 8);
  EXPECT_EQ(static_cast<int>(DataType::Bfloat16), 9);
  EXPECT_EQ(static_cast<int>(DataType::Fp8E4M3), 10);
  EXPECT_EQ(static_cast<int>(DataType::Fp8E5M2), 11);
  EXPECT_EQ(kNumDataTypes, 12);
  EXPECT_EQ(static_cast<int>(ReduceOp::Sum), 0);
  EXPECT_EQ(static_cast<int>(ReduceOp::Prod), 1);
  EXPECT_EQ(static_cast<int>(ReduceOp::Max), 2);
  EXPECT_EQ(static_cast<int>(ReduceOp::Min), 3);
  EXPECT_EQ(static_cast<int>(ReduceOp::Avg), 4);
  EXPECT_EQ(kNumReduceOps, 5);
}

TEST(KernelsDatatype, Sizes) {
  const std::size_t expected[kNumDataTypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  for (int t = 0; t < kNumDataTypes; ++t)
    EXPECT_EQ(datatype_size(static_cast<DataType>(t)), expected[t]) << t;
  EXPECT_EQ(datatype_size(static_cast<DataType>(12)), 0u);
  EXPECT_EQ(datatype_size(static_cast<DataType>(-1)), 0u);
  EXPECT_FALSE(is_valid(static_cast<DataType>(12)));
  EXPECT_FALSE(is_valid(static_cast<ReduceOp>(5)));
  EXPECT_TRUE(is_floating(DataType::Fp8E5M2));
  EXPECT_FALSE(is_floating(DataType::Uint64));
}

TEST(KernelsDatatype, NamesRoundTrip) {
  for (int t = 0; t < kNumDataTypes; ++t) {
    const auto type = static_cast<DataType>(t);
    const auto parsed = parse_datatype(datatype_name(type));
    ASSERT_TRUE(parsed.has_value()) << datatype_name(type);
    EXPECT_EQ(*parsed, type);
  }
  for (int o = 0; o < kNumReduceOps; ++o) {
    const auto op = static_cast<ReduceOp>(o);
    const auto parsed = parse_reduce_op(reduce_op_name(op));
    ASSERT_TRUE(parsed.has_value()) << reduce_op_name(op);
    EXPECT_EQ(*parsed, op);
  }
  EXPECT_EQ(datatype_name(static_cast<DataType>(99)), "invalid");
  EXPECT_EQ(reduce_op_name(static_cast<ReduceOp>(99)), "invalid");
}

TEST(KernelsDatatype, Aliases) {
  EXPECT_EQ(parse_datatype("float"), DataType::Float32);
  EXPECT_EQ(parse_datatype("f32"), DataType::Float32);
  EXPECT_EQ(parse_datatype("FP32"), DataType::Float32);
  EXPECT_EQ(parse_datatype("ncclFloat32"), DataType::Float32);
  EXPECT_EQ(parse_datatype("half"), DataType::Float16);
  EXPECT_EQ(parse_datatype("bf16"), DataType::Bfloat16);
  EXPECT_EQ(parse_datatype("ncclBfloat16"), DataType::Bfloat16);
  EXPECT_EQ(parse_datatype("double"), DataType::Float64);
  EXPECT_EQ(parse_datatype("char"), DataType::Int8);
  EXPECT_EQ(parse_datatype("int"), DataType::Int32);
  EXPECT_EQ(parse_datatype("e4m3"), DataType::Fp8E4M3);
  EXPECT_EQ(parse_datatype("fp8_e4m3"), DataType::Fp8E4M3);
  EXPECT_EQ(parse_datatype("ncclFloat8e5m2"), DataType::Fp8E5M2);
  EXPECT_EQ(parse_reduce_op("SUM"), ReduceOp::Sum);
  EXPECT_EQ(parse_reduce_op("ncclAvg"), ReduceOp::Avg);
  EXPECT_EQ(parse_reduce_op("product"), ReduceOp::Prod);
  EXPECT_FALSE(parse_datatype("float128").has_value());
  EXPECT_FALSE(parse_datatype("").has_value());
  EXPECT_FALSE(parse_reduce_op("premulsum").has_value());
  EXPECT_FALSE(parse_reduce_op("").has_value());
}

}  // namespace
}  // namespace topocoll::kernels
