#pragma once
// kiln_convolutions_until_hot = auto (the default): in bf16 mode, with input shapes that vary,
// the precision of a new shape's convolutions until the shape is hot, chosen by measuring.
//
// bf16 convolutions are oneDNN JIT kernels made for each shape; f32 ones are mostly kiln's
// kernels, made for none. Which costs a new shape less depends on the model: a CRNN's narrow
// convolutions took 10 ms to make in bf16 against 1 in f32 and ran no faster, a ResNet-50's
// cost about as much to make either way and ran 1.6x faster in bf16 (docs/settings.md,
// Precision). So the executor builds the first new shapes both ways, alternately (bf16 first),
// times each graph's build (compile stages 4-8) and first run, and from then on takes the
// precision whose expected cost for the next shape is lower. A graph's cost for a shape of E
// input elements is
//   build + runs * (its first run / its input elements) * E,
// `runs` being how often a new shape's graph has run on average before it was hot or dropped
// (at least 1, at most Executor::kHotRuns); a precision's expected cost is the least of its
// last kSamples graphs' (a single run is easily slowed down, hardly ever sped up). Each
// precision's first graph is left out: it pays what the precision costs once (packing weights,
// making kiln's kernels). Every kRemeasure-th new shape after the first choice takes the other
// precision, so a choice made on unlucky figures does not stay. A hot shape's graph is rebuilt
// in bf16 either way.
//
// Thread-safe: graphs are built and run on many threads at once.
#include <mutex>
#include <string>

namespace kiln::cpu {

class UntilHotChooser {
 public:
  static constexpr int kSamples = 2;     // graphs per precision measured, after its first, before choosing
  static constexpr int kRemeasure = 16;  // then every this many new shapes, one takes the other precision

  // Whether the next new shape's convolutions compute in f32. `elements`: its input elements
  // (all inputs); `runs`: how often a new shape's graph is expected to run (clamped to >= 1).
  bool next_f32(double elements, double runs);
  // What a graph built with `f32` (as next_f32 said) cost: its build and its first run.
  void record(bool f32, double build_ms, double run_ms, double elements);

  // What next_f32 would answer now, without asking.
  bool prefers_f32(double elements, double runs) const;
  // The figures so far and the choice for the last shape asked about, for reports: "measuring"
  // until both precisions have kSamples graphs, then e.g. "f32: a new shape of ... input elements".
  std::string describe() const;
  int measured(bool f32) const;  // graphs recorded with that precision (their first left out)

 private:
  struct Sample {
    double build_ms = 0, ms_per_element = 0;
  };
  struct Figures {
    int issued = 0;           // next_f32 answered this precision
    bool first_seen = false;  // the first graph was recorded (and left out)
    int n = 0;                // recorded since
    Sample last[kSamples];    // the last kSamples recorded, round robin
    // the least cost of the last kSamples graphs for a shape of `elements` run `runs` times
    double cost(double elements, double runs) const;
  };
  bool measuring_locked() const;
  bool cheaper_f32_locked(double elements, double runs) const;
  bool answer_locked(double elements, double runs) const;  // next_f32's answer

  mutable std::mutex mutex_;
  Figures bf16_, f32_;
  int chosen_ = 0;  // answers given after measuring
  double last_elements_ = 0, last_runs_ = 1;  // of the last shape asked about (describe)
};

}  // namespace kiln::cpu
