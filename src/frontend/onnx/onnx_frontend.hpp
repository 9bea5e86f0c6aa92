#pragma once
// ONNX frontend: ModelProto (libonnx protobuf classes) -> ir::Graph.
#include <memory>
#include <string>

#include "ir/graph.hpp"

namespace kiln::frontend {

// Reads a .onnx file. External data files resolve inside the model's own folder.
std::shared_ptr<ir::Graph> load_onnx_file(const std::string& path);
// Parses serialized ModelProto bytes; external data resolves inside `base_dir`.
std::shared_ptr<ir::Graph> load_onnx_bytes(const std::string& bytes, const std::string& base_dir);

}  // namespace kiln::frontend
