// Independent reference arithmetic for the kernel tests: decodes narrow floats from their
// fields with ldexp, rounds by binary search over the format's values, and computes integer
// results exactly in 128 bits before wrapping. Shares no code with kernels/.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>

#include "kernels/datatype.h"

namespace topocoll::kernels::test {

struct NarrowFormat {
  int exp_bits, man_bits;
  bool ieee_special;          // all-ones exponent = inf/NaN (false: only S.1111.111 is NaN)
  bool saturate;              // overflow -> max finite (fp8 __NV_SATFINITE) instead of inf
  std::uint32_t max_finite;   // positive bit pattern of the largest finite value
  std::uint32_t inf;          // positive infinity (IEEE formats)
  std::uint32_t nan;          // canonical NaN produced by conversions
};

inline constexpr NarrowFormat kHalf{5, 10, true, false, 0x7BFF, 0x7C00, 0x7FFF};
inline constexpr NarrowFormat kBf16{8, 7, true, false, 0x7F7F, 0x7F80, 0x7FFF};
inline constexpr NarrowFormat kE4M3{4, 3, false, true, 0x7E, 0, 0x7F};
inline constexpr NarrowFormat kE5M2{5, 2, true, true, 0x7B, 0x7C, 0x7F};

inline double ref_decode(const NarrowFormat& f, std::uint32_t bits) {
  const int bias = (1 << (f.exp_bits - 1)) - 1;
  const std::uint32_t exp_all = (1u << f.exp_bits) - 1;
  const bool neg = (bits >> (f.exp_bits + f.man_bits)) & 1u;
  const std::uint32_t e = (bits >> f.man_bits) & exp_all;
  const std::uint32_t m = bits & ((1u << f.man_bits) - 1);
  double v;
  if (f.ieee_special && e == exp_all) {
    v = m ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else if (!f.ieee_special && e == exp_all && m == (1u << f.man_bits) - 1) {
    v = std::numeric_limits<double>::quiet_NaN();
  } else if (e == 0) {
    v = std::ldexp(static_cast<double>(m), 1 - bias - f.man_bits);
  } else {
    v = std::ldexp(1.0 + std::ldexp(static_cast<double>(m), -f.man_bits),
                   static_cast<int>(e) - bias);
  }
  return neg ? -v : v;
}

// Round-to-nearest-even of v into the format, by search over its (monotonic) positive codes.
inline std::uint32_t ref_encode(const NarrowFormat& f, double v) {
  if (std::isnan(v)) return f.nan;
  const std::uint32_t sign = std::signbit(v) ? 1u << (f.exp_bits + f.man_bits) : 0u;
  const double a = std::fabs(v);
  const double max = ref_decode(f, f.max_finite);
  if (a > max) {
    if (f.saturate) return f.max_finite | sign;
    // The next code above max would be 2^(emax+1); max's code is odd, so the tie goes up.
    const double above = 2.0 * std::ldexp(1.0, static_cast<int>((f.max_finite >> f.man_bits)) -
                                                   ((1 << (f.exp_bits - 1)) - 1));
    return (a < (max + above) / 2 ? f.max_finite : f.inf) | sign;
  }
  std::uint32_t lo = 0, hi = f.max_finite;  // invariant: decode(lo) <= a <= decode(hi)
  while (hi - lo > 1) {
    const std::uint32_t mid = (lo + hi) / 2;
    (ref_decode(f, mid) <= a ? lo : hi) = mid;
  }
  const double dlo = ref_decode(f, lo), dhi = ref_decode(f, hi);
  std::uint32_t r;
  if (a == dlo) r = lo;
  else if (a == dhi) r = hi;
  else {
    const double midpoint = (dlo + dhi) / 2;
    r = a < midpoint ? lo : a > midpoint ? hi : ((lo & 1u) ? hi : lo);
  }
  return r | sign;
}

inline const NarrowFormat* narrow_format(DataType t) {
  switch (t) {
    case DataType::Float16: return &kHalf;
    case DataType::Bfloat16: return &kBf16;
    case DataType::Fp8E4M3: return &kE4M3;
    case DataType::Fp8E5M2: return &kE5M2;
    default: return nullptr;
  }
}

inline int bit_width(DataType t) { return static_cast<int>(datatype_size(t)) * 8; }
inline std::uint64_t low_mask(DataType t) {
  return bit_width(t) == 64 ? ~0ull : (1ull << bit_width(t)) - 1;
}

inline bool is_signed_int(DataType t) {
  return t == DataType::Int8 || t == DataType::Int32 || t == DataType::Int64;
}

inline __int128 int_value(DataType t, std::uint64_t bits) {
  bits &= low_mask(t);
  if (is_signed_int(t) && (bits >> (bit_width(t) - 1)) & 1u)
    return static_cast<__int128>(bits) - (static_cast<__int128>(1) << bit_width(t));
  return static_cast<__int128>(bits);
}

// Value of a floating element as a double (float32 and the narrow types convert exactly).
inline double float_value(DataType t, std::uint64_t bits) {
  if (t == DataType::Float32) {
    float f;
    const auto u = static_cast<std::uint32_t>(bits);
    std::memcpy(&f, &u, 4);
    return f;
  }
  if (t == DataType::Float64) {
    double d;
    std::memcpy(&d, &bits, 8);
    return d;
  }
  return ref_decode(*narrow_format(t), static_cast<std::uint32_t>(bits));
}

// Rounds an (exact or double-rounded) result to the type: float32 via the hardware cast,
// narrow types as "float op, then round to narrow" (the documented semantics).
inline std::uint64_t float_bits_of(DataType t, double v) {
  if (t == DataType::Float64) {
    std::uint64_t u;
    std::memcpy(&u, &v, 8);
    return u;
  }
  const float f = static_cast<float>(v);
  if (t == DataType::Float32) {
    std::uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
  }
  return ref_encode(*narrow_format(t), f);
}

// Reference for one binary step a op b (Avg as Sum).
inline std::uint64_t ref_apply(DataType t, ReduceOp op, std::uint64_t a, std::uint64_t b) {
  if (!is_floating(t)) {
    const __int128 x = int_value(t, a), y = int_value(t, b);
    switch (op) {
      case ReduceOp::Sum: case ReduceOp::Avg:
        return static_cast<std::uint64_t>(x + y) & low_mask(t);
      case ReduceOp::Prod: {
        const unsigned __int128 p = static_cast<unsigned __int128>(a & low_mask(t)) *
                                    static_cast<unsigned __int128>(b & low_mask(t));
        return static_cast<std::uint64_t>(p) & low_mask(t);
      }
      case ReduceOp::Max: return (x > y ? a : b) & low_mask(t);
      case ReduceOp::Min: return (x < y ? a : b) & low_mask(t);
    }
  }
  const double x = float_value(t, a), y = float_value(t, b);
  switch (op) {
    case ReduceOp::Sum: case ReduceOp::Avg:
      // Sums of two float32/narrow values are exact in double except for huge exponent gaps,
      // where double-then-float rounding still equals one correct rounding (53 >= 2*24+1).
      return float_bits_of(t, x + y);
    case ReduceOp::Prod:
      return float_bits_of(t, x * y);
    case ReduceOp::Max: case ReduceOp::Min: {
      const bool is_max = op == ReduceOp::Max;
      std::uint64_t r;
      if (std::isnan(y)) r = a;
      else if (std::isnan(x)) r = b;
      else if (x == y) r = (std::signbit(x) == is_max) ? b : a;  // max(+0,-0) = +0
      else r = (is_max ? x > y : x < y) ? a : b;
      // Narrow types as NCCL's __hmax/__hmin (both NaN: the canonical NaN) and, for fp8, its
      // conversion back with saturation (e5m2 ±inf: ±57344): the selected value re-encoded.
      return narrow_format(t) ? float_bits_of(t, float_value(t, r)) : r;
    }
  }
  return 0;
}

// Reference for Avg's final division.
inline std::uint64_t ref_divide(DataType t, std::uint64_t a, int n) {
  if (!is_floating(t)) {
    const __int128 x = int_value(t, a);
    return static_cast<std::uint64_t>(x / n) & low_mask(t);  // truncates toward zero
  }
  // Division: double then float rounding is innocuous (53 >= 2*24+2).
  return float_bits_of(t, float_value(t, a) / n);
}

// Equal bits, or both NaN (NaN payloads are not specified; see docs/kernels.md).
inline bool same_result(DataType t, std::uint64_t x, std::uint64_t y) {
  x &= low_mask(t);
  y &= low_mask(t);
  if (x == y) return true;
  return is_floating(t) && std::isnan(float_value(t, x)) && std::isnan(float_value(t, y));
}

// Random element bits: every integer pattern with extra weight on the extremes; float32/64 of
// varied magnitude with some zeros, infinities, NaNs and subnormals; narrow types uniformly
// over all patterns (which includes their specials).
inline std::uint64_t random_bits(DataType t, std::mt19937_64& rng) {
  const std::uint64_t r = rng();
  const unsigned pick = static_cast<unsigned>(rng() % 16);
  if (!is_floating(t)) {
    const std::uint64_t top = 1ull << (bit_width(t) - 1);
    switch (pick) {
      case 0: return 0;
      case 1: return low_mask(t);              // -1 / max unsigned
      case 2: return top;                      // min signed
      case 3: return (top - 1) & low_mask(t);  // max signed
      default: return r & low_mask(t);
    }
  }
  if (narrow_format(t)) return r & low_mask(t);
  double v;
  switch (pick) {
    case 0: v = 0.0; break;
    case 1: v = -0.0; break;
    case 2: v = std::numeric_limits<double>::infinity() * (r & 1 ? -1 : 1); break;
    case 3: v = std::numeric_limits<double>::quiet_NaN(); break;
    case 4: v = (t == DataType::Float32 ? std::numeric_limits<float>::denorm_min()
                                        : std::numeric_limits<double>::denorm_min()) *
                static_cast<double>(r % 1000 + 1);
            break;
    default: {
      const double m = 1.0 + static_cast<double>(r >> 11) * 0x1p-53;
      v = std::ldexp(m, static_cast<int>(rng() % 41) - 20) * (r & 1 ? -1 : 1);
    }
  }
  if (t == DataType::Float32) {
    const float f = static_cast<float>(v);
    std::uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
  }
  std::uint64_t u;
  std::memcpy(&u, &v, 8);
  return u;
}

inline void store_bits(void* base, std::size_t i, DataType t, std::uint64_t bits) {
  std::memcpy(static_cast<char*>(base) + i * datatype_size(t), &bits, datatype_size(t));
}
inline std::uint64_t load_bits(const void* base, std::size_t i, DataType t) {
  std::uint64_t bits = 0;
  std::memcpy(&bits, static_cast<const char*>(base) + i * datatype_size(t), datatype_size(t));
  return bits;
}

}  // namespace topocoll::kernels::test
