// One rank of the interposer's GPU check (perf/gpu/run_all.sh starts N of them, each with
// its own NCCL_HOSTID, under LD_PRELOAD=libnccl-topocoll.so). MPI-free: rank 0 writes
// ncclGetUniqueId to a file, the others wait for it.
//
//   interposer_gpu_check check --rank R --nranks N --id-file F [--device D]
//       allreduce / reduce-scatter / allgather / all-to-all through the NCCL API (so through
//       the interposer when preloaded) against an exact CPU reference: every NCCL type
//       (fp8 reductions must be refused below sm_90, as NCCL refuses them) and op, uneven counts, in and out of place, inside and outside a user group, under CUDA
//       graph capture, and on split sub-communicators (one of them leaving a rank out
//       with NCCL_SPLIT_NOCOLOR). Then the communicator lifecycle:
//       ncclCommShrink without the last rank (N >= 3), a second communicator from
//       ncclCommInitRankScalable (id in F.scalable) finalized then destroyed, and a
//       non-blocking communicator (config.blocking = 0, id in F.nonblocking), which topocoll
//       leaves to NCCL. Exit 0 only if every case matches bit for bit. --max-count C leaves
//       out the larger counts (the host emulation, tests/emu, where every byte crosses a
//       socket).
//   interposer_gpu_check check-all --ndev N [--max-count C]
//       one process, N communicators from ncclCommInitAll (GPUs 0..N-1) driven from one
//       thread as nccl-tests -g N does: every case is one ncclGroupStart/End around the
//       collective on every communicator, then every rank's output is checked. For the host
//       emulation and multi-GPU machines only: on a single GPU NCCL refuses two ranks of one
//       communicator on one device. tests/interposer/run_all_in_one.sh runs it.
//   interposer_gpu_check bench --rank R --nranks N --id-file F [--json OUT]
//       allreduce / reduce-scatter / allgather times through the API (topocoll's decision)
//       and through pnccl* directly (NCCL itself), side by side; rank 0 prints the table.
//   interposer_gpu_check topology --nranks N --out FILE [--gpus-per-host G] [--kind bigraph|nap]
//                                 [--link-gbps G] [--link-latency-us US]
//       writes a BiGraph topology of at least N GPUs on servers s0, s1, ... of G GPUs each
//       (default 1: one process per host, GPU 0; links of 100 Gb/s and 1 us unless given:
//       the net plugin reports its NIC's as NCCL's tuning input), or (--kind nap) a NAP network of N nodes,
//       one GPU per host, in packages of two nodes on a torus (N = 2, 4, 6, 8, 12, 16), and
//       prints every endpoint's "host gpu", the (NCCL_HOSTID, CUDA ordinal) the interposer
//       identifies a rank by.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "topo/generators.h"
#include "topo/topology_json.h"

namespace {

struct Args {
  std::string mode;
  int rank = 0, nranks = 1, device = 0;
  int ndev = 0, gpus_per_host = 1;
  std::string kind = "bigraph";
  int64_t max_count = INT64_MAX;
  std::string id_file, json, out;
  std::optional<double> link_gbps, link_latency_us;  // topology: the BiGraph's links
};

[[noreturn]] void die(const std::string& msg) {
  std::fprintf(stderr, "interposer_gpu_check: %s\n", msg.c_str());
  std::exit(2);
}

// A number for OPTION, or the program ends naming it.
double number_arg(const std::string& option, const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(v)) die(option + " needs a number, not '" + text + "'");
  return v;
}

#define CUDA_OK(x)                                                                     \
  do {                                                                                 \
    cudaError_t e_ = (x);                                                              \
    if (e_ != cudaSuccess) die(std::string(#x) + ": " + cudaGetErrorString(e_));       \
  } while (0)
#define NCCL_OK(x)                                                                     \
  do {                                                                                 \
    ncclResult_t r_ = (x);                                                             \
    if (r_ != ncclSuccess) die(std::string(#x) + ": " + ncclGetErrorString(r_));       \
  } while (0)

Args parse(int argc, char** argv) {
  Args a;
  if (argc < 2) die("usage: interposer_gpu_check check|check-all|bench|topology [options]");
  a.mode = argv[1];
  for (int i = 2; i < argc; ++i) {
    std::string k = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) die("missing value after " + k);
      return argv[++i];
    };
    if (k == "--rank") a.rank = std::atoi(next().c_str());
    else if (k == "--nranks") a.nranks = std::atoi(next().c_str());
    else if (k == "--device") a.device = std::atoi(next().c_str());
    else if (k == "--ndev") a.ndev = std::atoi(next().c_str());
    else if (k == "--gpus-per-host") a.gpus_per_host = std::atoi(next().c_str());
    else if (k == "--kind") a.kind = next();
    else if (k == "--link-gbps") a.link_gbps = number_arg(k, next());
    else if (k == "--link-latency-us") a.link_latency_us = number_arg(k, next());
    else if (k == "--id-file") a.id_file = next();
    else if (k == "--max-count") a.max_count = std::atoll(next().c_str());
    else if (k == "--json") a.json = next();
    else if (k == "--out") a.out = next();
    else die("unknown option " + k);
  }
  return a;
}

// Files of the ids of the communicators the lifecycle cases create after the first one.
std::string scalable_id_file(const Args& a) { return a.id_file + ".scalable"; }
std::string nonblocking_id_file(const Args& a) { return a.id_file + ".nonblocking"; }

// Rank 0 creates an id and publishes it at `path` (written aside, then renamed, so nobody
// reads half of it); the others wait for it.
ncclUniqueId shared_id(const Args& a, const std::string& path) {
  ncclUniqueId id;
  if (a.rank == 0) {
    NCCL_OK(ncclGetUniqueId(&id));
    const std::string tmp = path + ".tmp";
    std::ofstream(tmp, std::ios::binary).write(id.internal, sizeof id.internal);
    std::rename(tmp.c_str(), path.c_str());
    return id;
  }
  for (int waited_ms = 0; waited_ms < 120000; waited_ms += 50) {
    std::ifstream in(path, std::ios::binary);
    if (in && in.read(id.internal, sizeof id.internal)) return id;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  die("no unique id in " + path + " after 120 s");
}

ncclUniqueId bootstrap_id(const Args& a) {
  // The later ids of a previous run in the same place must not be read as this run's: they
  // go before the first id appears, and no other rank gets past the first id without rank 0.
  if (a.rank == 0) {
    std::remove(scalable_id_file(a).c_str());
    std::remove(nonblocking_id_file(a).c_str());
  }
  return shared_id(a, a.id_file);
}

// NCCL's non-blocking protocol: a call on a non-blocking communicator may return
// ncclInProgress; ncclCommGetAsyncError then says when it is done and how it ended.
ncclResult_t settle(ncclComm_t comm, ncclResult_t r) {
  while (r == ncclInProgress) {
    const ncclResult_t q = ncclCommGetAsyncError(comm, &r);
    if (q != ncclSuccess) return q;
    if (r == ncclInProgress) std::this_thread::yield();
  }
  return r;
}

// ---- element types: host encode/decode of exact small values ----------------------------

struct TypeInfo {
  ncclDataType_t type;
  const char* name;
  std::size_t size;
  bool is_signed;
};
const TypeInfo kTypes[] = {
    {ncclFloat32, "float32", 4, true}, {ncclFloat16, "float16", 2, true},
    {ncclBfloat16, "bfloat16", 2, true}, {ncclFloat64, "float64", 8, true},
    {ncclInt32, "int32", 4, true},     {ncclInt64, "int64", 8, true},
    {ncclUint8, "uint8", 1, false},    {ncclInt8, "int8", 1, true},
};
// Every other type NCCL has, checked at the smaller counts (the kernels' own tests cover
// every type at every size): fp8 reductions need sm_90 under NCCL (fp8_reductions_refused).
const TypeInfo kMoreTypes[] = {
    {ncclUint32, "uint32", 4, false},           {ncclUint64, "uint64", 8, false},
    {ncclFloat8e4m3, "fp8_e4m3", 1, true},      {ncclFloat8e5m2, "fp8_e5m2", 1, true},
};

bool is_fp8(ncclDataType_t t) { return t == ncclFloat8e4m3 || t == ncclFloat8e5m2; }

void encode(ncclDataType_t t, double v, void* dst) {
  switch (t) {
    case ncclFloat32: { float x = float(v); std::memcpy(dst, &x, 4); break; }
    case ncclFloat64: std::memcpy(dst, &v, 8); break;
    case ncclFloat16: { __half x = __double2half(v); std::memcpy(dst, &x, 2); break; }
    case ncclBfloat16: { __nv_bfloat16 x = __double2bfloat16(v); std::memcpy(dst, &x, 2); break; }
    case ncclInt32: { int32_t x = int32_t(v); std::memcpy(dst, &x, 4); break; }
    case ncclInt64: { int64_t x = int64_t(v); std::memcpy(dst, &x, 8); break; }
    case ncclUint8: { uint8_t x = uint8_t(v); std::memcpy(dst, &x, 1); break; }
    case ncclInt8: { int8_t x = int8_t(v); std::memcpy(dst, &x, 1); break; }
    case ncclUint32: { uint32_t x = uint32_t(v); std::memcpy(dst, &x, 4); break; }
    case ncclUint64: { uint64_t x = uint64_t(v); std::memcpy(dst, &x, 8); break; }
    // Saturating, as NCCL's own conversions (and topocoll's kernels) round to fp8.
    case ncclFloat8e4m3: { const __nv_fp8_storage_t x = __nv_cvt_double_to_fp8(v, __NV_SATFINITE, __NV_E4M3); std::memcpy(dst, &x, 1); break; }
    case ncclFloat8e5m2: { const __nv_fp8_storage_t x = __nv_cvt_double_to_fp8(v, __NV_SATFINITE, __NV_E5M2); std::memcpy(dst, &x, 1); break; }
    default: die("type not covered");
  }
}

bool is_integer(ncclDataType_t t) {
  return t == ncclInt32 || t == ncclInt64 || t == ncclUint8 || t == ncclInt8 || t == ncclUint32 ||
         t == ncclUint64;
}

// Inputs chosen so every result is exact in every type (sums <= 32, products <= 256 in
// magnitude, avg over a power-of-two rank count): the reference is exact and any
// reduction order gives the same bits, so a mismatch is a real error. fp8 e5m2 holds the
// integers only up to 8 exactly (3 significant bits), so its inputs are -1, 0, 1: every
// partial sum of up to 8 ranks is exact.
// NCCL's avg on floating types multiplies every input by s = round_T(1/nranks) before the
// sum (PreMulSum, src/enqueue.cc). With a power-of-two rank count s is exact and so is
// every sum below; otherwise each element gets one nonzero contribution (from rank
// i mod nranks), so the result round_T(v * s) is exact whatever order a schedule sums in.
bool avg_one_contributor(const TypeInfo& t, ncclRedOp_t op, int nranks) {
  return op == ncclAvg && !is_integer(t.type) && nranks > 0 && (nranks & (nranks - 1)) != 0;
}

double avg_scalar(const TypeInfo& t, int nranks) {
  const float f = float(1.0 / nranks);
  switch (t.type) {
    case ncclFloat64: return 1.0 / nranks;
    case ncclFloat16: return double(__half2float(__float2half(f)));
    case ncclBfloat16: return double(__bfloat162float(__float2bfloat16(f)));
    case ncclFloat8e4m3:
    case ncclFloat8e5m2: {
      const __nv_fp8_interpretation_t kind = t.type == ncclFloat8e4m3 ? __NV_E4M3 : __NV_E5M2;
      const __half_raw h = __nv_cvt_fp8_to_halfraw(__nv_cvt_float_to_fp8(f, __NV_SATFINITE, kind), kind);
      return double(__half2float(__half(h)));
    }
    default: return double(f);
  }
}

double input(const TypeInfo& t, ncclRedOp_t op, int rank, int64_t i, int salt, int nranks = 0) {
  if (avg_one_contributor(t, op, nranks) && rank != int(i % nranks)) return 0.0;
  const int64_t h = (int64_t(rank) * 7 + i * 13 + salt * 5) % 5;
  if (op == ncclProd) {
    if (t.type == ncclInt8 || t.type == ncclUint8) return (h % 2 == 0) ? 1 : (t.is_signed ? -1 : 1);
    return h == 0 ? 2 : (h == 1 && t.is_signed ? -1 : 1);
  }
  if (t.type == ncclFloat8e5m2) return double(h % 3 - 1);
  return t.is_signed ? double(h - 2) : double(h);
}

double reduce_ref(const TypeInfo& t, ncclRedOp_t op, int nranks, int64_t i, int salt,
                  int64_t offset_rank_base = 0) {
  (void)offset_rank_base;
  if (avg_one_contributor(t, op, nranks))
    return input(t, op, int(i % nranks), i, salt, nranks) * avg_scalar(t, nranks);  // encode rounds once
  double acc = input(t, op, 0, i, salt);
  for (int r = 1; r < nranks; ++r) {
    const double v = input(t, op, r, i, salt);
    switch (op) {
      case ncclSum: case ncclAvg: acc += v; break;
      case ncclProd: acc *= v; break;
      case ncclMax: acc = std::max(acc, v); break;
      case ncclMin: acc = std::min(acc, v); break;
      default: break;
    }
  }
  if (op == ncclAvg) acc = is_integer(t.type) ? std::trunc(acc / nranks) : acc / nranks;
  return acc;
}

const char* op_name(ncclRedOp_t op) {
  static const char* names[] = {"sum", "prod", "max", "min", "avg"};
  return names[int(op)];
}

// ---- one checked call --------------------------------------------------------------------

enum class Coll { AllReduce, ReduceScatter, AllGather, AllToAll };
const char* coll_name(Coll c) {
  static const char* n[] = {"allreduce", "reducescatter", "allgather", "alltoall"};
  return n[int(c)];
}

struct Case {
  Coll coll;
  const TypeInfo* type;
  ncclRedOp_t op;
  int64_t count;
  bool in_place;
};

struct Buffers {
  void* send = nullptr;
  void* recv = nullptr;
  void* base = nullptr;  // allocation
  std::vector<char> input;  // what `send` was filled with
  std::vector<char> expected;
  std::size_t recv_bytes = 0;
};

struct Checker {
  int rank, nranks;
  ncclComm_t comm;
  cudaStream_t stream;
  int failures = 0, passed = 0;
  bool nonblocking = false;  // `comm` follows NCCL's non-blocking protocol (settle)
  // The communicator has a GPU below sm_90: NCCL 2.28 refuses its fp8 reductions with
  // ncclInvalidArgument (src/enqueue.cc, taskAppend), and so must NCCL under topocoll,
  // whatever route a call of that size takes.
  bool fp8_reductions_refused = false;

  bool refused(const Case& c) const {
    return fp8_reductions_refused && is_fp8(c.type->type) && c.count > 0 &&
           (c.coll == Coll::AllReduce || c.coll == Coll::ReduceScatter);
  }

  std::size_t in_elems(const Case& c) const {
    return c.coll == Coll::AllReduce || c.coll == Coll::AllGather ? c.count : c.count * nranks;
  }
  std::size_t out_elems(const Case& c) const {
    return c.coll == Coll::AllReduce || c.coll == Coll::ReduceScatter ? c.count : c.count * nranks;
  }

  // Allocates and fills the call's buffers (salt distinguishes calls of one group).
  Buffers prepare(const Case& c, int salt) {
    Buffers b;
    const std::size_t es = c.type->size;
    const std::size_t in_n = in_elems(c), out_n = out_elems(c);
    const std::size_t bytes = (c.in_place ? std::max(in_n, out_n) : in_n + out_n) * es + 256;
    CUDA_OK(cudaMalloc(&b.base, bytes));
    CUDA_OK(cudaMemset(b.base, 0xA5, bytes));
    char* base = static_cast<char*>(b.base);
    if (!c.in_place) {
      b.send = base;
      b.recv = base + (in_n * es + 255) / 256 * 256;
    } else if (c.coll == Coll::AllReduce) {
      b.send = b.recv = base;
    } else if (c.coll == Coll::ReduceScatter) {
      b.send = base;
      b.recv = base + std::size_t(rank) * c.count * es;
    } else {  // allgather
      b.recv = base;
      b.send = base + std::size_t(rank) * c.count * es;
    }
    std::vector<char> host(in_n * es);
    for (std::size_t i = 0; i < in_n; ++i) encode(c.type->type, input(*c.type, c.op, rank, int64_t(i), salt, nranks), &host[i * es]);
    if (c.coll == Coll::AllToAll)  // block p of rank r's input goes to rank p
      for (std::size_t i = 0; i < in_n; ++i)
        encode(c.type->type, double((rank * 3 + int64_t(i)) % 100), &host[i * es]);
    CUDA_OK(cudaMemcpy(b.send, host.data(), host.size(), cudaMemcpyHostToDevice));
    // cudaMemset and cudaMemcpy run on the legacy stream, which the non-blocking streams
    // the calls use do not wait for, and may return before they are done.
    CUDA_OK(cudaDeviceSynchronize());
    b.input = std::move(host);
    b.recv_bytes = out_n * es;
    b.expected.resize(b.recv_bytes);
    for (std::size_t i = 0; i < out_n; ++i) {
      double v = 0;
      switch (c.coll) {
        case Coll::AllReduce: v = reduce_ref(*c.type, c.op, nranks, int64_t(i), salt); break;
        case Coll::ReduceScatter: v = reduce_ref(*c.type, c.op, nranks, int64_t(rank) * c.count + int64_t(i), salt); break;
        case Coll::AllGather: {
          const int src = int(i / std::size_t(c.count));
          v = input(*c.type, c.op, src, int64_t(i % std::size_t(c.count)), salt, nranks);
          break;
        }
        case Coll::AllToAll: {
          const int src = int(i / std::size_t(c.count));
          v = double((src * 3 + int64_t(rank) * c.count + int64_t(i % std::size_t(c.count))) % 100);
          break;
        }
      }
      encode(c.type->type, v, &b.expected[i * es]);
    }
    return b;
  }

  ncclResult_t issue(const Case& c, const Buffers& b, ncclComm_t on) {
    switch (c.coll) {
      case Coll::AllReduce: return ncclAllReduce(b.send, b.recv, c.count, c.type->type, c.op, on, stream);
      case Coll::ReduceScatter: return ncclReduceScatter(b.send, b.recv, c.count, c.type->type, c.op, on, stream);
      case Coll::AllGather: return ncclAllGather(b.send, b.recv, c.count, c.type->type, on, stream);
      case Coll::AllToAll: return ncclAlltoAll(b.send, b.recv, c.count, c.type->type, on, stream);
    }
    return ncclInvalidArgument;
  }

  void verify(const std::string& label, const Case& c, Buffers& b) {
    std::vector<char> got(b.recv_bytes);
    CUDA_OK(cudaMemcpy(got.data(), b.recv, got.size(), cudaMemcpyDeviceToHost));
    CUDA_OK(cudaFree(b.base));
    const std::size_t es = c.type->size;
    for (std::size_t i = 0; i < got.size(); i += es)
      if (std::memcmp(&got[i], &b.expected[i], es) != 0) {
        ++failures;
        std::printf("FAIL rank %d %s %s %s %s count %lld %s: element %zu differs\n", rank, label.c_str(),
                    coll_name(c.coll), c.type->name, op_name(c.op), (long long)c.count,
                    c.in_place ? "in-place" : "out-of-place", i / es);
        return;
      }
    ++passed;
  }

  void single(const Case& c) {
    Buffers b = prepare(c, 0);
    if (refused(c)) {
      const ncclResult_t r = nonblocking ? settle(comm, issue(c, b, comm)) : issue(c, b, comm);
      CUDA_OK(cudaFree(b.base));
      if (r == ncclInvalidArgument) {
        ++passed;
      } else {
        ++failures;
        std::printf("FAIL rank %d %s %s %s count %lld: NCCL refuses fp8 reductions below sm_90 "
                    "(ncclInvalidArgument), the call returned \"%s\"\n", rank, coll_name(c.coll),
                    c.type->name, op_name(c.op), (long long)c.count, ncclGetErrorString(r));
      }
      return;
    }
    if (nonblocking) NCCL_OK(settle(comm, issue(c, b, comm)));
    else NCCL_OK(issue(c, b, comm));
    CUDA_OK(cudaStreamSynchronize(stream));
    verify(nonblocking ? "non-blocking" : "single", c, b);
  }

  void grouped(const std::vector<Case>& cases) {
    std::vector<Buffers> bufs;
    for (std::size_t k = 0; k < cases.size(); ++k) bufs.push_back(prepare(cases[k], int(k) + 1));
    NCCL_OK(ncclGroupStart());
    for (std::size_t k = 0; k < cases.size(); ++k) NCCL_OK(issue(cases[k], bufs[k], comm));
    NCCL_OK(ncclGroupEnd());
    CUDA_OK(cudaStreamSynchronize(stream));
    for (std::size_t k = 0; k < cases.size(); ++k) verify("group", cases[k], bufs[k]);
  }

  // Before a replay: the output cleared, then the input restored (in place, the output
  // overlaps the input, which the previous run overwrote).
  void reset(const Buffers& b) {
    CUDA_OK(cudaMemset(b.recv, 0, b.recv_bytes));
    CUDA_OK(cudaMemcpy(b.send, b.input.data(), b.input.size(), cudaMemcpyHostToDevice));
    CUDA_OK(cudaDeviceSynchronize());  // as in prepare()
  }

  // Captured once, replayed twice, the buffers reset before each replay.
  void graph(const Case& c) {
    Buffers b = prepare(c, 0);
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    NCCL_OK(issue(c, b, comm));
    CUDA_OK(cudaStreamEndCapture(stream, &graph));
    CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
    reset(b);
    CUDA_OK(cudaGraphLaunch(exec, stream));
    CUDA_OK(cudaStreamSynchronize(stream));
    std::vector<char> first(b.recv_bytes);
    CUDA_OK(cudaMemcpy(first.data(), b.recv, first.size(), cudaMemcpyDeviceToHost));
    if (std::memcmp(first.data(), b.expected.data(), first.size()) != 0) {
      ++failures;
      std::printf("FAIL rank %d graph %s first replay\n", rank, coll_name(c.coll));
    }
    reset(b);
    CUDA_OK(cudaGraphLaunch(exec, stream));
    CUDA_OK(cudaStreamSynchronize(stream));
    CUDA_OK(cudaGraphExecDestroy(exec));
    CUDA_OK(cudaGraphDestroy(graph));
    verify("graph", c, b);
  }
};

// Adds `sub`'s counts to `total`.
void merge(Checker& total, const Checker& sub) {
  total.failures += sub.failures;
  total.passed += sub.passed;
}

// Served collectives on one communicator, issued round-robin on three streams with no
// synchronisation between them, each call with buffers of its own. Legal for a user: NCCL
// orders nothing across streams, so whatever the calls share inside topocoll (the
// communicator's device scratch) must be ordered by topocoll itself. On the emulation, the
// stream-ordering race detector fails the process if it is not.
void multi_stream_cases(const Args& a, ncclComm_t comm, Checker& ck) {
  const auto at_most = [&](int64_t c) { return std::min(c, a.max_count); };
  const std::vector<Case> cases = {
      {Coll::AllReduce, &kTypes[0], ncclSum, at_most(65536 + 13), false},
      {Coll::ReduceScatter, &kTypes[1], ncclMax, at_most(4099), false},
      {Coll::AllReduce, &kTypes[4], ncclMin, at_most(1031), true},
      {Coll::AllGather, &kTypes[0], ncclSum, at_most(777), false},
      {Coll::AllReduce, &kTypes[3], ncclAvg, at_most(65536 + 13), false},
      {Coll::ReduceScatter, &kTypes[0], ncclSum, at_most(65536 + 13), true},
  };
  std::vector<cudaStream_t> streams(3);
  for (cudaStream_t& s : streams) CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  std::vector<Checker> on;
  for (std::size_t k = 0; k < cases.size(); ++k)
    on.push_back(Checker{ck.rank, ck.nranks, comm, streams[k % streams.size()]});
  // Every buffer is prepared before anything is issued: prepare() waits for the whole device,
  // which would otherwise let the first calls finish before the group below starts.
  std::vector<Buffers> bufs, more;
  for (std::size_t k = 0; k < cases.size(); ++k) bufs.push_back(on[k].prepare(cases[k], int(k) + 1));
  for (std::size_t k = 0; k < 3; ++k) more.push_back(on[k].prepare(cases[k], int(k) + 11));
  for (std::size_t k = 0; k < cases.size(); ++k) NCCL_OK(on[k].issue(cases[k], bufs[k], comm));
  // Then a user group whose calls are on two streams (NCCL joins them), followed at once by
  // a call on the third.
  NCCL_OK(ncclGroupStart());
  for (std::size_t k = 0; k < 2; ++k) NCCL_OK(on[k].issue(cases[k], more[k], comm));
  NCCL_OK(ncclGroupEnd());
  NCCL_OK(on[2].issue(cases[2], more[2], comm));
  for (cudaStream_t s : streams) CUDA_OK(cudaStreamSynchronize(s));
  for (std::size_t k = 0; k < cases.size(); ++k) on[k].verify("multi-stream", cases[k], bufs[k]);
  for (std::size_t k = 0; k < 3; ++k) on[k].verify("multi-stream group", cases[k], more[k]);
  // NCCL runs a group as if it were posted on every stream of its calls: a copy queued on the
  // second call's stream after the group reads the first call's output whole, though nothing
  // but the group orders the two streams. The first stream is held back 50 ms first (a host
  // function), so on a GPU a copy that does not wait for it reads the poison; on the
  // emulation, the race detector fails the process if topocoll ran the first call on its own
  // stream only.
  {
    Buffers first = on[0].prepare(cases[0], 21), second = on[1].prepare(cases[1], 22);
    void* copy = nullptr;
    CUDA_OK(cudaMalloc(&copy, first.recv_bytes));
    CUDA_OK(cudaLaunchHostFunc(streams[0], [](void*) { std::this_thread::sleep_for(std::chrono::milliseconds(50)); },
                               nullptr));
    NCCL_OK(ncclGroupStart());
    NCCL_OK(on[0].issue(cases[0], first, comm));
    NCCL_OK(on[1].issue(cases[1], second, comm));
    NCCL_OK(ncclGroupEnd());
    CUDA_OK(cudaMemcpyAsync(copy, first.recv, first.recv_bytes, cudaMemcpyDeviceToDevice, streams[1]));
    std::vector<char> got(first.recv_bytes);
    CUDA_OK(cudaMemcpyAsync(got.data(), copy, got.size(), cudaMemcpyDeviceToHost, streams[1]));
    CUDA_OK(cudaStreamSynchronize(streams[1]));
    if (std::memcmp(got.data(), first.expected.data(), got.size()) != 0) {
      ++ck.failures;
      std::printf("FAIL rank %d multi-stream group: the first call's output, read on the second call's stream "
                  "after the group, is not whole\n", ck.rank);
    } else {
      ++ck.passed;
    }
    for (cudaStream_t s : streams) CUDA_OK(cudaStreamSynchronize(s));
    CUDA_OK(cudaFree(copy));
    on[0].verify("multi-stream group joined", cases[0], first);
    on[1].verify("multi-stream group joined", cases[1], second);
  }
  // ... and every call of the group starts after the work queued before it on any of the
  // group's streams: one call's input is written on the other call's stream, held back
  // 50 ms, just before the group (the first call's, then the second's). Whichever way
  // topocoll routes each call (run by NCCL on the communicator, queued, moved to the
  // topology-ordered split), it reads its input whole.
  for (const std::size_t staged : {0, 1}) {
    const std::size_t other = 1 - staged;
    Buffers b[2] = {on[0].prepare(cases[0], 31), on[1].prepare(cases[1], 32)};
    Buffers& input_late = b[staged];
    void* held = nullptr;
    CUDA_OK(cudaMalloc(&held, input_late.input.size()));
    CUDA_OK(cudaMemcpy(held, input_late.input.data(), input_late.input.size(), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemset(input_late.send, 0xA5, input_late.input.size()));
    CUDA_OK(cudaDeviceSynchronize());  // the legacy stream's work, as in prepare()
    CUDA_OK(cudaLaunchHostFunc(streams[other], [](void*) { std::this_thread::sleep_for(std::chrono::milliseconds(50)); },
                               nullptr));
    CUDA_OK(cudaMemcpyAsync(input_late.send, held, input_late.input.size(), cudaMemcpyDeviceToDevice,
                            streams[other]));
    NCCL_OK(ncclGroupStart());
    NCCL_OK(on[0].issue(cases[0], b[0], comm));
    NCCL_OK(on[1].issue(cases[1], b[1], comm));
    NCCL_OK(ncclGroupEnd());
    for (cudaStream_t s : streams) CUDA_OK(cudaStreamSynchronize(s));
    CUDA_OK(cudaFree(held));
    const std::string label = "multi-stream group, call " + std::to_string(staged) +
                              "'s input written before it on another stream";
    on[0].verify(label, cases[0], b[0]);
    on[1].verify(label, cases[1], b[1]);
  }
  for (const Checker& c : on) merge(ck, c);
  for (cudaStream_t s : streams) CUDA_OK(cudaStreamDestroy(s));
}

// NCCL refuses a group whose calls on one communicator mix a captured stream with an
// uncaptured one (enqueue.cc ncclPlannerSetCapturingGraph): the call that mixes them fails
// with ncclInvalidUsage, the group's end fails with it and launches nothing, the user's
// capture stays valid, and the communicator serves the next call. topocoll takes calls out
// of NCCL's group, where NCCL would not see them together, so it checks this itself.
void mixed_capture_group_case(const Args& a, ncclComm_t comm, Checker& ck) {
  cudaStream_t captured = nullptr, eager = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&captured, cudaStreamNonBlocking));
  CUDA_OK(cudaStreamCreateWithFlags(&eager, cudaStreamNonBlocking));
  Checker on_captured{ck.rank, ck.nranks, comm, captured}, on_eager{ck.rank, ck.nranks, comm, eager};
  const Case c{Coll::AllReduce, &kTypes[0], ncclSum, std::min<int64_t>(65536 + 13, a.max_count), false};
  Buffers first = on_captured.prepare(c, 51), second = on_eager.prepare(c, 52);
  CUDA_OK(cudaStreamBeginCapture(captured, cudaStreamCaptureModeRelaxed));
  NCCL_OK(ncclGroupStart());
  const ncclResult_t in_capture = on_captured.issue(c, first, comm);
  const ncclResult_t mixed = on_eager.issue(c, second, comm);
  const ncclResult_t end = ncclGroupEnd();
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(captured, &graph);
  if (graph) CUDA_OK(cudaGraphDestroy(graph));
  if (in_capture != ncclSuccess || mixed != ncclInvalidUsage || end != ncclInvalidUsage || ended != cudaSuccess) {
    ++ck.failures;
    std::printf("FAIL rank %d mixed-capture group: calls %s, %s, group end %s (want success, then invalid usage "
                "twice), end of capture %s\n", ck.rank, ncclGetErrorString(in_capture), ncclGetErrorString(mixed),
                ncclGetErrorString(end), cudaGetErrorString(ended));
  } else {
    ++ck.passed;
  }
  NCCL_OK(on_eager.issue(c, second, comm));
  CUDA_OK(cudaStreamSynchronize(eager));
  on_eager.verify("after a refused mixed-capture group", c, second);
  // NCCL looks at no stream of an empty collective (enqueue.cc taskAppend drops it first):
  // one on the eager stream beside a captured call is no mix, and the captured call runs at
  // the graph's launch.
  CUDA_OK(cudaStreamBeginCapture(captured, cudaStreamCaptureModeRelaxed));
  NCCL_OK(ncclGroupStart());
  NCCL_OK(on_captured.issue(c, first, comm));
  NCCL_OK(ncclAllReduce(first.send, first.recv, 0, c.type->type, c.op, comm, eager));
  NCCL_OK(ncclGroupEnd());
  CUDA_OK(cudaStreamEndCapture(captured, &graph));
  cudaGraphExec_t exec = nullptr;
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  CUDA_OK(cudaGraphLaunch(exec, captured));
  CUDA_OK(cudaStreamSynchronize(captured));
  CUDA_OK(cudaGraphExecDestroy(exec));
  CUDA_OK(cudaGraphDestroy(graph));
  on_captured.verify("a captured call beside an empty one on another stream", c, first);
  merge(ck, on_eager);
  merge(ck, on_captured);
  CUDA_OK(cudaStreamDestroy(eager));
  CUDA_OK(cudaStreamDestroy(captured));
}

// Communicators made and ended the other ways NCCL offers, each checked like the first.
void lifecycle_cases(const Args& a, ncclComm_t comm, cudaStream_t stream, Checker& ck) {
  const auto at_most = [&](int64_t c) { return std::min(c, a.max_count); };

  // sendbuff == recvbuff on every rank for allgather and reduce-scatter: in place on rank 0,
  // overlapping (NCCL: undefined data) on the others. The route may not depend on a rank's
  // own pointers (rank 0 served, the others forwarded to NCCL: a hang), so it completes,
  // and the communicator still computes right afterwards.
  {
    const std::size_t count = std::size_t(at_most(4099));
    void* both = nullptr;
    CUDA_OK(cudaMalloc(&both, count * std::size_t(a.nranks) * sizeof(float)));
    CUDA_OK(cudaMemsetAsync(both, 0, count * std::size_t(a.nranks) * sizeof(float), stream));
    NCCL_OK(ncclAllGather(both, both, count, ncclFloat32, comm, stream));
    NCCL_OK(ncclReduceScatter(both, both, count, ncclFloat32, ncclSum, comm, stream));
    CUDA_OK(cudaStreamSynchronize(stream));
    CUDA_OK(cudaFree(both));
    ck.single({Coll::AllReduce, &kTypes[0], ncclSum, at_most(65536 + 13), false});
  }

  // ncclCommShrink without the last rank. NCCL's rule: only the remaining ranks call it
  // (the excluded one does not), and with NCCL_SHRINK_DEFAULT none of the parent's
  // operations may be outstanding.
  if (a.nranks >= 3) {
    CUDA_OK(cudaStreamSynchronize(stream));
    if (a.rank != a.nranks - 1) {
      int excluded = a.nranks - 1;
      ncclComm_t shrunk;
      NCCL_OK(ncclCommShrink(comm, &excluded, 1, &shrunk, nullptr, NCCL_SHRINK_DEFAULT));
      int sr = -1, sn = 0;
      NCCL_OK(ncclCommUserRank(shrunk, &sr));
      NCCL_OK(ncclCommCount(shrunk, &sn));
      if (sr != a.rank || sn != a.nranks - 1) {  // the ranks before the gap keep their numbers
        ++ck.failures;
        std::printf("FAIL rank %d shrink: rank %d of %d in the shrunk communicator, expected %d of %d\n",
                    a.rank, sr, sn, a.rank, a.nranks - 1);
      } else {
        Checker sub{sr, sn, shrunk, stream};
        sub.single({Coll::AllReduce, &kTypes[0], ncclSum, at_most(65536 + 13), false});
        sub.single({Coll::AllGather, &kTypes[4], ncclSum, 1031, true});
        merge(ck, sub);
      }
      NCCL_OK(ncclCommDestroy(shrunk));
    }
  }

  // A second communicator of the same ranks from ncclCommInitRankScalable (its own id),
  // finalized then destroyed.
  {
    ncclUniqueId id = shared_id(a, scalable_id_file(a));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    ncclComm_t second;
    NCCL_OK(ncclCommInitRankScalable(&second, a.nranks, a.rank, 1, &id, &config));
    Checker sub{a.rank, a.nranks, second, stream};
    sub.single({Coll::AllReduce, &kTypes[4], ncclMax, 1031, true});
    sub.single({Coll::ReduceScatter, &kTypes[0], ncclSum, at_most(65536 + 13), false});
    merge(ck, sub);
    NCCL_OK(ncclCommFinalize(second));
    NCCL_OK(ncclCommDestroy(second));
  }

  // A non-blocking communicator: topocoll does not serve it, so this checks the fallback
  // to NCCL. Every call may return ncclInProgress (settle).
  {
    ncclUniqueId id = shared_id(a, nonblocking_id_file(a));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t nb = nullptr;
    const ncclResult_t init = ncclCommInitRankConfig(&nb, a.nranks, id, a.rank, &config);
    NCCL_OK(settle(nb, init));  // nb is set before the init completes
    Checker sub{a.rank, a.nranks, nb, stream};
    sub.nonblocking = true;
    sub.single({Coll::AllReduce, &kTypes[1], ncclSum, at_most(65536 + 13), false});
    sub.single({Coll::AllReduce, &kTypes[7], ncclMin, 7, true});
    merge(ck, sub);
    NCCL_OK(settle(nb, ncclCommFinalize(nb)));
    NCCL_OK(ncclCommDestroy(nb));
  }
}

// This rank's communicator (unique id through the id file) and a non-blocking stream on
// its device.
std::pair<ncclComm_t, cudaStream_t> join_communicator(const Args& a) {
  CUDA_OK(cudaSetDevice(a.device));
  const ncclUniqueId id = bootstrap_id(a);
  ncclComm_t comm;
  NCCL_OK(ncclCommInitRank(&comm, a.nranks, id, a.rank));
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  return {comm, stream};
}

// Whether NCCL refuses fp8 reductions on a communicator of `device`: below sm_90. Every
// rank of a run shares the one GPU (or one kind), so this rank's answer is the
// communicator's minimum, which NCCL decides by.
bool fp8_reductions_refused(int device) {
  int major = 0;
  CUDA_OK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  return major < 9;
}

int run_check(const Args& a) {
  const auto [comm, stream] = join_communicator(a);
  Checker ck{a.rank, a.nranks, comm, stream};
  ck.fp8_reductions_refused = fp8_reductions_refused(a.device);

  std::vector<int64_t> counts;
  for (int64_t c : {int64_t(1), int64_t(7), int64_t(1031), int64_t(65536 + 13), int64_t((1 << 20) + 5)})
    if (c <= a.max_count) counts.push_back(c);
  // The fixed-size cases below, scaled down the same way.
  const auto at_most = [&](int64_t c) { return std::min(c, a.max_count); };
  const ncclRedOp_t ops[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};
  for (const TypeInfo& t : kTypes)
    for (ncclRedOp_t op : ops)
      for (int64_t count : counts) {
        if (count > 100000 && op != ncclSum && op != ncclAvg) continue;  // keep the run short
        for (bool in_place : {false, true}) {
          ck.single({Coll::AllReduce, &t, op, count, in_place});
          ck.single({Coll::ReduceScatter, &t, op, count, in_place});
        }
      }
  for (const TypeInfo& t : kTypes)
    for (int64_t count : counts)
      for (bool in_place : {false, true}) ck.single({Coll::AllGather, &t, ncclSum, count, in_place});
  for (const TypeInfo* t : {&kTypes[0], &kTypes[1], &kTypes[6]})
    for (int64_t count : counts) ck.single({Coll::AllToAll, t, ncclSum, count, false});
  // Every other NCCL type, at two counts.
  for (const TypeInfo& t : kMoreTypes)
    for (const int64_t count : {at_most(7), at_most(1031)}) {
      for (ncclRedOp_t op : ops)
        for (bool in_place : {false, true}) {
          ck.single({Coll::AllReduce, &t, op, count, in_place});
          ck.single({Coll::ReduceScatter, &t, op, count, in_place});
        }
      for (bool in_place : {false, true}) ck.single({Coll::AllGather, &t, ncclSum, count, in_place});
      ck.single({Coll::AllToAll, &t, ncclSum, count, false});
    }

  // User groups: three collectives (different types, ops, in/out of place) queued together.
  ck.grouped({{Coll::AllReduce, &kTypes[0], ncclSum, at_most(1 << 20), false},
              {Coll::ReduceScatter, &kTypes[1], ncclMax, 4099, true},
              {Coll::AllGather, &kTypes[4], ncclSum, 777, false}});
  ck.grouped({{Coll::AllReduce, &kTypes[2], ncclAvg, at_most(33333), true},
              {Coll::AllReduce, &kTypes[5], ncclMin, 5, false},
              {Coll::AllToAll, &kTypes[0], ncclSum, 1000, false}});

  // CUDA graph capture.
  ck.graph({Coll::AllReduce, &kTypes[0], ncclSum, at_most((1 << 20) + 5), false});
  ck.graph({Coll::ReduceScatter, &kTypes[1], ncclAvg, at_most(65536 + 13), true});
  ck.graph({Coll::AllGather, &kTypes[2], ncclSum, 1031, false});

  // Split sub-communicators get their own placement.
  if (a.nranks >= 4) {
    ncclComm_t half;
    NCCL_OK(ncclCommSplit(comm, a.rank % 2, a.rank, &half, nullptr));
    int hr = 0, hn = 0;
    NCCL_OK(ncclCommUserRank(half, &hr));
    NCCL_OK(ncclCommCount(half, &hn));
    Checker sub{hr, hn, half, stream};
    sub.single({Coll::AllReduce, &kTypes[0], ncclSum, at_most((1 << 18) + 3), false});
    sub.single({Coll::AllGather, &kTypes[0], ncclSum, 999, true});
    merge(ck, sub);
    NCCL_OK(ncclCommDestroy(half));
  }
  // A split inside a user group on even ranks, outside one on odd ranks: NCCL writes the
  // child's handle only at the group's end, and topocoll's init of the child (an exchange on
  // every rank) must happen on both kinds of rank, or the ones outside wait forever.
  if (a.nranks >= 2) {
    ncclComm_t grouped = nullptr;
    const bool in_group = a.rank % 2 == 0;
    if (in_group) NCCL_OK(ncclGroupStart());
    NCCL_OK(ncclCommSplit(comm, 0, a.rank, &grouped, nullptr));
    if (in_group) NCCL_OK(ncclGroupEnd());
    if (!grouped) {
      ++ck.failures;
      std::printf("FAIL rank %d split %s a group: no communicator\n", a.rank, in_group ? "inside" : "outside");
    } else {
      Checker sub{a.rank, a.nranks, grouped, stream};
      sub.single({Coll::AllReduce, &kTypes[0], ncclSum, at_most((1 << 18) + 3), true});
      sub.single({Coll::ReduceScatter, &kTypes[2], ncclSum, 1031, false});
      merge(ck, sub);
      NCCL_OK(ncclCommDestroy(grouped));
    }
  }
  // A split that leaves one rank out (NCCL_SPLIT_NOCOLOR: it gets no communicator, as
  // PyTorch's new_group does for non-members), keys reversing the order.
  if (a.nranks >= 3) {
    const bool member = a.rank != a.nranks - 1;
    ncclComm_t part = nullptr;
    NCCL_OK(ncclCommSplit(comm, member ? 0 : NCCL_SPLIT_NOCOLOR, a.nranks - a.rank, &part, nullptr));
    if (member != (part != nullptr)) {
      ++ck.failures;
      std::printf("FAIL rank %d split with NCCL_SPLIT_NOCOLOR: %s\n", a.rank,
                  member ? "a member got no communicator" : "a non-member got one");
    } else if (part) {
      int pr = 0, pn = 0;
      NCCL_OK(ncclCommUserRank(part, &pr));
      NCCL_OK(ncclCommCount(part, &pn));
      if (pn != a.nranks - 1 || pr != a.nranks - 2 - a.rank) {
        ++ck.failures;
        std::printf("FAIL rank %d split with NCCL_SPLIT_NOCOLOR: rank %d of %d\n", a.rank, pr, pn);
      } else {
        Checker sub{pr, pn, part, stream};
        sub.single({Coll::AllReduce, &kTypes[4], ncclMax, 1031, false});
        sub.single({Coll::ReduceScatter, &kTypes[0], ncclSum, at_most(65536 + 13), true});
        merge(ck, sub);
      }
      NCCL_OK(ncclCommDestroy(part));
    }
  }

  multi_stream_cases(a, comm, ck);
  mixed_capture_group_case(a, comm, ck);
  lifecycle_cases(a, comm, stream, ck);

  CUDA_OK(cudaStreamDestroy(stream));
  NCCL_OK(ncclCommDestroy(comm));
  std::printf("rank %d/%d: %d cases passed, %d failed\n", a.rank, a.nranks, ck.passed, ck.failures);
  return ck.failures == 0 ? 0 : 1;
}

// ---- one process, N communicators (ncclCommInitAll) ---------------------------------------

// The N ranks of one ncclCommInitAll clique, driven from this thread.
struct Clique {
  std::vector<Checker> ranks;  // rank i: communicator i, its own stream, on GPU i

  // One group: every case on every communicator, then every rank's outputs checked. Each
  // rank's buffers are allocated and filled on its own GPU. Issued communicator by
  // communicator (as nccl-tests), or with `case_major` case by case across communicators:
  // NCCL accepts both orders in a group.
  void run(const std::vector<Case>& cases, bool case_major = false) {
    const int n = int(ranks.size());
    std::vector<std::vector<Buffers>> bufs(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
      CUDA_OK(cudaSetDevice(i));
      for (std::size_t k = 0; k < cases.size(); ++k)
        bufs[std::size_t(i)].push_back(ranks[std::size_t(i)].prepare(cases[k], cases.size() > 1 ? int(k) + 1 : 0));
    }
    NCCL_OK(ncclGroupStart());
    const std::size_t calls = std::size_t(n) * cases.size();
    for (std::size_t c = 0; c < calls; ++c) {
      const std::size_t i = case_major ? c % std::size_t(n) : c / cases.size();
      const std::size_t k = case_major ? c / std::size_t(n) : c % cases.size();
      NCCL_OK(ranks[i].issue(cases[k], bufs[i][k], ranks[i].comm));
    }
    NCCL_OK(ncclGroupEnd());
    for (int i = 0; i < n; ++i) {
      CUDA_OK(cudaSetDevice(i));
      CUDA_OK(cudaStreamSynchronize(ranks[std::size_t(i)].stream));
    }
    for (int i = 0; i < n; ++i) {
      CUDA_OK(cudaSetDevice(i));
      for (std::size_t k = 0; k < cases.size(); ++k)
        ranks[std::size_t(i)].verify(cases.size() > 1 ? "all-in-one group" : "all-in-one", cases[k],
                                     bufs[std::size_t(i)][k]);
    }
  }
};

int run_check_all(const Args& a) {
  const int n = a.ndev;
  int devices = 0;
  CUDA_OK(cudaGetDeviceCount(&devices));
  if (n < 1 || n > devices)
    die("check-all: --ndev " + std::to_string(n) + " must be in 1.." + std::to_string(devices) +
        " (the GPUs CUDA sees)");
  std::vector<ncclComm_t> comms(static_cast<std::size_t>(n));
  std::vector<int> devlist(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) devlist[std::size_t(i)] = i;
  NCCL_OK(ncclCommInitAll(comms.data(), n, devlist.data()));
  Clique clique;
  for (int i = 0; i < n; ++i) {
    CUDA_OK(cudaSetDevice(i));
    cudaStream_t stream;
    CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    clique.ranks.push_back({i, n, comms[std::size_t(i)], stream});
  }

  std::vector<int64_t> counts;
  for (int64_t c : {int64_t(1), int64_t(7), int64_t(1031), int64_t(65536 + 13), int64_t((1 << 20) + 5)})
    if (c <= a.max_count) counts.push_back(c);
  const auto at_most = [&](int64_t c) { return std::min(c, a.max_count); };
  const ncclRedOp_t ops[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};
  for (const TypeInfo& t : kTypes) {
    for (ncclRedOp_t op : ops)
      for (int64_t count : {int64_t(7), int64_t(1031)})
        for (bool in_place : {false, true}) clique.run({{Coll::AllReduce, &t, op, count, in_place}});
    for (int64_t count : counts)
      for (bool in_place : {false, true}) clique.run({{Coll::AllReduce, &t, ncclSum, count, in_place}});
  }
  for (const TypeInfo* t : {&kTypes[0], &kTypes[2], &kTypes[4], &kTypes[6]})
    for (ncclRedOp_t op : ops)
      for (int64_t count : {int64_t(1), int64_t(7), int64_t(1031)})
        for (bool in_place : {false, true}) clique.run({{Coll::ReduceScatter, t, op, count, in_place}});
  for (const TypeInfo* t : {&kTypes[0], &kTypes[1], &kTypes[3], &kTypes[7]})
    for (int64_t count : counts)
      for (bool in_place : {false, true}) clique.run({{Coll::AllGather, t, ncclSum, count, in_place}});
  for (const TypeInfo* t : {&kTypes[0], &kTypes[1], &kTypes[6]})
    for (int64_t count : counts) clique.run({{Coll::AllToAll, t, ncclSum, count, false}});
  // Two different collectives per communicator in one group, in both issue orders.
  for (bool case_major : {false, true}) {
    clique.run({{Coll::AllReduce, &kTypes[0], ncclSum, at_most(65536 + 13), false},
                {Coll::AllGather, &kTypes[4], ncclSum, 777, true}}, case_major);
    clique.run({{Coll::ReduceScatter, &kTypes[1], ncclMax, 1031, true},
                {Coll::AllToAll, &kTypes[0], ncclSum, 1000, false}}, case_major);
    clique.run({{Coll::AllReduce, &kTypes[2], ncclAvg, at_most(33333), true},
                {Coll::AllReduce, &kTypes[5], ncclMin, 5, false}}, case_major);
  }

  int passed = 0, failed = 0;
  for (int i = 0; i < n; ++i) {
    Checker& r = clique.ranks[std::size_t(i)];
    passed += r.passed;
    failed += r.failures;
    CUDA_OK(cudaSetDevice(i));
    CUDA_OK(cudaStreamDestroy(r.stream));
    NCCL_OK(ncclCommDestroy(r.comm));
  }
  std::printf("check-all %d ranks in one process: %d cases passed, %d failed\n", n, passed, failed);
  return failed == 0 ? 0 : 1;
}

// ---- benchmark ---------------------------------------------------------------------------

int run_bench(const Args& a) {
  const auto [comm, stream] = join_communicator(a);
  const std::size_t max_bytes = std::size_t(64) << 20;
  void *send, *recv;
  CUDA_OK(cudaMalloc(&send, max_bytes * std::size_t(a.nranks)));
  CUDA_OK(cudaMalloc(&recv, max_bytes * std::size_t(a.nranks)));
  CUDA_OK(cudaMemset(send, 0, max_bytes * std::size_t(a.nranks)));
  CUDA_OK(cudaDeviceSynchronize());  // the memset is on the legacy stream
  cudaEvent_t t0, t1;
  CUDA_OK(cudaEventCreate(&t0));
  CUDA_OK(cudaEventCreate(&t1));

  using Call = std::function<ncclResult_t(std::size_t count)>;
  struct Variant { const char* coll; const char* path; Call call; };
  std::vector<Variant> variants = {
      {"allreduce", "topocoll", [&](std::size_t n) { return ncclAllReduce(send, recv, n, ncclFloat32, ncclSum, comm, stream); }},
      {"allreduce", "nccl", [&](std::size_t n) { return pncclAllReduce(send, recv, n, ncclFloat32, ncclSum, comm, stream); }},
      {"reducescatter", "topocoll", [&](std::size_t n) { return ncclReduceScatter(send, recv, n / a.nranks, ncclFloat32, ncclSum, comm, stream); }},
      {"reducescatter", "nccl", [&](std::size_t n) { return pncclReduceScatter(send, recv, n / a.nranks, ncclFloat32, ncclSum, comm, stream); }},
      {"allgather", "topocoll", [&](std::size_t n) { return ncclAllGather(send, recv, n / a.nranks, ncclFloat32, comm, stream); }},
      {"allgather", "nccl", [&](std::size_t n) { return pncclAllGather(send, recv, n / a.nranks, ncclFloat32, comm, stream); }},
  };
  FILE* json = (a.rank == 0 && !a.json.empty()) ? std::fopen(a.json.c_str(), "w") : nullptr;
  if (json) std::fprintf(json, "[\n");
  bool first_row = true;
  if (a.rank == 0)
    std::printf("%-14s %-9s %12s %12s %10s %10s\n", "collective", "path", "size(B)", "time(us)", "algbw", "busbw");
  for (const Variant& v : variants) {
    for (std::size_t bytes = 1024; bytes <= max_bytes; bytes *= 4) {
      const std::size_t count = std::max<std::size_t>(bytes / 4 / a.nranks * a.nranks, a.nranks);
      // Several processes share one GPU by time slicing: keep the counts small.
      const int warmup = 2, iters = bytes >= (std::size_t(16) << 20) ? 3 : 8;
      for (int i = 0; i < warmup; ++i) NCCL_OK(v.call(count));
      std::vector<float> times;
      for (int rep = 0; rep < 3; ++rep) {
        CUDA_OK(cudaEventRecord(t0, stream));
        for (int i = 0; i < iters; ++i) NCCL_OK(v.call(count));
        CUDA_OK(cudaEventRecord(t1, stream));
        CUDA_OK(cudaEventSynchronize(t1));
        float ms = 0;
        CUDA_OK(cudaEventElapsedTime(&ms, t0, t1));
        times.push_back(ms * 1000.f / float(iters));
      }
      std::sort(times.begin(), times.end());
      const double us = times[times.size() / 2];
      const double size = double(count) * 4;
      const double algbw = size / us / 1e3;
      const double factor = std::string(v.coll) == "allreduce" ? 2.0 * (a.nranks - 1) / a.nranks
                                                               : double(a.nranks - 1) / a.nranks;
      if (a.rank == 0) {
        std::printf("%-14s %-9s %12.0f %12.1f %10.3f %10.3f\n", v.coll, v.path, size, us, algbw, algbw * factor);
        if (json) {
          std::fprintf(json, "%s  {\"collective\": \"%s\", \"path\": \"%s\", \"nranks\": %d, \"bytes\": %.0f, "
                       "\"time_us\": %.2f, \"algbw\": %.4f, \"busbw\": %.4f}",
                       first_row ? "" : ",\n", v.coll, v.path, a.nranks, size, us, algbw, algbw * factor);
          first_row = false;
        }
      }
    }
  }
  if (json) {
    std::fprintf(json, "\n]\n");
    std::fclose(json);
  }
  CUDA_OK(cudaFree(send));
  CUDA_OK(cudaFree(recv));
  NCCL_OK(ncclCommDestroy(comm));
  return 0;
}

// NAP: packages of two nodes (two local switches) on a 2-D torus, one GPU per host, so
// every process is one node: the package-local log-step and fully connected schedules and
// the rings across packages all have more than one package and more than one node to span.
topocoll::topo::Topology nap_topology(int nranks) {
  if (nranks < 2 || nranks % 2 != 0 || nranks > 16) die("topology: --kind nap needs an even --nranks in 2..16");
  topocoll::topo::NapShape shape;
  shape.nodes_per_package = 2;
  shape.local_switches = 2;
  shape.packages = nranks / 2;
  const int p = shape.packages;
  shape.torus = p == 1 ? std::vector<int>{1, 1} : p % 2 == 0 && p > 2 ? std::vector<int>{2, p / 2}
                                                                      : std::vector<int>{p, 1};
  return topocoll::topo::generate_nap(shape);
}

int write_topology(const Args& a) {
  if (a.kind == "nap") {
    if (a.link_gbps || a.link_latency_us) die("topology: --link-gbps and --link-latency-us are for --kind bigraph");
    const auto topology = nap_topology(a.nranks);
    std::ofstream(a.out) << topocoll::topo::topology_to_json(topology).dump(2) << "\n";
    for (const auto& e : topology.endpoints()) std::printf("%s %d\n", e.host.c_str(), e.gpu);
    return 0;
  }
  if (a.kind != "bigraph") die("topology: --kind must be bigraph or nap, not " + a.kind);
  // Servers of --gpus-per-host GPUs: one GPU each when every process is its own host
  // (run_ranks.sh), all GPUs of one server for a one-process clique (run_all_in_one.sh).
  if (a.nranks < 1) die("topology: --nranks must be at least 1");
  topocoll::topo::BiGraphShape shape;
  shape.gpus_per_server = a.gpus_per_host;
  if (a.link_gbps) shape.link_gbps = *a.link_gbps;
  if (a.link_latency_us) shape.link_latency_us = *a.link_latency_us;
  if (a.nranks <= 2) { shape.switches_per_group = 1; shape.endpoints_per_switch = 1; }
  else if (a.nranks <= 4) { shape.switches_per_group = 1; shape.endpoints_per_switch = 2; }
  else { shape.switches_per_group = 2; shape.endpoints_per_switch = a.nranks <= 8 ? 2 : 4; }
  if (a.nranks > 2 * shape.switches_per_group * shape.endpoints_per_switch) die("topology: at most 16 ranks");
  if (a.gpus_per_host < 1 || a.gpus_per_host > 16) die("topology: --gpus-per-host must be in 1..16");
  // Whole servers: more endpoints per switch until the servers fill the BiGraph exactly
  // (3 GPUs per host: 6 endpoints).
  while (2 * shape.switches_per_group * shape.endpoints_per_switch % a.gpus_per_host != 0)
    ++shape.endpoints_per_switch;
  topocoll::topo::Topology topology;
  try {
    topology = topocoll::topo::generate_bigraph(shape);
  } catch (const std::exception& e) {
    die(std::string("topology: ") + e.what());
  }
  std::ofstream(a.out) << topocoll::topo::topology_to_json(topology).dump(2) << "\n";
  for (const auto& e : topology.endpoints()) std::printf("%s %d\n", e.host.c_str(), e.gpu);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  if (a.mode == "topology") return write_topology(a);
  if (a.mode == "check") return run_check(a);
  if (a.mode == "check-all") return run_check_all(a);
  if (a.mode == "bench") return run_bench(a);
  die("unknown mode " + a.mode);
}
