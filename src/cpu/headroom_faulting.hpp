#pragma once
// A new input shape's plan is built on one thread while the other threads of its OpenMP team
// wait for the next inference. The plan's objects go into heap room reserved ahead
// (core/heap_headroom.hpp), whose pages each fault at their first touch. Here the team's
// second thread faults them in meanwhile, a step at a time, and stops when the build is done.
// kiln_plan_compile_ms (stages 1-8 of every new shape) over 60 new shapes of mobilenet_v3_small
// 42.5 -> 32.5 ms (medians of 8 interleaved runs), EfficientNet-B0 over 12 shapes 19.7 -> 16.1
// (6 runs); BERT-6 over 64 lengths and MobileNet-v2 over 64 batches and sizes about 25% less.
// The second thread started and left idle measured no faster than without it.
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
