#include "cpu/until_hot_chooser.hpp"

#include <algorithm>
#include <cstdio>
#include <limits>

#include "core/strings.hpp"

namespace kiln::cpu {

namespace {
std::string one_decimal(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}
}  // namespace

double UntilHotChooser::Figures::cost(double elements, double runs) const {
  double least = std::numeric_limits<double>::infinity();
  for (int i = 0; i < std::min(n, kSamples); ++i)
    least = std::min(least, last[i].build_ms + runs * last[i].ms_per_element * elements);
  return least;
}

bool UntilHotChooser::measuring_locked() const { return bf16_.n < kSamples || f32_.n < kSamples; }

bool UntilHotChooser::cheaper_f32_locked(double elements, double runs) const {
  return f32_.cost(elements, runs) < bf16_.cost(elements, runs);
}

bool UntilHotChooser::answer_locked(double elements, double runs) const {
  if (bf16_.issued < kSamples + 1 || f32_.issued < kSamples + 1)
    return f32_.issued < bf16_.issued;  // measuring: alternately, bf16 first
  // graphs handed out have not all run yet (other threads), or one failed: the precision with
  // fewer figures, bf16 when even
  if (measuring_locked()) return f32_.n < bf16_.n;
  const bool f32 = cheaper_f32_locked(elements, runs);
  return (chosen_ + 1) % kRemeasure == 0 ? !f32 : f32;  // now and then the other, measured again
}

bool UntilHotChooser::next_f32(double elements, double runs) {
  std::lock_guard<std::mutex> lock(mutex_);
  runs = std::max(runs, 1.0);
  last_elements_ = elements;
  last_runs_ = runs;
  const bool measured = !measuring_locked();
  const bool f32 = answer_locked(elements, runs);
  ++(f32 ? f32_ : bf16_).issued;
  if (measured) ++chosen_;
  return f32;
}

bool UntilHotChooser::prefers_f32(double elements, double runs) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return answer_locked(elements, std::max(runs, 1.0));
}

void UntilHotChooser::record(bool f32, double build_ms, double run_ms, double elements) {
  std::lock_guard<std::mutex> lock(mutex_);
  Figures& f = f32 ? f32_ : bf16_;
  if (!f.first_seen) {  // it paid what the precision costs once: packing weights, kiln's kernels
    f.first_seen = true;
    return;
  }
  f.last[f.n % kSamples] = {build_ms, run_ms / std::max(elements, 1.0)};
  ++f.n;
}

int UntilHotChooser::measured(bool f32) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return (f32 ? f32_ : bf16_).n;
}

std::string UntilHotChooser::describe() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (measuring_locked())
    return cat("measuring (", bf16_.n, " bf16 and ", f32_.n, " f32 graphs of ", kSamples, " each)");
  auto figures = [&](const char* name, const Figures& f) {
    return cat(name, " ", one_decimal(f.cost(last_elements_, last_runs_)), " ms (", f.n, " graphs measured)");
  };
  return cat(cheaper_f32_locked(last_elements_, last_runs_) ? "f32" : "bf16", ": a new shape of ",
             static_cast<long long>(last_elements_), " input elements run ", one_decimal(last_runs_),
             " times costs ", figures("bf16", bf16_), ", ", figures("f32", f32_),
             " to build and run (the least of the last ", kSamples, " each)");
}

}  // namespace kiln::cpu
