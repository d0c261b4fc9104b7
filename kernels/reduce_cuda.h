// CUDA reductions with exactly the CPU reference's semantics (kernels/reduce_cpu.h): same
// arguments, same bits. Everything is asynchronous on the caller's stream: no allocation, no
// synchronisation, arguments (source pointers included) travel by value in the launch, so the
// calls are CUDA-graph capturable. Invalid arguments return cudaErrorInvalidValue and launch
// nothing; count == 0 returns cudaSuccess and launches nothing.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "kernels/copy_ranges_cuda.h"
#include "kernels/datatype.h"
#include "kernels/reduce_cpu.h"  // kMaxReduceInputs

namespace topocoll::kernels {

// dst[i] = srcs[0][i] op ... op srcs[nsrc-1][i], left to right, 1 <= nsrc <= kMaxReduceInputs.
// All pointers are device pointers aligned to the element size; dst may be one of the sources.
// The host array `srcs` is read during the call only. Avg reduces as Sum (see finalize_cuda).
cudaError_t reduce_cuda(DataType type, ReduceOp op, void* dst, const void* const* srcs, int nsrc,
                        std::size_t count, cudaStream_t stream);

// Avg on integer types: dst[i] /= nranks, exactly as finalize_cpu; a no-op (nothing
// launched) for floating types (pre-multiplied, avg_premul_cuda) and other ops.
cudaError_t finalize_cuda(DataType type, ReduceOp op, void* dst, std::size_t count, int nranks,
                          cudaStream_t stream);

// PreMulSum's pre-op: dst[i] = src[i] * *host_scalar, exactly as premul_cpu. host_scalar is
// read during the call (NCCL's ncclScalarHostImmediate); device scalars are not supported.
cudaError_t premul_cuda(DataType type, void* dst, const void* src, std::size_t count,
                        const void* host_scalar, cudaStream_t stream);

// Avg's pre-op, exactly as avg_premul_cpu: dst[i] = src[i] * avg scalar for floating types,
// a device-to-device copy (stream-ordered) for the others.
cudaError_t avg_premul_cuda(DataType type, void* dst, const void* src, std::size_t count,
                            int nranks, cudaStream_t stream);

}  // namespace topocoll::kernels
