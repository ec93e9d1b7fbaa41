#include "core/comm/reduce_kernels.h"

#include <gtest/gtest.h>

#include <cmath>

namespace dlaunch::core {
namespace {

TEST(ReduceKernelsTest, HalfRoundTripsKnownValues) {
  EXPECT_EQ(0x3c00, FloatToHalf(1.0f));
  EXPECT_EQ(0xc000, FloatToHalf(-2.0f));
  EXPECT_EQ(0x7bff, FloatToHalf(65504.0f));
  EXPECT_EQ(0x7c00, FloatToHalf(1e6f));
  EXPECT_EQ(0x0001, FloatToHalf(5.9604645e-08f));  // smallest subnormal
  EXPECT_FLOAT_EQ(1.0f, HalfToFloat(0x3c00));
  EXPECT_FLOAT_EQ(5.9604645e-08f, HalfToFloat(0x0001));
  EXPECT_FLOAT_EQ(0.333251953125f, HalfToFloat(FloatToHalf(1.0f / 3)));
  // Ties go to even: 2049 lies halfway between 2048 and 2050.
  EXPECT_FLOAT_EQ(2048.0f, HalfToFloat(FloatToHalf(2049.0f)));
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(NAN))));
}

TEST(ReduceKernelsTest, BFloat16RoundTripsKnownValues) {
  EXPECT_EQ(0x3f80, FloatToBFloat16(1.0f));
  EXPECT_FLOAT_EQ(1.0f, BFloat16ToFloat(0x3f80));
  EXPECT_FLOAT_EQ(256.0f, BFloat16ToFloat(FloatToBFloat16(257.0f)));  // tie to even
  EXPECT_FLOAT_EQ(3.0f, BFloat16ToFloat(FloatToBFloat16(3.0f)));
}

TEST(ReduceKernelsTest, EveryTypeAndOp) {
  for (DataType t : {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16,
                     DataType::kBFloat16, DataType::kInt32, DataType::kInt64, DataType::kUint8}) {
    char a[64], b[64], out[64];
    StoreFromDouble(a, 0, t, 3);
    StoreFromDouble(a, 1, t, 10);
    StoreFromDouble(b, 0, t, 5);
    StoreFromDouble(b, 1, t, 2);
    GetReduceFn(t, ReduceOp::kSum)(out, a, b, 2);
    EXPECT_EQ(8, LoadAsDouble(out, 0, t)) << DataTypeName(t);
    EXPECT_EQ(12, LoadAsDouble(out, 1, t)) << DataTypeName(t);
    GetReduceFn(t, ReduceOp::kMin)(out, a, b, 2);
    EXPECT_EQ(3, LoadAsDouble(out, 0, t)) << DataTypeName(t);
    EXPECT_EQ(2, LoadAsDouble(out, 1, t)) << DataTypeName(t);
    GetReduceFn(t, ReduceOp::kMax)(a, a, b, 2);  // in place
    EXPECT_EQ(5, LoadAsDouble(a, 0, t)) << DataTypeName(t);
    EXPECT_EQ(10, LoadAsDouble(a, 1, t)) << DataTypeName(t);
    DivideInPlace(a, 2, t, 2);
    EXPECT_EQ(t == DataType::kInt32 || t == DataType::kInt64 || t == DataType::kUint8 ? 2 : 2.5,
              LoadAsDouble(a, 0, t))
        << DataTypeName(t);
  }
}

TEST(DataTypeTest, NamesAndSizesMatchNcclTests) {
  EXPECT_STREQ("float", DataTypeName(DataType::kFloat32));
  EXPECT_STREQ("bfloat16", DataTypeName(DataType::kBFloat16));
  EXPECT_STREQ("half", DataTypeName(DataType::kFloat16));
  EXPECT_EQ(2u, DataTypeSize(DataType::kBFloat16));
  EXPECT_EQ(8u, DataTypeSize(DataType::kInt64));
  EXPECT_STREQ("avg", ReduceOpName(ReduceOp::kAvg));
}

}  // namespace
}  // namespace dlaunch::core
