// The CUDA kernels of the integer types: int8 uint8 int32 uint32 int64 uint64 (kernels/kernel_table_cuda.h).
#include "kernels/type_kernels_cuda.cuh"

namespace topocoll::kernels {

void add_integer_kernels(KernelTable& table) {
  add_type_kernels<DataType::Int8>(table);
  add_type_kernels<DataType::Uint8>(table);
  add_type_kernels<DataType::Int32>(table);
  add_type_kernels<DataType::Uint32>(table);
  add_type_kernels<DataType::Int64>(table);
  add_type_kernels<DataType::Uint64>(table);
}

}  // namespace topocoll::kernels
