#pragma once
// A compact binary form of an ir::Graph, for the model cache (cpu/model_cache.hpp): the
// graph's structure (inputs, constants, nodes with their attributes and subgraphs, outputs,
// value types) inline, and every tensor's bytes handed to the caller, who stores them where
// it likes (the cache puts them, aligned, after the structure and maps them back without a
// copy). The reader checks every length and index against the bytes it has, so a damaged
// buffer gets a kiln::Error, never a read out of bounds.
#include <kiln/tensor.hpp>

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "ir/graph.hpp"

namespace kiln::ir {

// Little-endian scalars and length-prefixed strings appended to a byte string.
class ByteWriter {
 public:
  void u8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void u32(uint32_t v) { pod(v); }
  void u64(uint64_t v) { pod(v); }
  void i64(int64_t v) { pod(v); }
  void f32(float v) { pod(v); }
  void str(std::string_view s) {
    u64(s.size());
    out_.append(s.data(), s.size());
  }
  const std::string& bytes() const { return out_; }
  std::string take() { return std::move(out_); }

 private:
  template <class T>
  void pod(T v) {
    out_.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  std::string out_;
};

// Reads what ByteWriter wrote; any read past the end throws kiln::Error naming `what`.
class ByteReader {
 public:
  ByteReader(std::string_view bytes, std::string what) : in_(bytes), what_(std::move(what)) {}
  uint8_t u8() { return pod<uint8_t>(); }
  uint32_t u32() { return pod<uint32_t>(); }
  uint64_t u64() { return pod<uint64_t>(); }
  int64_t i64() { return pod<int64_t>(); }
  float f32() { return pod<float>(); }
  std::string str();
  // A count of items that take at least `min_item_bytes` each: checked against what is left,
  // so a damaged count cannot make the caller reserve or loop without bound.
  uint64_t count(size_t min_item_bytes = 1);
  bool done() const { return at_ == in_.size(); }
  [[noreturn]] void fail(const std::string& why) const;

 private:
  template <class T>
  T pod() {
    need(sizeof(T));
    T v;
    std::memcpy(&v, in_.data() + at_, sizeof v);
    at_ += sizeof v;
    return v;
  }
  void need(size_t n) const;
  std::string_view in_;
  size_t at_ = 0;
  std::string what_;
};

// A tensor's bytes go out through `put` (returns the id the reader will be given) and come
// back through `get` (id, dtype, shape, byte size: the tensor, e.g. over mapped memory).
// Only dense numeric tensors are written: a string, sequence or optional constant makes
// write_graph throw kiln::Error naming it (the caller then does not cache the graph).
using PutTensor = std::function<uint64_t(const Tensor&)>;
using GetTensor = std::function<Tensor(uint64_t id, DType dtype, const Shape& shape, size_t bytes)>;

void write_graph(const Graph& g, ByteWriter& w, const PutTensor& put);
std::shared_ptr<Graph> read_graph(ByteReader& r, const GetTensor& get);

}  // namespace kiln::ir
