// The storage behind shim_call.h's error channel.
#include "shim_call.h"

namespace stratlab {

std::string& last_error() {
  thread_local std::string message;
  return message;
}

}  // namespace stratlab

extern "C" const char* stratlab_shim_last_error() { return stratlab::last_error().c_str(); }
