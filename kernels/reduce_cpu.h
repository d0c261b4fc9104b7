// CPU reference reductions with exactly the semantics of the CUDA kernels (kernels/reduce_cuda.h);
// the host backend uses them for real work. Arithmetic rules: kernels/element_ops.h and
// docs/kernels.md. Bad arguments throw std::invalid_argument naming the argument.
#pragma once

#include <cstddef>

#include "kernels/datatype.h"

namespace topocoll::kernels {

// Most inputs one reduce call combines (a fully connected step receives from several peers).
inline constexpr int kMaxReduceInputs = 8;

// dst[i] = srcs[0][i] op srcs[1][i] op ... op srcs[nsrc-1][i], combined left to right, each
// binary step rounded to the element type. 1 <= nsrc <= kMaxReduceInputs (nsrc == 1 copies).
// Avg reduces as Sum: integer types then call finalize_cpu once on the fully reduced data;
// floating types pre-multiply every rank's input first (avg_premul_cpu), as NCCL does.
// dst may be any of the sources (same pointer) or disjoint from all; partial overlap is not
// allowed. Pointers must be aligned to the element size. count == 0 does nothing.
void reduce_cpu(DataType type, ReduceOp op, void* dst, const void* const* srcs, int nsrc,
                std::size_t count);

// The op's final step, done exactly once on fully reduced data: Avg on integer types divides
// by nranks, truncating toward zero (NCCL's SumPostDiv). Floating Avg was pre-multiplied
// (kernels/avg_scalar.h) and every other op has no final step: no-ops. nranks >= 1.
void finalize_cpu(DataType type, ReduceOp op, void* dst, std::size_t count, int nranks);

// NCCL's PreMulSum (ncclRedOpCreatePreMulSum with a host scalar): dst[i] = src[i] * scalar,
// rounded to the element type, applied once to each rank's own input before Sum reductions.
// scalar points to ONE host element of `type`. Device-resident scalars are not supported:
// callers must fall back to NCCL for them. dst may equal src.
void premul_cpu(DataType type, void* dst, const void* src, std::size_t count, const void* scalar);

// Avg's pre-op on a floating type: dst[i] = src[i] * avg scalar of nranks
// (kernels/avg_scalar.h), applied once to each rank's own input before the Sum. A copy for
// other types (they divide in finalize_cpu). dst may equal src.
void avg_premul_cpu(DataType type, void* dst, const void* src, std::size_t count, int nranks);

}  // namespace topocoll::kernels
