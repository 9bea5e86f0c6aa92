// Control flow: If, Loop, Scan. Their bodies are ir::Graphs held in graph attributes
// and run with the reference executor. Values a body reads from an enclosing graph are
// "captures": the frontend appends them to the node's inputs and lists their names in
// the node's `kiln_captures` attribute; in the body they are inputs of the same name
// after the body's declared inputs.
#include <algorithm>
#include <cstring>
#include <limits>

#include "ops/kernel_util.hpp"
#include "ops/op_families.hpp"
#include "runtime/reference_executor.hpp"

namespace kiln::ops {

namespace {

constexpr size_t kMany = std::numeric_limits<int32_t>::max();

using ir::capture_names;

size_t first_capture(const ir::Node& n) { return n.num_inputs() - capture_names(n).size(); }

size_t capture_index(const ir::Node& n, const std::string& name) {
  const size_t k = ir::capture_input(n, name);
  if (k == std::string::npos)
    throw Error(cat(n.describe(), ": subgraph input '", name, "' is neither declared nor a captured outer value"));
  return k;
}

// Checks the body's declared input count, then types its capture inputs from the
// node's inputs and infers the body's shapes.
void infer_body(ir::InferContext& ctx, ir::Graph& body, const std::vector<ir::ValueType>& declared,
                const char* attr) {
  const ir::Node& n = ctx.node();
  size_t ncap = 0;
  auto names = capture_names(n);
  for (ir::Value* in : body.inputs())
    if (std::find(names.begin(), names.end(), in->name()) != names.end()) ++ncap;
  if (body.inputs().size() - ncap != declared.size())
    throw ctx.error("subgraph '", attr, "' declares ", body.inputs().size() - ncap, " inputs, expected ",
                    declared.size());
  for (size_t i = 0; i < body.inputs().size(); ++i) {
    ir::Value* in = body.inputs()[i];
    if (i < declared.size()) {
      if (in->type.dtype == DType::undefined) in->type.dtype = declared[i].dtype;
      if (!in->type.shape.rank_known) in->type.shape = declared[i].shape;
      if (in->type.kind == ValueKind::tensor) {  // sequences / optionals carried in
        in->type.kind = declared[i].kind;
        in->type.elem_kind = declared[i].elem_kind;
      }
    } else {
      in->type = ctx.input_type(capture_index(n, in->name()));
    }
  }
  ir::infer_shapes(body);
}

// The body's input tensors: the declared ones given, then its captures by name.
std::vector<Tensor> body_inputs(const ir::RunContext& ctx, const ir::Graph& body, std::vector<Tensor> declared) {
  for (size_t i = declared.size(); i < body.inputs().size(); ++i)
    declared.push_back(ctx.value(capture_index(ctx.node(), body.inputs()[i]->name())));
  return declared;
}

// A loop-carried value where an optional is declared but the body gave its content (a
// tensor or a sequence): wrapped in the optional, as ONNX's type rules allow.
Tensor as_kind(Tensor v, const ir::ValueType& declared) {
  if (declared.kind == ValueKind::optional && v.kind() != ValueKind::optional)
    return Tensor::optional(v.dtype(), v, v.kind());
  return v;
}

bool scalar_true(const Tensor& t, const ir::RunContext& ctx, const char* what) {
  return one_value(ctx, t, what).to_f64()[0] != 0.0;
}

// t with dimension `axis` removed, taking index `i` along it.
Tensor take_slice(const Tensor& t, size_t axis, int64_t i) {
  Shape s = t.shape();
  int64_t d = s[axis];
  int64_t outer = 1, inner = 1;
  for (size_t k = 0; k < axis; ++k) outer *= s[k];
  for (size_t k = axis + 1; k < s.size(); ++k) inner *= s[k];
  s.erase(s.begin() + static_cast<std::ptrdiff_t>(axis));
  Tensor out(t.dtype(), s);
  size_t es = dtype_size(t.dtype());
  auto* src = static_cast<const char*>(t.raw());
  auto* dst = static_cast<char*>(out.raw());
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(dst + static_cast<size_t>(o * inner) * es, src + static_cast<size_t>((o * d + i) * inner) * es,
                static_cast<size_t>(inner) * es);
  return out;
}

// Stacks equally shaped tensors along a new dimension `axis` (reversed order if asked).
Tensor stack(const std::vector<Tensor>& parts, size_t axis, bool reverse, const ir::RunContext& ctx, DType dtype,
             const Shape& empty_elem) {
  if (parts.empty()) {
    Shape s = empty_elem;
    s.insert(s.begin() + static_cast<std::ptrdiff_t>(std::min(axis, s.size())), 0);
    return Tensor(dtype, s);
  }
  const Shape& e = parts[0].shape();
  if (axis > e.size()) throw ctx.error("scan output axis ", axis, " is out of range for rank ", e.size() + 1);
  for (auto& p : parts)
    if (p.shape() != e || p.dtype() != parts[0].dtype())
      throw ctx.error("scan output changes shape across iterations: ", shape_to_string(e), " then ",
                      shape_to_string(p.shape()));
  int64_t n = static_cast<int64_t>(parts.size());
  Shape s = e;
  s.insert(s.begin() + static_cast<std::ptrdiff_t>(axis), n);
  Tensor out(parts[0].dtype(), s);
  int64_t outer = 1, inner = 1;
  for (size_t k = 0; k < axis; ++k) outer *= e[k];
  for (size_t k = axis; k < e.size(); ++k) inner *= e[k];
  size_t es = dtype_size(out.dtype());
  auto* dst = static_cast<char*>(out.raw());
  for (int64_t t = 0; t < n; ++t) {
    auto* src = static_cast<const char*>(parts[static_cast<size_t>(reverse ? n - 1 - t : t)].raw());
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(dst + static_cast<size_t>((o * n + t) * inner) * es, src + static_cast<size_t>(o * inner) * es,
                  static_cast<size_t>(inner) * es);
  }
  return out;
}

ir::PartialShape merge(const ir::PartialShape& a, const ir::PartialShape& b) {
  if (!a.rank_known || !b.rank_known || a.rank() != b.rank()) return ir::PartialShape::unknown_rank();
  ir::PartialShape m = a;
  for (size_t i = 0; i < a.rank(); ++i)
    if (!(a.dims[i] == b.dims[i])) m.dims[i] = ir::Dim::unknown();
  return m;
}

Shape static_or_empty(const ir::PartialShape& p) {
  Shape s;
  if (!p.rank_known) return s;
  for (auto& d : p.dims) s.push_back(d.is_static() ? d.value : 0);
  return s;
}

// ---------------- If ----------------

void register_if(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "If";
  s.min_inputs = 1;
  s.max_inputs = kMany;
  s.min_outputs = 0;
  s.max_outputs = kMany;
  // kiln_fitting_branch: set by specialize_shapes when only that branch can take the inputs'
  // shapes (the other fails if taken): the outputs are typed by it alone.
  s.attrs = {{"then_branch", ir::AttrType::graph, true},
             {"else_branch", ir::AttrType::graph, true},
             {"kiln_captures", ir::AttrType::strings},
             {"kiln_fitting_branch", ir::AttrType::s}};
  s.infer = [](ir::InferContext& ctx) {
    const ir::Node& n = ctx.node();
    if (n.has_attr("kiln_fitting_branch")) {
      const std::string which = n.attr_s("kiln_fitting_branch");
      if (which != "then_branch" && which != "else_branch")
        throw ctx.error("kiln_fitting_branch must name then_branch or else_branch, got '", which, "'");
      auto g = n.attr_graph(which);
      infer_body(ctx, *g, {}, which.c_str());
      if (g->outputs().size() != n.num_outputs())
        throw ctx.error(which, " produces ", g->outputs().size(), " outputs, the node has ", n.num_outputs());
      for (size_t i = 0; i < n.num_outputs(); ++i) ctx.set_output_type(i, g->outputs()[i]->type);
      return;
    }
    auto then_g = n.attr_graph("then_branch"), else_g = n.attr_graph("else_branch");
    infer_body(ctx, *then_g, {}, "then_branch");
    infer_body(ctx, *else_g, {}, "else_branch");
    if (then_g->outputs().size() != n.num_outputs() || else_g->outputs().size() != n.num_outputs())
      throw ctx.error("branches produce ", then_g->outputs().size(), " and ", else_g->outputs().size(),
                      " outputs, the node has ", n.num_outputs());
    for (size_t i = 0; i < n.num_outputs(); ++i) {
      const auto& a = then_g->outputs()[i]->type;
      const auto& b = else_g->outputs()[i]->type;
      ir::ValueType t = a;  // a branch may give a sequence / optional
      t.dtype = a.dtype != DType::undefined ? a.dtype : b.dtype;
      t.shape = merge(a.shape, b.shape);
      ctx.set_output_type(i, t);
    }
  };
  s.run = [](ir::RunContext& ctx) {
    const ir::Node& n = ctx.node();
    bool cond = scalar_true(ctx.input(0), ctx, "If condition");
    auto body = n.attr_graph(cond ? "then_branch" : "else_branch");
    runtime::ReferenceExecutor exec(body);
    auto outs = exec.run(body_inputs(ctx, *body, {}));
    if (outs.size() != ctx.num_outputs())
      throw ctx.error("branch produced ", outs.size(), " outputs, expected ", ctx.num_outputs());
    for (size_t i = 0; i < outs.size(); ++i) ctx.set_output(i, outs[i]);
  };
  r.add(std::move(s));
}

// ---------------- Loop ----------------

void register_loop(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "Loop";
  s.min_inputs = 0;  // M and cond are optional but positional
  s.max_inputs = kMany;
  s.min_outputs = 0;
  s.max_outputs = kMany;
  s.attrs = {{"body", ir::AttrType::graph, true}, {"kiln_captures", ir::AttrType::strings}};
  s.validate = [](const ir::Node& n) {
    if (n.num_inputs() < 2 + capture_names(n).size())
      throw Error(cat(n.describe(), ": Loop needs inputs M and cond (either may be empty)"));
  };
  s.infer = [](ir::InferContext& ctx) {
    const ir::Node& n = ctx.node();
    auto body = n.attr_graph("body");
    size_t carried = first_capture(n) - 2;
    std::vector<ir::ValueType> declared = {{DType::i64, ir::PartialShape(Shape{})},
                                           {DType::boolean, ir::PartialShape(Shape{})}};
    for (size_t i = 0; i < carried; ++i) declared.push_back(ctx.input_type(2 + i));
    infer_body(ctx, *body, declared, "body");
    size_t nout = body->outputs().size();
    if (nout < 1 + carried || n.num_outputs() != nout - 1)
      throw ctx.error("body has ", nout, " outputs; with ", carried, " loop-carried values the node needs ",
                      nout - 1, " outputs, it has ", n.num_outputs());
    for (size_t i = 0; i < carried; ++i) {
      ir::ValueType t = ctx.input_type(2 + i);  // sequences / optionals carried as they are
      t.shape = merge(ctx.input_shape(2 + i), body->outputs()[1 + i]->type.shape);
      ctx.set_output_type(i, t);
    }
    for (size_t k = 1 + carried; k < nout; ++k) {
      const auto& t = body->outputs()[k]->type;
      ir::PartialShape sh = ir::PartialShape::unknown_rank();
      if (t.shape.rank_known) {
        sh = t.shape;
        sh.dims.insert(sh.dims.begin(), ir::Dim::unknown());
      }
      ctx.set_output(k - 1, t.dtype, sh);
    }
  };
  s.run = [](ir::RunContext& ctx) {
    const ir::Node& n = ctx.node();
    auto body = n.attr_graph("body");
    size_t carried = first_capture(n) - 2;
    int64_t max_trips = ctx.has_input(0) ? ctx.input(0).to_i64().at(0) : std::numeric_limits<int64_t>::max();
    bool cond = ctx.has_input(1) ? scalar_true(ctx.input(1), ctx, "Loop condition") : true;
    std::vector<Tensor> state;
    for (size_t i = 0; i < carried; ++i) state.push_back(ctx.value(2 + i));
    size_t nscan = body->outputs().size() - 1 - carried;
    std::vector<std::vector<Tensor>> scans(nscan);
    runtime::ReferenceExecutor exec(body);
    exec.set_input_dims_are_hints(true);  // carried values may change shape (ONNX Runtime runs them too)
    std::vector<long double> scan_bytes(nscan, 0);  // what each scan output holds so far
    for (int64_t it = 0; it < max_trips && cond; ++it) {
      std::vector<Tensor> ins = {Tensor::scalar<int64_t>(it), Tensor::scalar<bool>(cond)};
      ins.insert(ins.end(), state.begin(), state.end());
      auto outs = exec.run(body_inputs(ctx, *body, std::move(ins)));
      cond = scalar_true(outs[0], ctx, "Loop body condition output");
      for (size_t i = 0; i < carried; ++i) state[i] = as_kind(outs[1 + i], body->inputs()[2 + i]->type);
      for (size_t k = 0; k < nscan; ++k) {
        const Tensor& part = outs[1 + carried + k];
        scan_bytes[k] += static_cast<long double>(part.byte_size());
        ctx.check_bytes(scan_bytes[k], cat("scan output ", carried + k, " after ", it + 1, " iterations"));
        scans[k].push_back(part);
      }
    }
    for (size_t i = 0; i < carried; ++i) ctx.set_output(i, as_kind(state[i], n.output(i)->type));
    for (size_t k = 0; k < nscan; ++k) {
      const auto& t = body->outputs()[1 + carried + k]->type;
      ctx.set_output(carried + k, stack(scans[k], 0, false, ctx, t.dtype, static_or_empty(t.shape)));
    }
  };
  r.add(std::move(s));
}

// ---------------- Scan (opset 9+) ----------------

void register_scan(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "Scan";
  s.since_version = 8;
  s.min_inputs = 0;  // opset 8 starts with an optional sequence_lens; validate checks the rest
  s.max_inputs = kMany;
  s.min_outputs = 0;
  s.max_outputs = kMany;
  s.attrs = {{"body", ir::AttrType::graph, true},
             {"num_scan_inputs", ir::AttrType::i, true},
             {"scan_input_directions", ir::AttrType::ints},
             {"scan_output_directions", ir::AttrType::ints},
             {"scan_input_axes", ir::AttrType::ints},
             {"scan_output_axes", ir::AttrType::ints},
             {"kiln_captures", ir::AttrType::strings}};
  s.validate = [](const ir::Node& n) {
    if (n.opset() == 8)
      throw Error(cat(n.describe(), ": the opset-8 form of Scan (batch axis, sequence_lens input) is not supported; "
                                    "opset 9 and later are"));
    int64_t m = n.attr_i("num_scan_inputs");
    if (m < 1 || static_cast<size_t>(m) > first_capture(n))
      throw Error(cat(n.describe(), ": num_scan_inputs ", m, " must be in [1, ", first_capture(n), "]"));
  };
  s.infer = [](ir::InferContext& ctx) {
    const ir::Node& n = ctx.node();
    auto body = n.attr_graph("body");
    size_t m = static_cast<size_t>(n.attr_i("num_scan_inputs"));
    size_t states = first_capture(n) - m;
    auto in_axes = n.attr_ints("scan_input_axes", std::vector<int64_t>(m, 0));
    std::vector<ir::ValueType> declared;
    for (size_t i = 0; i < states; ++i) declared.push_back(ctx.input_type(i));
    ir::Dim seq = ir::Dim::unknown();
    for (size_t j = 0; j < m; ++j) {
      ir::ValueType t = ctx.input_type(states + j);
      if (t.shape.rank_known) {
        int64_t ax = ir::normalize_axis(j < in_axes.size() ? in_axes[j] : 0, static_cast<int64_t>(t.shape.rank()), n);
        seq = t.shape.dims[static_cast<size_t>(ax)];
        t.shape.dims.erase(t.shape.dims.begin() + ax);
      }
      declared.push_back(t);
    }
    infer_body(ctx, *body, declared, "body");
    size_t nout = body->outputs().size();
    if (nout < states || n.num_outputs() != nout) throw ctx.error("body has ", nout, " outputs, the node has ", n.num_outputs());
    auto out_axes = n.attr_ints("scan_output_axes", std::vector<int64_t>(nout - states, 0));
    for (size_t i = 0; i < states; ++i) ctx.set_output(i, ctx.input_dtype(i), body->outputs()[i]->type.shape);
    for (size_t k = states; k < nout; ++k) {
      const auto& t = body->outputs()[k]->type;
      ir::PartialShape sh = ir::PartialShape::unknown_rank();
      if (t.shape.rank_known) {
        sh = t.shape;
        int64_t ax = k - states < out_axes.size() ? out_axes[k - states] : 0;
        ax = ir::normalize_axis(ax, static_cast<int64_t>(sh.rank()) + 1, n);
        sh.dims.insert(sh.dims.begin() + ax, seq);
      }
      ctx.set_output(k, t.dtype, sh);
    }
  };
  s.run = [](ir::RunContext& ctx) {
    const ir::Node& n = ctx.node();
    auto body = n.attr_graph("body");
    size_t m = static_cast<size_t>(n.attr_i("num_scan_inputs"));
    size_t states = first_capture(n) - m;
    auto in_dirs = n.attr_ints("scan_input_directions", std::vector<int64_t>(m, 0));
    auto in_axes = n.attr_ints("scan_input_axes", std::vector<int64_t>(m, 0));
    size_t nscan_out = body->outputs().size() - states;
    auto out_dirs = n.attr_ints("scan_output_directions", std::vector<int64_t>(nscan_out, 0));
    auto out_axes = n.attr_ints("scan_output_axes", std::vector<int64_t>(nscan_out, 0));
    if (in_dirs.size() != m || in_axes.size() != m || out_dirs.size() != nscan_out || out_axes.size() != nscan_out)
      throw ctx.error("scan direction/axis attributes must have one entry per scan input/output");
    int64_t seq = -1;
    std::vector<size_t> axes(m);
    for (size_t j = 0; j < m; ++j) {
      const Tensor& x = ctx.input(states + j);
      axes[j] = static_cast<size_t>(ir::normalize_axis(in_axes[j], static_cast<int64_t>(x.rank()), n));
      int64_t len = x.shape()[axes[j]];
      if (seq >= 0 && len != seq) throw ctx.error("scan inputs have different sequence lengths ", seq, " and ", len);
      seq = len;
    }
    std::vector<Tensor> state;
    for (size_t i = 0; i < states; ++i) state.push_back(ctx.input(i));
    std::vector<std::vector<Tensor>> scans(nscan_out);
    runtime::ReferenceExecutor exec(body);
    for (int64_t t = 0; t < seq; ++t) {
      std::vector<Tensor> ins = state;
      for (size_t j = 0; j < m; ++j)
        ins.push_back(take_slice(ctx.input(states + j), axes[j], in_dirs[j] ? seq - 1 - t : t));
      auto outs = exec.run(body_inputs(ctx, *body, std::move(ins)));
      for (size_t i = 0; i < states; ++i) state[i] = outs[i];
      for (size_t k = 0; k < nscan_out; ++k) scans[k].push_back(outs[states + k]);
    }
    for (size_t i = 0; i < states; ++i) ctx.set_output(i, state[i]);
    for (size_t k = 0; k < nscan_out; ++k) {
      const auto& ty = body->outputs()[states + k]->type;
      Shape elem = scans[k].empty() ? static_or_empty(ty.shape) : scans[k][0].shape();
      int64_t ax = ir::normalize_axis(out_axes[k], static_cast<int64_t>(elem.size()) + 1, n);
      ctx.set_output(states + k,
                     stack(scans[k], static_cast<size_t>(ax), out_dirs[k] != 0, ctx, ty.dtype, elem));
    }
  };
  r.add(std::move(s));
}

}  // namespace

void register_control_flow_ops(ir::OpRegistry& r) {
  register_if(r);
  register_loop(r);
  register_scan(r);
}

}  // namespace kiln::ops
