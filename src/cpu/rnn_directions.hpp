#pragma once
// How kiln's recurrent kernels (lstm_f32, gru_f32) run a layer's directions: with two directions
// and two threads or more, one thread each at once (a direction's steps depend on each other, so
// splitting one step over the team would cost a barrier per step); otherwise one after the
// other, each with the whole team for its input projection. Called from inside a parallel
// region (a caller's own), the region of two gets one thread, which runs both.
#include <omp.h>

#include <cstdint>

namespace kiln::cpu {

// direction(d, reverse, parallel) for d in [0, D): `reverse` the direction runs backwards (the
// second of two, or the only one when `reverse_one`); `parallel` it may use the team.
template <typename F>
void for_each_direction(int64_t D, bool reverse_one, int threads, F&& direction) {
  if (D == 2 && threads >= 2 && omp_get_max_threads() >= 2) {
#pragma omp parallel num_threads(2)
    {
      // a direction a thread; a team of one (the caller inside a parallel region already: a
      // nested region gets one thread) runs both, as LstmNode's split parts do
      for (int64_t d = omp_get_thread_num(); d < 2; d += omp_get_num_threads())
        direction(d, d == 1, /*parallel=*/false);
    }
    return;
  }
  for (int64_t d = 0; d < D; ++d) direction(d, D == 2 ? d == 1 : reverse_one, /*parallel=*/true);
}

}  // namespace kiln::cpu
