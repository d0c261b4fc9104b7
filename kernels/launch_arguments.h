// What each CUDA entry point (reduce_cuda.h, copy_ranges_cuda.h) does with its arguments,
// before any CUDA call: launch, do nothing (a valid empty call), or refuse. One rule for the
// CUDA build and for the host emulation's stand-ins (tests/emu/kernels_emu.cpp), so the
// kernel tests that run on both hold both to the same contract.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/avg_scalar.h"
#include "kernels/copy_ranges_cuda.h"
#include "kernels/datatype.h"
#include "kernels/reduce_cpu.h"  // kMaxReduceInputs

namespace topocoll::kernels {

enum class Launch { Run, Nothing, Invalid };

inline bool aligned_to(const void* p, std::size_t elem) {
  return reinterpret_cast<std::uintptr_t>(p) % elem == 0;
}

inline Launch check_reduce(DataType type, ReduceOp op, const void* dst, const void* const* srcs, int nsrc,
                           std::size_t count) {
  if (!is_valid(type) || !is_valid(op) || nsrc < 1 || nsrc > kMaxReduceInputs) return Launch::Invalid;
  if (count == 0) return Launch::Nothing;
  const std::size_t elem = datatype_size(type);
  if (!dst || !srcs || !aligned_to(dst, elem)) return Launch::Invalid;
  for (int j = 0; j < nsrc; ++j)
    if (!srcs[j] || !aligned_to(srcs[j], elem)) return Launch::Invalid;
  return Launch::Run;
}

// The element-wise map kernels (finalize, premul): one source, one destination.
inline Launch check_map(DataType type, const void* dst, const void* src) {
  const std::size_t elem = datatype_size(type);
  if (!dst || !src || !aligned_to(dst, elem) || !aligned_to(src, elem)) return Launch::Invalid;
  return Launch::Run;
}

// Only integer Avg divides after the sum; floating Avg was pre-multiplied.
inline Launch check_finalize(DataType type, ReduceOp op, const void* dst, std::size_t count, int nranks) {
  if (!is_valid(type) || !is_valid(op) || nranks < 1) return Launch::Invalid;
  if (op != ReduceOp::Avg || avg_premultiplies(type) || count == 0) return Launch::Nothing;
  return check_map(type, dst, dst);
}

inline Launch check_premul(DataType type, const void* dst, const void* src, std::size_t count,
                           const void* host_scalar) {
  if (!is_valid(type)) return Launch::Invalid;
  if (count == 0) return Launch::Nothing;
  if (!host_scalar) return Launch::Invalid;
  return check_map(type, dst, src);
}

// Floating types multiply (premul); the others copy unless in place.
inline Launch check_avg_premul(DataType type, const void* dst, const void* src, std::size_t count,
                               int nranks) {
  if (!is_valid(type) || nranks < 1) return Launch::Invalid;
  if (count == 0) return Launch::Nothing;
  if (!avg_premultiplies(type)) return dst == src ? Launch::Nothing : Launch::Run;
  return check_map(type, dst, src);
}

inline Launch check_copy_ranges(const CopyRange* ranges, int n) {
  if (n < 0 || (n > 0 && !ranges)) return Launch::Invalid;
  bool any = false;
  for (int i = 0; i < n; ++i) {
    if (ranges[i].bytes == 0) continue;
    if (!ranges[i].dst || !ranges[i].src) return Launch::Invalid;
    any = true;
  }
  return any ? Launch::Run : Launch::Nothing;
}

}  // namespace topocoll::kernels
