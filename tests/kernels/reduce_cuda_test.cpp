// CUDA kernels against the CPU reference (itself checked against an independent reference in
// reduce_cpu_test.cpp): fresh random data for every type x op x K, sizes from 0 to 1M+3,
// misaligned and aliased pointers, destination poisoned with two different patterns (so an
// element the kernel forgot cannot pass by luck) and guard bytes around it checked. Results
// must be bitwise equal; the only latitude is NaN payloads (any NaN matches any NaN).
// Every case skips when no CUDA device is present.
//
// Every touch of device memory is ordered on the stream the kernels run on (upload, poison,
// download below): the legacy default stream, where cudaMemset and cudaMemcpy run, is not
// ordered against a cudaStreamNonBlocking stream, and on an H100 the poison landed after the
// kernel. The same file also runs on the host emulation's CUDA runtime (tests/emu), whose
// stream-ordering race detector fails any access these helpers leave unordered.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/reduce_cpu.h"
#include "kernels/reduce_cuda.h"
#include "tests/kernels/reference_numerics.h"

namespace topocoll::kernels {
namespace {

using test::random_bits;
using test::same_result;

bool have_device() {
  static const bool ok = [] {
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
  }();
  return ok;
}

#define REQUIRE_DEVICE()                   \
  if (!have_device()) {                    \
    GTEST_SKIP() << "no CUDA device";      \
  }

constexpr std::size_t kGuard = 256;  // poisoned bytes on each side of every destination

// Element counts past what one block of threads covers. On the emulated runtime the kernels
// are the CPU reference and what is checked is stream order and arguments, for which a few
// thousand elements do as well as a million (and keep the emu label quick).
#ifdef TOPOCOLL_EMULATED_CUDA
constexpr std::size_t kLargeCount = 5003, kMediumCount = 4099;
#else
constexpr std::size_t kLargeCount = (std::size_t(1) << 20) + 3, kMediumCount = 65537;
#endif

// Device allocation with guard space; ptr(offset) is the element area shifted by offset bytes.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t bytes) : bytes_(bytes + 2 * kGuard + 16) {
    if (cudaMalloc(&base_, bytes_) != cudaSuccess) base_ = nullptr;
  }
  ~DeviceBuffer() {
    if (base_) cudaFree(base_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  bool ok() const { return base_ != nullptr; }
  char* ptr(std::size_t offset) const { return static_cast<char*>(base_) + kGuard + offset; }
  char* base() const { return static_cast<char*>(base_); }
  std::size_t total() const { return bytes_; }

 private:
  void* base_ = nullptr;
  std::size_t bytes_;
};

// A cudaStreamNonBlocking stream, destroyed with its scope.
struct OwnedStream {
  cudaStream_t stream = nullptr;
  OwnedStream() {
    if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) stream = nullptr;
  }
  ~OwnedStream() {
    if (stream) cudaStreamDestroy(stream);
  }
  bool ok() const { return stream != nullptr; }
};

// Host to device on `stream`. The host bytes may be reused at once: a copy from pageable
// memory returns once they are staged.
::testing::AssertionResult upload(void* dst, const void* src, std::size_t bytes, cudaStream_t stream) {
  const cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream);
  if (e == cudaSuccess) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "upload: " << cudaGetErrorString(e);
}

::testing::AssertionResult poison(void* dst, unsigned char byte, std::size_t bytes, cudaStream_t stream) {
  const cudaError_t e = cudaMemsetAsync(dst, byte, bytes, stream);
  if (e == cudaSuccess) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "poison: " << cudaGetErrorString(e);
}

// Device to host after everything issued on `stream`.
::testing::AssertionResult download(void* dst, const void* src, std::size_t bytes, cudaStream_t stream) {
  cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream);
  if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
  if (e == cudaSuccess) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "download: " << cudaGetErrorString(e);
}

std::vector<char> random_elements(DataType t, std::size_t count, std::mt19937_64& rng) {
  std::vector<char> v(count * datatype_size(t) + 8);
  for (std::size_t i = 0; i < count; ++i) test::store_bits(v.data(), i, t, random_bits(t, rng));
  return v;
}

struct Case {
  DataType type;
  ReduceOp op;
  int nsrc;
  std::size_t count;
  std::size_t dst_offset = 0;                 // bytes
  std::vector<std::size_t> src_offsets;       // bytes, one per source
  int alias = -1;                             // dst is srcs[alias] (then dst_offset is ignored)
  std::string describe() const {
    std::string s = std::string(datatype_name(type)) + " " + std::string(reduce_op_name(op)) +
                    " K=" + std::to_string(nsrc) + " count=" + std::to_string(count) +
                    " dst+" + std::to_string(dst_offset) + " srcs+";
    for (std::size_t o : src_offsets) s += std::to_string(o) + ",";
    if (alias >= 0) s += " in-place on srcs[" + std::to_string(alias) + "]";
    return s;
  }
};

// Runs one case on the device twice (two poison patterns) and compares with the CPU.
void run_case(const Case& c, std::mt19937_64& rng, cudaStream_t stream) {
  SCOPED_TRACE(c.describe());
  const std::size_t elem = datatype_size(c.type);
  const std::size_t bytes = c.count * elem;
  std::vector<std::vector<char>> host;
  std::vector<const void*> host_ptrs;
  for (int j = 0; j < c.nsrc; ++j) host.push_back(random_elements(c.type, c.count, rng));
  for (auto& h : host) host_ptrs.push_back(h.data());

  // CPU reference result.
  std::vector<char> want(bytes + 8);
  reduce_cpu(c.type, c.op, want.data(), host_ptrs.data(), c.nsrc, c.count);
  finalize_cpu(c.type, c.op, want.data(), c.count, c.nsrc);

  std::vector<std::unique_ptr<DeviceBuffer>> dev;
  for (int j = 0; j < c.nsrc; ++j) {
    dev.push_back(std::make_unique<DeviceBuffer>(bytes));
    ASSERT_TRUE(dev.back()->ok());
  }
  DeviceBuffer dst_buf(bytes);
  ASSERT_TRUE(dst_buf.ok());
  const DeviceBuffer& dst_owner = c.alias >= 0 ? *dev[c.alias] : dst_buf;
  const std::size_t dst_offset = c.alias >= 0 ? c.src_offsets[c.alias] : c.dst_offset;
  char* dst = dst_owner.ptr(dst_offset);

  for (unsigned char fill : {0x5A, 0xA5}) {
    std::vector<const void*> srcs;
    for (int j = 0; j < c.nsrc; ++j) {
      // Sources get a poisoned frame too, so an in-place destination's guards are checked.
      ASSERT_TRUE(poison(dev[j]->base(), fill, dev[j]->total(), stream));
      ASSERT_TRUE(upload(dev[j]->ptr(c.src_offsets[j]), host[j].data(), bytes, stream));
      srcs.push_back(dev[j]->ptr(c.src_offsets[j]));
    }
    if (c.alias < 0) {
      ASSERT_TRUE(poison(dst_buf.base(), fill, dst_buf.total(), stream));
    }
    ASSERT_EQ(reduce_cuda(c.type, c.op, dst, srcs.data(), c.nsrc, c.count, stream), cudaSuccess);
    ASSERT_EQ(finalize_cuda(c.type, c.op, dst, c.count, c.nsrc, stream), cudaSuccess);

    std::vector<unsigned char> got(dst_owner.total());
    ASSERT_TRUE(download(got.data(), dst_owner.base(), got.size(), stream));
    const std::size_t first = kGuard + dst_offset;
    int bad = 0;
    for (std::size_t i = 0; i < c.count; ++i) {
      const std::uint64_t g = test::load_bits(got.data() + first, i, c.type);
      const std::uint64_t w = test::load_bits(want.data(), i, c.type);
      if (!same_result(c.type, g, w) && ++bad <= 5)
        ADD_FAILURE() << "poison 0x" << std::hex << int(fill) << ": element " << std::dec << i
                      << " got 0x" << std::hex << g << " want 0x" << w;
    }
    EXPECT_EQ(bad, 0);
    for (std::size_t b = 0; b < got.size(); ++b) {
      if (b >= first && b < first + bytes) continue;
      if (got[b] != fill) {
        ADD_FAILURE() << "byte " << b << " outside the destination was written";
        break;
      }
    }
  }
}

class KernelsReduceCuda : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    if (!have_device()) GTEST_SKIP() << "no CUDA device";
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
  }
  void TearDown() override {
    if (stream_) cudaStreamDestroy(stream_);
  }
  DataType type() const { return static_cast<DataType>(GetParam()); }
  cudaStream_t stream_ = nullptr;
};

TEST_P(KernelsReduceCuda, EveryOpAndInputCountMatchesCpu) {
  std::mt19937_64 rng(1000 + GetParam());
  for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{4095}, kLargeCount})
    for (int nsrc : {1, 2, 3, 8})  // one source: the copy path
      for (int o = 0; o < kNumReduceOps; ++o) {
        Case c{type(), static_cast<ReduceOp>(o), nsrc, count, 0, {}};
        c.src_offsets.assign(nsrc, 0);
        run_case(c, rng, stream_);
        if (HasFatalFailure()) return;
      }
}

TEST_P(KernelsReduceCuda, MisalignedPointers) {
  std::mt19937_64 rng(2000 + GetParam());
  const std::size_t elem = datatype_size(type());
  for (std::size_t count : {std::size_t{7}, std::size_t{4095}, kMediumCount})
    for (std::size_t off = elem; off < 16; off += elem) {
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max}) {
        // Same misalignment everywhere: vector body after a scalar head.
        Case same{type(), op, 3, count, off, {off, off, off}, -1};
        run_case(same, rng, stream_);
        // Different misalignments: the element-wise path.
        Case mixed{type(), op, 3, count, off, {0, (16 - off) % 16, off}, -1};
        run_case(mixed, rng, stream_);
        Case eight{type(), op, 8, count, 0, {}, -1};
        for (int j = 0; j < 8; ++j) eight.src_offsets.push_back((off * j) % 16 / elem * elem);
        run_case(eight, rng, stream_);
        if (HasFatalFailure()) return;
      }
    }
}

TEST_P(KernelsReduceCuda, InPlaceOnAnySource) {
  std::mt19937_64 rng(3000 + GetParam());
  const std::size_t elem = datatype_size(type());
  for (int alias : {0, 1, 2})
    for (std::size_t off : {std::size_t{0}, elem % 16}) {
      Case c{type(), ReduceOp::Sum, 3, kLargeCount / 10 + 1, 0, {off, off, off}, alias};
      run_case(c, rng, stream_);
      Case p{type(), ReduceOp::Prod, 3, 1001, 0, {0, off, 0}, alias};
      run_case(p, rng, stream_);
      Case m{type(), alias == 1 ? ReduceOp::Min : ReduceOp::Max, 3, 4099, 0, {off, off, off}, alias};
      run_case(m, rng, stream_);
      if (HasFatalFailure()) return;
    }
}

TEST_P(KernelsReduceCuda, PremulMatchesCpu) {
  std::mt19937_64 rng(4000 + GetParam());
  const DataType t = type();
  const std::size_t elem = datatype_size(t);
  for (std::size_t count : {std::size_t{1}, std::size_t{4095}, kLargeCount})
    for (std::size_t off : {std::size_t{0}, elem % 16}) {
      SCOPED_TRACE(std::string(datatype_name(t)) + " premul count=" + std::to_string(count));
      const auto host = random_elements(t, count, rng);
      const std::uint64_t scalar = random_bits(t, rng);
      std::vector<char> want(count * elem + 8);
      premul_cpu(t, want.data(), host.data(), count, &scalar);
      DeviceBuffer src(count * elem), dst(count * elem);
      ASSERT_TRUE(src.ok() && dst.ok());
      ASSERT_TRUE(upload(src.ptr(off), host.data(), count * elem, stream_));
      ASSERT_TRUE(poison(dst.base(), 0x5A, dst.total(), stream_));
      ASSERT_EQ(premul_cuda(t, dst.ptr(off), src.ptr(off), count, &scalar, stream_), cudaSuccess);
      std::vector<char> got(count * elem + 8);
      ASSERT_TRUE(download(got.data(), dst.ptr(off), count * elem, stream_));
      int bad = 0;
      for (std::size_t i = 0; i < count; ++i)
        if (!same_result(t, test::load_bits(got.data(), i, t), test::load_bits(want.data(), i, t)))
          ++bad;
      EXPECT_EQ(bad, 0);
    }
}

// Avg's pre-multiply (NCCL's PreMulSum by 1/nranks) is the CPU reference's, bit for bit,
// including the top of each type's range.
TEST_P(KernelsReduceCuda, AvgPremulMatchesCpu) {
  std::mt19937_64 rng(4500 + GetParam());
  const DataType t = type();
  const std::size_t elem = datatype_size(t), count = kMediumCount + 4464;
  for (int nranks : {2, 3, 8, 1000}) {
    SCOPED_TRACE(std::string(datatype_name(t)) + " avg premul nranks=" + std::to_string(nranks));
    const auto host = random_elements(t, count, rng);
    std::vector<char> want(count * elem);
    avg_premul_cpu(t, want.data(), host.data(), count, nranks);
    DeviceBuffer src(count * elem), dst(count * elem);
    ASSERT_TRUE(src.ok() && dst.ok());
    ASSERT_TRUE(upload(src.ptr(0), host.data(), count * elem, stream_));
    ASSERT_TRUE(poison(dst.base(), 0xA5, dst.total(), stream_));  // a skipped element shows
    ASSERT_EQ(avg_premul_cuda(t, dst.ptr(0), src.ptr(0), count, nranks, stream_), cudaSuccess);
    std::vector<char> got(count * elem);
    ASSERT_TRUE(download(got.data(), dst.ptr(0), count * elem, stream_));
    int bad = 0;
    for (std::size_t i = 0; i < count; ++i)
      if (!same_result(t, test::load_bits(got.data(), i, t), test::load_bits(want.data(), i, t)))
        ++bad;
    EXPECT_EQ(bad, 0);
  }
}

// The element-wise kernels where the schedules put them: Avg's pre-multiply and a PreMulSum
// in place (the staged input is the output when the schedule is correct in place) and out of
// place into a poisoned destination, and Avg's finalize (integers divide by the ranks, not
// by the sources a kernel had) on a misaligned destination; all bit for bit the CPU's, and
// nothing outside the elements written.
TEST_P(KernelsReduceCuda, ElementWiseKernelsInPlaceAndMisalignedMatchCpu) {
  std::mt19937_64 rng(6000 + GetParam());
  const DataType t = type();
  const std::size_t elem = datatype_size(t), count = kMediumCount + 7, bytes = count * elem;
  const std::size_t misaligned = elem;  // one element off the 16-byte vector alignment
  const auto check = [&](const DeviceBuffer& buf, std::size_t off, const std::vector<char>& want, unsigned char fill,
                         bool guards_poisoned) {
    std::vector<char> got(buf.total());
    ASSERT_TRUE(download(got.data(), buf.base(), got.size(), stream_));
    int bad = 0;
    for (std::size_t i = 0; i < count; ++i)
      if (!same_result(t, test::load_bits(got.data() + kGuard + off, i, t), test::load_bits(want.data(), i, t)) &&
          ++bad <= 3)
        ADD_FAILURE() << "element " << i;
    EXPECT_EQ(bad, 0);
    if (!guards_poisoned) return;
    for (std::size_t b = 0; b < got.size(); ++b)
      if ((b < kGuard + off || b >= kGuard + off + bytes) && static_cast<unsigned char>(got[b]) != fill) {
        ADD_FAILURE() << "byte " << b << " outside the elements was written";
        break;
      }
  };
  for (unsigned char fill : {0x5A, 0xA5})
    for (std::size_t off : {std::size_t{0}, misaligned}) {
      SCOPED_TRACE(std::string(datatype_name(t)) + " offset " + std::to_string(off) + " poison " + std::to_string(fill));
      const auto host = random_elements(t, count, rng);
      for (const bool in_place : {false, true}) {
        SCOPED_TRACE(in_place ? "in place" : "out of place");
        // Avg's pre-multiply by 1/5.
        std::vector<char> want(bytes + 8);
        avg_premul_cpu(t, want.data(), host.data(), count, 5);
        DeviceBuffer src(bytes), dst(bytes);
        ASSERT_TRUE(src.ok() && dst.ok());
        ASSERT_TRUE(poison(src.base(), fill, src.total(), stream_));
        ASSERT_TRUE(poison(dst.base(), fill, dst.total(), stream_));
        ASSERT_TRUE(upload(src.ptr(off), host.data(), bytes, stream_));
        const DeviceBuffer& out = in_place ? src : dst;
        ASSERT_EQ(avg_premul_cuda(t, out.ptr(off), src.ptr(off), count, 5, stream_), cudaSuccess);
        check(out, off, want, fill, true);
        // A PreMulSum by a random scalar.
        const std::uint64_t scalar = random_bits(t, rng);
        premul_cpu(t, want.data(), host.data(), count, &scalar);
        ASSERT_TRUE(upload(src.ptr(off), host.data(), bytes, stream_));
        ASSERT_EQ(premul_cuda(t, out.ptr(off), src.ptr(off), count, &scalar, stream_), cudaSuccess);
        check(out, off, want, fill, true);
      }
      // Avg's finalize: a sum of 3 sources over 4 ranks (integers divide by the ranks).
      std::vector<char> want(host.begin(), host.end());
      finalize_cpu(t, ReduceOp::Avg, want.data(), count, 4);
      DeviceBuffer buf(bytes);
      ASSERT_TRUE(buf.ok());
      ASSERT_TRUE(poison(buf.base(), fill, buf.total(), stream_));
      ASSERT_TRUE(upload(buf.ptr(off), host.data(), bytes, stream_));
      ASSERT_EQ(finalize_cuda(t, ReduceOp::Avg, buf.ptr(off), count, 4, stream_), cudaSuccess);
      check(buf, off, want, fill, true);
      if (HasFatalFailure()) return;
    }
}

TEST_P(KernelsReduceCuda, FinalizeIsANoOpExceptForAvg) {
  const DataType t = type();
  const std::size_t count = 1000, bytes = count * datatype_size(t);
  std::mt19937_64 rng(5000 + GetParam());
  const auto host = random_elements(t, count, rng);
  DeviceBuffer buf(bytes);
  ASSERT_TRUE(buf.ok());
  ASSERT_TRUE(upload(buf.ptr(0), host.data(), bytes, stream_));
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min})
    ASSERT_EQ(finalize_cuda(t, op, buf.ptr(0), count, 7, stream_), cudaSuccess);
  std::vector<char> got(bytes);
  ASSERT_TRUE(download(got.data(), buf.ptr(0), bytes, stream_));
  EXPECT_EQ(std::memcmp(got.data(), host.data(), bytes), 0);
}

INSTANTIATE_TEST_SUITE_P(Types, KernelsReduceCuda, ::testing::Range(0, kNumDataTypes),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::string(datatype_name(static_cast<DataType>(info.param)));
                         });

// Max/Min on float16, bfloat16 and fp8 give NCCL 2.28's answer bit for bit where NaNs meet:
// the canonical NaN when both are NaN (__hmax/__hmin), whatever their signs and payloads,
// and the number when one is. run_case's comparison lets any NaN match any NaN; this one
// compares bits, so the device's conversions (cvt to half, bfloat16 and fp8, which on sm_90
// is the hardware's) are held to what the CPU reference and docs/kernels.md say.
TEST(KernelsReduceCudaNaN, NarrowMaxMinWhereNaNsMeetIsBitwiseTheCpus) {
  REQUIRE_DEVICE();
  struct Narrow {
    DataType type;
    std::vector<std::uint64_t> nans;
    std::uint64_t one;
  };
  const std::vector<Narrow> narrow = {
      {DataType::Float16, {0x7E00, 0x7FFF, 0x7C01, 0xFE01, 0xFC01, 0xFFFF}, 0x3C00},
      {DataType::Bfloat16, {0x7FC0, 0x7FFF, 0x7F81, 0xFFC1, 0xFF81, 0xFFFF}, 0x3F80},
      {DataType::Fp8E4M3, {0x7F, 0xFF}, 0x38},
      {DataType::Fp8E5M2, {0x7D, 0x7E, 0x7F, 0xFD, 0xFE, 0xFF}, 0x3C},
  };
  OwnedStream stream;
  ASSERT_TRUE(stream.ok());
  for (const Narrow& n : narrow)
    for (ReduceOp op : {ReduceOp::Max, ReduceOp::Min}) {
      SCOPED_TRACE(std::string(datatype_name(n.type)) + " " + std::string(reduce_op_name(op)));
      // Every ordered pair of NaNs, then each NaN against 1 on either side.
      std::vector<std::uint64_t> a, b;
      for (std::uint64_t x : n.nans)
        for (std::uint64_t y : n.nans) a.push_back(x), b.push_back(y);
      for (std::uint64_t x : n.nans) {
        a.push_back(x), b.push_back(n.one);
        a.push_back(n.one), b.push_back(x);
      }
      const std::size_t count = a.size(), elem = datatype_size(n.type), bytes = count * elem;
      std::vector<char> ha(bytes + 8), hb(bytes + 8), want(bytes + 8), got(bytes);
      for (std::size_t i = 0; i < count; ++i) {
        test::store_bits(ha.data(), i, n.type, a[i]);
        test::store_bits(hb.data(), i, n.type, b[i]);
      }
      const void* host_srcs[2] = {ha.data(), hb.data()};
      reduce_cpu(n.type, op, want.data(), host_srcs, 2, count);
      DeviceBuffer da(bytes), db(bytes), dd(bytes);
      ASSERT_TRUE(da.ok() && db.ok() && dd.ok());
      ASSERT_TRUE(upload(da.ptr(0), ha.data(), bytes, stream.stream));
      ASSERT_TRUE(upload(db.ptr(0), hb.data(), bytes, stream.stream));
      const void* srcs[2] = {da.ptr(0), db.ptr(0)};
      ASSERT_EQ(reduce_cuda(n.type, op, dd.ptr(0), srcs, 2, count, stream.stream), cudaSuccess);
      ASSERT_TRUE(download(got.data(), dd.ptr(0), bytes, stream.stream));
      int bad = 0;
      for (std::size_t i = 0; i < count; ++i) {
        const std::uint64_t g = test::load_bits(got.data(), i, n.type), w = test::load_bits(want.data(), i, n.type);
        if (g != w && ++bad <= 5)
          ADD_FAILURE() << "0x" << std::hex << a[i] << " and 0x" << b[i] << ": got 0x" << g << " want 0x" << w;
      }
      EXPECT_EQ(bad, 0);
    }
}

TEST(KernelsReduceCudaApi, RejectsBadArgumentsWithoutLaunching) {
  // Validation happens before any CUDA call, so this runs with or without a device.
  int dummy[4] = {};
  const void* srcs[9] = {dummy, dummy, dummy, dummy, dummy, dummy, dummy, dummy, dummy};
  EXPECT_EQ(reduce_cuda(DataType::Float32, ReduceOp::Sum, dummy, srcs, 0, 4, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(reduce_cuda(DataType::Float32, ReduceOp::Sum, dummy, srcs, 9, 4, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(reduce_cuda(static_cast<DataType>(12), ReduceOp::Sum, dummy, srcs, 2, 4, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(reduce_cuda(DataType::Float32, static_cast<ReduceOp>(5), dummy, srcs, 2, 4, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(reduce_cuda(DataType::Float32, ReduceOp::Sum, nullptr, srcs, 2, 4, nullptr),
            cudaErrorInvalidValue);
  const void* misaligned[2] = {dummy, reinterpret_cast<const char*>(dummy) + 2};
  EXPECT_EQ(reduce_cuda(DataType::Float32, ReduceOp::Sum, dummy, misaligned, 2, 1, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(finalize_cuda(DataType::Float32, ReduceOp::Avg, dummy, 4, 0, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(premul_cuda(DataType::Float32, dummy, dummy, 4, nullptr, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(copy_ranges_cuda(nullptr, 2, nullptr), cudaErrorInvalidValue);
  // count == 0 and empty range lists are no-ops, even with null pointers.
  EXPECT_EQ(reduce_cuda(DataType::Float32, ReduceOp::Sum, nullptr, nullptr, 2, 0, nullptr),
            cudaSuccess);
  EXPECT_EQ(finalize_cuda(DataType::Float32, ReduceOp::Avg, nullptr, 0, 2, nullptr), cudaSuccess);
  EXPECT_EQ(premul_cuda(DataType::Float32, nullptr, nullptr, 0, nullptr, nullptr), cudaSuccess);
  EXPECT_EQ(copy_ranges_cuda(nullptr, 0, nullptr), cudaSuccess);
  const CopyRange empty{nullptr, nullptr, 0};
  EXPECT_EQ(copy_ranges_cuda(&empty, 1, nullptr), cudaSuccess);
}

TEST(KernelsReduceCudaApi, CapturesIntoACudaGraph) {
  // No allocation or synchronisation on the launch path: the calls must be capturable.
  REQUIRE_DEVICE();
  const std::size_t count = 4099;
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  DeviceBuffer a(count * 4), b(count * 4);
  ASSERT_TRUE(a.ok() && b.ok());
  std::vector<float> ha(count), hb(count);
  for (std::size_t i = 0; i < count; ++i) ha[i] = float(i), hb[i] = 0.5f;
  ASSERT_TRUE(upload(a.ptr(0), ha.data(), count * 4, stream));
  ASSERT_TRUE(upload(b.ptr(0), hb.data(), count * 4, stream));
  const void* srcs[2] = {a.ptr(0), b.ptr(0)};
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  EXPECT_EQ(reduce_cuda(DataType::Float32, ReduceOp::Sum, a.ptr(0), srcs, 2, count, stream),
            cudaSuccess);
  // Times 1/2 (avg's pre-multiply), exactly a division by 2.
  EXPECT_EQ(avg_premul_cuda(DataType::Float32, a.ptr(0), a.ptr(0), count, 2, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);  // twice: ((x+.5)/2 + .5)/2
  std::vector<float> got(count);
  ASSERT_TRUE(download(got.data(), a.ptr(0), count * 4, stream));
  for (std::size_t i = 0; i < count; ++i) {
    const float once = (float(i) + 0.5f) / 2.0f;
    ASSERT_EQ(got[i], (once + 0.5f) / 2.0f) << i;
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

TEST(KernelsCopyRangesCuda, CopiesEveryRangeAndNothingElse) {
  REQUIRE_DEVICE();
  OwnedStream owned;
  ASSERT_TRUE(owned.ok());
  const cudaStream_t stream = owned.stream;
  std::mt19937_64 rng(6000);
  const std::size_t sizes[] = {0, 1, 3, 15, 16, 17, 255, 4095, kMediumCount + 6, kLargeCount + 2};
  for (int n : {1, 2, 5, 16, 17, 40}) {
    SCOPED_TRACE("ranges=" + std::to_string(n));
    std::vector<CopyRange> ranges;
    std::vector<std::size_t> src_at, dst_at;
    std::size_t src_total = 0, dst_total = 0;
    for (int i = 0; i < n; ++i) {
      const std::size_t bytes = sizes[rng() % std::size(sizes)];
      src_total += rng() % 16;  // independent misalignment of source and destination
      dst_total += rng() % 16;
      src_at.push_back(src_total);
      dst_at.push_back(dst_total);
      ranges.push_back({nullptr, nullptr, bytes});
      src_total += bytes;
      dst_total += bytes + 1;  // a poisoned gap between destinations
    }
    std::vector<unsigned char> src(src_total);
    for (auto& b : src) b = static_cast<unsigned char>(rng());
    DeviceBuffer dsrc(src_total), ddst(dst_total);
    ASSERT_TRUE(dsrc.ok() && ddst.ok());
    ASSERT_TRUE(upload(dsrc.ptr(0), src.data(), src_total, stream));
    ASSERT_TRUE(poison(ddst.base(), 0xEE, ddst.total(), stream));
    for (int i = 0; i < n; ++i) {
      ranges[i].src = dsrc.ptr(src_at[i]);
      ranges[i].dst = ddst.ptr(dst_at[i]);
    }
    ASSERT_EQ(copy_ranges_cuda(ranges.data(), n, stream), cudaSuccess);
    std::vector<unsigned char> want(ddst.total(), 0xEE);
    for (int i = 0; i < n; ++i)
      std::memcpy(want.data() + kGuard + dst_at[i], src.data() + src_at[i], ranges[i].bytes);
    std::vector<unsigned char> got(ddst.total());
    ASSERT_TRUE(download(got.data(), ddst.base(), got.size(), stream));
    std::size_t first_bad = got.size();
    for (std::size_t b = 0; b < got.size() && first_bad == got.size(); ++b)
      if (got[b] != want[b]) first_bad = b;
    EXPECT_EQ(first_bad, got.size()) << "first differing byte";
  }
}

}  // namespace
}  // namespace topocoll::kernels
