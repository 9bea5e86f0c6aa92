#include "api/compile_cache.hpp"

#include <dlfcn.h>
#include <sys/stat.h>

#include <oneapi/dnnl/dnnl.hpp>

#include "core/strings.hpp"
#include "cpu/compile_pipeline.hpp"
#include "cpu/isa.hpp"
#include "cpu/model_cache.hpp"

#ifndef KILN_VERSION
#define KILN_VERSION "unknown"
#endif

namespace kiln::api {

const std::string& build_identity() {
  static const std::string id = [] {
    const dnnl_version_t* v = dnnl_version();
    std::string s = cat("kiln ", KILN_VERSION, ", oneDNN ", v->major, ".", v->minor, ".", v->patch, " ", v->hash);
    Dl_info info{};
    struct stat st {};
    if (dladdr(reinterpret_cast<const void*>(&build_identity), &info) && info.dli_fname &&
        stat(info.dli_fname, &st) == 0)
      s += cat(", ", info.dli_fname, " ", st.st_size, " bytes, modified ", st.st_mtim.tv_sec, ".", st.st_mtim.tv_nsec);
    return s;
  }();
  return id;
}

std::string cache_key(const Settings& s, const cpu::StreamLayout& layout, const std::string& model_hash) {
  const cpu::GraphOptions& g = s.graph;
  return cpu::hash_parts({
      "kiln model cache",
      build_identity(),
      cpu::isa_description(),
      join(std::vector<std::string>(g.disabled_passes.begin(), g.disabled_passes.end()), ","),
      s.pattern_text,
      g.bf16 ? "bf16" : "f32",
      cat("convolutions until hot ", until_hot_name(g.convolutions_until_hot)),
      std::to_string(static_cast<int>(g.snippets_mode)),
      effective_value("kiln_snippets_isa", s, layout),
      std::to_string(cpu::max_tensor_bytes(g)),
      std::to_string(layout.threads_per_stream),
      model_hash,
  });
}

}  // namespace kiln::api
