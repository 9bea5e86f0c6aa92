#include "serve/model_repository.hpp"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/strings.hpp"

namespace kiln::serve {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// config.json's "properties": string, number or boolean values, as compile properties.
AnyMap read_config(const fs::path& file, const std::string& model) {
  AnyMap props;
  std::error_code ec;
  if (!fs::exists(file, ec)) return props;
  std::ifstream f(file);
  std::stringstream text;
  text << f.rdbuf();
  json j;
  try {
    j = json::parse(text.str());
  } catch (const json::exception& e) {
    throw Error(cat("model '", model, "': ", file.string(), " is not valid JSON: ", e.what()));
  }
  if (!j.is_object()) throw Error(cat("model '", model, "': ", file.string(), " must hold a JSON object"));
  for (const auto& [key, value] : j.items()) {
    if (key != "properties")
      throw Error(cat("model '", model, "': ", file.string(), ": unknown key \"", key, "\" (accepted: properties)"));
    if (!value.is_object()) throw Error(cat("model '", model, "': ", file.string(), ": \"properties\" must be an object"));
    for (const auto& [k, v] : value.items()) {
      if (v.is_string()) props[k] = v.get<std::string>();
      else if (v.is_number_integer()) props[k] = std::to_string(v.get<int64_t>());
      else if (v.is_boolean()) props[k] = v.get<bool>() ? "YES" : "NO";
      else throw Error(cat("model '", model, "': ", file.string(), ": property ", k, " must be a string, an integer or a boolean"));
    }
  }
  return props;
}

}  // namespace

ModelRepository::ModelRepository(const std::string& dir, const AnyMap& defaults) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw Error(cat("model repository '", dir, "' is not a folder"));
  std::vector<fs::path> folders;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_directory() && fs::exists(e.path() / "model.onnx")) folders.push_back(e.path());
  if (folders.empty())
    throw Error(cat("model repository '", dir, "' holds no model: put each as ", dir, "/<name>/model.onnx"));
  std::sort(folders.begin(), folders.end());
  Core core;
  for (const fs::path& folder : folders) {
    ServedModel m;
    m.name = folder.filename().string();
    m.path = (folder / "model.onnx").string();
    m.properties = defaults;
    for (auto& [k, v] : read_config(folder / "config.json", m.name)) m.properties[k] = v;
    try {
      m.compiled = core.compile_model(m.path, m.properties);
    } catch (const Error& e) {
      throw Error(cat("model '", m.name, "' (", m.path, "): ", e.what()));
    }
    models_.emplace(m.name, std::move(m));
  }
}

const ServedModel* ModelRepository::find(const std::string& name) const {
  auto it = models_.find(name);
  return it == models_.end() ? nullptr : &it->second;
}

std::vector<std::string> ModelRepository::names() const {
  std::vector<std::string> out;
  for (const auto& [name, m] : models_) out.push_back(name);
  return out;
}

}  // namespace kiln::serve
