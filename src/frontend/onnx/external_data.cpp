#include "frontend/onnx/external_data.hpp"

#include <kiln/error.hpp>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "core/strings.hpp"

namespace fs = std::filesystem;

namespace kiln::frontend {

namespace {
thread_local ExternalFilesRecorder* t_recorder = nullptr;
}

ExternalFilesRecorder::ExternalFilesRecorder() : previous_(t_recorder) { t_recorder = this; }
ExternalFilesRecorder::~ExternalFilesRecorder() { t_recorder = previous_; }

std::string resolve_inside(const std::string& base_dir, const std::string& location) {
  KILN_CHECK(!location.empty(), "external data: empty location");
  fs::path loc(location);
  KILN_CHECK(!loc.is_absolute() && !loc.has_root_name() && !loc.has_root_directory(),
             cat("external data location '", location, "' is an absolute path; it must be relative to the model's folder"));
  std::error_code ec;
  fs::path base = fs::weakly_canonical(fs::absolute(base_dir.empty() ? "." : base_dir), ec);
  KILN_CHECK(!ec, cat("external data: cannot resolve the model folder '", base_dir, "'"));
  fs::path full = fs::weakly_canonical(base / loc, ec);
  KILN_CHECK(!ec, cat("external data: cannot resolve '", location, "'"));
  // full must be base itself + more components
  auto b = base.begin(), f = full.begin();
  for (; b != base.end(); ++b, ++f)
    KILN_CHECK(f != full.end() && *b == *f,
               cat("external data location '", location, "' escapes the model's folder '", base.string(), "'"));
  KILN_CHECK(f != full.end(), cat("external data location '", location, "' is the model folder itself"));
  return full.string();
}

std::string read_external_data(const onnx::TensorProto& p, const std::string& base_dir, size_t expected_bytes) {
  std::string location;
  int64_t offset = 0, length = -1;
  bool has_length = false;
  // a whole non-negative decimal integer, else an error naming the key
  auto number = [&](const onnx::StringStringEntryProto& kv) {
    const std::string& v = kv.value();
    size_t used = 0;
    long long x = -1;
    try {
      x = std::stoll(v, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    KILN_CHECK(!v.empty() && used == v.size() && x >= 0,
               cat("tensor '", p.name(), "': external data key '", kv.key(), "' has the value '", v,
                   "', expected a non-negative integer"));
    return static_cast<int64_t>(x);
  };
  for (const auto& kv : p.external_data()) {
    if (kv.key() == "location") location = kv.value();
    else if (kv.key() == "offset") offset = number(kv);
    else if (kv.key() == "length") length = number(kv), has_length = true;
  }
  KILN_CHECK(!location.empty(), cat("tensor '", p.name(), "': external data without a location"));
  if (has_length)
    KILN_CHECK(static_cast<size_t>(length) == expected_bytes,
               cat("tensor '", p.name(), "': external data length ", length, " but the tensor needs ", expected_bytes, " bytes"));
  std::string path = resolve_inside(base_dir, location);
  if (t_recorder && std::find(t_recorder->files.begin(), t_recorder->files.end(), path) == t_recorder->files.end())
    t_recorder->files.push_back(path);
  std::ifstream f(path, std::ios::binary);
  KILN_CHECK(f, cat("tensor '", p.name(), "': cannot open external data file '", path, "'"));
  f.seekg(0, std::ios::end);
  const auto size = static_cast<int64_t>(f.tellg());
  KILN_CHECK(size >= 0 && offset <= size && expected_bytes <= static_cast<uint64_t>(size - offset),
             cat("tensor '", p.name(), "': external data file '", location, "' has ", size, " bytes, need ",
                 expected_bytes, " at offset ", offset));
  std::string data(expected_bytes, '\0');
  f.seekg(offset);
  f.read(data.data(), static_cast<std::streamsize>(expected_bytes));
  KILN_CHECK(f, cat("tensor '", p.name(), "': reading external data from '", location, "' failed"));
  return data;
}

}  // namespace kiln::frontend
