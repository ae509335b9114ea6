// Tessera C++ API: conversions between float32 and the 16-bit storage types (tessera.h has the
// rules; tessera::reference::f32_to_f16 and its kin are the specification).
#pragma once

#include "tessera/common.hpp"

namespace tessera {

TESSERA_API Status convert(DType from, DType to, int64_t n, const void* x, void* y);

}  // namespace tessera
