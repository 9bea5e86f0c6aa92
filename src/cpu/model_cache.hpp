#pragma once
// The model cache (property cache_dir, OpenVINO's CACHE_DIR): what compile_model made for a
// model of static input shapes, written once and read back by the next compile_model of the
// same model with the same settings on the same kind of CPU, so a restart skips reading the
// ONNX file, stages 0-3 of the compile pipeline and weight packing.
//
// One file per key, DIR/<key>.kilncache. The key (make_cache_key) is a hash of the model's
// content, every setting that changes what the compiler makes, the instruction set in use
// and kiln's build. The file holds the plan's graph after stage 3 (ir/serialize.hpp), the
// passes' log, and the packed weights of the weights cache (oneDNN layout descriptors and
// bytes); stages 4-8 run again on load, quickly: primitives come from oneDNN, weights are
// found packed.
//
// Layout: a header (magic, format version, sizes, hashes), a table of XXH3-128 hashes of the
// data region in 8 MiB chunks, the metadata, then the data region (tensors and packed
// weights, 64-byte aligned) at a page boundary. A file that is truncated, damaged, of
// another format version or written under another key is refused with the reason (the
// caller compiles and writes it again); nothing in it is used before every hash matched.
// Files are written to a temporary name and renamed, so a reader never sees half a file.
#include <kiln/tensor.hpp>

#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cpu/weights_cache.hpp"
#include "ir/graph.hpp"
#include "transforms/pass_log.hpp"

namespace kiln::cpu {

// What a cache file holds for one compiled plan.
struct CachedPlan {
  std::vector<Shape> shapes;              // the input shapes the plan was compiled for
  std::shared_ptr<ir::Graph> graph;       // stage 3's graph (loaded: constants over the mapped file)
  transforms::PassLog log;                // what stages 0-3 decided
  using Packed = WeightsCache::Packed;    // one weights cache entry (loaded: over the mapped file)
  std::vector<Packed> packed;
  std::vector<std::pair<std::string, std::string>> notes;  // caller's (name, value) pairs, e.g. external data hashes
  static constexpr const char* kExternalNote = "external ";     // + a data file's path: its content hash
};

// A hex XXH3-128 of `parts` joined (each length-prefixed, so no two lists collide).
std::string hash_parts(const std::vector<std::string>& parts);
// A hex XXH3-128 of a file's bytes, read on up to `threads` threads; throws kiln::Error when
// the file cannot be read.
std::string hash_file(const std::string& path, int threads = 2);
// The content hash of an in-memory graph (its structure and every tensor's bytes).
std::string hash_graph(const ir::Graph& g);

class ModelCache {
 public:
  explicit ModelCache(std::string dir);  // created when missing (kiln::Error when it cannot be)
  const std::string& dir() const { return dir_; }
  std::string path_for(const std::string& key) const;

  // hash_file(path), remembered: DIR/digests/ holds, per file, the hash with the file's
  // device, inode, size and modification and change times when it was hashed (as Bazel's
  // digest cache and git's index do). While all five are unchanged the file's bytes are
  // too (the kernel moves the change time on every write, and no call sets it back), so
  // the hash is taken from there instead of reading the file again. A file changed within
  // the last two seconds is hashed but not remembered (a write in the same clock tick as
  // the hashing could otherwise go unseen).
  std::string file_digest(const std::string& path) const;

  // The plan stored under `key`, or nullopt: `why` says "" when there is no file, else why the
  // file was refused (truncated, checksum mismatch, other format, other key, unreadable).
  std::optional<CachedPlan> load(const std::string& key, std::string* why) const;
  // Writes `plan` (its packed weights: the entries of `weights` whose source is one of the
  // graph's constants) under `key`. Throws kiln::Error when the graph holds what the cache
  // does not store (string or sequence constants) or the file cannot be written.
  void save(const std::string& key, const CachedPlan& plan, const WeightsCache& weights) const;

 private:
  std::string dir_;
};

}  // namespace kiln::cpu
