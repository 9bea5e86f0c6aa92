#include "cpu/headroom_faulting.hpp"

#include <omp.h>

#include <atomic>
#include <exception>

#include "core/heap_headroom.hpp"

namespace kiln::cpu {

namespace {
// Pages a step (a system call each): the builder waits at most one step's faults at the end
constexpr size_t kStepBytes = size_t{32} << 10;
}  // namespace

void run_while_faulting_in_headroom(const std::function<void()>& build) {
  HeadroomPages& pages = headroom_pages();  // the calling thread's: the helper gets a reference
  if (pages.left() == 0 || omp_in_parallel() || omp_get_max_threads() < 2) return build();
  std::atomic<bool> built{false};
  std::exception_ptr error;
#pragma omp parallel num_threads(2)
  {
    if (omp_get_thread_num() == 0) {
      try {
        build();
      } catch (...) {
        error = std::current_exception();
      }
      built.store(true, std::memory_order_release);
    } else {
      while (!built.load(std::memory_order_acquire) && pages.fault_in_next(kStepBytes)) {
      }
    }
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace kiln::cpu
