#include "frontend/onnx/onnx_frontend.hpp"

#include <kiln/error.hpp>

namespace kiln::frontend {

std::shared_ptr<ir::Graph> load_onnx_file(const std::string& path) {
  throw Error("ONNX frontend: loading '" + path + "' is not available in this build yet");
}

std::shared_ptr<ir::Graph> load_onnx_bytes(const std::string&, const std::string&) {
  throw Error("ONNX frontend: not available in this build yet");
}

}  // namespace kiln::frontend
