#pragma once
// The model cache's key for a compile_model call (cpu/model_cache.hpp holds the files): a hash
// of the model's content and of everything else that changes what the compiler makes.
#include <string>

#include "api/properties.hpp"
#include "cpu/stream_layout.hpp"

namespace kiln::api {

// kiln's version and this build of it (the size and time of the binary kiln's code is in,
// so a rebuilt kiln never reads what another build wrote), and oneDNN's version.
const std::string& build_identity();

// `model_hash`: cpu::hash_file of the model file, or cpu::hash_graph of a model in memory.
// The key also covers: build_identity(), the instruction set in use (with KILN_MAX_CPU_ISA's
// cap), the passes disabled, the pattern files' contents, inference precision, snippets
// mode and ISA, kiln_max_tensor_bytes and the threads per stream (oneDNN may pick other
// kernels, so other weight layouts, for another thread count).
std::string cache_key(const Settings& s, const cpu::StreamLayout& layout, const std::string& model_hash);

}  // namespace kiln::api
