// Tessera C++ API: conversions between float32 and the 16-bit and block storage types (tessera.h
// has the rules; tessera::reference::f32_to_f16, quantize and their kin are the specification).
#pragma once

#include "tessera/common.hpp"

namespace tessera {

TESSERA_API Status convert(DType from, DType to, int64_t n, const void* x, void* y);
// Bytes of n values of type t; 0 for a bad type, n < 0, a partial block or an overflow.
TESSERA_API size_t dtype_size(DType t, int64_t n);

}  // namespace tessera
