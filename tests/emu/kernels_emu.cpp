// The CUDA kernels the NCCL backend launches (kernels/reduce_cuda.h), for the host
// emulation (emu_runtime.h): the same arguments checked the same way, then the CPU
// reference (kernels/reduce_cpu.h, bitwise the kernels' semantics) runs as stream work, so
// it lands in stream order and inside graph captures exactly where the launch would.
#include <array>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/reduce_cpu.h"
#include "kernels/reduce_cuda.h"
#include "tests/emu/emu_runtime.h"

namespace topocoll::kernels {

cudaError_t reduce_cuda(DataType type, ReduceOp op, void* dst, const void* const* srcs, int nsrc,
                        std::size_t count, cudaStream_t stream) {
  if (!is_valid(type) || !is_valid(op) || nsrc < 1 || nsrc > kMaxReduceInputs || !dst || !srcs)
    return cudaErrorInvalidValue;
  if (count == 0) return cudaSuccess;
  const std::size_t bytes = count * datatype_size(type);
  std::array<const void*, kMaxReduceInputs> inputs{};  // by value, as a kernel launch takes them
  for (int i = 0; i < nsrc; ++i) {
    if (!srcs[i]) return cudaErrorInvalidValue;
    emu::check_device_range(srcs[i], bytes, "reduce kernel source");
    inputs[std::size_t(i)] = srcs[i];
  }
  emu::check_device_range(dst, bytes, "reduce kernel destination");
  // Declared when the work runs (at each launch of a captured graph): sources read, the
  // destination written (dst == srcs[0] is both, on one stream: no race with itself).
  emu::enqueue(stream, [=] {
    for (int i = 0; i < nsrc; ++i)
      emu::access(inputs[std::size_t(i)], bytes, false, stream, "reduce kernel source");
    emu::access(dst, bytes, true, stream, "reduce kernel destination");
    reduce_cpu(type, op, dst, inputs.data(), nsrc, count);
  });
  return cudaSuccess;
}

cudaError_t finalize_cuda(DataType type, ReduceOp op, void* dst, std::size_t count, int nranks,
                          cudaStream_t stream) {
  if (!is_valid(type) || !is_valid(op) || !dst || nranks < 1) return cudaErrorInvalidValue;
  if (count == 0 || op != ReduceOp::Avg) return cudaSuccess;
  const std::size_t bytes = count * datatype_size(type);
  emu::check_device_range(dst, bytes, "finalize kernel destination");
  emu::enqueue(stream, [=] {
    emu::access(dst, bytes, true, stream, "finalize kernel destination");
    finalize_cpu(type, op, dst, count, nranks);
  });
  return cudaSuccess;
}

// The batched copy kernel: one piece of stream work for every range (one launch), each
// range's source read and destination written. Counted, so tests can tell one launch from
// one cudaMemcpyAsync per range.
cudaError_t copy_ranges_cuda(const CopyRange* ranges, int n, cudaStream_t stream) {
  if (n < 0 || (n > 0 && !ranges)) return cudaErrorInvalidValue;
  std::vector<CopyRange> copies;
  for (int i = 0; i < n; ++i) {
    if (ranges[i].bytes == 0) continue;
    if (!ranges[i].dst || !ranges[i].src) return cudaErrorInvalidValue;
    emu::check_device_range(ranges[i].src, ranges[i].bytes, "copy kernel source");
    emu::check_device_range(ranges[i].dst, ranges[i].bytes, "copy kernel destination");
    copies.push_back(ranges[i]);
  }
  if (copies.empty()) return cudaSuccess;
  const int launches = int((copies.size() + kMaxCopyRangesPerLaunch - 1) / kMaxCopyRangesPerLaunch);
  for (int l = 0; l < launches; ++l) emu::count_event("copy_ranges launch");
  emu::enqueue(stream, [copies, stream] {
    for (const CopyRange& c : copies) {
      emu::access(c.src, c.bytes, false, stream, "copy kernel source");
      emu::access(c.dst, c.bytes, true, stream, "copy kernel destination");
      std::memcpy(c.dst, c.src, c.bytes);
    }
  });
  return cudaSuccess;
}

cudaError_t avg_premul_cuda(DataType type, void* dst, const void* src, std::size_t count,
                            int nranks, cudaStream_t stream) {
  if (!is_valid(type) || !dst || !src || nranks < 1) return cudaErrorInvalidValue;
  if (count == 0) return cudaSuccess;
  const std::size_t bytes = count * datatype_size(type);
  emu::check_device_range(src, bytes, "avg pre-multiply kernel source");
  emu::check_device_range(dst, bytes, "avg pre-multiply kernel destination");
  emu::enqueue(stream, [=] {
    emu::access(src, bytes, false, stream, "avg pre-multiply kernel source");
    emu::access(dst, bytes, true, stream, "avg pre-multiply kernel destination");
    avg_premul_cpu(type, dst, src, count, nranks);
  });
  return cudaSuccess;
}

}  // namespace topocoll::kernels
