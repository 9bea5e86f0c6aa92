// FakeQuantize (domain "kiln"): the OpenVINO quantise-dequantise op, which the graph
// passes produce from QuantizeLinear -> DequantizeLinear pairs on activations
// (transforms/qdq_to_fake_quantize.cpp).
//
//   FakeQuantize(X, input_low, input_high, output_low, output_high), attribute `levels`
//
// The four range inputs broadcast (numpy rules) to X's shape and must not grow it; the
// output has X's type and shape. Per element, with lo = min(il, ih), hi = max(il, ih):
//   x <= lo          -> ol
//   x >  hi          -> oh
//   otherwise        -> q / (levels - 1) * (oh - ol) + ol,
//                       q = round((x - il) / (ih - il) * (levels - 1))
// Arithmetic is in double; t = (x - il) * (levels - 1) / (ih - il) is formed in that order
// so that a level position which is exactly representable comes out exact.
//
// Rounding: ties round to even, like QuantizeLinear. Which level counts as "even" is
// decided on the grid anchored at the real value 0 whenever 0 lies on the grid, i.e. when
// il / (ih - il) * (levels - 1) is an integer -o (within 1e-4): then q = nearbyint(t - o) + o.
// That is always the case for a FakeQuantize made from QuantizeLinear (input_low =
// (qmin - zero_point) * scale), and it makes a tie x = (k + 1/2) * scale round like
// QuantizeLinear's nearbyint(x / scale) whatever the parity of zero_point - qmin. When 0 is
// not on the grid the tie goes to the even level index counted from input_low (plain
// nearbyint(t), as OpenVINO's reference does). The two rules differ only at exact ties.
// NaN inputs give NaN.
#include "ops/quant_fake_quantize.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <type_traits>

#include "ir/infer_util.hpp"
#include "ops/kernel_util.hpp"

namespace kiln::ops {

namespace {

constexpr const char* kRangeNames[4] = {"input_low", "input_high", "output_low", "output_high"};

// The range input of shape `r` must broadcast into X's shape `x` without growing it.
void check_range_static(const ir::InferContext& ctx, const ir::PartialShape& x, const ir::PartialShape& r,
                        const char* what) {
  if (!x.rank_known || !r.rank_known) return;
  if (r.rank() > x.rank())
    throw ctx.error(what, " of shape ", r.to_string(), " has a higher rank than X ", x.to_string());
  for (size_t i = 0; i < r.rank(); ++i) {
    const ir::Dim& d = r.dims[r.rank() - 1 - i];
    const ir::Dim& xd = x.dims[x.rank() - 1 - i];
    if (d.is_static() && xd.is_static() && d.value != 1 && d.value != xd.value)
      throw ctx.error(what, " of shape ", r.to_string(), " does not broadcast to X ", x.to_string());
  }
}

void check_range_run(const RunContext& ctx, const Shape& x, const Shape& r, const char* what) {
  bool ok = r.size() <= x.size();
  for (size_t i = 0; ok && i < r.size(); ++i) {
    const int64_t d = r[r.size() - 1 - i], xd = x[x.size() - 1 - i];
    ok = d == 1 || d == xd;
  }
  if (!ok)
    throw ctx.error(what, " of shape ", shape_to_string(r), " does not broadcast to X of shape ",
                    shape_to_string(x), " (the output keeps X's shape)");
}

// One element; see the file comment.
double fake_quantize(double x, double il, double ih, double ol, double oh, double L) {
  if (x <= std::min(il, ih)) return ol;
  if (x > std::max(il, ih)) return oh;
  if (std::isnan(x)) return x;
  const double t = (x - il) * L / (ih - il);
  const double o = il * L / (ih - il);  // real 0 sits at level -o
  const double oi = std::nearbyint(o);
  const double q = std::fabs(o - oi) <= 1e-4 ? std::nearbyint(t + oi) - oi : std::nearbyint(t);
  return q * (oh - ol) / L + ol;
}

}  // namespace

void register_fake_quantize(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.domain = "kiln";
  s.name = "FakeQuantize";
  s.since_version = 1;
  s.min_inputs = s.max_inputs = 5;
  s.attrs = {{"levels", ir::AttrType::i, true}};
  s.validate = [](const ir::Node& n) {
    KILN_CHECK(n.attr_i("levels") >= 2, cat(n.describe(), ": attribute 'levels' must be >= 2, got ", n.attr_i("levels")));
  };
  s.infer = [](ir::InferContext& ctx) {
    const DType dt = ctx.input_dtype(0);
    if (dt != DType::undefined && !is_floating(dt)) throw ctx.error("X must be a float tensor, got ", dtype_name(dt));
    for (size_t i = 1; i < 5; ++i) {
      const DType rt = ctx.input_dtype(i);
      if (rt != DType::undefined && !is_floating(rt))
        throw ctx.error(kRangeNames[i - 1], " must be a float tensor, got ", dtype_name(rt));
      check_range_static(ctx, ctx.input_shape(0), ctx.input_shape(i), kRangeNames[i - 1]);
    }
    ctx.set_output(0, dt, ctx.input_shape(0));
  };
  s.run = [](ir::RunContext& ctx) {
    const Tensor& x = ctx.input(0);
    std::array<std::vector<double>, 4> rng;
    std::array<Shape, 5> shapes;
    shapes[0] = x.shape();
    for (size_t i = 0; i < 4; ++i) {
      const Tensor& t = ctx.input(i + 1);
      if (!is_floating(t.dtype())) throw ctx.error(kRangeNames[i], " must be a float tensor, got ", dtype_name(t.dtype()));
      check_range_run(ctx, x.shape(), t.shape(), kRangeNames[i]);
      rng[i] = t.to_f64();
      shapes[i + 1] = t.shape();
    }
    const double L = static_cast<double>(ctx.node().attr_i("levels") - 1);
    Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());
    dispatch_float(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* px = x.data<T>();
      T* py = y.data<T>();
      for_each_broadcast<5>(x.shape(), shapes, [&](int64_t i, const std::array<int64_t, 5>& off) {
        double xv;
        if constexpr (std::is_same_v<T, double>) xv = px[off[0]];
        else xv = static_cast<float>(px[off[0]]);
        const double v = fake_quantize(xv, rng[0][off[1]], rng[1][off[2]], rng[2][off[3]], rng[3][off[4]], L);
        if constexpr (std::is_same_v<T, double>) py[i] = v;
        else py[i] = T(static_cast<float>(v));
      });
    }, ctx.node().describe().c_str());
  };
  r.add(std::move(s));
}

}  // namespace kiln::ops
