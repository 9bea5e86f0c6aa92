#include "api/properties.hpp"

#include <algorithm>
#include <cctype>
#include <map>

#include "core/strings.hpp"
#include "cpu/compile_pipeline.hpp"
#include "cpu/emitters/x64/target_machine.hpp"
#include "cpu/dnnl_util.hpp"
#include "cpu/isa.hpp"
#include "cpu/graph_optimizer.hpp"
#include "pattern/pattern_config.hpp"

#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>

namespace kiln::api {

namespace {

struct Key {
  const char* name;
  const char* old_name;  // the spec's (OpenVINO 1.0) key, or null
  const char* values;    // what it accepts, for error messages
  bool read_only;
};

// Every key, in the order errors list them.
const std::vector<Key>& keys() {
  static const std::vector<Key> k = {
      {"inference_num_threads", "CPU_THREADS_NUM", "an integer >= 0 (0: all CPUs)", false},
      {"num_streams", "CPU_THROUGHPUT_STREAMS",
       "an integer >= 0, AUTO (or CPU_THROUGHPUT_AUTO), NUMA (or CPU_THROUGHPUT_NUMA)", false},
      {"enable_cpu_pinning", "CPU_BIND_THREAD", "YES, NO, NUMA", false},
      {"performance_mode", "PERFORMANCE_HINT", "LATENCY, THROUGHPUT, NONE", false},
      {"exclusive_async_requests", "EXCLUSIVE_ASYNC_REQUESTS", "YES, NO", false},
      {"enable_profiling", "PERF_COUNT", "YES, NO", false},
      {"inference_precision", "ENFORCE_BF16", "f32, bf16 (ENFORCE_BF16: YES, NO)", false},
      {"execution_mode", "EXECUTION_MODE_HINT", "PERFORMANCE, ACCURACY", false},
      {"snippets_mode", "SNIPPETS_MODE", "ENABLE, IGNORE_CALLBACK, DISABLE", false},
      {"kiln_executor", nullptr, "cpu, reference", false},
      {"kiln_snippets_isa", nullptr, "auto, avx512, avx2", false},
      {"kiln_disable_passes", nullptr, "optimizer pass names, comma-separated, or all-fusions", false},
      {"kiln_pattern_files", nullptr, "pattern-mapping JSON files, comma-separated (docs/pattern_mapping.md)", false},
      {"kiln_plan_cache_capacity", nullptr, "an integer in [1, 100000]: the input-shape plans kept", false},
      {"kiln_max_tensor_bytes", nullptr, "bytes, an integer >= 1024: the largest tensor or plan memory allowed", false},
      {"kiln_convolutions_until_hot", nullptr, "auto, bf16, f32: the precision of a new input shape's convolutions in bf16 mode (auto: measured)", false},
      {"cpu_runtime_cache_capacity", "CPU_RUNTIME_CACHE_CAPACITY",
       "an integer in [0, 1000000]: oneDNN primitives kept for reuse, process-wide (0: none)", false},
      {"cache_dir", "CACHE_DIR", "a folder for compiled models (created when missing; empty: no cache)", false},
      {"optimal_number_of_infer_requests", "OPTIMAL_NUMBER_OF_INFER_REQUESTS", "", true},
      {"kiln_model_cache", nullptr, "", true},
      {"kiln_weights_bytes", nullptr, "", true},
      {"kiln_released_weights_bytes", nullptr, "", true},
      {"kiln_arena_bytes", nullptr, "", true},
      {"kiln_threads_per_stream", nullptr, "", true},
      {"kiln_stream_layout", nullptr, "", true},
      {"kiln_cpu_isa", nullptr, "", true},
      {"kiln_plan_cache_size", nullptr, "", true},
      {"kiln_plan_cache_hits", nullptr, "", true},
      {"kiln_plan_cache_misses", nullptr, "", true},
      {"kiln_plan_compile_ms", nullptr, "", true},
      {"kiln_convolutions_until_hot_choice", nullptr, "", true},
  };
  return k;
}

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// "a,b,,c" -> {a, b, c}: the non-empty items of a comma-separated value.
std::vector<std::string> split_list(const std::string& v) {
  std::vector<std::string> items;
  size_t at = 0;
  while (at <= v.size()) {
    const size_t comma = v.find(',', at);
    std::string item = v.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    at = comma == std::string::npos ? v.size() + 1 : comma + 1;
    if (!item.empty()) items.push_back(std::move(item));
  }
  return items;
}

[[noreturn]] void bad_value(const std::string& key, const std::string& v, const char* accepted) {
  throw Error(cat("property ", key, ": '", v, "' is not one of: ", accepted));
}

bool parse_bool(const std::string& key, const std::string& v) {
  const std::string u = upper(v);
  if (u == "YES" || u == "TRUE" || u == "1") return true;
  if (u == "NO" || u == "FALSE" || u == "0") return false;
  bad_value(key, v, "YES, NO (also true, false, 1, 0)");
}

// A plain decimal integer in [lo, hi] (no sign, no spaces); false otherwise.
bool parse_u64(const std::string& v, uint64_t lo, uint64_t hi, uint64_t* out) {
  if (v.empty() || v.size() > 19 || !std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return false;
  const unsigned long long x = std::stoull(v);  // 19 digits always fit
  if (x < lo || x > hi) return false;
  *out = x;
  return true;
}

bool parse_int(const std::string& v, int lo, int hi, int* out) {
  uint64_t x = 0;
  if (lo < 0 || !parse_u64(v, static_cast<uint64_t>(lo), static_cast<uint64_t>(hi), &x)) return false;
  *out = static_cast<int>(x);
  return true;
}

const Key& find_key(const std::string& key, bool read_only) {
  for (const Key& k : keys())
    if ((key == k.name || (k.old_name && key == k.old_name)) && (read_only || !k.read_only)) return k;
  throw Error(cat("unknown property '", key, "'; accepted: ", accepted_keys(read_only)));
}

}  // namespace

std::string accepted_keys(bool read_only) {
  std::vector<std::string> names;
  for (const Key& k : keys()) {
    if (k.read_only && !read_only) continue;
    names.push_back(k.old_name ? cat(k.name, " (", k.old_name, ")") : std::string(k.name));
  }
  return join(names, ", ");
}

std::string canonical_key(const std::string& key, bool read_only) { return find_key(key, read_only).name; }

Settings parse_properties(const AnyMap& properties) {
  using Streams = cpu::StreamRequest::Streams;
  Settings s;
  s.graph.convolutions_until_hot = cpu::GraphOptions::UntilHot::measure;  // kiln_convolutions_until_hot = auto
  std::map<std::string, std::string> given;  // canonical key -> the name it came under
  bool precision_given = false;
  for (auto& [k, v] : properties) {
    const Key& key = find_key(k, false);
    const std::string name = key.name;
    if (auto it = given.find(name); it != given.end())
      throw Error(cat("property ", name, " is given twice (as ", it->second, " and as ", k, ")"));
    given[name] = k;
    if (name == "inference_num_threads") {
      if (!parse_int(v, 0, 4096, &s.streams.threads))
        throw Error(cat("property ", k, ": '", v, "' is not an integer in [0, 4096] (0: all CPUs)"));
    } else if (name == "num_streams") {
      const std::string u = upper(v);
      if (u == "AUTO" || u == "CPU_THROUGHPUT_AUTO") {
        s.streams.streams_kind = Streams::automatic;
      } else if (u == "NUMA" || u == "CPU_THROUGHPUT_NUMA") {
        s.streams.streams_kind = Streams::numa;
      } else if (parse_int(v, 0, 1024, &s.streams.streams)) {
        s.streams.streams_kind = Streams::number;
      } else {
        bad_value(k, v, "an integer in [0, 1024], AUTO (or CPU_THROUGHPUT_AUTO), NUMA (or CPU_THROUGHPUT_NUMA)");
      }
    } else if (name == "enable_cpu_pinning") {
      if (upper(v) == "NUMA") s.streams.pin = cpu::PinMode::numa;
      else {
        const std::string u = upper(v);
        if (u == "YES" || u == "TRUE" || u == "1") s.streams.pin = cpu::PinMode::cores;
        else if (u == "NO" || u == "FALSE" || u == "0") s.streams.pin = cpu::PinMode::none;
        else bad_value(k, v, "YES, NO, NUMA (also true, false, 1, 0)");
      }
    } else if (name == "performance_mode") {
      const std::string u = upper(v);
      if (u == "LATENCY") s.streams.mode = cpu::PerformanceMode::latency;
      else if (u == "THROUGHPUT") s.streams.mode = cpu::PerformanceMode::throughput;
      else if (u == "NONE" || u == "UNDEFINED" || u.empty()) s.streams.mode = cpu::PerformanceMode::none;
      else bad_value(k, v, "LATENCY, THROUGHPUT, NONE");
    } else if (name == "exclusive_async_requests") {
      s.exclusive = parse_bool(k, v);
    } else if (name == "inference_precision") {
      const std::string u = upper(v);
      if (k == "ENFORCE_BF16") s.graph.bf16 = parse_bool(k, v);
      else if (u == "BF16") s.graph.bf16 = true;
      else if (u == "F32" || u == "FP32") s.graph.bf16 = false;
      else bad_value(k, v, "f32, bf16");
      precision_given = true;
    } else if (name == "execution_mode") {
      const std::string u = upper(v);
      if (u == "ACCURACY") s.accuracy = true;
      else if (u == "PERFORMANCE") s.accuracy = false;
      else bad_value(k, v, "PERFORMANCE, ACCURACY");
    } else if (name == "enable_profiling") {
      s.profiling = parse_bool(k, v);
    } else if (name == "kiln_disable_passes") {
      // comma-separated pass names, or all-fusions
      const auto known = cpu::known_pass_names();
      for (const std::string& pass : split_list(v)) {
        if (std::find(known.begin(), known.end(), pass) == known.end())
          throw Error(cat("property kiln_disable_passes: unknown pass '", pass, "'; passes: ", join(known, ", ")));
        s.graph.disabled_passes.insert(pass);
      }
    } else if (name == "kiln_pattern_files") {
      // every file is read and validated now, so a bad config fails compile_model
      auto configs = std::make_shared<std::vector<pattern::PatternConfig>>();
      std::vector<std::string> files;
      for (const std::string& file : split_list(v)) {
        std::ifstream f(file);
        if (!f.good()) throw Error(cat("property kiln_pattern_files: cannot read '", file, "'"));
        std::stringstream text;
        text << f.rdbuf();
        try {
          for (auto& c : pattern::parse_pattern_configs_string(text.str(), file)) configs->push_back(std::move(c));
        } catch (const Error& e) {
          throw Error(cat("property kiln_pattern_files: '", file, "': ", e.what()));
        }
        files.push_back(file);
        s.pattern_text += text.str();
      }
      s.graph.user_patterns = configs;
      s.pattern_files = join(files, ",");
    } else if (name == "cache_dir") {
      s.cache_dir = v;
    } else if (name == "snippets_mode") {
      const std::string u = upper(v);
      if (u == "ENABLE") s.graph.snippets_mode = cpu::SnippetsMode::enable;
      else if (u == "IGNORE_CALLBACK") s.graph.snippets_mode = cpu::SnippetsMode::ignore_callback;
      else if (u == "DISABLE") s.graph.snippets_mode = cpu::SnippetsMode::disable;
      else bad_value(k, v, "ENABLE, IGNORE_CALLBACK, DISABLE");
    } else if (name == "kiln_snippets_isa") {
      try {
        s.graph.snippets_isa = snippets::parse_isa(v);
      } catch (const Error&) {
        bad_value(k, v, "auto, avx512, avx2");
      }
      try {  // auto: the widest the ISA in use runs, or none
        if (s.graph.snippets_isa != snippets::Isa::Auto)
          cpu::x64::make_target_machine(s.graph.snippets_isa)->check_available();
      } catch (const Error& e) {
        throw Error(cat("property kiln_snippets_isa=", v, ": ", e.what()));
      }
    } else if (name == "kiln_plan_cache_capacity") {
      int n = 0;
      if (!parse_int(v, 1, 100000, &n)) bad_value(k, v, "an integer in [1, 100000]");
      s.plan_capacity = static_cast<size_t>(n);
    } else if (name == "kiln_max_tensor_bytes") {
      if (!parse_u64(v, 1024, UINT64_MAX, &s.graph.max_tensor_bytes)) bad_value(k, v, "bytes, an integer >= 1024");
    } else if (name == "kiln_convolutions_until_hot") {
      using U = cpu::GraphOptions::UntilHot;
      if (v != "auto" && v != "bf16" && v != "f32") bad_value(k, v, "auto, bf16, f32");
      s.graph.convolutions_until_hot = v == "auto" ? U::measure : v == "f32" ? U::f32 : U::bf16;
    } else if (name == "cpu_runtime_cache_capacity") {
      if (!parse_int(v, 0, 1000000, &s.runtime_cache_capacity)) bad_value(k, v, "an integer in [0, 1000000]");
    } else if (name == "kiln_executor") {
      if (v != "cpu" && v != "reference") bad_value(k, v, "cpu, reference");
      s.reference = v == "reference";
    }
  }
  // inference_precision not given: f32 for ACCURACY (OpenVINO's execution mode hint: the
  // precision the model was trained in), else bf16 where the ISA in use runs it natively
  if (!precision_given) s.graph.bf16 = !s.accuracy && cpu::bf16_native();
  if (s.graph.bf16 && !s.reference) {
    check_bf16_available(cpu::bf16_available(), cpu::isa_description());
    const std::string warning = precision_warning(s, cpu::bf16_native(), cpu::isa_description());
    static std::once_flag once;  // one line per process, not one per compiled model
    if (!warning.empty()) std::call_once(once, [&] { std::cerr << warning << "\n"; });
  }
  return s;
}

const char* until_hot_name(cpu::GraphOptions::UntilHot u) {
  using U = cpu::GraphOptions::UntilHot;
  return u == U::measure ? "auto" : u == U::f32 ? "f32" : "bf16";
}

void check_bf16_available(bool available, const std::string& isa) {
  KILN_CHECK(available, cat("inference_precision=bf16: this CPU cannot compute in bf16 (instruction set ", isa,
                            "): oneDNN runs bf16 only on AVX-512 (natively with avx512_bf16 or AMX, emulated on "
                            "other AVX-512 CPUs); use inference_precision=f32"));
}

std::string precision_warning(const Settings& s, bool native_bf16, const std::string& isa) {
  if (!s.graph.bf16 || s.reference || native_bf16) return "";
  return cat("kiln: warning: inference_precision=bf16 on a CPU without native bf16 (instruction set ", isa,
             "): oneDNN emulates it, which is slower than f32");
}

std::string effective_value(const std::string& key, const Settings& s, const cpu::StreamLayout& layout) {
  auto yes_no = [](bool b) { return std::string(b ? "YES" : "NO"); };
  if (key == "inference_num_threads") return std::to_string(layout.total_threads());
  if (key == "num_streams") return std::to_string(layout.streams);
  if (key == "enable_cpu_pinning") return cpu::pin_mode_name(layout.pin);
  if (key == "performance_mode") return cpu::performance_mode_name(s.streams.mode);
  if (key == "exclusive_async_requests") return yes_no(s.exclusive);
  if (key == "enable_profiling") return yes_no(s.profiling);
  if (key == "inference_precision") return s.graph.bf16 && !s.reference ? "bf16" : "f32";  // reference kernels: f32
  if (key == "execution_mode") return s.accuracy ? "ACCURACY" : "PERFORMANCE";
  if (key == "kiln_executor") return s.reference ? "reference" : "cpu";
  if (key == "snippets_mode") {
    switch (s.graph.snippets_mode) {
      case cpu::SnippetsMode::enable: return "ENABLE";
      case cpu::SnippetsMode::ignore_callback: return "IGNORE_CALLBACK";
      case cpu::SnippetsMode::disable: return "DISABLE";
    }
  }
  if (key == "kiln_snippets_isa") {  // what Auto resolves to here ("none": no snippets target)
    if (s.graph.snippets_isa != snippets::Isa::Auto) return snippets::isa_name(s.graph.snippets_isa);
    const auto best = cpu::x64::best_isa();
    return best ? snippets::isa_name(*best) : "none";
  }
  if (key == "kiln_pattern_files") return s.pattern_files;
  if (key == "cache_dir") return s.cache_dir;
  if (key == "kiln_plan_cache_capacity") return std::to_string(s.plan_capacity);
  if (key == "kiln_max_tensor_bytes") return std::to_string(cpu::max_tensor_bytes(s.graph));
  if (key == "kiln_convolutions_until_hot") return until_hot_name(s.graph.convolutions_until_hot);
  if (key == "cpu_runtime_cache_capacity") return std::to_string(dnnl::get_primitive_cache_capacity());
  if (key == "kiln_disable_passes")
    return join(std::vector<std::string>(s.graph.disabled_passes.begin(), s.graph.disabled_passes.end()), ",");
  if (key == "optimal_number_of_infer_requests") return std::to_string(std::max(1, layout.streams));
  if (key == "kiln_threads_per_stream") return std::to_string(layout.threads_per_stream);
  if (key == "kiln_stream_layout") return layout.describe();
  if (key == "kiln_cpu_isa") return cpu::isa_description();
  throw Error(cat("unknown property '", key, "'; accepted: ", accepted_keys(true)));
}

std::string device_property(const std::string& key) {
  if (key == "kiln_cpu_isa") return cpu::isa_description();
  if (key == "OPTIMIZATION_CAPABILITIES") return cpu::bf16_available() ? "FP32 BF16" : "FP32";
  throw Error(cat("unknown device property '", key, "'; accepted: kiln_cpu_isa, OPTIMIZATION_CAPABILITIES"));
}

}  // namespace kiln::api
