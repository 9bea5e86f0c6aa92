#pragma once
// Arena: the bytes a cpu::Graph's intermediate tensors live in while it runs. Graphs that
// never run at the same time share one: the cpu::Executor gives every thread one arena per
// compiled model, used by all that thread's graphs (one per input-shape plan), so memory is
// the largest plan's need, not the sum over plans, and a new shape reuses pages already
// touched instead of faulting in fresh ones. The contents do not outlive a run.
#include <atomic>
#include <cstddef>

namespace kiln::cpu {

class Arena {
 public:
  static constexpr size_t kAlignment = 64;
  // bytes rounded up to a multiple of kAlignment (where the next buffer of a carved-up reserve() may start)
  static constexpr size_t aligned(size_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }
  Arena() = default;
  ~Arena();
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  // At least `bytes` bytes (aligned to kAlignment), valid until the next reserve() that
  // grows the arena. Growing replaces the buffer (the old contents are not kept) by one of
  // max(bytes, 1.5 x the old size), so a stream of growing shapes reallocates a logarithmic
  // number of times; from 2 MiB on, the new buffer takes over the old one's pages (arena.cpp).
  // Throws kiln::Error when the memory cannot be had.
  void* reserve(size_t bytes);
  // Brings the arena's pages into memory now rather than at the first run's touch of each
  // (core/pages.hpp): compile_model's, so that the first inference does not pay them
  // (ResNet-50's first inference faulted in its 20 MiB arena there).
  void populate();
  size_t capacity() const { return capacity_.load(std::memory_order_relaxed); }  // any thread may ask
  const void* data() const { return data_; }  // the buffer (null before the first reserve())
  size_t reallocations() const { return reallocations_; }

 private:
  void release();  // frees the buffer: capacity 0
  void* data_ = nullptr;
  bool mapped_ = false;  // data_ from mmap (2 MiB and up), else from malloc
  std::atomic<size_t> capacity_{0};
  size_t reallocations_ = 0;
};

}  // namespace kiln::cpu
