#include "runtime/error.hpp"

#include <cstdarg>
#include <cstdio>

namespace tessera {
namespace detail {
namespace {
thread_local char g_message[512] = "";
}

Status fail(Status s, const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(g_message, sizeof g_message, fmt, args);
  va_end(args);
  return s;
}

void clear_error() { g_message[0] = '\0'; }

void TaskStatus::record(Status s) {
  if (s == Status::ok) return;
  std::lock_guard<std::mutex> guard(lock_);
  if (status_ != Status::ok) return;
  status_ = s;
  std::snprintf(message_, sizeof message_, "%s", g_message);
  failed_.store(true, std::memory_order_relaxed);
}

Status TaskStatus::result() const {
  if (!failed()) return Status::ok;
  return fail(status_, "%s", message_);
}

}  // namespace detail

const char* last_error() { return detail::g_message; }

const char* status_string(Status s) {
  switch (s) {
    case Status::ok:
      return "TESSERA_OK";
    case Status::invalid_argument:
      return "TESSERA_INVALID_ARGUMENT";
    case Status::unsupported:
      return "TESSERA_UNSUPPORTED";
    case Status::out_of_memory:
      return "TESSERA_OUT_OF_MEMORY";
    case Status::internal:
      return "TESSERA_INTERNAL";
  }
  return "unknown tessera_status";
}

}  // namespace tessera
