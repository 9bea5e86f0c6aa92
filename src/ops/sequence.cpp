// Sequence and optional values (ONNX's non-tensor types), reference kernels: SequenceEmpty,
// SequenceConstruct, SequenceAt, SequenceInsert, SequenceErase, SequenceLength,
// SplitToSequence, ConcatFromSequence, SequenceMap (a body graph per item, run by the reference
// executor), Optional, OptionalHasElement, OptionalGetElement. A sequence is a kiln::Tensor of
// kind sequence holding its tensors; an optional holds none or one value. Models with such
// values run on the reference executor (cpu::Executor falls back).
#include <algorithm>
#include <cstring>
#include <limits>

#include "core/onnx_dtype.hpp"
#include "ir/infer_util.hpp"
#include "ops/kernel_util.hpp"
#include "ops/op_families.hpp"
#include "runtime/reference_executor.hpp"

namespace kiln::ops {

namespace {

using ir::PartialShape;
using ir::ValueType;

ValueType seq_type(DType elem, PartialShape shape = PartialShape::unknown_rank()) {
  ValueType t;
  t.kind = ValueKind::sequence;
  t.dtype = elem;
  t.shape = std::move(shape);
  return t;
}

const Tensor& sequence_input(const RunContext& ctx, size_t i) {
  const Tensor& s = ctx.value(i);
  if (s.kind() != ValueKind::sequence) throw ctx.error("input ", i, " must be a sequence");
  return s;
}

// A tensor of element type `t` may join a sequence of `seq` (undefined: an empty sequence
// whose type is not known yet). Ctx: InferContext or RunContext.
template <class Ctx>
void check_insertable(const Ctx& ctx, DType seq, DType t) {
  if (seq != t && seq != DType::undefined)
    throw ctx.error("the tensor's element type ", dtype_name(t), " differs from the sequence's ", dtype_name(seq));
}

// A position input (scalar int32 / int64) checked against [-n, n) (or [-n, n] with `end_ok`).
int64_t position(const RunContext& ctx, size_t i, int64_t n, bool end_ok) {
  const Tensor& p = ctx.input(i);
  if (p.dtype() != DType::i64 && p.dtype() != DType::i32) throw ctx.error("position must be int32 or int64");
  if (p.size() != 1) throw ctx.error("position must be a scalar, got shape ", shape_to_string(p.shape()));
  int64_t v = p.to_i64()[0];
  const int64_t hi = end_ok ? n : n - 1;
  if (v < -n || v > hi) throw ctx.error("position ", v, " is out of range for a sequence of ", n, " tensors");
  return v < 0 ? v + n : v;
}

void register_sequence_basics(ir::OpRegistry& r) {
  {
    ir::OpSchema s;
    s.name = "SequenceEmpty";
    s.since_version = 11;
    s.min_inputs = s.max_inputs = 0;
    s.attrs = {{"dtype", ir::AttrType::i}};
    s.infer = [](ir::InferContext& ctx) {
      const ir::Node& n = ctx.node();
      ctx.set_output_type(0, seq_type(n.has_attr("dtype") ? dtype_from_onnx_code(n.attr_i("dtype"), n.describe()) : DType::f32));
    };
    s.run = [](RunContext& ctx) {
      const ir::Node& n = ctx.node();
      ctx.set_output(0, Tensor::sequence(n.has_attr("dtype") ? dtype_from_onnx_code(n.attr_i("dtype"), n.describe()) : DType::f32, {}));
    };
    r.add(std::move(s));
  }
  {
    ir::OpSchema s;
    s.name = "SequenceConstruct";
    s.since_version = 11;
    s.max_inputs = std::numeric_limits<int32_t>::max();
    s.infer = [](ir::InferContext& ctx) {
      DType t = ctx.input_dtype(0);
      PartialShape shape = ctx.input_shape(0);
      for (size_t i = 1; i < ctx.num_inputs(); ++i) {
        if (ctx.input_dtype(i) != t) throw ctx.error("inputs have different element types");
        if (!(ctx.input_shape(i) == shape)) shape = PartialShape::unknown_rank();
      }
      ctx.set_output_type(0, seq_type(t, shape));
    };
    s.run = [](RunContext& ctx) {
      std::vector<Tensor> items;
      for (size_t i = 0; i < ctx.num_inputs(); ++i) items.push_back(ctx.input(i));
      const DType elem = items.at(0).dtype();  // before the move below
      for (const Tensor& t : items)
        if (t.dtype() != elem) throw ctx.error("inputs have different element types");
      ctx.set_output(0, Tensor::sequence(elem, std::move(items)));
    };
    r.add(std::move(s));
  }
  {
    ir::OpSchema s;
    s.name = "SequenceAt";
    s.since_version = 11;
    s.min_inputs = s.max_inputs = 2;
    s.infer = [](ir::InferContext& ctx) { ctx.set_output(0, ctx.input_dtype(0), ctx.input_shape(0)); };
    s.run = [](RunContext& ctx) {
      const Tensor& seq = sequence_input(ctx, 0);
      const int64_t n = static_cast<int64_t>(seq.items().size());
      ctx.set_output(0, seq.items()[static_cast<size_t>(position(ctx, 1, n, false))]);
    };
    r.add(std::move(s));
  }
  {
    ir::OpSchema s;
    s.name = "SequenceInsert";
    s.since_version = 11;
    s.min_inputs = 2;
    s.max_inputs = 3;
    s.infer = [](ir::InferContext& ctx) {
      check_insertable(ctx, ctx.input_dtype(0), ctx.input_dtype(1));
      ctx.set_output_type(0, seq_type(ctx.input_dtype(1)));
    };
    s.run = [](RunContext& ctx) {
      const Tensor& seq = sequence_input(ctx, 0);
      const Tensor& t = ctx.input(1);
      check_insertable(ctx, seq.dtype(), t.dtype());
      std::vector<Tensor> items = seq.items();
      const int64_t n = static_cast<int64_t>(items.size());
      const int64_t at = ctx.has_input(2) ? position(ctx, 2, n, true) : n;
      items.insert(items.begin() + at, t);
      ctx.set_output(0, Tensor::sequence(t.dtype(), std::move(items)));
    };
    r.add(std::move(s));
  }
  {
    ir::OpSchema s;
    s.name = "SequenceErase";
    s.since_version = 11;
    s.min_inputs = 1;
    s.max_inputs = 2;
    s.infer = [](ir::InferContext& ctx) { ctx.set_output_type(0, seq_type(ctx.input_dtype(0))); };
    s.run = [](RunContext& ctx) {
      const Tensor& seq = sequence_input(ctx, 0);
      std::vector<Tensor> items = seq.items();
      const int64_t n = static_cast<int64_t>(items.size());
      if (n == 0) throw ctx.error("cannot erase from an empty sequence");
      const int64_t at = ctx.has_input(1) ? position(ctx, 1, n, false) : n - 1;
      items.erase(items.begin() + at);
      ctx.set_output(0, Tensor::sequence(seq.dtype(), std::move(items)));
    };
    r.add(std::move(s));
  }
  {
    ir::OpSchema s;
    s.name = "SequenceLength";
    s.since_version = 11;
    s.infer = [](ir::InferContext& ctx) { ctx.set_output(0, DType::i64, PartialShape(Shape{})); };
    s.run = [](RunContext& ctx) {
      ctx.set_output(0, Tensor::scalar<int64_t>(static_cast<int64_t>(sequence_input(ctx, 0).items().size())));
    };
    r.add(std::move(s));
  }
}

// Copies the slab [from, from + len) of `axis` of x into a new tensor.
Tensor slab(const Tensor& x, size_t axis, int64_t from, int64_t len) {
  Shape s = x.shape();
  const int64_t d = s[axis];
  int64_t outer = 1, inner = 1;
  for (size_t k = 0; k < axis; ++k) outer *= s[k];
  for (size_t k = axis + 1; k < s.size(); ++k) inner *= s[k];
  s[axis] = len;
  Tensor out(x.dtype(), s);
  const size_t es = dtype_size(x.dtype());
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(static_cast<char*>(out.raw()) + static_cast<size_t>(o * len * inner) * es,
                static_cast<const char*>(x.raw()) + static_cast<size_t>((o * d + from) * inner) * es,
                static_cast<size_t>(len * inner) * es);
  return out;
}

void register_split_concat(ir::OpRegistry& r) {
  {
    ir::OpSchema s;
    s.name = "SplitToSequence";
    s.since_version = 11;
    s.min_inputs = 1;
    s.max_inputs = 2;
    s.attrs = {{"axis", ir::AttrType::i}, {"keepdims", ir::AttrType::i}};
    s.infer = [](ir::InferContext& ctx) { ctx.set_output_type(0, seq_type(ctx.input_dtype(0))); };
    s.run = [](RunContext& ctx) {
      const Tensor& x = ctx.input(0);
      if (x.dtype() == DType::string) throw ctx.error("string tensors are not split");
      const int64_t rank = static_cast<int64_t>(x.rank());
      if (rank == 0) throw ctx.error("cannot split a scalar");
      const size_t axis = static_cast<size_t>(normalize_axis(ctx.node().attr_i("axis", 0), rank, ctx.node()));
      const int64_t d = x.shape()[axis];
      std::vector<int64_t> sizes;
      bool squeeze = false;
      if (!ctx.has_input(1)) {
        sizes.assign(static_cast<size_t>(d), 1);
        squeeze = ctx.node().attr_i("keepdims", 1) == 0;
      } else {
        const Tensor& sp = ctx.input(1);
        const std::vector<int64_t> v = sp.to_i64();
        if (sp.rank() == 0) {
          if (v[0] <= 0) throw ctx.error("split ", v[0], " must be positive");
          for (int64_t at = 0; at < d; at += v[0]) sizes.push_back(std::min(v[0], d - at));
        } else {
          int64_t sum = 0;
          for (int64_t e : v) {
            if (e < 0) throw ctx.error("split has a negative size ", e);
            sum += e;
          }
          if (sum != d) throw ctx.error("split [", join(v), "] sums to ", sum, ", the axis has ", d);
          sizes = v;
        }
      }
      std::vector<Tensor> items;
      int64_t at = 0;
      for (int64_t len : sizes) {
        Tensor t = slab(x, axis, at, len);
        if (squeeze) {
          Shape sh = t.shape();
          sh.erase(sh.begin() + static_cast<std::ptrdiff_t>(axis));
          t = t.reshaped(sh);
        }
        items.push_back(std::move(t));
        at += len;
      }
      ctx.set_output(0, Tensor::sequence(x.dtype(), std::move(items)));
    };
    r.add(std::move(s));
  }
  {
    ir::OpSchema s;
    s.name = "ConcatFromSequence";
    s.since_version = 11;
    s.attrs = {{"axis", ir::AttrType::i, true}, {"new_axis", ir::AttrType::i}};
    s.infer = [](ir::InferContext& ctx) { ctx.set_output(0, ctx.input_dtype(0), PartialShape::unknown_rank()); };
    s.run = [](RunContext& ctx) {
      const Tensor& seq = sequence_input(ctx, 0);
      const auto& items = seq.items();
      if (items.empty()) throw ctx.error("cannot concatenate an empty sequence");
      const bool stack = ctx.node().attr_i("new_axis", 0) != 0;
      const Shape& e = items[0].shape();
      const int64_t rank = static_cast<int64_t>(e.size()) + (stack ? 1 : 0);
      const size_t axis = static_cast<size_t>(normalize_axis(ctx.node().attr_i("axis"), rank, ctx.node()));
      // stacking is concatenating [.., 1, ..] views
      std::vector<Tensor> parts;
      for (const Tensor& t : items) {
        if (t.dtype() != items[0].dtype() || t.dtype() == DType::string)
          throw ctx.error("items must share one numeric element type");
        if (!stack) {
          parts.push_back(t);
          continue;
        }
        Shape sh = t.shape();
        sh.insert(sh.begin() + static_cast<std::ptrdiff_t>(axis), 1);
        parts.push_back(t.reshaped(sh));
      }
      Shape out = parts[0].shape();
      if (axis >= out.size()) throw ctx.error("axis out of range");
      out[axis] = 0;
      for (const Tensor& p : parts) {
        Shape a = p.shape(), b = parts[0].shape();
        if (a.size() != b.size()) throw ctx.error("items have different ranks");
        a[axis] = b[axis] = 0;
        if (a != b) throw ctx.error("items ", shape_to_string(p.shape()), " and ", shape_to_string(parts[0].shape()),
                                    " differ outside axis ", axis);
        out[axis] += p.shape()[axis];
      }
      Tensor& y = ctx.allocate_output(0, parts[0].dtype(), out);
      int64_t outer = 1, inner = 1;
      for (size_t k = 0; k < axis; ++k) outer *= out[k];
      for (size_t k = axis + 1; k < out.size(); ++k) inner *= out[k];
      const size_t es = dtype_size(y.dtype());
      int64_t col = 0;
      for (const Tensor& p : parts) {
        const int64_t row = p.shape()[axis] * inner;
        for (int64_t o = 0; o < outer; ++o)
          std::memcpy(static_cast<char*>(y.raw()) + static_cast<size_t>(o * out[axis] * inner + col) * es,
                      static_cast<const char*>(p.raw()) + static_cast<size_t>(o * row) * es, static_cast<size_t>(row) * es);
        col += row;
      }
    };
    r.add(std::move(s));
  }
}

// SequenceMap: the body runs once per item of the first input sequence; sequence inputs
// give their item at that position, tensor inputs are given whole; each body output collects
// into an output sequence.
void register_sequence_map(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "SequenceMap";
  s.since_version = 17;
  s.max_inputs = std::numeric_limits<int32_t>::max();
  s.max_outputs = std::numeric_limits<int32_t>::max();
  s.attrs = {{"body", ir::AttrType::graph, true}, {"kiln_captures", ir::AttrType::strings}};
  s.infer = [](ir::InferContext& ctx) {
    const ir::Node& n = ctx.node();
    auto body = n.attr_graph("body");
    const size_t declared = n.num_inputs() - ir::capture_names(n).size();
    for (size_t i = 0; i < body->inputs().size() && i < declared; ++i) {
      ir::Value* in = body->inputs()[i];
      if (in->type.dtype == DType::undefined) in->type.dtype = ctx.input_dtype(i);
      if (ctx.input_type(i).kind == ValueKind::tensor && !in->type.shape.rank_known) in->type.shape = ctx.input_shape(i);
    }
    for (size_t i = declared; i < body->inputs().size(); ++i) {  // captures: by name
      const size_t k = ir::capture_input(n, body->inputs()[i]->name());
      if (k != std::string::npos) body->inputs()[i]->type = ctx.input_type(k);
    }
    ir::infer_shapes(*body);
    for (size_t k = 0; k < n.num_outputs(); ++k)
      ctx.set_output_type(k, seq_type(k < body->outputs().size() ? body->outputs()[k]->type.dtype : DType::undefined));
  };
  s.run = [](RunContext& ctx) {
    const ir::Node& n = ctx.node();
    auto body = n.attr_graph("body");
    const std::vector<std::string> caps = ir::capture_names(n);
    const size_t declared = n.num_inputs() - caps.size();
    const size_t len = sequence_input(ctx, 0).items().size();
    for (size_t i = 1; i < declared; ++i)
      if (ctx.value(i).kind() == ValueKind::sequence && ctx.value(i).items().size() != len)
        throw ctx.error("input ", i, " has ", ctx.value(i).items().size(), " items, the first sequence ", len);
    runtime::ReferenceExecutor exec(body);
    std::vector<std::vector<Tensor>> outs(n.num_outputs());
    for (size_t it = 0; it < len; ++it) {
      std::vector<Tensor> ins;
      for (size_t i = 0; i < declared; ++i) {
        const Tensor& v = ctx.value(i);
        ins.push_back(v.kind() == ValueKind::sequence ? v.items()[it] : v);
      }
      for (size_t i = declared; i < body->inputs().size(); ++i) {
        auto c = std::find(caps.begin(), caps.end(), body->inputs()[i]->name());
        if (c == caps.end()) throw ctx.error("body input '", body->inputs()[i]->name(), "' has no value");
        ins.push_back(ctx.value(declared + static_cast<size_t>(c - caps.begin())));
      }
      auto res = exec.run(ins);
      if (res.size() != outs.size()) throw ctx.error("body gave ", res.size(), " outputs, the node has ", outs.size());
      for (size_t k = 0; k < res.size(); ++k) outs[k].push_back(std::move(res[k]));
    }
    for (size_t k = 0; k < outs.size(); ++k) {
      const DType t = body->outputs()[k]->type.dtype != DType::undefined ? body->outputs()[k]->type.dtype
                      : outs[k].empty() ? DType::undefined
                                        : outs[k][0].dtype();
      ctx.set_output(k, Tensor::sequence(t, std::move(outs[k])));
    }
  };
  r.add(std::move(s));
}

// The `type` attribute of Optional: the frontend writes ONNX's TypeProto as "tensor <code>"
// or "sequence <code>".
std::pair<ValueKind, DType> optional_type_attr(const ir::Node& n) {
  const std::string t = n.attr_s("type");
  const size_t sp = t.find(' ');
  KILN_CHECK(sp != std::string::npos, cat(n.describe(), ": attribute 'type' must be a tensor or sequence type"));
  const ValueKind k = t.substr(0, sp) == "sequence" ? ValueKind::sequence : ValueKind::tensor;
  return {k, dtype_from_onnx_code(std::stoll(t.substr(sp + 1)), n.describe())};
}

void register_optional(ir::OpRegistry& r) {
  {
    ir::OpSchema s;
    s.name = "Optional";
    s.since_version = 15;
    s.min_inputs = 0;
    s.max_inputs = 1;
    s.attrs = {{"type", ir::AttrType::s}};
    s.validate = [](const ir::Node& n) {
      KILN_CHECK(n.has_input(0) || n.has_attr("type"), cat(n.describe(), ": an empty Optional needs attribute 'type'"));
    };
    s.infer = [](ir::InferContext& ctx) {
      ValueType t;
      t.kind = ValueKind::optional;
      if (ctx.has_input(0)) {
        const ValueType& in = ctx.input_type(0);
        t.dtype = in.dtype;
        t.shape = in.shape;
        t.elem_kind = in.kind;
      } else {
        const auto [k, dt] = optional_type_attr(ctx.node());
        t.dtype = dt;
        t.elem_kind = k;
      }
      ctx.set_output_type(0, t);
    };
    s.run = [](RunContext& ctx) {
      if (ctx.has_input(0)) {
        const Tensor& v = ctx.value(0);
        if (v.kind() == ValueKind::optional) throw ctx.error("an optional cannot hold an optional");
        ctx.set_output(0, Tensor::optional(v.dtype(), v, v.kind()));
      } else {
        const auto [k, dt] = optional_type_attr(ctx.node());
        ctx.set_output(0, Tensor::optional(dt, std::nullopt, k));
      }
    };
    r.add(std::move(s));
  }
  {
    ir::OpSchema s;
    s.name = "OptionalHasElement";
    s.since_version = 15;
    s.max_version = 18;  // 18: also a tensor / sequence, or no input at all
    s.min_inputs = 0;
    s.max_inputs = 1;
    s.infer = [](ir::InferContext& ctx) { ctx.set_output(0, DType::boolean, PartialShape(Shape{})); };
    s.run = [](RunContext& ctx) {
      bool has = false;
      if (ctx.has_input(0)) {
        const Tensor& v = ctx.value(0);
        has = v.kind() != ValueKind::optional || !v.items().empty();
      }
      ctx.set_output(0, Tensor::scalar<bool>(has));
    };
    r.add(std::move(s));
  }
  {
    ir::OpSchema s;
    s.name = "OptionalGetElement";
    s.since_version = 15;
    s.max_version = 18;  // 18: a tensor / sequence passes through
    s.infer = [](ir::InferContext& ctx) {
      ValueType t = ctx.input_type(0);
      if (t.kind == ValueKind::optional) t.kind = t.elem_kind;
      t.elem_kind = ValueKind::tensor;
      ctx.set_output_type(0, t);
    };
    s.run = [](RunContext& ctx) {
      const Tensor& v = ctx.value(0);
      if (v.kind() != ValueKind::optional) return ctx.set_output(0, v);
      if (v.items().empty()) throw ctx.error("the optional holds no value");
      ctx.set_output(0, v.items()[0]);
    };
    r.add(std::move(s));
  }
}

}  // namespace

void register_sequence_ops(ir::OpRegistry& r) {
  register_sequence_basics(r);
  register_split_concat(r);
  register_sequence_map(r);
  register_optional(r);
}

}  // namespace kiln::ops
