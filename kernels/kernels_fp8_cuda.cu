// The CUDA kernels of the fp8 types: fp8_e4m3 fp8_e5m2 (kernels/kernel_table_cuda.h).
#include "kernels/type_kernels_cuda.cuh"

namespace topocoll::kernels {

void add_fp8_kernels(KernelTable& table) {
  add_type_kernels<DataType::Fp8E4M3>(table);
  add_type_kernels<DataType::Fp8E5M2>(table);
}

}  // namespace topocoll::kernels
