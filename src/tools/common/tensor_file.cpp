#include "tools/common/tensor_file.hpp"

#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/strings.hpp"
#include "frontend/onnx/tensor_proto.hpp"
#include "tools/common/npy.hpp"

namespace kiln::tools {

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  if (s.size() < suffix.size()) return false;
  for (size_t i = 0; i < suffix.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(s[s.size() - suffix.size() + i])) != suffix[i]) return false;
  return true;
}

Tensor load_pb(const std::string& path) { return frontend::tensor_from_proto_file(path); }

}  // namespace

Tensor load_tensor_file(const std::string& path) {
  std::error_code ec;
  KILN_CHECK(std::filesystem::exists(path, ec), cat("tensor file '", path, "' does not exist"));
  KILN_CHECK(!std::filesystem::is_directory(path, ec), cat("'", path, "' is a directory, not a tensor file"));
  if (ends_with(path, ".npy")) return read_npy(path);
  if (ends_with(path, ".pb")) return load_pb(path);
  std::ifstream f(path, std::ios::binary);
  KILN_CHECK(f, cat("cannot open '", path, "'"));
  char magic[6] = {};
  f.read(magic, 6);
  if (f.gcount() == 6 && std::memcmp(magic, "\x93NUMPY", 6) == 0) return read_npy(path);
  return load_pb(path);
}

}  // namespace kiln::tools
