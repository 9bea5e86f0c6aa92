// The "nn" op family: Conv / pools / normalisations live in nn_conv.cpp, nn_pool.cpp
// and nn_norm.cpp; this file holds the shared window geometry plus Dropout and Identity.
#include <algorithm>
#include <utility>

#include "ir/infer_util.hpp"
#include "ops/kernel_util.hpp"
#include "ops/nn_common.hpp"
#include "ops/op_families.hpp"

namespace kiln::ops {
namespace nn {

void validate_window_attrs(const ir::Node& n) {
  auto positive = [&](const char* name) {
    if (!n.has_attr(name)) return;
    for (int64_t v : n.attr_ints(name))
      KILN_CHECK(v >= 1, cat(n.describe(), ": attribute '", name, "' values must be >= 1, got [",
                             join(n.attr_ints(name)), "]"));
  };
  positive("kernel_shape");
  positive("strides");
  positive("dilations");
  if (n.has_attr("pads")) {
    auto pads = n.attr_ints("pads");
    KILN_CHECK(pads.size() % 2 == 0,
               cat(n.describe(), ": attribute 'pads' must have an even number of values, got ", pads.size()));
    for (int64_t v : pads)
      KILN_CHECK(v >= 0, cat(n.describe(), ": attribute 'pads' values must be >= 0, got [", join(pads), "]"));
  }
  if (n.has_attr("auto_pad")) {
    std::string a = n.attr_s("auto_pad");
    KILN_CHECK(a == "NOTSET" || a == "SAME_UPPER" || a == "SAME_LOWER" || a == "VALID",
               cat(n.describe(), ": attribute 'auto_pad' must be NOTSET, SAME_UPPER, SAME_LOWER or VALID, got '", a,
                   "'"));
  }
  if (n.has_attr("ceil_mode")) {
    int64_t c = n.attr_i("ceil_mode");
    KILN_CHECK(c == 0 || c == 1, cat(n.describe(), ": attribute 'ceil_mode' must be 0 or 1, got ", c));
  }
  if (n.has_attr("group"))
    KILN_CHECK(n.attr_i("group") >= 1, cat(n.describe(), ": attribute 'group' must be >= 1, got ", n.attr_i("group")));
}

Window read_window(const ir::Node& n, size_t nsp, const std::vector<int64_t>& kernel) {
  Window w;
  w.nsp = nsp;
  // (shape inference of every windowed node, for every new input shape: the attributes are
  // read in place, one copy each)
  auto read = [&](const char* name, std::vector<int64_t>& to, size_t want, int64_t fill) {
    if (const std::vector<int64_t>* v = n.find_ints(name)) {
      KILN_CHECK(v->size() == want, cat(n.describe(), ": attribute '", name, "' has ", v->size(), " values [",
                                        join(*v), "], expected ", want, " for ", nsp, " spatial dims"));
      to = *v;
    } else {
      to.assign(want, fill);
    }
  };
  if (n.find_ints("kernel_shape")) {
    read("kernel_shape", w.kernel, nsp, 0);
  } else {
    KILN_CHECK(kernel.size() == nsp, cat(n.describe(), ": attribute 'kernel_shape' has ", kernel.size(), " values [",
                                         join(kernel), "], expected ", nsp, " for ", nsp, " spatial dims"));
    w.kernel = kernel;
  }
  for (int64_t k : w.kernel)
    KILN_CHECK(k >= 1, cat(n.describe(), ": kernel dims must be >= 1, got [", join(w.kernel), "]"));
  read("strides", w.strides, nsp, 1);
  read("dilations", w.dilations, nsp, 1);
  read("pads", w.pads, 2 * nsp, 0);
  if (const std::string* a = n.find_string("auto_pad")) w.auto_pad = *a;
  w.ceil_mode = n.attr_i("ceil_mode", 0) != 0;
  return w;
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

namespace {

// Output size of spatial dim i for input size `in`; pb / pe: the pads, resolved for auto_pad
int64_t output_size(const ir::Node& n, const Window& w, size_t i, int64_t in, int64_t& pb, int64_t& pe) {
  const int64_t s = w.strides[i];
  const int64_t ek = (w.kernel[i] - 1) * w.dilations[i] + 1;
  pb = w.pads[i];
  pe = w.pads[i + w.nsp];
  if (w.auto_pad == "SAME_UPPER" || w.auto_pad == "SAME_LOWER") {
    int64_t out = ceil_div(in, s);
    int64_t total = std::max<int64_t>(0, (out - 1) * s + ek - in);
    pb = w.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
    pe = total - pb;
  } else if (w.auto_pad == "VALID") {
    pb = pe = 0;
  }
  int64_t span = in + pb + pe - ek;
  KILN_CHECK(span >= 0, cat(n.describe(), ": spatial dim ", i, " of size ", in, " (padded ", in + pb + pe,
                            ") is smaller than the kernel extent ", ek));
  if (!w.ceil_mode) return span / s + 1;
  // ceil_mode: one more window where it fits partly, but the last one must start inside the
  // input or its begin padding, not in the end padding (ONNX's reference, PyTorch)
  int64_t out = ceil_div(span, s) + 1;
  if ((out - 1) * s >= in + pb) --out;
  return out;
}

}  // namespace

int64_t window_output_size(const ir::Node& n, Window& w, size_t i, int64_t in) {
  return output_size(n, w, i, in, w.pads[i], w.pads[i + w.nsp]);
}

std::vector<int64_t> window_output(const ir::Node& n, Window& w, const std::vector<int64_t>& in) {
  KILN_CHECK(in.size() == w.nsp, cat(n.describe(), ": expected ", w.nsp, " spatial dims, got ", in.size()));
  std::vector<int64_t> out(in.size());
  for (size_t i = 0; i < in.size(); ++i) out[i] = window_output_size(n, w, i, in[i]);
  return out;
}

ir::Dim window_output_dim(const ir::Node& n, const Window& w, size_t i, const ir::Dim& in) {
  if (in.is_static()) {
    int64_t pb = 0, pe = 0;
    return ir::Dim(output_size(n, w, i, in.value, pb, pe));
  }
  if (in.is_symbolic() && w.strides[i] == 1) {
    const int64_t ek = (w.kernel[i] - 1) * w.dilations[i] + 1;
    bool same = w.auto_pad == "SAME_UPPER" || w.auto_pad == "SAME_LOWER" ||
                (w.auto_pad == "NOTSET" && w.pads[i] + w.pads[i + w.nsp] == ek - 1) ||
                (w.auto_pad == "VALID" && ek == 1);
    if (same) return in;
  }
  return ir::Dim::unknown();
}

Geom3 make_geom3(const ir::Node& n, const Window& w, const std::vector<int64_t>& in, const std::vector<int64_t>& out) {
  KILN_CHECK(w.nsp >= 1 && w.nsp <= 3,
             cat(n.describe(), ": ", w.nsp, " spatial dims are not supported (the reference kernel handles 1 to 3)"));
  Geom3 g;
  const size_t off = 3 - w.nsp;
  for (size_t i = 0; i < w.nsp; ++i) {
    g.in[off + i] = in[i];
    g.out[off + i] = out[i];
    g.k[off + i] = w.kernel[i];
    g.s[off + i] = w.strides[i];
    g.d[off + i] = w.dilations[i];
    g.p[off + i] = w.pads[i];
  }
  return g;
}

std::vector<float> to_f32(const Tensor& t) {
  std::vector<double> d = t.to_f64();
  return std::vector<float>(d.begin(), d.end());
}

}  // namespace nn

namespace {

void register_dropout(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "Dropout";
  s.since_version = 1;
  s.min_inputs = 1;
  s.max_inputs = 3;  // data, ratio (opset 12+), training_mode (opset 12+)
  s.min_outputs = 1;
  s.max_outputs = 2;
  s.attrs = {{"ratio", ir::AttrType::f}, {"seed", ir::AttrType::i}, {"is_test", ir::AttrType::i}};
  s.validate = [](const ir::Node& n) {
    if (n.has_attr("ratio")) {
      float ratio = n.attr_f("ratio");
      KILN_CHECK(ratio >= 0.f && ratio < 1.f,
                 cat(n.describe(), ": attribute 'ratio' must be in [0, 1), got ", ratio));
    }
  };
  s.infer = [](ir::InferContext& ctx) {
    DType t = ctx.input_dtype(0);
    ctx.set_output(0, t, ctx.input_shape(0));
    DType mask = ctx.node().opset() != 0 && ctx.node().opset() < 10 ? t : DType::boolean;
    ctx.set_output(1, mask, ctx.input_shape(0));
  };
  s.run = [](ir::RunContext& ctx) {
    const Tensor& x = ctx.input(0);
    dispatch_float(x.dtype(), [](auto) {}, "Dropout");
    if (ctx.has_input(2)) {
      const Tensor& tm = ctx.input(2);
      KILN_CHECK(tm.dtype() == DType::boolean && tm.size() == 1,
                 ctx.error("training_mode must be a bool scalar, got ", dtype_name(tm.dtype()), " ",
                           shape_to_string(tm.shape())));
      if (tm.data<bool>()[0]) {
        double ratio = 0.5;
        if (ctx.has_input(1)) {
          const Tensor& rt = ctx.input(1);
          KILN_CHECK(rt.size() == 1, ctx.error("ratio must be a scalar, got shape ", shape_to_string(rt.shape())));
          ratio = rt.to_f64()[0];
        }
        if (ratio != 0.0)
          throw ctx.error("training mode with ratio ", ratio,
                          " (random dropout) is not supported by the reference executor");
      }
    }
    ctx.set_output(0, x);
    if (ctx.num_outputs() > 1) {
      int opset = ctx.node().opset();
      if (opset != 0 && opset < 10) {
        Tensor& m = ctx.allocate_output(1, x.dtype(), x.shape());
        dispatch_float(x.dtype(), [&](auto tag) {
          using T = typename decltype(tag)::type;
          T* p = m.data<T>();
          for (int64_t i = 0; i < m.size(); ++i) p[i] = T(1.0f);
        }, "Dropout");
      } else {
        Tensor& m = ctx.allocate_output(1, DType::boolean, x.shape());
        bool* p = m.data<bool>();
        std::fill(p, p + m.size(), true);
      }
    }
  };
  r.add(std::move(s));
}

void register_identity(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "Identity";
  s.since_version = 1;
  // any value: tensors, sequences and optionals (opset 14, 16) pass through
  s.infer = [](ir::InferContext& ctx) { ctx.set_output_type(0, ctx.input_type(0)); };
  s.run = [](ir::RunContext& ctx) { ctx.set_output(0, ctx.value(0)); };
  r.add(std::move(s));
}

}  // namespace

void register_nn_ops(ir::OpRegistry& r) {
  nn::register_conv_ops(r);
  nn::register_pool_ops(r);
  nn::register_norm_ops(r);
  nn::register_attention_ops(r);
  nn::register_attention23_ops(r);
  nn::register_squeeze_excite_ops(r);
  register_dropout(r);
  register_identity(r);
}

}  // namespace kiln::ops
