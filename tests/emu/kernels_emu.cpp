// The CUDA kernels the NCCL backend launches (kernels/reduce_cuda.h), for the host
// emulation (emu_runtime.h): the same arguments checked by the same rules
// (kernels/launch_arguments.h), then the CPU
// reference (kernels/reduce_cpu.h, bitwise the kernels' semantics) runs as stream work, so
// it lands in stream order and inside graph captures exactly where the launch would.
#include <array>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/launch_arguments.h"
#include "kernels/reduce_cpu.h"
#include "kernels/reduce_cuda.h"
#include "tests/emu/emu_runtime.h"

namespace topocoll::kernels {
namespace {
cudaError_t result_of(Launch l) { return l == Launch::Nothing ? cudaSuccess : cudaErrorInvalidValue; }

// An element-wise map kernel as stream work: `src` read, `dst` written, then `body`.
template <class Body>
void enqueue_map(const char* what, void* dst, const void* src, std::size_t bytes, cudaStream_t stream,
                 Body body) {
  // Appended, not `std::string(what) + "..."`: GCC 12 at -O2 misreads that as out of bounds.
  const std::string source = std::string(what).append(" source");
  const std::string destination = std::string(what).append(" destination");
  emu::check_device_range(src, bytes, source.c_str());
  emu::check_device_range(dst, bytes, destination.c_str());
  emu::enqueue(stream, [=] {
    emu::access(src, bytes, false, stream, source.c_str());
    emu::access(dst, bytes, true, stream, destination.c_str());
    body();
  });
}
}  // namespace

cudaError_t reduce_cuda(DataType type, ReduceOp op, void* dst, const void* const* srcs, int nsrc,
                        std::size_t count, cudaStream_t stream) {
  if (const Launch l = check_reduce(type, op, dst, srcs, nsrc, count); l != Launch::Run) return result_of(l);
  if (const cudaError_t e = emu::take_injected_failure("reduce_cuda"); e != cudaSuccess) return e;
  const std::size_t bytes = count * datatype_size(type);
  std::array<const void*, kMaxReduceInputs> inputs{};  // by value, as a kernel launch takes them
  for (int i = 0; i < nsrc; ++i) {
    emu::check_device_range(srcs[i], bytes, "reduce kernel source");
    inputs[std::size_t(i)] = srcs[i];
  }
  emu::check_device_range(dst, bytes, "reduce kernel destination");
  // Declared when the work runs (at each launch of a captured graph): sources read, the
  // destination written (dst equal to a source is both, on one stream: no race with itself).
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
  if (const Launch l = check_finalize(type, op, dst, count, nranks); l != Launch::Run) return result_of(l);
  enqueue_map("finalize kernel", dst, dst, count * datatype_size(type), stream,
              [=] { finalize_cpu(type, op, dst, count, nranks); });
  return cudaSuccess;
}

cudaError_t premul_cuda(DataType type, void* dst, const void* src, std::size_t count,
                        const void* host_scalar, cudaStream_t stream) {
  if (const Launch l = check_premul(type, dst, src, count, host_scalar); l != Launch::Run) return result_of(l);
  std::uint64_t scalar = 0;  // read during the call, as the launch takes it
  std::memcpy(&scalar, host_scalar, datatype_size(type));
  enqueue_map("pre-multiply kernel", dst, src, count * datatype_size(type), stream,
              [=] { premul_cpu(type, dst, src, count, &scalar); });
  return cudaSuccess;
}

cudaError_t avg_premul_cuda(DataType type, void* dst, const void* src, std::size_t count,
                            int nranks, cudaStream_t stream) {
  if (const Launch l = check_avg_premul(type, dst, src, count, nranks); l != Launch::Run) return result_of(l);
  enqueue_map("avg pre-multiply kernel", dst, src, count * datatype_size(type), stream,
              [=] { avg_premul_cpu(type, dst, src, count, nranks); });
  return cudaSuccess;
}

// The batched copy kernel: one piece of stream work for every range (one launch), each
// range's source read and destination written. Counted, so tests can tell one launch from
// one cudaMemcpyAsync per range.
cudaError_t copy_ranges_cuda(const CopyRange* ranges, int n, cudaStream_t stream) {
  if (const Launch l = check_copy_ranges(ranges, n); l != Launch::Run) return result_of(l);
  std::vector<CopyRange> copies;
  for (int i = 0; i < n; ++i) {
    if (ranges[i].bytes == 0) continue;
    emu::check_device_range(ranges[i].src, ranges[i].bytes, "copy kernel source");
    emu::check_device_range(ranges[i].dst, ranges[i].bytes, "copy kernel destination");
    copies.push_back(ranges[i]);
  }
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

}  // namespace topocoll::kernels
