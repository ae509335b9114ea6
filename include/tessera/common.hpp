// Tessera C++ API: types shared by every capability header.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tessera/tessera.h"

namespace tessera {

enum class Status : int {
  ok = TESSERA_OK,
  invalid_argument = TESSERA_INVALID_ARGUMENT,
  unsupported = TESSERA_UNSUPPORTED,
  out_of_memory = TESSERA_OUT_OF_MEMORY,
  internal = TESSERA_INTERNAL,
};

enum class Transpose : int { no_trans = TESSERA_NO_TRANS, trans = TESSERA_TRANS };

enum class DType : int {
  f32 = TESSERA_F32,
  f16 = TESSERA_F16,
  bf16 = TESSERA_BF16,
  q8_0 = TESSERA_Q8_0,
  q4_0 = TESSERA_Q4_0,
};

TESSERA_API const char* status_string(Status s);
// Message of the last failed call on this thread, naming the argument; "" if none.
TESSERA_API const char* last_error();

}  // namespace tessera
