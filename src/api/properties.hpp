#pragma once
// Compile properties of Core::compile_model: parsing (new and old key names, values
// checked, errors naming the key and listing what is accepted) and the effective values
// CompiledModel::get_property reports. docs/settings.md is the user's page.
#include <kiln/core.hpp>

#include <string>
#include <vector>

#include "cpu/executor.hpp"
#include "cpu/graph.hpp"
#include "cpu/stream_layout.hpp"

namespace kiln::api {

struct Settings {
  cpu::StreamRequest streams;  // num_streams, inference_num_threads, enable_cpu_pinning, performance_mode
  bool profiling = false;      // enable_profiling
  bool exclusive = false;      // exclusive_async_requests
  bool reference = false;      // kiln_executor = reference
  cpu::GraphOptions graph;     // kiln_disable_passes, kiln_pattern_files (parsed configs), inference_precision
  std::string pattern_files;   // kiln_pattern_files as given
  std::string pattern_text;    // their contents (part of the model cache's key)
  std::string cache_dir;       // cache_dir: the model cache's folder (cpu/model_cache.hpp); "": none
  size_t plan_capacity = cpu::Executor::kDefaultPlanCapacity;  // kiln_plan_cache_capacity
  int runtime_cache_capacity = -1;  // cpu_runtime_cache_capacity; -1: not given (left as it is)
  bool accuracy = false;       // execution_mode = ACCURACY: f32 unless inference_precision says otherwise
};

// Throws kiln::Error naming the key (and, for a value, what it accepts); an unknown key
// lists every key; a setting given under both its names is an error too.
// inference_precision not given: f32 with execution_mode = ACCURACY, else bf16 where the ISA
// in use runs it natively (cpu::bf16_native()), else f32. bf16 asked for where oneDNN cannot run it at all (below
// AVX-512) throws (check_bf16_available); where oneDNN emulates it, precision_warning is
// printed once per process to stderr.
Settings parse_properties(const AnyMap& properties);

// kiln_convolutions_until_hot's value: "auto", "bf16" or "f32".
const char* until_hot_name(cpu::GraphOptions::UntilHot u);

// Throws kiln::Error saying what the CPU (instruction set `isa`) lacks and what to use
// instead when bf16 is not `available`.
void check_bf16_available(bool available, const std::string& isa);

// The one-line warning for bf16 on a CPU without native bf16 (oneDNN then emulates it),
// "" when there is nothing to say (f32, the reference executor, or native bf16).
std::string precision_warning(const Settings& s, bool native_bf16, const std::string& isa);

// "num_streams" for "num_streams" or "CPU_THROUGHPUT_STREAMS"; throws for an unknown key
// (`read_only`: also the keys get_property reports but compile_model does not take).
std::string canonical_key(const std::string& key, bool read_only);

// What Core::get_property reports: kiln_cpu_isa (the instruction set in use, see
// cpu/isa.hpp), OPTIMIZATION_CAPABILITIES ("FP32", "FP32 BF16"). Unknown key: kiln::Error.
std::string device_property(const std::string& key);

// The effective value of a canonical key.
std::string effective_value(const std::string& key, const Settings& s, const cpu::StreamLayout& layout);

// "inference_num_threads (CPU_THREADS_NUM), num_streams (CPU_THROUGHPUT_STREAMS), ..."
std::string accepted_keys(bool read_only);

}  // namespace kiln::api
