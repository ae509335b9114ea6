// Thread-local error reporting: every rejected argument is named in tessera_last_error().
#pragma once

#include "tessera/common.hpp"

namespace tessera::detail {

// Records a printf-style message for last_error() and returns `s`.
Status fail(Status s, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void clear_error();

}  // namespace tessera::detail
