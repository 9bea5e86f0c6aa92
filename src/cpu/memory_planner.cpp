#include "cpu/memory_planner.hpp"

#include <algorithm>
#include <numeric>

namespace kiln::cpu {

// Greedy by size (largest first), each placed at the lowest offset that does not collide
// with an already placed buffer whose lifetime overlaps.
MemoryPlan plan_memory(const std::vector<BufferRequest>& req) {
  const size_t A = MemoryPlan::kAlignment;
  MemoryPlan plan;
  plan.offsets.assign(req.size(), 0);
  std::vector<size_t> order(req.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return req[a].bytes > req[b].bytes; });
  struct Placed {
    size_t off, end;
    int first, last;
  };
  std::vector<Placed> placed;
  placed.reserve(req.size());
  std::vector<std::pair<size_t, size_t>> busy;  // (one vector for all: a plan per new input shape runs this)
  for (size_t i : order) {
    size_t size = (req[i].bytes + A - 1) / A * A;
    busy.clear();
    for (auto& p : placed)
      if (p.first <= req[i].last && req[i].first <= p.last) busy.emplace_back(p.off, p.end);
    std::sort(busy.begin(), busy.end());
    size_t off = 0;
    for (auto& [b, e] : busy) {
      if (off + size <= b) break;
      off = std::max(off, e);
    }
    plan.offsets[i] = off;
    placed.push_back({off, off + size, req[i].first, req[i].last});
    plan.total_bytes = std::max(plan.total_bytes, off + size);
  }
  return plan;
}

}  // namespace kiln::cpu
