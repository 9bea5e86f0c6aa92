// `kiln benchmark`: compile time, first-inference time, latency statistics over timed
// iterations, throughput and peak memory of one model; optionally as JSON.
#include <kiln/core.hpp>

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "commands.hpp"
#include "core/strings.hpp"
#include "tools/common/perf_counters.hpp"
#include "tools/common/run_util.hpp"

namespace kiln::cli {

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kDefaultIterations = 20;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

std::string fmt_ms(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f ms", ms);
  return buf;
}

double round3(double v) { return std::round(v * 1000.0) / 1000.0; }

// A one-line progress bar on stderr, redrawn at most every 100 ms; silent unless stderr is a terminal.
class Progress {
 public:
  Progress() : enabled_(isatty(STDERR_FILENO) != 0) {}
  ~Progress() { clear(); }
  // fraction in [0, 1]; `what` e.g. "12/20".
  void update(const char* phase, double fraction, const std::string& what, bool force = false) {
    if (!enabled_) return;
    auto now = Clock::now();
    if (!force && drawn_ && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    drawn_ = true;
    constexpr int kWidth = 30;
    int filled = static_cast<int>(std::clamp(fraction, 0.0, 1.0) * kWidth);
    std::string bar(static_cast<size_t>(filled), '#');
    bar.append(static_cast<size_t>(kWidth - filled), '.');
    std::fprintf(stderr, "\r\033[K%-7s [%s] %3d%%  %s", phase, bar.c_str(),
                 static_cast<int>(std::clamp(fraction, 0.0, 1.0) * 100), what.c_str());
    std::fflush(stderr);
  }
  void clear() {
    if (!enabled_ || !drawn_) return;
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
    drawn_ = false;
  }

 private:
  bool enabled_;
  bool drawn_ = false;
  Clock::time_point last_{};
};

}  // namespace

int cmd_benchmark(const BenchmarkOptions& o) {
  KILN_CHECK(!(o.iterations > 0 && o.seconds > 0), "give either -niter or -time, not both");
  std::error_code ec;
  KILN_CHECK(std::filesystem::exists(o.model, ec), cat("model file '", o.model, "' does not exist"));
  KILN_CHECK(!std::filesystem::is_directory(o.model, ec), cat("'", o.model, "' is a directory, not a model file"));

  // Compile: read_model + compile_model (inputs are prepared in between but not timed).
  Core core;
  auto t0 = Clock::now();
  auto model = core.read_model(o.model);
  double compile_ms = ms_since(t0);
  const auto& ports = model->inputs();
  tools::PreparedInputs in = tools::prepare_inputs(ports, o.inputs, o.shapes, /*random_missing=*/true, o.seed);

  AnyMap properties;
  if (o.threads > 0) properties["inference_num_threads"] = std::to_string(o.threads);
  if (!o.disabled_passes.empty()) properties["kiln_disable_passes"] = join(o.disabled_passes, ",");
  const bool perf_counts = o.perf_counts || !o.pc_sort.empty();
  if (perf_counts) properties["enable_profiling"] = "YES";
  t0 = Clock::now();
  CompiledModel compiled = core.compile_model(model, properties);
  compile_ms += ms_since(t0);

  InferRequest req = compiled.create_infer_request();
  for (size_t i = 0; i < ports.size(); ++i) req.set_input_tensor(i, in.tensors[i]);

  std::cout << "model       " << o.model << "\n";
  for (size_t i = 0; i < ports.size(); ++i)
    std::cout << "input       " << ports[i].name << "  " << shape_to_string(in.tensors[i].shape()) << "  "
              << dtype_name(in.tensors[i].dtype()) << "  (" << in.sources[i] << ")\n";
  std::cout << "threads     " << (o.threads > 0 ? std::to_string(o.threads) : std::string("default")) << "\n";
  std::cout << "compile     " << fmt_ms(compile_ms) << "  (read_model + compile_model)\n" << std::flush;

  Progress progress;
  const bool timed_by_count = o.seconds <= 0;
  const int iterations = o.iterations > 0 ? o.iterations : kDefaultIterations;

  // First inference (includes any lazy initialisation), then untimed warmup runs.
  progress.update("first", 0, "", true);
  t0 = Clock::now();
  req.infer();
  double first_ms = ms_since(t0);
  progress.clear();  // the bar shares the terminal with stdout
  std::cout << "first       " << fmt_ms(first_ms) << "  (first inference)\n" << std::flush;
  for (int i = 0; i < o.warmup; ++i) {
    progress.update("warmup", static_cast<double>(i) / o.warmup, cat(i, "/", o.warmup));
    req.infer();
  }

  // Timed iterations.
  tools::PerfCounterAverage counters;
  std::vector<double> times;
  if (timed_by_count) times.reserve(static_cast<size_t>(iterations));
  auto loop_start = Clock::now();
  for (;;) {
    double elapsed_s = ms_since(loop_start) / 1000.0;
    if (timed_by_count) {
      if (static_cast<int>(times.size()) >= iterations) break;
      progress.update("timing", static_cast<double>(times.size()) / iterations, cat(times.size(), "/", iterations));
    } else {
      if (!times.empty() && elapsed_s >= o.seconds) break;
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.1f/%g s, %zu runs", elapsed_s, o.seconds, times.size());
      progress.update("timing", elapsed_s / o.seconds, buf);
    }
    t0 = Clock::now();
    req.infer();
    times.push_back(ms_since(t0));
    if (perf_counts) counters.add(req.get_profiling_info());
  }
  double loop_s = ms_since(loop_start) / 1000.0;
  progress.clear();

  tools::LatencyStats st = tools::latency_stats(times);
  double throughput = loop_s > 0 ? static_cast<double>(times.size()) / loop_s : 0;
  double rss = tools::peak_rss_mib();

  std::cout << "latency     median " << fmt_ms(st.median) << ", min " << fmt_ms(st.min) << ", p90 "
            << fmt_ms(st.p90) << ", max " << fmt_ms(st.max) << ", mean " << fmt_ms(st.mean) << "  ("
            << times.size() << " iterations after " << o.warmup << " warmup)\n";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f", throughput);
  std::cout << "throughput  " << buf << " inferences/s\n";
  if (rss >= 0) {
    std::snprintf(buf, sizeof buf, "%.1f", rss);
    std::cout << "peak RSS    " << buf << " MiB  (VmHWM)\n";
  } else {
    std::cout << "peak RSS    unknown (no VmHWM in /proc/self/status)\n";
  }

  if (perf_counts) {
    std::cout << "\nperformance counters (mean of " << counters.runs() << " timed iterations; profiling "
              << "synchronises after every node, so the total is a little above the latency above):\n"
              << tools::format_perf_counters(counters.average(), o.pc_sort.empty() ? "no_sort" : o.pc_sort);
  }

  if (!o.json_path.empty()) {
    nlohmann::json j;
    j["model"] = o.model;
    j["threads"] = o.threads > 0 ? nlohmann::json(o.threads) : nlohmann::json(nullptr);
    j["iterations"] = times.size();
    j["warmup"] = o.warmup;
    j["compile_ms"] = round3(compile_ms);
    j["first_inference_ms"] = round3(first_ms);
    j["latency_ms"] = {{"median", round3(st.median)}, {"min", round3(st.min)}, {"p90", round3(st.p90)},
                       {"max", round3(st.max)},       {"mean", round3(st.mean)}};
    j["throughput_per_s"] = round3(throughput);
    j["peak_rss_mib"] = rss >= 0 ? nlohmann::json(round3(rss)) : nlohmann::json(nullptr);
    std::ofstream f(o.json_path);
    KILN_CHECK(f.good(), cat("--json: cannot write '", o.json_path, "'"));
    f << j.dump(2) << "\n";
    f.close();
    KILN_CHECK(!f.fail(), cat("--json: cannot write '", o.json_path, "'"));
    std::cout << "wrote       " << o.json_path << "\n";
  }
  return 0;
}

}  // namespace kiln::cli
