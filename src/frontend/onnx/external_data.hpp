#pragma once
// External tensor data (TensorProto.data_location = EXTERNAL): read from a file that
// must lie inside the model's own folder.
#include <string>
#include <vector>

namespace onnx {
class TensorProto;
}

namespace kiln::frontend {

// Resolves `location` against `base_dir`; refuses absolute paths and any path that
// leaves base_dir (after resolving "..", and symlinks that exist). Returns the path.
std::string resolve_inside(const std::string& base_dir, const std::string& location);

// While one is alive on a thread, the external data files that thread reads are listed in
// `files` (resolved paths, each once): the model cache keys a model by them too.
class ExternalFilesRecorder {
 public:
  ExternalFilesRecorder();
  ~ExternalFilesRecorder();
  ExternalFilesRecorder(const ExternalFilesRecorder&) = delete;
  ExternalFilesRecorder& operator=(const ExternalFilesRecorder&) = delete;
  std::vector<std::string> files;

 private:
  ExternalFilesRecorder* previous_;
};

// Reads `expected_bytes` bytes for the tensor from its external file (offset/length keys).
std::string read_external_data(const onnx::TensorProto& proto, const std::string& base_dir, size_t expected_bytes);

}  // namespace kiln::frontend
