// One error channel for the shim's fallible calls: a C++ exception must never cross into
// Rust, so each call runs inside `guarded`, which returns 0, or 1 with the exception's
// message kept for `stratlab_shim_last_error` (thread-local: each worker and stage thread
// reads its own).
#pragma once

#include <exception>
#include <string>

namespace stratlab {

std::string& last_error();

template <typename Call>
int guarded(Call&& call) {
  try {
    call();
    return 0;
  } catch (const std::exception& e) {
    last_error() = e.what();
    return 1;
  } catch (...) {
    last_error() = "unknown C++ exception";
    return 1;
  }
}

}  // namespace stratlab
