#pragma once
// A new input shape's plan is built on one thread while the other threads of its OpenMP team
// wait for the next inference. The plan's objects go into heap room reserved ahead
// (core/heap_headroom.hpp), whose pages each fault at their first touch. Here the team's
// second thread faults them in meanwhile, a step at a time, and stops when the build is done:
// mobilenet_v3_small's stages 1-8 a new shape 0.85 -> 0.77 ms (medians of 8 interleaved runs
// of 60 shapes; 0.88 with the second thread started and left idle), its first pass over 60
// shapes 131 -> 117 ms (6 runs).
#include <functional>

namespace kiln::cpu {

// Runs `build` on the calling thread while the second thread of its team faults in the calling
// thread's headroom_pages(), until `build` returns (or throws: rethrown here). `build` runs as
// the master of a team of two, so a parallel region inside it runs on one thread: it must make
// things (plans, graphs, primitives), not run kernels that count on a team. Without a second
// thread (a team of one, or a caller already inside a parallel region) or without pages left,
// `build` just runs.
void run_while_faulting_in_headroom(const std::function<void()>& build);

}  // namespace kiln::cpu
