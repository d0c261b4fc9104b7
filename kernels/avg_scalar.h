// ncclAvg on floating types, as NCCL 2.28 computes it: not "sum, then divide" but PreMulSum,
// every rank's input multiplied by a scalar 1/nranks before the sum (src/enqueue.cc,
// hostToDevRedOp, case ncclAvg; src/device/reduce_kernel.h, Apply_PreOp<FuncPreMulSum>).
// The scalar is float(1.0/nranks) rounded to the element type (double: 1.0/nranks), so the
// intermediate sums stay in range (8 ranks of 448 in fp8 e4m3 average to 448, not to the
// saturated sum divided by 8). Integer types keep SumPostDiv: sum, then divide once
// (kernels/element_ops.h, divide_by_ranks).
//
// fp8: NCCL multiplies in half (__hmul) and rounds the half to fp8; topocoll multiplies in
// float and rounds once. The product of two fp8 values has at most 8 significant bits, exact
// in half wherever the fp8 result is not zero, so both give the same bits.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/datatype.h"
#include "kernels/narrow_float.h"

namespace topocoll::kernels {

// Whether Avg on `type` pre-multiplies (floating types) rather than divides at the end.
constexpr bool avg_premultiplies(DataType type) { return is_floating(type); }

// The bits of NCCL's Avg scalar for a floating `type`, in the low datatype_size(type) bytes
// (little-endian, as premul_cpu/premul_cuda read a host scalar). 0 for other types.
inline std::uint64_t avg_scalar_bits(DataType type, int nranks) {
  const float f = float(1.0 / double(nranks));
  std::uint64_t bits = 0;
  switch (type) {
    case DataType::Float16: bits = float_to_half(f); break;
    case DataType::Bfloat16: bits = float_to_bf16(f); break;
    case DataType::Fp8E4M3: bits = float_to_fp8_e4m3(f); break;
    case DataType::Fp8E5M2: bits = float_to_fp8_e5m2(f); break;
    case DataType::Float32: bits = float_bits(f); break;
    case DataType::Float64: {
      const double d = 1.0 / double(nranks);
      std::memcpy(&bits, &d, sizeof d);
      break;
    }
    default: break;
  }
  return bits;
}

}  // namespace topocoll::kernels
