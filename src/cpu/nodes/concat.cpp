// Concat (f32) on oneDNN's concat primitive. Sources are taken in whatever layout their
// producers made (constants plain); oneDNN converts while it copies. The destination
// layout: when every consumer runs on any layout (convolutions, pools, norms,
// activations: inception and densenet blocks), the non-plain layout carrying most of
// the data, so the block stays in the convolutions' layout; otherwise (e.g. shufflenet's
// Reshape) the layout carrying most data, ties to plain. A source in another layout
// that other nodes read too (densenet's block input, read by every layer's concat) is
// converted once by a shared Reorder, so each concat is a same-layout copy (oneDNN's
// jit "simple" concat instead of one reorder per source). oneDNN also writes channel
// blocks at channel offsets that are not a multiple of the block. Should it reject a
// layout, the destination is plain. A single-input Concat is a view of its input.
#include <map>
#include <unordered_map>

#include "core/strings.hpp"
#include "cpu/dnnl_util.hpp"
#include "cpu/nodes/node_factory.hpp"
#include "ir/infer_util.hpp"

namespace kiln::cpu {

namespace {

using dnnl::memory;
using tag = memory::format_tag;

tag plain_tag(size_t rank) {
  static const tag tags[] = {tag::a, tag::ab, tag::abc, tag::abcd, tag::abcde, tag::abcdef};
  return tags[rank - 1];
}

// The format tag of a blocked edge among the activation layouts producers make
// (channels-last, channel blocks of 16/8/4), or -1.
int tag_of(const Edge& e) {
  static const std::vector<tag> by_rank[] = {
      {},
      {},
      {tag::acb, tag::aBc16b, tag::aBc8b, tag::aBc4b},
      {tag::acdb, tag::aBcd16b, tag::aBcd8b, tag::aBcd4b},
      {tag::acdeb, tag::aBcde16b, tag::aBcde8b, tag::aBcde4b},
      {}};
  const size_t r = e.shape.size();
  if (r < 1 || r > 6) return -1;
  for (tag t : by_rank[r - 1])
    if (memory::desc(to_dims(e.shape), memory::data_type::f32, t) == *e.blocked) return static_cast<int>(t);
  return -1;
}

// Does every consumer of the node's output run on any layout (so a blocked output costs
// no reorder later)? The cpu node kinds that take their producer's layout as it is.
bool consumers_take_any_layout(const ir::Node& n) {
  const auto& uses = n.output(0)->uses();
  if (uses.empty()) return false;
  for (const ir::Use& u : uses) {
    const ir::Node& c = *u.node;
    if (!convolution_supports(c) && !pooling_supports(c) && !batch_norm_supports(c) && !concat_supports(c) &&
        !lrn_supports(c) && !resize_supports(c) && !eltwise_supports(c))
      return false;
  }
  return true;
}

class ConcatNode : public Node {
 public:
  explicit ConcatNode(const ir::Node& n) {
    source = &n;
    name = n.name();
  }
  const char* type() const override { return "Concat"; }
  NodeKind kind() const override { return NodeKind::Concat; }
  // one input: the output is that input (no copy)
  int output_aliases_input() const override { return inputs.size() == 1 ? 0 : -1; }
  int concat_axis() const override { return inputs.size() > 1 ? axis_ : -1; }
  void set_inputs_in_output() override {
    in_output_ = true;
    impl = "in_place";
  }

  std::vector<InputLayout> prepare() override {
    Edge* out = outputs[0];
    const size_t n = inputs.size();
    if (n == 1) {
      impl = "view";
      out->blocked = inputs[0]->blocked;
      return {InputLayout::any()};
    }
    const int axis = static_cast<int>(
        ir::normalize_axis(source->attr_i("axis"), static_cast<int64_t>(out->shape.size()), *source));
    axis_ = axis;
    const int ptag = static_cast<int>(plain_tag(out->shape.size()));
    // destination layout: with consumers that take any layout, the non-plain layout
    // carrying most data; otherwise the layout carrying most data, ties to plain
    std::vector<int> tags(n);
    std::map<int, int64_t> weight;  // format tag (or -1: none of the known ones) -> elements
    for (size_t i = 0; i < n; ++i) {
      tags[i] = inputs[i]->is_plain() ? ptag : tag_of(*inputs[i]);
      weight[tags[i]] += shape_size(inputs[i]->shape);
    }
    int target = ptag;
    int64_t best = weight.count(ptag) ? weight[ptag] : 0;
    if (consumers_take_any_layout(*source)) {
      best = 0;
      for (auto& [t, w] : weight)
        if (t >= 0 && t != ptag && w > best) target = t, best = w;
    } else {
      for (auto& [t, w] : weight)
        if (w > best) target = t, best = w;
    }
    const memory::desc plain = *plain_desc(out->shape, out->dtype);
    std::vector<memory::desc> srcs;
    std::vector<InputLayout> req(n, InputLayout::any());
    for (size_t i = 0; i < n; ++i) {
      srcs.push_back(inputs[i]->desc());
      // an input in another layout that other nodes read too: convert it once, by a
      // shared Reorder (densenet's block input feeds every layer's concat)
      const ir::Value* v = source->input(i);
      if (target >= 0 && target != ptag && tags[i] != target && inputs[i]->kind != Edge::Kind::constant &&
          v->uses().size() > 1) {
        srcs[i] = memory::desc(to_dims(inputs[i]->shape), memory::data_type::f32, static_cast<tag>(target));
        req[i] = InputLayout::exact(srcs[i]);
      }
    }
    bool made = false;
    if (target != ptag) {
      try {
        if (target >= 0)
          pd_ = dnnl::concat::primitive_desc(
              memory::desc(to_dims(out->shape), memory::data_type::f32, static_cast<tag>(target)), axis, srcs,
              cpu_engine());
        else
          pd_ = dnnl::concat::primitive_desc(axis, srcs, cpu_engine());  // oneDNN's choice
        made = true;
      } catch (const dnnl::error&) {
        // no implementation for that destination layout: plain below
      }
    }
    if (!made) {
      for (size_t i = 0; i < n; ++i) srcs[i] = inputs[i]->desc();
      req.assign(n, InputLayout::any());
      pd_ = dnnl::concat::primitive_desc(plain, axis, srcs, cpu_engine());
    }
    prim_ = dnnl::concat(pd_);
    impl = pd_.impl_info_str();
    if (pd_.dst_desc() == plain) out->blocked.reset();
    else out->blocked = pd_.dst_desc();
    return req;
  }

  void execute(dnnl::stream& stream) override {
    if (inputs.size() == 1 || in_output_) return;
    std::unordered_map<int, memory> args;
    for (size_t i = 0; i < inputs.size(); ++i) args[DNNL_ARG_MULTIPLE_SRC + static_cast<int>(i)] = inputs[i]->memory();
    args[DNNL_ARG_DST] = outputs[0]->memory();
    prim_.execute(stream, args);
  }

 private:
  dnnl::concat::primitive_desc pd_;
  dnnl::concat prim_;
  int axis_ = -1;
  bool in_output_ = false;  // every producer already wrote its slice of the output
};

}  // namespace

bool concat_supports(const ir::Node& n) {
  if (n.op_type() != "Concat" || !n.is_onnx_domain()) return false;
  if (n.num_inputs() < 1 || n.num_outputs() != 1 || !n.has_attr("axis")) return false;
  const ir::Value* y = n.output(0);
  if (y->type.dtype != DType::f32 || !y->type.shape.is_static()) return false;
  const Shape ys = y->type.shape.to_shape();
  const int64_t rank = static_cast<int64_t>(ys.size());
  if (rank < 1 || rank > 6) return false;
  const int64_t axis = n.attr_i("axis");
  if (axis < -rank || axis >= rank) return false;
  for (const ir::Value* x : n.inputs()) {
    if (!x || x->type.dtype != DType::f32 || !x->type.shape.is_static()) return false;
    const Shape xs = x->type.shape.to_shape();
    if (static_cast<int64_t>(xs.size()) != rank || shape_size(xs) == 0) return false;
  }
  return true;
}

std::unique_ptr<Node> make_concat_node(const ir::Node& n) { return std::make_unique<ConcatNode>(n); }

}  // namespace kiln::cpu
