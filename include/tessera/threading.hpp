// Tessera C++ API: kernel-table selection and thread count.
//
// Every call runs in the caller's current tbb::task_arena, so applications bound Tessera's
// threads the TBB way; set_num_threads() is the process-wide convenience.
#pragma once

#include "tessera/common.hpp"

namespace tessera {

TESSERA_API const char* isa_name();
TESSERA_API Status set_isa(const char* name);
TESSERA_API bool isa_supported(const char* name);
TESSERA_API Status set_num_threads(int n);
TESSERA_API size_t scratch_bytes();
TESSERA_API Status release_scratch();
TESSERA_API Status bind_workspace(void* buffer, size_t bytes);
TESSERA_API size_t workspace_peak();

}  // namespace tessera
