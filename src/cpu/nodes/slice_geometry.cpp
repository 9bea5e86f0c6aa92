#include "cpu/nodes/slice_geometry.hpp"

#include <algorithm>
#include <string_view>

namespace kiln::cpu {

namespace {

// Slice-10 and later: starts, ends, [axes], [steps] as constant inputs; every step 1.
std::optional<SliceBox> slice_box(const ir::Node& n, const Shape& in, const Shape& out) {
  if (n.num_inputs() < 3 || in.size() != out.size()) return std::nullopt;
  auto ints = [&](size_t i) -> std::optional<std::vector<int64_t>> {
    const ir::Value* v = i < n.num_inputs() ? n.input(i) : nullptr;
    if (!v) return std::vector<int64_t>{};
    if (!v->is_constant()) return std::nullopt;
    return v->constant().to_i64();
  };
  const auto starts = ints(1), ends = ints(2), axes = ints(3), steps = ints(4);
  if (!starts || !ends || !axes || !steps || starts->size() != ends->size()) return std::nullopt;
  if (!steps->empty() && steps->size() != starts->size()) return std::nullopt;
  if (!axes->empty() && axes->size() != starts->size()) return std::nullopt;
  const int64_t rank = static_cast<int64_t>(in.size());
  SliceBox box{std::vector<int64_t>(in.size(), 0), out};
  for (size_t i = 0; i < starts->size(); ++i) {
    if (!steps->empty() && (*steps)[i] != 1) return std::nullopt;
    int64_t a = axes->empty() ? static_cast<int64_t>(i) : (*axes)[i];
    if (a < 0) a += rank;
    if (a < 0 || a >= rank) return std::nullopt;
    const int64_t dim = in[static_cast<size_t>(a)];
    int64_t s = (*starts)[i];
    if (s < 0) s += dim;
    box.begin[static_cast<size_t>(a)] = std::clamp<int64_t>(s, 0, dim);
  }
  for (size_t k = 0; k < in.size(); ++k)
    if (box.begin[k] + out[k] > in[k]) return std::nullopt;
  return box;
}

// Split: the outputs side by side along `axis`, every other axis whole.
std::optional<std::vector<SliceBox>> split_boxes(const ir::Node& n, const Shape& in, const std::vector<Shape>& outs) {
  const int64_t rank = static_cast<int64_t>(in.size());
  int64_t axis = n.attr_i("axis", 0);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return std::nullopt;
  const size_t a = static_cast<size_t>(axis);
  std::vector<SliceBox> boxes;
  int64_t at = 0;
  for (const Shape& o : outs) {
    if (o.size() != in.size()) return std::nullopt;
    for (size_t k = 0; k < in.size(); ++k)
      if (k != a && o[k] != in[k]) return std::nullopt;
    SliceBox box{std::vector<int64_t>(in.size(), 0), o};
    box.begin[a] = at;
    boxes.push_back(std::move(box));
    at += o[a];
  }
  if (at != in[a]) return std::nullopt;
  return boxes;
}

// Gather of one constant index (a scalar, or a one-element 1-D tensor): one slab of `axis`.
std::optional<SliceBox> gather_box(const ir::Node& n, const Shape& in, const Shape& out) {
  const ir::Value* idx = n.num_inputs() == 2 ? n.input(1) : nullptr;
  if (!idx || !idx->is_constant() || idx->constant().size() != 1 || idx->constant().rank() > 1) return std::nullopt;
  const int64_t rank = static_cast<int64_t>(in.size());
  int64_t axis = n.attr_i("axis", 0);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return std::nullopt;
  const size_t a = static_cast<size_t>(axis);
  int64_t i = idx->constant().to_i64()[0];
  if (i < 0) i += in[a];
  if (i < 0 || i >= in[a]) return std::nullopt;  // the reference kernel says what is wrong
  SliceBox box{std::vector<int64_t>(in.size(), 0), in};
  box.begin[a] = i;
  box.extent[a] = 1;
  if (shape_size(Shape(box.extent)) != shape_size(out)) return std::nullopt;
  return box;
}

}  // namespace

std::optional<SliceGeometry> slice_geometry(const ir::Node& n) {
  const std::string_view op = n.op_type();  // a view: each test below compares the length first
  if (!n.is_onnx_domain() || (op != "Slice" && op != "Split" && op != "Gather") || !n.input(0)) return std::nullopt;
  const ir::Value* x = n.input(0);
  if (!x->type.shape.is_static() || x->type.dtype == DType::string || x->type.dtype == DType::undefined)
    return std::nullopt;
  std::vector<Shape> outs;
  for (const ir::Value* o : n.outputs()) {
    if (!o || !o->type.shape.is_static() || o->type.dtype != x->type.dtype) return std::nullopt;
    outs.push_back(o->type.shape.to_shape());
  }
  SliceGeometry g{x->type.shape.to_shape(), {}};
  if (op == "Split") {
    auto boxes = split_boxes(n, g.in, outs);
    if (!boxes) return std::nullopt;
    g.outs = std::move(*boxes);
    return g;
  }
  if (outs.size() != 1) return std::nullopt;
  auto box = op == "Slice" ? slice_box(n, g.in, outs[0]) : gather_box(n, g.in, outs[0]);
  if (!box) return std::nullopt;
  g.outs.push_back(std::move(*box));
  return g;
}

SliceRuns slice_runs(const Shape& in, const SliceBox& box, size_t elem) {
  size_t first = 0;  // the run's first axis: the last not whole (none: all of it one run)
  for (size_t k = in.size(); k-- > 0;)
    if (box.extent[k] != in[k] || box.begin[k] != 0) {
      first = k;
      break;
    }
  std::vector<size_t> stride(in.size());
  size_t s = elem;
  for (size_t k = in.size(); k-- > 0;) {
    stride[k] = s;
    s *= static_cast<size_t>(in[k]);
  }
  SliceRuns r;
  r.run_bytes = in.empty() ? elem : static_cast<size_t>(box.extent[first]) * stride[first];
  r.count = 1;
  for (size_t k = 0; k < in.size(); ++k) {
    r.base += static_cast<size_t>(box.begin[k]) * stride[k];
    if (k < first) {
      r.outer.push_back(box.extent[k]);
      r.outer_stride.push_back(stride[k]);
      r.count *= box.extent[k];
    }
  }
  return r;
}

std::optional<int64_t> contiguous_offset(const Shape& in, const SliceBox& box) {
  // one run: every axis before the run's first of extent 1
  const SliceRuns r = slice_runs(in, box, 1);
  if (r.count != 1) return std::nullopt;
  return static_cast<int64_t>(r.base);
}

}  // namespace kiln::cpu
