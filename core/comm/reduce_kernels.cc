#include "core/comm/reduce_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"

namespace dlaunch::core {
namespace {

struct Half {
  uint16_t bits;
  static float Load(Half h) { return HalfToFloat(h.bits); }
  static Half Store(float f) { return Half{FloatToHalf(f)}; }
};
struct BFloat16 {
  uint16_t bits;
  static float Load(BFloat16 b) { return BFloat16ToFloat(b.bits); }
  static BFloat16 Store(float f) { return BFloat16{FloatToBFloat16(f)}; }
};

struct SumOp {
  template <typename T>
  static T Apply(T a, T b) {
    return a + b;
  }
};
struct ProdOp {
  template <typename T>
  static T Apply(T a, T b) {
    return static_cast<T>(a * b);
  }
};
struct MinOp {
  template <typename T>
  static T Apply(T a, T b) {
    return std::min(a, b);
  }
};
struct MaxOp {
  template <typename T>
  static T Apply(T a, T b) {
    return std::max(a, b);
  }
};

template <typename T, typename Op>
void ReduceNative(void* out, const void* a, const void* b, size_t count) {
  auto* o = static_cast<T*>(out);
  auto* x = static_cast<const T*>(a);
  auto* y = static_cast<const T*>(b);
  for (size_t i = 0; i < count; ++i) o[i] = Op::Apply(x[i], y[i]);
}

// 16-bit floats reduce in fp32 and round once per pair, as NCCL does.
template <typename T, typename Op>
void ReduceWidened(void* out, const void* a, const void* b, size_t count) {
  auto* o = static_cast<T*>(out);
  auto* x = static_cast<const T*>(a);
  auto* y = static_cast<const T*>(b);
  for (size_t i = 0; i < count; ++i) o[i] = T::Store(Op::Apply(T::Load(x[i]), T::Load(y[i])));
}

template <typename Op>
ReduceFn ForType(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32:
      return &ReduceNative<float, Op>;
    case DataType::kFloat64:
      return &ReduceNative<double, Op>;
    case DataType::kInt32:
      return &ReduceNative<int32_t, Op>;
    case DataType::kInt64:
      return &ReduceNative<int64_t, Op>;
    case DataType::kUint8:
      return &ReduceNative<uint8_t, Op>;
    case DataType::kInt8:
      return &ReduceNative<int8_t, Op>;
    case DataType::kFloat16:
      return &ReduceWidened<Half, Op>;
    case DataType::kBFloat16:
      return &ReduceWidened<BFloat16, Op>;
  }
  return nullptr;
}

uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

float BitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

}  // namespace

float HalfToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  if (exp == 0) {
    // Subnormal or zero: value = mant * 2^-24.
    float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  if (exp == 31) return BitsFloat(sign | 0x7f800000 | (mant << 13));
  return BitsFloat(sign | ((exp + 112) << 23) | (mant << 13));
}

uint16_t FloatToHalf(float f) {
  uint32_t u = FloatBits(f);
  uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000);
  float a = std::fabs(f);
  if (std::isnan(f)) return sign | 0x7e00;
  if (a >= 65520.0f) return sign | 0x7c00;  // rounds to infinity
  if (a < 6.103515625e-05f) {
    // Subnormal range: quantise to multiples of 2^-24 with round-to-nearest-even.
    float q = std::nearbyint(a * 16777216.0f);
    return sign | static_cast<uint16_t>(q);
  }
  uint32_t au = FloatBits(a);
  uint32_t exp = (au >> 23) - 112;
  uint32_t mant = au & 0x7fffff;
  uint32_t half = (exp << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (half & 1))) ++half;  // carries into exp correctly
  return sign | static_cast<uint16_t>(half);
}

float BFloat16ToFloat(uint16_t b) { return BitsFloat(static_cast<uint32_t>(b) << 16); }

uint16_t FloatToBFloat16(float f) {
  uint32_t u = FloatBits(f);
  if (std::isnan(f)) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fff + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}

ReduceFn GetReduceFn(DataType dtype, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      return ForType<SumOp>(dtype);
    case ReduceOp::kMin:
      return ForType<MinOp>(dtype);
    case ReduceOp::kMax:
      return ForType<MaxOp>(dtype);
    case ReduceOp::kProd:
      return ForType<ProdOp>(dtype);
  }
  return nullptr;
}

void DivideInPlace(void* buf, size_t count, DataType dtype, int divisor) {
  switch (dtype) {
    case DataType::kFloat32: {
      auto* p = static_cast<float*>(buf);
      for (size_t i = 0; i < count; ++i) p[i] /= static_cast<float>(divisor);
      return;
    }
    case DataType::kFloat64: {
      auto* p = static_cast<double*>(buf);
      for (size_t i = 0; i < count; ++i) p[i] /= divisor;
      return;
    }
    case DataType::kInt32: {
      auto* p = static_cast<int32_t*>(buf);
      for (size_t i = 0; i < count; ++i) p[i] /= divisor;
      return;
    }
    case DataType::kInt64: {
      auto* p = static_cast<int64_t*>(buf);
      for (size_t i = 0; i < count; ++i) p[i] /= divisor;
      return;
    }
    case DataType::kUint8: {
      auto* p = static_cast<uint8_t*>(buf);
      for (size_t i = 0; i < count; ++i) p[i] = static_cast<uint8_t>(p[i] / divisor);
      return;
    }
    case DataType::kInt8: {
      auto* p = static_cast<int8_t*>(buf);
      for (size_t i = 0; i < count; ++i) p[i] = static_cast<int8_t>(p[i] / divisor);
      return;
    }
    case DataType::kFloat16:
    case DataType::kBFloat16:
      for (size_t i = 0; i < count; ++i) {
        StoreFromDouble(buf, i, dtype, LoadAsDouble(buf, i, dtype) / divisor);
      }
      return;
  }
}

double LoadAsDouble(const void* buf, size_t i, DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32:
      return static_cast<const float*>(buf)[i];
    case DataType::kFloat64:
      return static_cast<const double*>(buf)[i];
    case DataType::kInt32:
      return static_cast<const int32_t*>(buf)[i];
    case DataType::kInt64:
      return static_cast<double>(static_cast<const int64_t*>(buf)[i]);
    case DataType::kUint8:
      return static_cast<const uint8_t*>(buf)[i];
    case DataType::kInt8:
      return static_cast<const int8_t*>(buf)[i];
    case DataType::kFloat16:
      return HalfToFloat(static_cast<const uint16_t*>(buf)[i]);
    case DataType::kBFloat16:
      return BFloat16ToFloat(static_cast<const uint16_t*>(buf)[i]);
  }
  return 0;
}

void StoreFromDouble(void* buf, size_t i, DataType dtype, double value) {
  switch (dtype) {
    case DataType::kFloat32:
      static_cast<float*>(buf)[i] = static_cast<float>(value);
      return;
    case DataType::kFloat64:
      static_cast<double*>(buf)[i] = value;
      return;
    case DataType::kInt32:
      static_cast<int32_t*>(buf)[i] = static_cast<int32_t>(value);
      return;
    case DataType::kInt64:
      static_cast<int64_t*>(buf)[i] = static_cast<int64_t>(value);
      return;
    case DataType::kUint8:
      static_cast<uint8_t*>(buf)[i] = static_cast<uint8_t>(value);
      return;
    case DataType::kInt8:
      static_cast<int8_t*>(buf)[i] = static_cast<int8_t>(value);
      return;
    case DataType::kFloat16:
      static_cast<uint16_t*>(buf)[i] = FloatToHalf(static_cast<float>(value));
      return;
    case DataType::kBFloat16:
      static_cast<uint16_t*>(buf)[i] = FloatToBFloat16(static_cast<float>(value));
      return;
  }
}

}  // namespace dlaunch::core
