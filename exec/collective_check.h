// Verifiable collective data (what nccl-tests' -c does): per-rank inputs for any
// datatype/op, the exact expected result, and buffers laid out in or out of place the NCCL
// way. Used by the tests, `topocoll bench` and `topocoll demo` to check every result.
//
// "Exact" data makes every partial reduction exact whatever the order a schedule reduces
// in, so one reference (ranks reduced in rank order by the CPU reference op) is bitwise
// right for every schedule: small integers whose partial sums stay within the type's exact
// integer range (integers wrap, which is order-free too), products of +-1 with a few +-2,
// any values for max/min. "Random" data is arbitrary finite values: only comparisons
// across ranks (and data movement) are exact then.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "exec/engine.h"
#include "kernels/datatype.h"
#include "kernels/narrow_float.h"
#include "kernels/reduce_cpu.h"
#include "sched/schedule.h"

namespace topocoll::exec {


enum class CheckData { Exact, Random };

// memcpy that accepts the null data() of empty vectors (count 0 is a normal case).
inline void copy_bytes(void* dst, const void* src, std::size_t n) {
  if (n > 0) std::memcpy(dst, src, n);
}

// Largest integer magnitude M such that every integer in [-M, M] is exact in the type.
inline int64_t exact_integer_limit(kernels::DataType t) {
  switch (t) {
    case kernels::DataType::Float16: return 2048;
    case kernels::DataType::Bfloat16: return 256;
    case kernels::DataType::Fp8E4M3: return 16;
    case kernels::DataType::Fp8E5M2: return 8;
    case kernels::DataType::Float32: return int64_t(1) << 24;
    case kernels::DataType::Float64: return int64_t(1) << 53;
    default: return INT64_MAX;  // integers wrap exactly
  }
}

// Stores the number v (an exact small integer or a finite value) as one element.
inline void store_element(kernels::DataType t, void* dst, double v) {
  switch (t) {
    case kernels::DataType::Int8: { int8_t x = int8_t(int64_t(v)); std::memcpy(dst, &x, 1); break; }
    case kernels::DataType::Uint8: { uint8_t x = uint8_t(int64_t(v)); std::memcpy(dst, &x, 1); break; }
    case kernels::DataType::Int32: { int32_t x = int32_t(int64_t(v)); std::memcpy(dst, &x, 4); break; }
    case kernels::DataType::Uint32: { uint32_t x = uint32_t(int64_t(v)); std::memcpy(dst, &x, 4); break; }
    case kernels::DataType::Int64: { int64_t x = int64_t(v); std::memcpy(dst, &x, 8); break; }
    case kernels::DataType::Uint64: { uint64_t x = uint64_t(int64_t(v)); std::memcpy(dst, &x, 8); break; }
    case kernels::DataType::Float16: { uint16_t x = kernels::float_to_half(float(v)); std::memcpy(dst, &x, 2); break; }
    case kernels::DataType::Bfloat16: { uint16_t x = kernels::float_to_bf16(float(v)); std::memcpy(dst, &x, 2); break; }
    case kernels::DataType::Fp8E4M3: { uint8_t x = kernels::float_to_fp8_e4m3(float(v)); std::memcpy(dst, &x, 1); break; }
    case kernels::DataType::Fp8E5M2: { uint8_t x = kernels::float_to_fp8_e5m2(float(v)); std::memcpy(dst, &x, 1); break; }
    case kernels::DataType::Float32: { float x = float(v); std::memcpy(dst, &x, 4); break; }
    case kernels::DataType::Float64: { std::memcpy(dst, &v, 8); break; }
  }
}

// Value of element i of rank r's contribution (exact data).
inline double exact_value(kernels::DataType t, kernels::ReduceOp op, int nranks, int r, int64_t i) {
  const int64_t limit = exact_integer_limit(t);
  // At most `nz` ranks contribute a "large" value to any one element, so partial sums
  // (products) of any subset stay exact.
  const int64_t m = std::min<int64_t>(3, limit);
  // Floating avg pre-multiplies by 1/nranks (kernels/avg_scalar.h), rounding each product:
  // with one large contribution per element the sum is exact in any order.
  const int64_t nz = op == kernels::ReduceOp::Avg && kernels::is_floating(t)
                         ? 1
                         : std::max<int64_t>(1, std::min<int64_t>(nranks, limit / m));
  const bool large = (i * 7 + r) % nranks < nz;
  const int64_t h = (i * 2654435761LL + r * 40503LL) & 0xffff;
  const int sign = (h & 1) ? -1 : 1;
  switch (op) {
    case kernels::ReduceOp::Sum:
    case kernels::ReduceOp::Avg:
      return large ? double(sign * (1 + (h >> 1) % m)) : 0.0;
    case kernels::ReduceOp::Prod:
      // at most min(nz, 6) factors of 2: 2^6 = 64 fits every type, fp8 included
      return sign * ((large && (i * 7 + r) % nranks < 6) ? 2.0 : 1.0);
    case kernels::ReduceOp::Max:
    case kernels::ReduceOp::Min:
      return double(int64_t((h >> 1) % (2 * m + 1)) - m);
  }
  return 0;
}

struct CollectiveCase {
  sched::Collective collective = sched::Collective::AllReduce;
  kernels::DataType dtype = kernels::DataType::Float32;
  kernels::ReduceOp op = kernels::ReduceOp::Sum;
  int nranks = 1;
  int64_t count = 0;  // NCCL's count argument
  bool in_place = false;
  CheckData data = CheckData::Exact;
  uint64_t seed = 1;

  std::size_t elem() const { return kernels::datatype_size(dtype); }
  // Per rank, in elements.
  int64_t input_elems() const {
    switch (collective) {
      case sched::Collective::AllReduce: return count;
      case sched::Collective::ReduceScatter: return count * nranks;
      case sched::Collective::AllGather: return count;
      case sched::Collective::AllToAll: return count * nranks;
    }
    return 0;
  }
  int64_t output_elems() const {
    switch (collective) {
      case sched::Collective::AllReduce: return count;
      case sched::Collective::ReduceScatter: return count;
      case sched::Collective::AllGather: return count * nranks;
      case sched::Collective::AllToAll: return count * nranks;
    }
    return 0;
  }
  std::string describe() const {
    return std::string(sched::to_string(collective)) + " " +
           std::string(kernels::datatype_name(dtype)) + " " +
           std::string(kernels::reduce_op_name(op)) + " P=" + std::to_string(nranks) +
           " count=" + std::to_string(count) + (in_place ? " in-place" : " out-of-place") +
           (data == CheckData::Exact ? " exact" : " random");
  }

  // Rank r's input bytes.
  std::vector<unsigned char> input(int r) const {
    std::vector<unsigned char> in(std::size_t(input_elems()) * elem());
    if (data == CheckData::Exact) {
      for (int64_t i = 0; i < input_elems(); ++i)
        store_element(dtype, in.data() + i * elem(), exact_value(dtype, op, nranks, r, i));
    } else {
      std::mt19937_64 rng(seed * 1000003 + uint64_t(r));
      std::uniform_real_distribution<double> dist(-1.0, 1.0);
      for (int64_t i = 0; i < input_elems(); ++i)
        store_element(dtype, in.data() + i * elem(),
              kernels::is_floating(dtype) ? dist(rng) : double(int64_t(rng() % 2001) - 1000));
    }
    return in;
  }

  // Rank r's expected output (exact data, or any data for pure data movement).
  std::vector<unsigned char> reference(int r, const std::vector<std::vector<unsigned char>>& ins) const {
    const std::size_t e = elem();
    std::vector<unsigned char> out(std::size_t(output_elems()) * e);
    auto reduce_block = [&](int64_t first) {  // all ranks' [first, first+count)
      std::vector<unsigned char> acc(std::size_t(count) * e), in(std::size_t(count) * e);
      if (count == 0) return acc;
      // Floating avg pre-multiplies every input (kernels/avg_scalar.h); a copy otherwise.
      kernels::avg_premul_cpu(dtype, acc.data(), ins[0].data() + first * e, std::size_t(count),
                              op == kernels::ReduceOp::Avg ? nranks : 1);
      for (int k = 1; k < nranks; ++k) {
        kernels::avg_premul_cpu(dtype, in.data(), ins[k].data() + first * e, std::size_t(count),
                                op == kernels::ReduceOp::Avg ? nranks : 1);
        const void* srcs[2] = {acc.data(), in.data()};
        kernels::reduce_cpu(dtype, op, acc.data(), srcs, 2, std::size_t(count));
      }
      kernels::finalize_cpu(dtype, op, acc.data(), std::size_t(count), nranks);
      return acc;
    };
    switch (collective) {
      case sched::Collective::AllReduce: out = reduce_block(0); break;
      case sched::Collective::ReduceScatter: out = reduce_block(int64_t(r) * count); break;
      case sched::Collective::AllGather:
        for (int k = 0; k < nranks; ++k)
          copy_bytes(out.data() + std::size_t(k) * count * e, ins[k].data(), std::size_t(count) * e);
        break;
      case sched::Collective::AllToAll:
        for (int k = 0; k < nranks; ++k)
          copy_bytes(out.data() + std::size_t(k) * count * e,
                      ins[k].data() + std::size_t(r) * count * e, std::size_t(count) * e);
        break;
    }
    return out;
  }
};

// Rank r's expected output without materialising every rank's whole input: exact data
// repeats with period lcm(65536, nranks) in the element index (see exact_value), so the
// reduction is computed over one period and tiled. Data movement copies only the blocks
// the rank receives. Reductions of random data are not checkable: empty result.
inline std::vector<unsigned char> expected_output(const CollectiveCase& c, int r) {
  const std::size_t e = c.elem();
  std::vector<unsigned char> out(std::size_t(c.output_elems()) * e);
  const bool reduces = c.collective == sched::Collective::AllReduce ||
                       c.collective == sched::Collective::ReduceScatter;
  if (!reduces) {
    // Block k of the output is rank k's block (all-to-all: block r; allgather: whole input).
    for (int k = 0; k < c.nranks; ++k) {
      const auto in = c.input(k);
      const std::size_t from =
          c.collective == sched::Collective::AllToAll ? std::size_t(r) * c.count * e : 0;
      copy_bytes(out.data() + std::size_t(k) * c.count * e, in.data() + from,
                  std::size_t(c.count) * e);
    }
    return out;
  }
  if (c.data != CheckData::Exact) return {};
  if (c.count == 0) return out;
  const int64_t period = std::lcm<int64_t>(65536, c.nranks);
  const int64_t base = c.collective == sched::Collective::ReduceScatter ? int64_t(r) * c.count : 0;
  const int64_t n = std::min<int64_t>(period, c.input_elems());
  std::vector<unsigned char> acc(std::size_t(n) * e), next(std::size_t(n) * e);
  for (int k = 0; k < c.nranks; ++k) {
    auto& dst = k == 0 ? acc : next;
    for (int64_t i = 0; i < n; ++i)
      store_element(c.dtype, dst.data() + i * e, exact_value(c.dtype, c.op, c.nranks, k, i));
    if (c.op == kernels::ReduceOp::Avg)
      kernels::avg_premul_cpu(c.dtype, dst.data(), dst.data(), std::size_t(n), c.nranks);
    if (k > 0) {
      const void* srcs[2] = {acc.data(), next.data()};
      kernels::reduce_cpu(c.dtype, c.op, acc.data(), srcs, 2, std::size_t(n));
    }
  }
  kernels::finalize_cpu(c.dtype, c.op, acc.data(), std::size_t(n), c.nranks);
  for (int64_t i = 0; i < c.output_elems(); ++i)
    std::memcpy(out.data() + i * e, acc.data() + ((base + i) % period) * e, e);
  return out;
}

// The memory of one rank, laid out as NCCL callers do for in-place calls. Scratch is
// reserved once, from the schedule.
struct RankMemory {
  std::vector<unsigned char> send, recv, scratch;
  Buffers buffers;

  RankMemory(const CollectiveCase& c, const sched::Schedule& s, int r,
             const std::vector<unsigned char>& input) {
    const std::size_t e = c.elem();
    scratch.resize(scratch_bytes(s, r, c.dtype, c.op) + 1);
    const std::size_t out_bytes = std::size_t(c.output_elems()) * e;
    if (!c.in_place) {
      send = input;
      recv.assign(out_bytes + 1, 0xA5);  // poisoned: every element must be written
      buffers = {send.data(), recv.data(), scratch.data()};
      return;
    }
    switch (c.collective) {
      case sched::Collective::AllReduce:
      case sched::Collective::AllToAll:
        recv = input;
        recv.push_back(0);
        buffers = {recv.data(), recv.data(), scratch.data()};
        break;
      case sched::Collective::ReduceScatter:  // Output = Input + rank*count
        recv = input;
        recv.push_back(0);
        buffers = {recv.data(), recv.data() + std::size_t(r) * c.count * e, scratch.data()};
        break;
      case sched::Collective::AllGather:  // Input = Output + rank*count
        recv.assign(out_bytes + 1, 0xA5);
        copy_bytes(recv.data() + std::size_t(r) * c.count * e, input.data(), input.size());
        buffers = {recv.data() + std::size_t(r) * c.count * e, recv.data(), scratch.data()};
        break;
    }
  }

  std::vector<unsigned char> output(const CollectiveCase& c) const {
    const auto* p = static_cast<const unsigned char*>(buffers.output);
    return {p, p + std::size_t(c.output_elems()) * c.elem()};
  }
};

}  // namespace topocoll::exec
