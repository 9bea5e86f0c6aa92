#pragma once
// External tensor data (TensorProto.data_location = EXTERNAL): read from a file that
// must lie inside the model's own folder.
#include <string>

namespace onnx {
class TensorProto;
}

namespace kiln::frontend {

// Resolves `location` against `base_dir`; refuses absolute paths and any path that
// leaves base_dir (after resolving "..", and symlinks that exist). Returns the path.
std::string resolve_inside(const std::string& base_dir, const std::string& location);

// Reads `expected_bytes` bytes for the tensor from its external file (offset/length keys).
std::string read_external_data(const onnx::TensorProto& proto, const std::string& base_dir, size_t expected_bytes);

}  // namespace kiln::frontend
