#include "ops/kernel_util.hpp"

#include <algorithm>
#include <string>

namespace kiln::ops {

std::vector<int64_t> strides_of(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * s[i];
  return st;
}

Shape broadcast_shape(const std::vector<Shape>& shapes, const ir::Node& node) {
  size_t rank = 0;
  for (auto& s : shapes) rank = std::max(rank, s.size());
  Shape out(rank, 1);
  for (auto& s : shapes) {
    size_t off = rank - s.size();
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t d = s[i];
      int64_t& o = out[off + i];
      if (d == o || d == 1) continue;
      if (o == 1) {
        o = d;
        continue;
      }
      std::vector<std::string> all;
      for (auto& x : shapes) all.push_back(shape_to_string(x));
      throw Error(cat(node.describe(), ": shapes ", join(all, " and "), " cannot be broadcast together"));
    }
  }
  return out;
}

std::vector<int64_t> broadcast_strides(const Shape& in, const Shape& out) {
  std::vector<int64_t> st(out.size(), 0);
  auto in_st = strides_of(in);
  size_t off = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) st[off + i] = in[i] == 1 ? 0 : in_st[i];
  return st;
}

std::vector<int64_t> optional_ints(const RunContext& ctx, size_t i) {
  if (!ctx.has_input(i)) return {};
  return ctx.input(i).to_i64();
}

const Tensor& one_value(const RunContext& ctx, const Tensor& t, const std::string& what) {
  if (t.size() != 1) throw ctx.error(what, " must hold one value, got shape ", shape_to_string(t.shape()));
  return t;
}

DType dtype_attr(const ir::Node& n, const char* attr) {
  return dtype_from_onnx_code(n.attr_i(attr), cat(n.describe(), ": attribute '", attr, "'"));
}

DType dtype_attr(const ir::Node& n, const char* attr, DType absent) {
  return n.has_attr(attr) ? dtype_attr(n, attr) : absent;
}

void strings_as_indices(ir::OpSchema& s, std::vector<size_t> data_inputs) {
  auto kernel = s.run;
  s.run = [kernel, data_inputs = std::move(data_inputs)](RunContext& ctx) {
    auto is_data = [&](size_t i) {
      return (data_inputs.size() == 1 && data_inputs[0] == kAllInputs) ||
             std::find(data_inputs.begin(), data_inputs.end(), i) != data_inputs.end();
    };
    bool strings = false;
    for (size_t i = 0; i < ctx.num_inputs(); ++i)
      strings |= is_data(i) && ctx.has_input(i) && ctx.value(i).is_tensor() && ctx.value(i).dtype() == DType::string;
    if (!strings) return kernel(ctx);
    if (ctx.node().attr_s("reduction", "none") != "none") throw ctx.error("a reduction of string tensors");
    // index 0 is no string: a value the kernel makes itself (a Pad's default 0) reads as ""
    std::vector<const std::string*> table{nullptr};
    std::vector<Tensor> indices(ctx.num_inputs());
    std::vector<const Tensor*> inputs(ctx.num_inputs(), nullptr);
    for (size_t i = 0; i < ctx.num_inputs(); ++i) {
      if (!ctx.has_input(i)) continue;
      const Tensor& x = ctx.value(i);
      inputs[i] = &x;
      if (!is_data(i)) continue;
      // the data inputs move together: a number among strings would read as an index
      if (!x.is_tensor() || x.dtype() != DType::string)
        throw ctx.error("input ", i, " is ", x.is_tensor() ? dtype_name(x.dtype()) : std::string("not a tensor"),
                        " where the other data inputs are strings");
      indices[i] = Tensor(DType::i64, x.shape());
      int64_t* p = indices[i].data<int64_t>();
      const std::string* v = x.data<std::string>();
      for (int64_t k = 0; k < x.size(); ++k) {
        p[k] = static_cast<int64_t>(table.size());
        table.push_back(v + k);
      }
      inputs[i] = &indices[i];
    }
    std::vector<Tensor> outputs(ctx.num_outputs());
    ir::RunContext inner(ctx.node(), std::move(inputs), outputs);
    kernel(inner);
    for (size_t o = 0; o < outputs.size(); ++o) {
      const Tensor& idx = outputs[o];
      if (!idx.defined() || !idx.is_tensor() || idx.dtype() != DType::i64)
        throw ctx.error("output ", o, " of a string move is not indices");
      Tensor& y = ctx.allocate_output(o, DType::string, idx.shape());
      const int64_t* p = idx.data<int64_t>();
      std::string* dst = y.data<std::string>();
      for (int64_t k = 0; k < idx.size(); ++k) {
        dst[k] = p[k] > 0 && p[k] < static_cast<int64_t>(table.size()) ? *table[static_cast<size_t>(p[k])] : std::string();
      }
    }
  };
}

}  // namespace kiln::ops
