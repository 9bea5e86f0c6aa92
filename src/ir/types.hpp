#pragma once
// Static type information of a value in ir::Graph: element type plus a shape whose
// dims are static (a number), symbolic (a name such as "batch") or unknown.
#include <kiln/dtype.hpp>
#include <kiln/tensor.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kiln::ir {

struct Dim {
  int64_t value = -1;   // >= 0 when static
  std::string symbol;   // non-empty when symbolic

  Dim() = default;
  Dim(int64_t v) : value(v) {}  // NOLINT: implicit from a number
  static Dim sym(std::string name) {
    Dim d;
    d.symbol = std::move(name);
    return d;
  }
  static Dim unknown() { return Dim(); }
  bool is_static() const { return value >= 0; }
  bool is_symbolic() const { return value < 0 && !symbol.empty(); }
  bool is_unknown() const { return value < 0 && symbol.empty(); }
  bool operator==(const Dim& o) const { return value == o.value && symbol == o.symbol; }
  std::string to_string() const;
};

// A shape whose rank may itself be unknown.
struct PartialShape {
  std::vector<Dim> dims;
  bool rank_known = true;

  PartialShape() = default;
  PartialShape(std::vector<Dim> d) : dims(std::move(d)) {}  // NOLINT
  PartialShape(const Shape& s) : dims(s.begin(), s.end()) {}  // NOLINT
  static PartialShape unknown_rank() {
    PartialShape p;
    p.rank_known = false;
    return p;
  }
  size_t rank() const { return dims.size(); }
  bool is_static() const;
  Shape to_shape() const;  // throws if not static
  int64_t elements() const;  // shape_size(to_shape()) without building the Shape
  bool operator==(const PartialShape& o) const { return rank_known == o.rank_known && dims == o.dims; }
  std::string to_string() const;  // "[1,3,batch,?]" or "[...]"
};

// A tensor's element type and shape; or, for ONNX's sequence and optional types, their
// element type and the shape of their tensors (kind, and elem_kind: what an optional holds).
struct ValueType {
  DType dtype = DType::undefined;
  PartialShape shape = PartialShape::unknown_rank();
  ValueKind kind = ValueKind::tensor;
  ValueKind elem_kind = ValueKind::tensor;
  std::string to_string() const;  // "f32[1,3]", "seq(f32[...])", "opt(seq(f32[...]))"
};

}  // namespace kiln::ir
