// The CUDA kernel table (kernels/kernel_table_cuda.h) assembled from its type groups: every
// type has every kernel, each (type, op) its own, Avg the Sum kernel. Taking the kernels'
// addresses needs no device, so this runs everywhere; a type a group forgets would launch a
// null kernel only on a GPU.
#include <gtest/gtest.h>

#include <set>

#include "kernels/kernel_table_cuda.h"

namespace topocoll::kernels {
namespace {

TEST(KernelsTable, EveryTypeHasEveryKernelOnceAndAvgReducesWithSum) {
  const KernelTable& table = kernel_table();
  std::set<const void*> reduce, map;
  for (int t = 0; t < kNumDataTypes; ++t) {
    const TypeKernels& row = table[t];
    const auto name = datatype_name(static_cast<DataType>(t));
    for (int op = 0; op < kNumReduceOps; ++op)
      ASSERT_NE(row.reduce[op], nullptr) << name << " " << reduce_op_name(static_cast<ReduceOp>(op));
    EXPECT_EQ(row.reduce[static_cast<int>(ReduceOp::Avg)], row.reduce[static_cast<int>(ReduceOp::Sum)]) << name;
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min})
      EXPECT_TRUE(reduce.insert(reinterpret_cast<const void*>(row.reduce[static_cast<int>(op)])).second)
          << name << " " << reduce_op_name(op) << " shares its kernel with another type or op";
    ASSERT_NE(row.finalize, nullptr) << name;
    ASSERT_NE(row.premul, nullptr) << name;
    EXPECT_TRUE(map.insert(reinterpret_cast<const void*>(row.finalize)).second) << name;
    EXPECT_TRUE(map.insert(reinterpret_cast<const void*>(row.premul)).second) << name;
  }
  EXPECT_EQ(reduce.size(), std::size_t(kNumDataTypes) * 4);
  EXPECT_EQ(&kernel_table(), &table);  // filled once
}

}  // namespace
}  // namespace topocoll::kernels
