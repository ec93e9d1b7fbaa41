// Element-wise reductions on host memory for every DataType, including fp16 and bf16 (which gloo's
// own reduction helpers do not cover for bf16). Used by the gloo backend and by result checks.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/comm/communicator.h"

namespace dlaunch::core {

float HalfToFloat(uint16_t h);
uint16_t FloatToHalf(float f);  // round to nearest even
float BFloat16ToFloat(uint16_t b);
uint16_t FloatToBFloat16(float f);  // round to nearest even

// out[i] = op(a[i], b[i]); out may alias a or b. kAvg reduces as kSum (divide afterwards).
using ReduceFn = void (*)(void* out, const void* a, const void* b, size_t count);
ReduceFn GetReduceFn(DataType dtype, ReduceOp op);

// buf[i] /= divisor (integer division for integer types): the second half of kAvg.
void DivideInPlace(void* buf, size_t count, DataType dtype, int divisor);

// Reads element i of a buffer as double / writes a double into element i (with the type's
// rounding): lets tests and the preflight checks fill and verify every dtype with one code path.
double LoadAsDouble(const void* buf, size_t i, DataType dtype);
void StoreFromDouble(void* buf, size_t i, DataType dtype, double value);

}  // namespace dlaunch::core
