#pragma once
// The snippets segfault detector (design guide, debug capabilities): kernels compiled with
// CompileOptions::segfault_detector (or KILN_SNIPPETS_SEGFAULT_DETECTOR=1) record the
// expression they execute and their loop iterations in a DebugState; while such a kernel
// runs on a thread, a SIGSEGV there is reported on stderr (kernel, expression, iterations,
// fault address) before the default action ends the process.
#include "snippets/target_machine.hpp"

namespace kiln::snippets {

// Installs the SIGSEGV handler (once; the previous handler runs for faults outside kernels).
void install_segfault_detector();

// Marks `state` as the kernel running on this thread (nullptr: none) for the handler.
void set_active_kernel(const DebugState* state);

}  // namespace kiln::snippets
