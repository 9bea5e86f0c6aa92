#pragma once
// The models a server serves: every DIR/<name>/model.onnx of a model repository (Triton's and
// KServe's layout), compiled once at start, with an optional DIR/<name>/config.json:
//   {"properties": {"num_streams": "2", "inference_precision": "f32", ...}}
// whose compile properties (docs/settings.md) override the server's defaults.
#include <kiln/core.hpp>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kiln::serve {

struct ServedModel {
  std::string name;
  std::string path;  // model.onnx
  CompiledModel compiled;  // compile_model(path): through the model cache when cache_dir is set
  AnyMap properties;  // what it was compiled with
};

class ModelRepository {
 public:
  // Reads and compiles every model; throws kiln::Error naming the model that fails, or when
  // the folder holds none. `defaults`: properties every model gets unless its config says otherwise.
  ModelRepository(const std::string& dir, const AnyMap& defaults);

  const ServedModel* find(const std::string& name) const;  // null when not served
  std::vector<std::string> names() const;

 private:
  std::map<std::string, ServedModel> models_;
};

}  // namespace kiln::serve
