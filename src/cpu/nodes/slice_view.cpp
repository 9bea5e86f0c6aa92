// SliceView: a Slice or Split whose every output is one contiguous run of its input's
// row-major bytes (e.g. channels [c0, c1) of an NCHW tensor with N = 1) is a view: the output
// edges alias the input's buffer at an offset, so no bytes move and no kernel runs. What a
// channel split in ShuffleNet or a q/k/v split of a fused projection costs is then nothing.
//
// Decided at lowering from the static shapes and constant slice parameters alone: outputs
// are row-major, the input is asked for row-major (a blocked producer gets a Reorder, as the
// reference kernel would need too).
#include <numeric>

#include "core/strings.hpp"
#include "cpu/nodes/node_factory.hpp"

namespace kiln::cpu {

namespace {

// The bytes of output `i` start this many elements into the input; nullopt: not one
// contiguous run (or parameters kiln does not read here).
using Offsets = std::vector<int64_t>;

int64_t product(const Shape& s, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t k = from; k < to; ++k) p *= s[k];
  return p;
}

// The elements before index `at` of `axis` in `in`, when a block along that axis (every other
// axis whole) is one contiguous run: every axis before it is 1.
std::optional<int64_t> contiguous_block(const Shape& in, size_t axis, int64_t at) {
  if (product(in, 0, axis) != 1) return std::nullopt;
  return at * product(in, axis + 1, in.size());
}

std::optional<Offsets> slice_offsets(const ir::Node& n, const Shape& in, const Shape& out) {
  // Slice-10 and later: starts, ends, [axes], [steps] as constant inputs
  if (n.num_inputs() < 3 || in.size() != out.size()) return std::nullopt;
  auto ints = [&](size_t i) -> std::optional<std::vector<int64_t>> {
    const ir::Value* v = n.input(i);
    if (!v) return std::vector<int64_t>{};
    if (!v->is_constant()) return std::nullopt;
    return v->constant().to_i64();
  };
  const auto starts = ints(1), ends = ints(2), axes = ints(3), steps = ints(4);
  if (!starts || !ends || !axes || !steps || starts->size() != ends->size()) return std::nullopt;
  if (!steps->empty() && steps->size() != starts->size()) return std::nullopt;
  if (!axes->empty() && axes->size() != starts->size()) return std::nullopt;
  const int64_t rank = static_cast<int64_t>(in.size());
  std::vector<int64_t> begin(in.size(), 0);
  for (size_t i = 0; i < starts->size(); ++i) {
    if (!steps->empty() && (*steps)[i] != 1) return std::nullopt;
    int64_t a = axes->empty() ? static_cast<int64_t>(i) : (*axes)[i];
    if (a < 0) a += rank;
    if (a < 0 || a >= rank) return std::nullopt;
    const int64_t dim = in[static_cast<size_t>(a)];
    int64_t s = (*starts)[i];
    if (s < 0) s += dim;
    begin[static_cast<size_t>(a)] = std::clamp<int64_t>(s, 0, dim);
  }
  // one sliced axis at most (the first one not whole); the rest whole, from 0
  std::optional<size_t> cut;
  for (size_t k = 0; k < in.size(); ++k) {
    if (begin[k] + out[k] > in[k]) return std::nullopt;
    if (out[k] == in[k] && begin[k] == 0) continue;
    if (cut) return std::nullopt;
    cut = k;
  }
  if (!cut) return Offsets{0};
  const auto at = contiguous_block(in, *cut, begin[*cut]);
  if (!at) return std::nullopt;
  return Offsets{*at};
}

std::optional<Offsets> split_offsets(const ir::Node& n, const Shape& in, const std::vector<Shape>& outs) {
  const int64_t rank = static_cast<int64_t>(in.size());
  int64_t axis = n.attr_i("axis", 0);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return std::nullopt;
  const size_t a = static_cast<size_t>(axis);
  Offsets offsets;
  int64_t at = 0;
  for (const Shape& o : outs) {
    if (o.size() != in.size()) return std::nullopt;
    for (size_t k = 0; k < in.size(); ++k)
      if (k != a && o[k] != in[k]) return std::nullopt;
    const auto off = contiguous_block(in, a, at);
    if (!off) return std::nullopt;
    offsets.push_back(*off);
    at += o[a];
  }
  if (at != in[a]) return std::nullopt;
  return offsets;
}

// The element offsets of every output, when the node is a view of its input.
std::optional<Offsets> view_offsets(const ir::Node& n) {
  if (!n.is_onnx_domain() || (n.op_type() != "Slice" && n.op_type() != "Split") || !n.input(0)) return std::nullopt;
  const ir::Value* x = n.input(0);
  if (!x->type.shape.is_static() || x->type.dtype == DType::string || x->type.dtype == DType::undefined)
    return std::nullopt;
  std::vector<Shape> outs;
  for (const ir::Value* o : n.outputs()) {
    if (!o || !o->type.shape.is_static() || o->type.dtype != x->type.dtype)
      return std::nullopt;
    outs.push_back(o->type.shape.to_shape());
  }
  const Shape in = x->type.shape.to_shape();
  if (n.op_type() == "Slice") return outs.size() == 1 ? slice_offsets(n, in, outs[0]) : std::nullopt;
  return split_offsets(n, in, outs);
}

class SliceViewNode : public Node {
 public:
  SliceViewNode(const ir::Node& n, Offsets offsets) : Node(n), offsets_(std::move(offsets)) {}
  const char* type() const override { return "View"; }
  NodeKind kind() const override { return NodeKind::SliceView; }
  std::optional<OutputView> output_view(size_t i) const override {
    return OutputView{0, static_cast<size_t>(offsets_.at(i)) * dtype_size(inputs[0]->dtype)};
  }

  std::vector<InputLayout> prepare() override {
    impl = "view";
    for (Edge* o : outputs) o->blocked.reset();
    std::vector<InputLayout> req(inputs.size(), InputLayout::any());
    req[0] = InputLayout::plain();
    return req;
  }
  void execute(dnnl::stream&) override {}

 private:
  Offsets offsets_;
};

}  // namespace

bool slice_view_supports(const ir::Node& n) { return view_offsets(n).has_value(); }

std::unique_ptr<Node> make_slice_view_node(const ir::Node& n) {
  auto offsets = view_offsets(n);
  KILN_CHECK(offsets, cat(n.describe(), ": not a contiguous slice of its input"));
  return std::make_unique<SliceViewNode>(n, std::move(*offsets));
}

}  // namespace kiln::cpu
