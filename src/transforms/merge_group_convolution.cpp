#include "transforms/merge_group_convolution.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>

#include "core/strings.hpp"
#include "transforms/graph_edit.hpp"

namespace kiln::transforms {

namespace {

// Where the channels were split: the parts in channel order and the nodes that made them.
struct SplitPoint {
  ir::Value* x = nullptr;
  std::vector<ir::Value*> parts;
  std::vector<ir::Node*> nodes;  // the Split, or the Slices in channel order
  std::string where;             // "split" or "slice_a, slice_b"
  std::string reason;            // non-empty: not a channel split, why (logged if a Conv reads a part)
};

int64_t normalized_axis(int64_t axis, const ir::Value* x) {
  const ir::PartialShape& s = x->type.shape;
  if (axis < 0 && s.rank_known) axis += static_cast<int64_t>(s.rank());
  return axis;
}

// The values of a constant integer input (int32 / int64), or nullopt.
std::optional<std::vector<int64_t>> const_ints(const ir::Node& n, size_t i) {
  const ir::Value* v = n.input(i);
  if (!v || !v->is_constant()) return std::nullopt;
  const Tensor& t = v->constant();
  if (t.dtype() != DType::i64 && t.dtype() != DType::i32) return std::nullopt;
  return t.to_i64();
}

std::string sizes_of(const std::vector<ir::Value*>& parts) {
  std::vector<int64_t> s;
  for (const ir::Value* p : parts) s.push_back(static_dim(p, 1));
  return join(s, ", ");
}

SplitPoint from_split(ir::Node* split) {
  SplitPoint sp;
  sp.x = split->input(0);
  sp.nodes = {split};
  sp.where = split->name();
  sp.parts = split->outputs();
  const int64_t axis = normalized_axis(split->attr_i("axis", 0), sp.x);
  if (axis != 1) sp.reason = cat("it splits along axis ", axis, ", not the channels (1)");
  return sp;
}

// A Slice of one axis, 1 (the channels), step 1, constant bounds, clamped to [0, C).
struct ChannelSlice {
  ir::Node* node;
  int64_t begin, end;
};

std::optional<ChannelSlice> channel_slice(ir::Node* n) {
  if (n->op_type() != "Slice" || !is_onnx_domain(*n) || n->num_outputs() != 1 || !n->input(0)) return std::nullopt;
  const ir::Value* x = n->input(0);
  const int64_t C = static_dim(x, 1);
  auto starts = const_ints(*n, 1), ends = const_ints(*n, 2);
  if (C < 0 || !starts || !ends || starts->size() != 1 || ends->size() != 1) return std::nullopt;
  int64_t axis = 0;
  if (n->has_input(3)) {
    auto axes = const_ints(*n, 3);
    if (!axes || axes->size() != 1) return std::nullopt;
    axis = (*axes)[0];
  }
  if (normalized_axis(axis, x) != 1) return std::nullopt;
  if (n->has_input(4)) {
    auto steps = const_ints(*n, 4);
    if (!steps || steps->size() != 1 || (*steps)[0] != 1) return std::nullopt;
  }
  auto clamp = [&](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + C : v, 0, C); };
  return ChannelSlice{n, clamp((*starts)[0]), clamp((*ends)[0])};
}

// Groups the channel Slices of each tensor; a group must tile [0, C) with its parts.
std::vector<SplitPoint> slice_groups(const std::vector<ir::Node*>& order) {
  std::map<ir::Value*, std::vector<ChannelSlice>> by_input;
  std::vector<ir::Value*> inputs;  // first-seen order
  for (ir::Node* n : order)
    if (auto s = channel_slice(n)) {
      auto& v = by_input[n->input(0)];
      if (v.empty()) inputs.push_back(n->input(0));
      v.push_back(*s);
    }
  std::vector<SplitPoint> out;
  for (ir::Value* x : inputs) {
    auto& slices = by_input[x];
    if (slices.size() < 2) continue;
    std::stable_sort(slices.begin(), slices.end(),
                     [](const ChannelSlice& a, const ChannelSlice& b) { return a.begin < b.begin; });
    SplitPoint sp;
    sp.x = x;
    std::vector<std::string> names, ranges;
    int64_t at = 0;
    for (const ChannelSlice& s : slices) {
      sp.nodes.push_back(s.node);
      sp.parts.push_back(s.node->output(0));
      names.push_back(s.node->name());
      ranges.push_back(cat("[", s.begin, ",", s.end, ")"));
      if (s.begin != at || s.end <= s.begin) at = -1;
      if (at >= 0) at = s.end;
    }
    sp.where = join(names, ", ");
    if (at != static_dim(x, 1))
      sp.reason = cat("the channel slices ", join(ranges, " "), " of '", x->name(), "' do not tile its ",
                      static_dim(x, 1), " channels");
    out.push_back(std::move(sp));
  }
  return out;
}

// The parameters two convolutions must share, normalised with ONNX defaults.
struct ConvParams {
  Shape weight;
  std::vector<int64_t> kernel, strides, pads, dilations;
  std::string auto_pad;
  int64_t group = 1;
};

ConvParams conv_params(const ir::Node& c) {
  ConvParams p;
  p.weight = c.input(1)->constant().shape();
  const size_t sp = p.weight.size() - 2;
  p.kernel = c.attr_ints("kernel_shape", std::vector<int64_t>(p.weight.begin() + 2, p.weight.end()));
  p.strides = c.attr_ints("strides", std::vector<int64_t>(sp, 1));
  p.pads = c.attr_ints("pads", std::vector<int64_t>(2 * sp, 0));
  p.dilations = c.attr_ints("dilations", std::vector<int64_t>(sp, 1));
  p.auto_pad = c.attr_s("auto_pad", "NOTSET");
  p.group = c.attr_i("group", 1);
  return p;
}

// "" when conv b has a's parameters, else what differs.
std::string differs(const ConvParams& a, const ConvParams& b) {
  if (a.weight != b.weight)
    return cat("weight shape ", shape_to_string(b.weight), " instead of ", shape_to_string(a.weight));
  if (a.kernel != b.kernel) return "kernel_shape";
  if (a.strides != b.strides) return "strides";
  if (a.pads != b.pads) return "pads";
  if (a.dilations != b.dilations) return "dilations";
  if (a.auto_pad != b.auto_pad) return "auto_pad";
  return "";
}

// Why conv `c` (reading a part as data input) cannot be merged on its own, or "".
std::string conv_unfit(const ir::Node& c) {
  if (c.attr_i("group", 1) != 1) return cat(c.name(), " is already grouped (group ", c.attr_i("group", 1), ")");
  const ir::Value* w = c.input(1);
  if (!w || !w->is_constant()) return cat(c.name(), "'s weight is not a constant");
  if (w->constant().dtype() != DType::f32 || w->constant().rank() < 3)
    return cat(c.name(), "'s weight is not an f32 tensor of rank >= 3");
  const ir::Value* b = c.input(2);
  if (b && (!b->is_constant() || b->constant().dtype() != DType::f32))
    return cat(c.name(), "'s bias is not an f32 constant");
  return "";
}

// `base` when no value or node has that name yet, else a unique variant of it.
std::string free_name(ir::Graph& g, const std::string& base) {
  return g.find_value(base) || g.find_node(base) ? g.unique_name(base) : base;
}

Tensor concat_rows(const std::vector<const Tensor*>& parts, Shape shape) {
  Tensor t(DType::f32, std::move(shape));
  auto* p = static_cast<unsigned char*>(t.raw());
  for (const Tensor* part : parts) {
    std::memcpy(p, part->raw(), part->byte_size());
    p += part->byte_size();
  }
  return t;
}

}  // namespace

size_t merge_group_convolution(ir::Graph& g, PassLog* log) {
  GraphEditor ed(g);
  const std::vector<ir::Node*> order = g.topo_order();
  std::vector<SplitPoint> points;
  for (ir::Node* n : order)
    if (n->op_type() == "Split" && is_onnx_domain(*n) && n->input(0) && n->num_outputs() >= 2)
      points.push_back(from_split(n));
  for (SplitPoint& sp : slice_groups(order)) points.push_back(std::move(sp));

  size_t merged = 0;
  for (SplitPoint& sp : points) {
    bool gone = false;
    for (ir::Node* n : sp.nodes) gone |= ed.erased(n);
    if (gone) continue;
    // a candidate once a Conv reads one of the parts as its data input
    std::vector<ir::Node*> convs(sp.parts.size(), nullptr);
    bool any_conv = false;
    for (size_t i = 0; i < sp.parts.size(); ++i)
      for (const ir::Use& u : sp.parts[i]->uses())
        if (u.node->op_type() == "Conv" && is_onnx_domain(*u.node) && u.input_index == 0) {
          convs[i] = u.node;
          any_conv = true;
        }
    if (!any_conv) continue;
    std::string where = sp.where;
    auto skip = [&](const std::string& why) {
      if (log) log->skipped(kMergeGroupConvolution, where, "not merged into a grouped Conv: " + why);
    };
    if (!sp.reason.empty()) {
      skip(sp.reason);
      continue;
    }
    const int64_t C = static_dim(sp.x, 1);
    const int64_t part = static_dim(sp.parts[0], 1);
    bool equal = C > 0 && part > 0;
    for (const ir::Value* p : sp.parts) equal = equal && static_dim(p, 1) == part;
    if (!equal) {
      skip(cat("the parts do not have one static channel count (", sizes_of(sp.parts), ")"));
      continue;
    }
    std::string why;
    for (size_t i = 0; i < sp.parts.size() && why.empty(); ++i) {
      ir::Value* p = sp.parts[i];
      if (!convs[i]) {
        why = cat("part '", p->name(), "' is read by ", p->uses().empty() ? std::string("no node") : p->uses()[0].node->name(),
                  ", not a Conv");
      } else if (std::string r = other_reader(g, p, convs[i]); !r.empty()) {
        why = cat("part '", p->name(), "' is also read by ", r);
      } else if (p->uses().size() != 1) {
        why = cat(convs[i]->name(), " reads part '", p->name(), "' twice");
      }
    }
    if (!why.empty()) {
      skip(why);
      continue;
    }
    std::vector<std::string> conv_names;
    for (ir::Node* c : convs) conv_names.push_back(c->name());
    where = cat(sp.where, " -> ", join(conv_names, ", "));
    for (ir::Node* c : convs)
      if (why.empty()) why = conv_unfit(*c);
    const ConvParams p0 = conv_params(*convs[0]);
    for (size_t i = 1; i < convs.size() && why.empty(); ++i)
      if (std::string d = differs(p0, conv_params(*convs[i])); !d.empty())
        why = cat(convs[i]->name(), " differs from ", convs[0]->name(), " in ", d);
    if (!why.empty()) {
      skip(why);
      continue;
    }
    // every Conv output read by one Concat only, along the channels, in split order
    ir::Value* y0 = convs[0]->output(0);
    ir::Node* concat = y0->uses().empty() ? nullptr : y0->uses()[0].node;
    for (ir::Node* c : convs) {
      if (!why.empty()) break;
      ir::Value* y = c->output(0);
      if (g.is_output(y)) why = cat(c->name(), "'s output is a graph output");
      else if (y->uses().size() != 1) why = cat(c->name(), "'s output is read by ", y->uses().size(), " nodes");
      else if (y->uses()[0].node->op_type() != "Concat" || !is_onnx_domain(*y->uses()[0].node))
        why = cat(c->name(), "'s output is read by ", y->uses()[0].node->name(), ", not a Concat");
      else if (y->uses()[0].node != concat) why = cat("the Conv outputs go to different Concats");
    }
    if (!why.empty()) {
      skip(why);
      continue;
    }
    where = cat(where, " -> ", concat->name());
    const int64_t axis = normalized_axis(concat->attr_i("axis"), concat->output(0));
    if (axis != 1) {
      skip(cat(concat->name(), " concatenates along axis ", axis, ", not the channels (1)"));
      continue;
    }
    bool in_order = concat->num_inputs() == convs.size();
    for (size_t i = 0; in_order && i < convs.size(); ++i) in_order = concat->input(i) == convs[i]->output(0);
    if (!in_order) {
      skip(cat(concat->name(), " does not read exactly the Conv outputs in split order"));
      continue;
    }
    if (std::string r = why_not_replaceable(g, concat->output(0), y0); !r.empty()) {
      skip(r);
      continue;
    }

    // Merge: weights [N * M, C / N, k...] and biases [N * M].
    const int64_t n = static_cast<int64_t>(convs.size());
    std::vector<const Tensor*> ws, bs;
    std::vector<Tensor> zero_bias;
    bool any_bias = false;
    for (ir::Node* c : convs) any_bias |= c->has_input(2);
    const int64_t M = p0.weight[0];
    zero_bias.reserve(convs.size());
    for (ir::Node* c : convs) {
      ws.push_back(&c->input(1)->constant());
      if (!any_bias) continue;
      if (c->has_input(2)) {
        bs.push_back(&c->input(2)->constant());
      } else {
        zero_bias.emplace_back(DType::f32, Shape{M});
        std::memset(zero_bias.back().raw(), 0, zero_bias.back().byte_size());
        bs.push_back(&zero_bias.back());
      }
    }
    Shape wshape = p0.weight;
    wshape[0] = M * n;
    std::vector<ir::Value*> inputs = {
        sp.x, g.add_constant(free_name(g, convs[0]->name() + "_group_weight"), concat_rows(ws, wshape))};
    if (any_bias) inputs.push_back(g.add_constant(free_name(g, convs[0]->name() + "_group_bias"), concat_rows(bs, {M * n})));
    ir::Node* merged_conv = g.add_node("Conv", inputs, 1, free_name(g, convs[0]->name() + "_group"));
    merged_conv->set_opset(convs[0]->opset());
    merged_conv->attrs = convs[0]->attrs;
    merged_conv->attrs["group"] = ir::Attribute(n);
    merged_conv->output(0)->type = concat->output(0)->type;
    const std::string name = merged_conv->name();
    ed.replace_and_erase(concat, concat->output(0), merged_conv->output(0));
    for (ir::Node* c : convs) ed.erase(c);
    for (ir::Node* s : sp.nodes) ed.erase(s);
    ++merged;
    if (log) log->applied(kMergeGroupConvolution, where, cat("merged into grouped Conv '", name, "' (group ", n, ")"));
  }
  return merged;
}

}  // namespace kiln::transforms
