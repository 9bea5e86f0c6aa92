#pragma once
// A new input shape's plan is built on one thread while the other threads of its OpenMP team
// wait for the next inference. The plan's objects go into heap room reserved ahead
// (core/heap_headroom.hpp), whose pages each fault at their first touch. Here the team's
// second thread faults them in while stages 1-3 run (the ir copy, its shapes, the ir passes:
// the first and largest share of a plan's allocations), a step at a time, and stops when they
// are done; the pages it did not reach fault in as stages 4-8 touch them.
//
// Not stages 4-8: they make oneDNN primitives, and oneDNN sizes some of them by the threads
// of the parallel region they are made in (one, inside this one), not those they run on. A
// version that ran the whole build inside the region failed once in CI with garbage outputs
// from dynamically quantized convolutions. A thread of the process's own instead of the team's
// (the whole build outside any region) measured slower than none (mobilenet_v3_small 52.7 ->
// 63.1 ms over 60 shapes): likely the team's idle thread spinning on the core it needed, and
// the build waiting at its end for a step the scheduler had put off.
//
// kiln_plan_compile_ms (stages 1-8 of every new shape) over 60 new shapes of
// mobilenet_v3_small 45.6 -> 37.8 ms (medians of 8 interleaved runs), its first pass 134.6 ->
// 129.0 ms. Populating every page of the room before stage 4 instead: 47.8 ms.
#include <functional>

namespace kiln::cpu {

// Runs `build` on the calling thread while the second thread of its team faults in the calling
// thread's headroom_pages(), until `build` returns (or throws: rethrown here); the pages not
// reached stay the caller's. `build` runs as the master of a team of two, inside a parallel
// region: it must not make oneDNN primitives or run kernels (a parallel region inside it runs
// on one thread). Without a second thread (a team of one, or a caller already inside a
// parallel region) or without pages left, `build` just runs.
void run_while_faulting_in_headroom(const std::function<void()>& build);

}  // namespace kiln::cpu
