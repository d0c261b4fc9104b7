// Reduce-kernel bandwidth against the device's own device-to-device copy, in one run.
//
// Bytes moved per operation: copy = 2 x size (read + write); reduce with K inputs =
// (K + 1) x size (K reads + 1 write), size being one array. "% of copy" compares each reduce's
// GB/s with the cudaMemcpyAsync copy of the same array size. Every measurement rotates
// through enough buffer sets that the working set is several times the L2 cache, times a batch
// of launches between two CUDA events, and reports the median of the repeats.
//
//   kernel_bench [--min-bytes N] [--max-bytes N] [--repeats N] [--json FILE] [--device N]
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernels/reduce_cuda.h"

namespace {

using topocoll::kernels::CopyRange;
using topocoll::kernels::DataType;
using topocoll::kernels::ReduceOp;

#define CHECK_CUDA(call)                                                                   \
  do {                                                                                     \
    const cudaError_t e_ = (call);                                                         \
    if (e_ != cudaSuccess) {                                                               \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,                   \
                   cudaGetErrorString(e_));                                                \
      std::exit(1);                                                                        \
    }                                                                                      \
  } while (0)

struct Options {
  std::size_t min_bytes = std::size_t{1} << 20;
  std::size_t max_bytes = std::size_t{4} << 30;
  int repeats = 15;
  int device = 0;
  std::string json;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "kernel_bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--min-bytes") o.min_bytes = std::stoull(value());
    else if (a == "--max-bytes") o.max_bytes = std::stoull(value());
    else if (a == "--repeats") o.repeats = std::max(1, std::stoi(value()));
    else if (a == "--device") o.device = std::stoi(value());
    else if (a == "--json") o.json = value();
    else {
      std::fprintf(stderr,
                   "usage: kernel_bench [--min-bytes N] [--max-bytes N] [--repeats N] "
                   "[--json FILE] [--device N]\n");
      std::exit(a == "--help" || a == "-h" ? 0 : 2);
    }
  }
  return o;
}

// Several sets of equally sized device arrays; each launch uses the next set.
class BufferSets {
 public:
  BufferSets(int arrays, std::size_t bytes, int sets) : arrays_(arrays) {
    for (int i = 0; i < arrays * sets; ++i) {
      void* p = nullptr;
      CHECK_CUDA(cudaMalloc(&p, bytes));
      // 0x3C bytes are small finite values in float32, bfloat16 and float16 alike.
      CHECK_CUDA(cudaMemset(p, 0x3C, bytes));
      ptrs_.push_back(p);
    }
    // The memsets ran on the legacy stream, which the benchmark's stream does not wait for.
    CHECK_CUDA(cudaDeviceSynchronize());
  }
  ~BufferSets() {
    for (void* p : ptrs_) cudaFree(p);
  }
  BufferSets(const BufferSets&) = delete;
  BufferSets& operator=(const BufferSets&) = delete;
  int sets() const { return static_cast<int>(ptrs_.size()) / arrays_; }
  void* at(int set, int array) const { return ptrs_[set * arrays_ + array]; }

 private:
  int arrays_;
  std::vector<void*> ptrs_;
};

// Median seconds per launch of op(set), batching launches so each timed span is >= ~2 ms.
template <class Op>
double time_per_launch(Op op, int nsets, int repeats, cudaStream_t stream) {
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  int next = 0;
  auto batch = [&](int n) {
    CHECK_CUDA(cudaEventRecord(start, stream));
    for (int i = 0; i < n; ++i) {
      op(next);
      next = (next + 1) % nsets;
    }
    CHECK_CUDA(cudaEventRecord(stop, stream));
    CHECK_CUDA(cudaEventSynchronize(stop));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
    return ms * 1e-3 / n;
  };
  batch(std::max(3, nsets));  // warm-up: first-touch, occupancy queries, clocks
  const double estimate = batch(10);
  const int per_batch = static_cast<int>(std::clamp(2e-3 / std::max(estimate, 1e-7), 1.0, 2000.0));
  std::vector<double> t;
  for (int r = 0; r < repeats; ++r) t.push_back(batch(per_batch));
  std::sort(t.begin(), t.end());
  CHECK_CUDA(cudaEventDestroy(start));
  CHECK_CUDA(cudaEventDestroy(stop));
  return t[t.size() / 2];
}

struct Row {
  std::string kind, dtype;
  int nsrc = 0;
  std::size_t bytes = 0;
  double seconds = 0, gbps = 0, pct_of_copy = 0;
};

std::string human(std::size_t bytes) {
  char buf[32];
  if (bytes >= (std::size_t{1} << 30)) std::snprintf(buf, sizeof buf, "%zu GiB", bytes >> 30);
  else std::snprintf(buf, sizeof buf, "%zu MiB", bytes >> 20);
  return buf;
}

// A benchmark of a wrong kernel is worthless: compare the last output of set 0 (first and last
// 64 KiB) with reduce_cpu on the same inputs.
bool output_matches_cpu(const BufferSets& buf, DataType type, int nsrc, std::size_t count) {
  CHECK_CUDA(cudaDeviceSynchronize());
  const std::size_t elem = topocoll::kernels::datatype_size(type);
  const std::size_t window = std::min<std::size_t>(count, (64 << 10) / elem);
  for (std::size_t first : {std::size_t{0}, count - window}) {
    std::vector<std::vector<char>> in(nsrc, std::vector<char>(window * elem));
    std::vector<const void*> ptrs;
    for (int j = 0; j < nsrc; ++j) {
      CHECK_CUDA(cudaMemcpy(in[j].data(), static_cast<const char*>(buf.at(0, j)) + first * elem,
                            window * elem, cudaMemcpyDeviceToHost));
      ptrs.push_back(in[j].data());
    }
    std::vector<char> want(window * elem), got(window * elem);
    topocoll::kernels::reduce_cpu(type, ReduceOp::Sum, want.data(), ptrs.data(), nsrc, window);
    CHECK_CUDA(cudaMemcpy(got.data(), static_cast<const char*>(buf.at(0, nsrc)) + first * elem,
                          window * elem, cudaMemcpyDeviceToHost));
    if (want != got) return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse(argc, argv);
  CHECK_CUDA(cudaSetDevice(opt.device));
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, opt.device));
  int runtime = 0, driver = 0;
  CHECK_CUDA(cudaRuntimeGetVersion(&runtime));
  CHECK_CUDA(cudaDriverGetVersion(&driver));
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  // Enough rotation that the working set is >= 4x L2: repeated launches must come from HBM.
  const std::size_t l2 = static_cast<std::size_t>(std::max(prop.l2CacheSize, 1 << 20));

  std::printf("device: %s (%d SMs, L2 %zu MiB), CUDA runtime %d, driver %d\n", prop.name,
              prop.multiProcessorCount, l2 >> 20, runtime, driver);
  std::printf("%-10s %-10s %-9s %3s %12s %10s %9s\n", "size", "kind", "dtype", "K", "time_us",
              "GB/s", "%copy");

  struct Variant {
    DataType type;
    int nsrc;
  };
  const Variant variants[] = {{DataType::Float32, 2},  {DataType::Bfloat16, 2},
                              {DataType::Float16, 2},  {DataType::Float32, 8},
                              {DataType::Bfloat16, 8}, {DataType::Float16, 8}};
  std::vector<Row> rows;
  for (std::size_t bytes = opt.min_bytes; bytes <= opt.max_bytes; bytes *= 2) {
    std::size_t free_mem = 0, total_mem = 0;
    CHECK_CUDA(cudaMemGetInfo(&free_mem, &total_mem));
    auto sets_for = [&](int arrays) -> int {
      const std::size_t per_set = static_cast<std::size_t>(arrays) * bytes;
      const int wanted = static_cast<int>(std::clamp<std::size_t>((4 * l2 + per_set - 1) / per_set, 1, 64));
      const int fit = static_cast<int>(static_cast<double>(free_mem) * 0.85 / per_set);
      return std::min(wanted, fit);  // 0: does not fit at all
    };

    // Baseline: device-to-device copy, bytes read + written.
    double copy_gbps = 0;
    if (const int sets = sets_for(2); sets > 0) {
      BufferSets buf(2, bytes, sets);
      const double s = time_per_launch(
          [&](int i) {
            CHECK_CUDA(cudaMemcpyAsync(buf.at(i, 1), buf.at(i, 0), bytes,
                                       cudaMemcpyDeviceToDevice, stream));
          },
          sets, opt.repeats, stream);
      copy_gbps = 2.0 * bytes / s / 1e9;
      rows.push_back({"copy", "bytes", 1, bytes, s, copy_gbps, 100.0});
      // The multi-range copy kernel on the same bytes split into 4 ranges.
      const double k = time_per_launch(
          [&](int i) {
            CopyRange r[4];
            const std::size_t q = bytes / 4;
            for (int j = 0; j < 4; ++j)
              r[j] = {static_cast<char*>(buf.at(i, 1)) + j * q,
                      static_cast<const char*>(buf.at(i, 0)) + j * q, j == 3 ? bytes - 3 * q : q};
            CHECK_CUDA(topocoll::kernels::copy_ranges_cuda(r, 4, stream));
          },
          sets, opt.repeats, stream);
      rows.push_back({"copy_ranges", "bytes", 4, bytes, k, 2.0 * bytes / k / 1e9,
                      100.0 * (2.0 * bytes / k / 1e9) / copy_gbps});
    } else {
      std::printf("%-10s skipped: not enough device memory\n", human(bytes).c_str());
      break;
    }
    for (const Variant& v : variants) {
      const int sets = sets_for(v.nsrc + 1);
      if (sets == 0) continue;
      BufferSets buf(v.nsrc + 1, bytes, sets);
      const std::size_t count = bytes / topocoll::kernels::datatype_size(v.type);
      const double s = time_per_launch(
          [&](int i) {
            const void* srcs[topocoll::kernels::kMaxReduceInputs];
            for (int j = 0; j < v.nsrc; ++j) srcs[j] = buf.at(i, j);
            CHECK_CUDA(topocoll::kernels::reduce_cuda(v.type, ReduceOp::Sum, buf.at(i, v.nsrc),
                                                      srcs, v.nsrc, count, stream));
          },
          sets, opt.repeats, stream);
      if (!output_matches_cpu(buf, v.type, v.nsrc, count)) {
        std::fprintf(stderr, "kernel_bench: %s K=%d %s: GPU result differs from reduce_cpu\n",
                     std::string(topocoll::kernels::datatype_name(v.type)).c_str(), v.nsrc,
                     human(bytes).c_str());
        return 1;
      }
      const double gbps = (v.nsrc + 1.0) * bytes / s / 1e9;
      rows.push_back({"reduce_sum", std::string(topocoll::kernels::datatype_name(v.type)), v.nsrc,
                      bytes, s, gbps, 100.0 * gbps / copy_gbps});
    }
    for (const Row& r : rows)
      if (r.bytes == bytes)
        std::printf("%-10s %-11s %-9s %3d %12.2f %10.1f %8.1f%%\n", human(bytes).c_str(),
                    r.kind.c_str(), r.dtype.c_str(), r.nsrc, r.seconds * 1e6, r.gbps,
                    r.pct_of_copy);
    std::fflush(stdout);
  }

  if (!opt.json.empty()) {
    nlohmann::json j;
    const std::time_t now = std::time(nullptr);
    char date[32];
    std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    j["device"] = prop.name;
    j["sm_count"] = prop.multiProcessorCount;
    j["l2_bytes"] = l2;
    j["cuda_runtime"] = runtime;
    j["cuda_driver"] = driver;
    j["date"] = date;
    j["repeats"] = opt.repeats;
    j["bytes_moved"] = "copy: 2 x size; reduce: (K + 1) x size";
    for (const Row& r : rows)
      j["results"].push_back({{"kind", r.kind},
                              {"dtype", r.dtype},
                              {"nsrc", r.nsrc},
                              {"bytes", r.bytes},
                              {"time_us", r.seconds * 1e6},
                              {"gbps", r.gbps},
                              {"pct_of_copy", r.pct_of_copy}});
    std::ofstream out(opt.json);
    out << j.dump(2) << "\n";
    if (!out) {
      std::fprintf(stderr, "kernel_bench: cannot write %s\n", opt.json.c_str());
      return 1;
    }
  }
  cudaStreamDestroy(stream);
  return 0;
}
