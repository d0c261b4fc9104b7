// The CUDA kernels of the float types: float16 float32 float64 bfloat16 (kernels/kernel_table_cuda.h).
#include "kernels/type_kernels_cuda.cuh"

namespace topocoll::kernels {

void add_float_kernels(KernelTable& table) {
  add_type_kernels<DataType::Float16>(table);
  add_type_kernels<DataType::Float32>(table);
  add_type_kernels<DataType::Float64>(table);
  add_type_kernels<DataType::Bfloat16>(table);
}

}  // namespace topocoll::kernels
