#pragma once
// The JSON files of src/pattern/library/, embedded at build time (embed_library.cmake
// writes the definition into the build tree).
#include <vector>

namespace kiln::pattern {

struct EmbeddedFile {
  const char* name;  // file name, e.g. "layer_norm.json"
  const char* text;  // its contents
};

const std::vector<EmbeddedFile>& embedded_pattern_files();

}  // namespace kiln::pattern
