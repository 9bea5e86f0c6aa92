// `kiln benchmark`: compile time, first-inference time, latency statistics over timed
// iterations, throughput and peak memory of one model; optionally as JSON. Sync mode runs
// one request inference after inference; async mode (throughput) keeps -nireq requests in
// flight on the compiled model's streams and reports FPS.
#include <kiln/core.hpp>

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <map>
#include <functional>
#include <iostream>
#include <mutex>
#include <string>
#include <vector>

#include "commands.hpp"
#include "core/strings.hpp"
#include "tools/common/exec_graph.hpp"
#include "tools/common/perf_counters.hpp"
#include "tools/common/trace.hpp"
#include "tools/common/run_util.hpp"

namespace kiln::cli {

namespace {

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

using Clock = std::chrono::steady_clock;

constexpr int kDefaultIterations = 20;

using tools::fmt_ms;
using tools::ms_since;

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

// The timed (or warmup) part: `count` inferences, or when count <= 0 as many as start
// within `seconds` (at least one). sync: one request, one inference after the other.
// async: every request in flight at once, each restarted as soon as it finishes, so
// the streams stay busy; a latency runs from start_async to the request's callback.
struct LoopResult {
  std::vector<double> latencies_ms;
  double wall_s = 0;
};

// `on_profile` (may be empty) gets every finished request's index and counters.
using ProfileSink = std::function<void(size_t request, const std::vector<ProfilingInfo>& rows)>;

LoopResult run_loop(std::vector<InferRequest>& reqs, bool async, int count, double seconds, Progress& progress,
                    const char* phase, const ProfileSink& on_profile) {
  LoopResult r;
  const auto t_start = Clock::now();
  auto more = [&](size_t launched) {
    if (count > 0) return launched < static_cast<size_t>(count);
    return launched == 0 || ms_since(t_start) / 1000.0 < seconds;
  };
  auto show = [&](size_t finished) {
    if (count > 0) {
      progress.update(phase, static_cast<double>(finished) / count, cat(finished, "/", count));
    } else {
      const double elapsed_s = ms_since(t_start) / 1000.0;
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.1f/%g s, %zu runs", elapsed_s, seconds, finished);
      progress.update(phase, elapsed_s / seconds, buf);
    }
  };
  if (count > 0) r.latencies_ms.reserve(static_cast<size_t>(count));
  if (!async) {
    InferRequest& q = reqs[0];
    for (size_t n = 0; more(n); ++n) {
      show(n);
      const auto t0 = Clock::now();
      q.infer();
      r.latencies_ms.push_back(ms_since(t0));
      if (on_profile) on_profile(0, q.get_profiling_info());
    }
    r.wall_s = ms_since(t_start) / 1000.0;
    return r;
  }
  struct Done {
    size_t request;
    double ms;
  };
  std::mutex mutex;
  std::condition_variable cv;
  std::deque<Done> done;
  std::vector<Clock::time_point> started(reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i)
    reqs[i].set_callback([&, i](std::exception_ptr) {
      const double ms = ms_since(started[i]);
      {
        std::lock_guard<std::mutex> lock(mutex);
        done.push_back({i, ms});
      }
      cv.notify_one();
    });
  size_t launched = 0, in_flight = 0;
  auto launch = [&](size_t i) {
    started[i] = Clock::now();
    reqs[i].start_async();
    ++launched;
    ++in_flight;
  };
  try {
    for (size_t i = 0; i < reqs.size() && more(launched); ++i) launch(i);
    while (in_flight > 0) {
      Done d{};
      {
        std::unique_lock<std::mutex> lock(mutex);
        cv.wait(lock, [&] { return !done.empty(); });
        d = done.front();
        done.pop_front();
      }
      --in_flight;
      reqs[d.request].wait();  // an inference error is thrown here
      r.latencies_ms.push_back(d.ms);
      if (on_profile) on_profile(d.request, reqs[d.request].get_profiling_info());
      show(r.latencies_ms.size());
      if (more(launched)) launch(d.request);
    }
  } catch (...) {
    for (InferRequest& q : reqs) {  // the callbacks use this frame: let every request finish
      try {
        q.wait();
      } catch (const Error&) {
      }
      q.set_callback(nullptr);
    }
    throw;
  }
  for (InferRequest& q : reqs) q.set_callback(nullptr);
  r.wall_s = ms_since(t_start) / 1000.0;
  return r;
}

// The -i specs naming a directory (NAME=DIR, or DIR for a one-input model), as benchmark_app's
// folder of inputs: one list of specs per file of the directories (*.npy and *.pb, in name
// order), with the other specs in every list; empty when no spec names a directory.
// Directories given for several inputs must hold as many files.
std::vector<std::vector<std::string>> input_file_groups(const std::vector<std::string>& specs) {
  namespace fs = std::filesystem;
  std::vector<std::vector<std::string>> per_spec;
  size_t n = 0;
  for (const std::string& spec : specs) {
    const size_t eq = spec.find('=');
    const std::string prefix = eq == std::string::npos ? "" : spec.substr(0, eq + 1);
    const std::string path = eq == std::string::npos ? spec : spec.substr(eq + 1);
    std::error_code ec;
    if (!fs::is_directory(path, ec)) {
      per_spec.push_back({spec});
      continue;
    }
    std::vector<std::string> files;
    for (const auto& e : fs::directory_iterator(path, ec)) {
      const std::string ext = e.path().extension().string();
      if (e.is_regular_file(ec) && (ext == ".npy" || ext == ".pb")) files.push_back(e.path().string());
    }
    KILN_CHECK(!ec, cat("-i ", spec, ": cannot list the directory: ", ec.message()));
    KILN_CHECK(!files.empty(), cat("-i ", spec, ": the directory holds no .npy or .pb file"));
    KILN_CHECK(n == 0 || files.size() == n,
               cat("-i ", spec, ": ", files.size(), " files, where another input's directory holds ", n));
    n = files.size();
    std::sort(files.begin(), files.end());
    std::vector<std::string> named;
    for (const std::string& f : files) named.push_back(prefix + f);
    per_spec.push_back(std::move(named));
  }
  if (n == 0) return {};
  std::vector<std::vector<std::string>> groups(n);
  for (size_t g = 0; g < n; ++g)
    for (const auto& ps : per_spec) groups[g].push_back(ps.size() == 1 ? ps[0] : ps[g]);
  return groups;
}

}  // namespace

int cmd_benchmark(const BenchmarkOptions& given) {
  BenchmarkOptions o = given;
  // benchmark_app's spellings: -m FILE, -d CPU, -json_stats, -cache_dir (-shape: below, once
  // the model's inputs are known)
  KILN_CHECK(o.model.empty() || o.model_flag.empty() || o.model == o.model_flag,
             cat("two models given: '", o.model, "' and -m '", o.model_flag, "'"));
  if (o.model.empty()) o.model = o.model_flag;
  KILN_CHECK(!o.model.empty(), "no model given: kiln benchmark MODEL.onnx (or -m MODEL.onnx)");
  KILN_CHECK(o.device.empty() || upper(o.device) == "CPU", cat("-d ", o.device, ": kiln runs on the CPU only (-d CPU)"));
  if (o.json_stats && o.json_path.empty()) {
    const std::filesystem::path folder(o.report_folder.empty() ? "." : o.report_folder);
    std::error_code made;
    std::filesystem::create_directories(folder, made);  // a failure shows when the report is written
    o.json_path = (folder / "benchmark_report.json").string();
  }
  KILN_CHECK(!(o.iterations > 0 && o.seconds > 0), "give either -niter or -t / -time, not both");
  KILN_CHECK(!(o.threads > 0 && o.nthreads > 0), "give either --threads or -nthreads, not both");
  std::error_code ec;
  KILN_CHECK(std::filesystem::exists(o.model, ec), cat("model file '", o.model, "' does not exist"));
  KILN_CHECK(!std::filesystem::is_directory(o.model, ec), cat("'", o.model, "' is a directory, not a model file"));

  // Compile properties: --property KEY=VALUE and the options that set one.
  AnyMap properties = parse_property_specs(o.properties);
  const int threads = o.threads > 0 ? o.threads : o.nthreads;
  if (threads > 0) add_property(properties, "inference_num_threads", std::to_string(threads), "-nthreads");
  if (!o.disabled_passes.empty())
    add_property(properties, "kiln_disable_passes", join(o.disabled_passes, ","), "--disable-pass");
  const bool perf_counts = o.perf_counts || !o.pc_sort.empty();
  if (perf_counts) add_property(properties, "enable_profiling", "YES", "-pc");
  const bool report_counters = o.report_type == "average_counters" || o.report_type == "detailed_counters";
  if ((!o.trace_path.empty() || report_counters) && !perf_counts)
    add_property(properties, "enable_profiling", "YES", o.trace_path.empty() ? "-report_type" : "--trace");
  const std::string hint = upper(o.hint);
  if (!hint.empty()) add_property(properties, "performance_mode", hint, "-hint");
  if (!o.nstreams.empty()) add_property(properties, "num_streams", o.nstreams, "-nstreams");
  if (!o.pin.empty()) add_property(properties, "enable_cpu_pinning", o.pin, "-pin");
  if (!o.infer_precision.empty()) add_property(properties, "inference_precision", o.infer_precision, "-infer_precision");
  const bool async = !o.api.empty() ? o.api == "async" : (hint == "THROUGHPUT" || !o.nstreams.empty() || o.nireq > 1);
  KILN_CHECK(async || o.nireq <= 1, cat("-nireq ", o.nireq, " needs -api async (sync runs one request)"));

  // read_model, then compile_model (which builds everything for static shapes: primitives,
  // packed weights, kernels, on every stream); inputs are prepared in between, not timed.
  // With -cache_dir: compile_model(FILE) through the model cache, which reads the file only
  // when the cache does not hold the model.
  if (!o.cache_dir.empty()) add_property(properties, "cache_dir", o.cache_dir, "-cache_dir");
  const bool through_cache = gives_cache_dir(properties);  // -cache_dir or -p cache_dir=DIR
  Core core;
  std::shared_ptr<Model> model;
  CompiledModel compiled;
  double read_ms = 0, compile_ms = 0;
  auto t0 = Clock::now();
  if (through_cache) {
    compiled = core.compile_model(o.model, properties);
    compile_ms = ms_since(t0);
  } else {
    model = core.read_model(o.model);
    read_ms = ms_since(t0);
  }
  const std::vector<PortInfo> ports = through_cache ? compiled.inputs() : model->inputs();  // (a copy: the model is handed over)
  {  // --shape in benchmark_app's spelling (x[1,3,224,224], no '='): one shape per input
    std::vector<std::string> kiln_specs, app_specs;
    for (const std::string& spec : o.shapes) (spec.find('=') == std::string::npos ? app_specs : kiln_specs).push_back(spec);
    if (!app_specs.empty()) {
      const std::string app = join(app_specs, ",");
      const auto groups = tools::parse_data_shape(app, ports);
      KILN_CHECK(groups.size() == 1, cat("-shape ", app, ": one shape per input (to cycle through several: -data_shape)"));
      kiln_specs.insert(kiln_specs.end(), groups[0].begin(), groups[0].end());
    }
    o.shapes = kiln_specs;
  }
  // -data_shape: one set of inputs per shape group, cycled through; -i NAME=DIR: one set per
  // file of the directory (benchmark_app's folder of inputs), cycled through; else one set
  std::vector<tools::PreparedInputs> groups;
  const std::vector<std::vector<std::string>> file_groups = input_file_groups(o.inputs);
  if (!file_groups.empty()) {
    KILN_CHECK(o.data_shape.empty(), "-i NAME=DIR cycles through files: not with -data_shape");
    KILN_CHECK(!async, "-i NAME=DIR runs one request after the other: not with -api async, -hint throughput, "
                       "-nstreams or -nireq");
    for (const auto& specs : file_groups)
      groups.push_back(tools::prepare_inputs(ports, specs, o.shapes, /*random_missing=*/true, o.seed));
  } else if (!o.data_shape.empty()) {
    KILN_CHECK(!async, "-data_shape runs one request after the other: not with -api async, -hint throughput, "
                       "-nstreams or -nireq");
    for (const auto& specs : tools::parse_data_shape(o.data_shape, ports)) {
      std::vector<std::string> all = o.shapes;
      all.insert(all.end(), specs.begin(), specs.end());
      groups.push_back(tools::prepare_inputs(ports, o.inputs, all, /*random_missing=*/true, o.seed));
    }
  } else {
    groups.push_back(tools::prepare_inputs(ports, o.inputs, o.shapes, /*random_missing=*/true, o.seed));
  }
  const tools::PreparedInputs& in = groups[0];

  if (!through_cache) {
    t0 = Clock::now();
    // handed over: the compiled model keeps each weight once, packed (Core::compile_model)
    compiled = core.compile_model(std::move(model), properties);
    compile_ms = ms_since(t0);
  }

  const int streams = std::stoi(compiled.get_property("num_streams"));
  const int total_threads = std::stoi(compiled.get_property("inference_num_threads"));
  const int per_stream = std::stoi(compiled.get_property("kiln_threads_per_stream"));
  const std::string pinning = compiled.get_property("enable_cpu_pinning");
  const std::string mode = compiled.get_property("performance_mode");
  const int nireq =
      async ? (o.nireq > 0 ? o.nireq : std::stoi(compiled.get_property("optimal_number_of_infer_requests"))) : 1;
  std::vector<InferRequest> reqs;
  for (int i = 0; i < nireq; ++i) {
    reqs.push_back(compiled.create_infer_request());
    for (size_t k = 0; k < ports.size(); ++k) reqs.back().set_input_tensor(k, in.tensors[k]);
  }

  std::cout << "model       " << o.model << "\n";
  for (size_t i = 0; i < ports.size(); ++i) {
    std::cout << "input       " << ports[i].name << "  " << shape_to_string(in.tensors[i].shape());
    if (groups.size() > 1)
      std::cout << " .. " << shape_to_string(groups.back().tensors[i].shape()) << " (" << groups.size() << " shapes)";
    std::cout << "  " << dtype_name(in.tensors[i].dtype()) << "  (" << in.sources[i] << ")\n";
  }
  if (!in.defaulted_dims_hint.empty()) std::cout << "note        " << in.defaulted_dims_hint << "\n";
  std::cout << "threads     " << total_threads << "\n";
  std::cout << "streams     " << streams << " (" << per_stream << (per_stream == 1 ? " thread" : " threads")
            << " each, pinning " << pinning << ", hint " << mode << ")\n";
  {  // asked for more streams or threads than the CPUs: what was cut
    const std::string layout = compiled.get_property("kiln_stream_layout");
    const size_t at = layout.find("; clamped: ");
    if (at != std::string::npos) std::cout << "note        " << layout.substr(at + 2) << "\n";
  }
  std::cout << "api         " << (async ? "async" : "sync") << ", " << nireq
            << (nireq == 1 ? " infer request\n" : " infer requests\n");
  std::cout << "precision   " << describe_precision(compiled.get_property("inference_precision"), properties) << "\n";
  std::cout << "isa         " << compiled.get_property("kiln_cpu_isa") << "\n";
  if (through_cache)
    std::cout << "cache       " << compiled.get_property("kiln_model_cache") << "\n"
              << "read        -  (compile_model reads the file itself, only on a cache miss: in compile)\n";
  else
    std::cout << "read        " << fmt_ms(read_ms) << "  (read_model)\n";
  std::cout << "compile     " << fmt_ms(compile_ms)
            << (std::all_of(ports.begin(), ports.end(), [](const PortInfo& p) { return p.is_static(); })
                    ? "  (compile_model: every stream's runtime graph built)\n"
                    : "  (compile_model: fusions and packed weights for every shape, a graph at a probe shape; "
                      "each new input shape compiles at its first inference)\n")
            << std::flush;

  Progress progress;
  const bool timed_by_count = o.seconds <= 0;
  const int iterations = o.iterations > 0 ? o.iterations : kDefaultIterations;

  // Timed iterations.
  tools::PerfCounterAverage counters;
  std::map<size_t, tools::PerfCounterAverage> per_request;  // -report_type detailed_counters
  tools::Trace trace;
  ProfileSink sink;
  if (perf_counts || !o.trace_path.empty() || report_counters)
    sink = [&](size_t request, const std::vector<ProfilingInfo>& rows) {
      if (perf_counts || report_counters) counters.add(rows);
      if (o.report_type == "detailed_counters") per_request[request].add(rows);
      if (!o.trace_path.empty()) trace.add(request, rows);
    };
  double first_ms = 0;
  LoopResult loop;
  std::vector<double> first_seen, repeated;  // -data_shape: latencies of a shape's first / later inferences
  std::vector<double> rss_per_pass;          // -data_shape: resident MiB after each pass over the shapes
  std::vector<std::vector<double>> group_ms(groups.size());  // -data_shape: each group's latencies in order
  try {
  if (groups.size() == 1 && o.data_shape.empty()) {
    // First inference (includes any lazy initialisation), then untimed warmup runs.
    progress.update("first", 0, "", true);
    t0 = Clock::now();
    reqs[0].infer();
    first_ms = ms_since(t0);
    progress.clear();  // the bar shares the terminal with stdout
    std::cout << "first       " << fmt_ms(first_ms) << "  (first inference)\n" << std::flush;
    if (o.warmup > 0) run_loop(reqs, async, o.warmup, 0, progress, "warmup", {});
    loop = run_loop(reqs, async, timed_by_count ? iterations : 0, o.seconds, progress, "timing", sink);
  } else {
    // the shape groups in turn, every inference timed: a group's first is a first-seen shape
    const size_t count = o.iterations > 0 ? static_cast<size_t>(o.iterations) : 3 * groups.size();
    std::vector<bool> seen(groups.size(), false);
    const auto t_start = Clock::now();
    for (size_t n = 0; timed_by_count ? n < count : (n == 0 || ms_since(t_start) / 1000.0 < o.seconds); ++n) {
      const size_t g = n % groups.size();
      for (size_t k = 0; k < ports.size(); ++k) reqs[0].set_input_tensor(k, groups[g].tensors[k]);
      progress.update("timing", timed_by_count ? static_cast<double>(n) / count : ms_since(t_start) / 1000.0 / o.seconds,
                      cat(n, " runs"));
      t0 = Clock::now();
      reqs[0].infer();
      const double ms = ms_since(t0);
      loop.latencies_ms.push_back(ms);
      (seen[g] ? repeated : first_seen).push_back(ms);
      group_ms[g].push_back(ms);
      if (n == 0) first_ms = ms;
      seen[g] = true;
      if (g + 1 == groups.size()) rss_per_pass.push_back(tools::rss_mib());
      if (sink) sink(0, reqs[0].get_profiling_info());
    }
    loop.wall_s = ms_since(t_start) / 1000.0;
  }
  } catch (const Error& e) {
    progress.clear();
    throw Error(in.explain(e));  // naming the defaulted dims, the likely cause
  }
  progress.clear();
  const std::vector<double>& times = loop.latencies_ms;

  tools::LatencyStats st = tools::latency_stats(times);
  double throughput = loop.wall_s > 0 ? static_cast<double>(times.size()) / loop.wall_s : 0;
  double rss = tools::peak_rss_mib();

  std::cout << "latency     median " << fmt_ms(st.median) << ", min " << fmt_ms(st.min) << ", p90 "
            << fmt_ms(st.p90) << ", max " << fmt_ms(st.max) << ", mean " << fmt_ms(st.mean) << "  ("
            << times.size()
            << (first_seen.empty() ? cat(" iterations after ", o.warmup, " warmup)\n")
                                   : std::string(" iterations over all shapes, no warmup)\n"));
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f", throughput);
  std::cout << "throughput  " << buf << " inferences/s";
  if (async)
    std::cout << "  (FPS, " << nireq << (nireq == 1 ? " request" : " requests") << " in flight on " << streams
              << (streams == 1 ? " stream)" : " streams)");
  std::cout << "\n";
  if (!first_seen.empty()) {
    auto line = [&](const char* label, const std::vector<double>& v) {
      if (v.empty()) return void(std::cout << label << "none\n");
      const tools::LatencyStats s = tools::latency_stats(v);
      std::cout << label << "median " << fmt_ms(s.median) << ", mean " << fmt_ms(s.mean) << ", max " << fmt_ms(s.max)
                << ", total " << fmt_ms(s.total) << "  (" << v.size() << " inferences)\n";
    };
    std::cout << "shapes      " << groups.size()
              << (file_groups.empty() ? " groups, cycled (-data_shape)\n" : " sets of input files, cycled (-i NAME=DIR)\n");
    line("first-seen  ", first_seen);
    line("repeated    ", repeated);
    if (!rss_per_pass.empty()) {
      std::vector<std::string> mib;
      for (double m : rss_per_pass) mib.push_back(cat(static_cast<long>(std::lround(m))));
      std::cout << "memory      resident " << join(mib, ", ") << " MiB after each pass over the shapes\n";
    }
    std::cout << "plan cache  " << compiled.get_property("kiln_plan_cache_size") << " of "
              << compiled.get_property("kiln_plan_cache_capacity") << " plans kept, "
              << compiled.get_property("kiln_plan_cache_hits") << " hits, "
              << compiled.get_property("kiln_plan_cache_misses") << " misses\n";
    // what the first-seen latencies paid for compiling (the new shapes' plans and their graphs)
    std::cout << "compiling   " << fmt_ms(std::stod(compiled.get_property("kiln_plan_compile_ms")))
              << " of the inferences' time went to compiling plans for new input shapes\n";
    if (const std::string c = compiled.get_property("kiln_convolutions_until_hot_choice"); !c.empty())
      std::cout << "new shapes  convolutions until hot in " << c << "\n";
  }
  const auto mib_of = [&](const char* property) {
    return static_cast<double>(std::stoull(compiled.get_property(property))) / (1024.0 * 1024.0);
  };
  const double weights_mib = mib_of("kiln_weights_bytes"), released_mib = mib_of("kiln_released_weights_bytes"),
               arena_mib = mib_of("kiln_arena_bytes");
  std::snprintf(buf, sizeof buf, "%.1f", weights_mib);
  std::cout << "memory      packed weights " << buf << " MiB";
  std::snprintf(buf, sizeof buf, "%.1f", released_mib);
  std::cout << " (" << buf << " MiB of originals given back), intermediate tensors ";
  std::snprintf(buf, sizeof buf, "%.1f", arena_mib);
  std::cout << buf << " MiB (arenas of all streams)\n";
  if (rss >= 0) {
    std::snprintf(buf, sizeof buf, "%.1f", rss);
    std::cout << "peak RSS    " << buf << " MiB  (VmHWM)\n";
  } else {
    std::cout << "peak RSS    unknown (no VmHWM in /proc/self/status)\n";
  }

  if (perf_counts) {
    const std::vector<ProfilingInfo> mean_rows = counters.average();
    std::cout << "\nperformance counters (mean of " << counters.runs() << " timed iterations; profiling "
              << "synchronises after every node, so the latencies above are a little longer than without -pc"
              << (streams > 1 && nireq > 1 ? "; CPU times include the other streams' work" : "") << "):\n"
              << tools::format_perf_counters(mean_rows, o.pc_sort.empty() ? "no_sort" : o.pc_sort)
              << tools::format_node_time_vs_latency(tools::node_time_sum_ms(mean_rows), st.mean, st.median)
              << (async ? "  (async: a latency includes the time queued for a stream)" : "") << "\n";
  }

  if (!o.report_type.empty()) {
    // benchmark_app-style CSV reports (';'-separated) in -report_folder
    const std::filesystem::path dir = o.report_folder.empty() ? "." : o.report_folder;
    std::error_code made;
    std::filesystem::create_directories(dir, made);  // a failure shows when a report is written
    auto write_csv = [&](const char* file, const std::string& text) {
      const std::filesystem::path p = dir / file;
      std::ofstream f(p);
      KILN_CHECK(f.good(), cat("-report_type: cannot write '", p.string(), "'"));
      f << text;
      f.close();
      KILN_CHECK(!f.fail(), cat("-report_type: cannot write '", p.string(), "'"));
      std::cout << "wrote       " << p.string() << "\n";
    };
    std::ostringstream stats;
    stats << "Statistics report\nmodel;" << o.model << "\napi;" << (async ? "async" : "sync") << "\nstreams;" << streams
          << "\nrequests;" << nireq << "\niterations;" << times.size() << "\nread ms;" << round3(read_ms)
          << "\ncompile ms;" << round3(compile_ms) << "\nfirst inference ms;" << round3(first_ms)
          << "\nlatency median ms;" << round3(st.median) << "\nlatency min ms;" << round3(st.min) << "\nlatency p90 ms;"
          << round3(st.p90) << "\nlatency max ms;" << round3(st.max) << "\nthroughput per s;" << round3(throughput) << "\n";
    write_csv("benchmark_report.csv", stats.str());
    auto counters_csv = [](const std::vector<ProfilingInfo>& rows) {
      std::ostringstream os;
      os << "layerName;execStatus;layerType;execType;realTime (ms);cpuTime (ms);fusedInto\n";
      for (const ProfilingInfo& r : rows)
        os << r.node_name << ";" << status_name(r.status) << ";" << r.node_type << ";" << r.exec_type << ";"
           << round3(r.real_time_us / 1000.0) << ";" << round3(r.cpu_time_us / 1000.0) << ";" << r.fused_into << "\n";
      return os.str();
    };
    if (o.report_type == "average_counters") write_csv("benchmark_average_counters_report.csv", counters_csv(counters.average()));
    if (o.report_type == "detailed_counters") {
      std::string text;
      for (auto& [request, avg] : per_request)
        text += cat("request ", request, " (", avg.runs(), " runs)\n", counters_csv(avg.average()), "\n");
      write_csv("benchmark_detailed_counters_report.csv", text);
    }
  }
  if (!o.trace_path.empty()) {
    trace.write(o.trace_path);
    std::cout << "wrote       " << o.trace_path << "  (" << trace.events()
              << " node events; open in chrome://tracing or ui.perfetto.dev)\n";
  }
  if (!o.exec_graph_path.empty()) {
    // the runtime graph the benchmark's requests ran for these input shapes
    std::vector<Shape> shapes;
    for (const Tensor& t : in.tensors) shapes.push_back(t.shape());
    const RuntimeModel runtime = compiled.get_runtime_model(shapes);
    KILN_CHECK(runtime.reference_reason.empty(), cat("-exec_graph_path: no runtime graph (", runtime.reference_reason, ")"));
    std::ofstream f(o.exec_graph_path);
    KILN_CHECK(f.good(), cat("-exec_graph_path: cannot write '", o.exec_graph_path, "'"));
    f << tools::exec_graph_json(runtime).dump(2) << "\n";
    std::cout << "wrote       " << o.exec_graph_path << "  (runtime graph)\n";
  }

  if (!o.json_path.empty()) {
    nlohmann::json j;
    j["model"] = o.model;
    j["threads"] = total_threads;
    j["threads_per_stream"] = per_stream;
    j["streams"] = streams;
    j["pinning"] = pinning;
    j["hint"] = mode;
    j["api"] = async ? "async" : "sync";
    j["nireq"] = nireq;
    j["precision"] = compiled.get_property("inference_precision");
    j["isa"] = compiled.get_property("kiln_cpu_isa");
    j["properties"] = properties;
    j["iterations"] = times.size();
    j["warmup"] = first_seen.empty() ? o.warmup : 0;
    j["read_ms"] = round3(read_ms);
    j["compile_ms"] = round3(compile_ms);
    if (through_cache) j["model_cache"] = compiled.get_property("kiln_model_cache");
    j["first_inference_ms"] = round3(first_ms);
    j["latency_ms"] = {{"median", round3(st.median)}, {"min", round3(st.min)}, {"p90", round3(st.p90)},
                       {"max", round3(st.max)},       {"mean", round3(st.mean)}};
    j["throughput_per_s"] = round3(throughput);
    j["fps"] = round3(throughput);
    j["peak_rss_mib"] = rss >= 0 ? nlohmann::json(round3(rss)) : nlohmann::json(nullptr);
    j["packed_weights_mib"] = round3(weights_mib);
    j["released_weights_mib"] = round3(released_mib);
    j["arena_mib"] = round3(arena_mib);
    if (perf_counts) j["node_time_sum_ms"] = round3(tools::node_time_sum_ms(counters.average()));
    if (!first_seen.empty()) {
      auto stats = [](const std::vector<double>& v) {
        if (v.empty()) return nlohmann::json(nullptr);
        const tools::LatencyStats s = tools::latency_stats(v);
        return nlohmann::json{{"count", v.size()}, {"median", round3(s.median)}, {"mean", round3(s.mean)},
                              {"max", round3(s.max)}, {"total", round3(s.total)}};
      };
      j["data_shape"] = {{"groups", groups.size()},
                         {"rss_mib_per_pass", rss_per_pass},
                         {"first_seen_ms", stats(first_seen)},
                         {"repeated_ms", stats(repeated)},
                         {"group_ms", group_ms},
                         {"plan_cache", {{"size", std::stoul(compiled.get_property("kiln_plan_cache_size"))},
                                         {"capacity", std::stoul(compiled.get_property("kiln_plan_cache_capacity"))},
                                         {"hits", std::stoul(compiled.get_property("kiln_plan_cache_hits"))},
                                         {"misses", std::stoul(compiled.get_property("kiln_plan_cache_misses"))}}},
                         {"plan_compile_ms", round3(std::stod(compiled.get_property("kiln_plan_compile_ms")))}};
      if (const std::string c = compiled.get_property("kiln_convolutions_until_hot_choice"); !c.empty())
        j["data_shape"]["convolutions_until_hot"] = c;
    }
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
