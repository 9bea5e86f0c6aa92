#pragma once
// Assigns arena offsets to buffers by lifetime: two buffers share bytes only if their
// lifetimes [first, last] (execution step indices, inclusive) do not overlap.
#include <cstddef>
#include <vector>

namespace kiln::cpu {

struct BufferRequest {
  size_t bytes = 0;
  int first = 0;  // step that writes it
  int last = 0;   // last step that reads it
};

struct MemoryPlan {
  std::vector<size_t> offsets;  // one per request, aligned to kAlignment
  size_t total_bytes = 0;
  static constexpr size_t kAlignment = 64;
};

MemoryPlan plan_memory(const std::vector<BufferRequest>& requests);

}  // namespace kiln::cpu
