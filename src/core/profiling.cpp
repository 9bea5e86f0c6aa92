#include <kiln/profiling.hpp>

namespace kiln {

const char* status_name(ProfilingInfo::Status s) {
  switch (s) {
    case ProfilingInfo::Status::not_run: return "NOT_RUN";
    case ProfilingInfo::Status::optimized_out: return "OPTIMIZED_OUT";
    case ProfilingInfo::Status::executed: return "EXECUTED";
  }
  return "?";
}

}  // namespace kiln
