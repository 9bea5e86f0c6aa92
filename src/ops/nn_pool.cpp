// Pooling: MaxPool (with optional Indices), AveragePool, LpPool, their Global
// variants, and MaxUnpool. 1-D / 2-D / 3-D inputs are normalised to 3 spatial dims.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ir/infer_util.hpp"
#include "ops/kernel_util.hpp"
#include "ops/nn_common.hpp"
#include "ops/quant_util.hpp"

namespace kiln::ops::nn {
namespace {

// Taps t in [t0, t1) of a window starting at `start` (dilation d, k taps) that land
// inside [0, limit).
inline void tap_range(int64_t start, int64_t limit, int64_t k, int64_t d, int64_t& t0, int64_t& t1) {
  t0 = start >= 0 ? 0 : (-start + d - 1) / d;
  const int64_t room = limit - start;  // positions start .. limit-1
  t1 = room <= 0 ? 0 : std::min(k, (room + d - 1) / d);
  if (t1 < t0) t1 = t0;
}

// Window of one output element: per dim tap ranges inside the input and the window
// start, plus the tap count clipped to the padded input (count_include_pad divisor).
struct Win {
  int64_t start[3], t0[3], t1[3];
  int64_t padded_count;
};

// Calls fn(out_offset_in_plane, win) for every output position of one plane.
template <typename Fn>
void for_each_window(const Geom3& g, const int64_t pe[3], Fn&& fn) {
  Win w{};
  int64_t o = 0;
  for (int64_t od = 0; od < g.out[0]; ++od) {
    w.start[0] = od * g.s[0] - g.p[0];
    tap_range(w.start[0], g.in[0], g.k[0], g.d[0], w.t0[0], w.t1[0]);
    int64_t a0, c0;
    tap_range(w.start[0], g.in[0] + pe[0], g.k[0], g.d[0], a0, c0);
    for (int64_t oh = 0; oh < g.out[1]; ++oh) {
      w.start[1] = oh * g.s[1] - g.p[1];
      tap_range(w.start[1], g.in[1], g.k[1], g.d[1], w.t0[1], w.t1[1]);
      int64_t a1, c1;
      tap_range(w.start[1], g.in[1] + pe[1], g.k[1], g.d[1], a1, c1);
      for (int64_t ow = 0; ow < g.out[2]; ++ow, ++o) {
        w.start[2] = ow * g.s[2] - g.p[2];
        tap_range(w.start[2], g.in[2], g.k[2], g.d[2], w.t0[2], w.t1[2]);
        int64_t a2, c2;
        tap_range(w.start[2], g.in[2] + pe[2], g.k[2], g.d[2], a2, c2);
        // taps from the (padded) start: start >= -pad_begin so a_i == 0 unless start < -pad
        (void)a0, (void)a1, (void)a2;
        w.padded_count = c0 * c1 * c2;
        fn(o, w);
      }
    }
  }
}

// Resolved pooling geometry for a concrete input shape.
struct PoolSetup {
  int64_t planes;  // N * C
  Geom3 g;
  int64_t pe[3] = {0, 0, 0};  // end pads
  Shape out_shape;
};

PoolSetup pool_setup(const RunContext& ctx, const Shape& xs, bool kernel_required = true) {
  const ir::Node& n = ctx.node();
  KILN_CHECK(xs.size() >= 3, ctx.error("input X must have rank >= 3 (N, C, spatial...), got shape ",
                                       shape_to_string(xs)));
  const size_t nsp = xs.size() - 2;
  KILN_CHECK(!kernel_required || n.has_attr("kernel_shape"), ctx.error("attribute 'kernel_shape' is required"));
  Window w = read_window(n, nsp, std::vector<int64_t>(nsp, 1));
  std::vector<int64_t> in = spatial_of(xs);
  std::vector<int64_t> out = window_output(n, w, in);
  PoolSetup ps;
  ps.planes = xs[0] * xs[1];
  ps.g = make_geom3(n, w, in, out);
  for (size_t i = 0; i < nsp; ++i) ps.pe[3 - nsp + i] = w.pads[nsp + i];
  ps.out_shape = {xs[0], xs[1]};
  ps.out_shape.insert(ps.out_shape.end(), out.begin(), out.end());
  return ps;
}

void pool_infer(ir::InferContext& ctx, bool with_indices) {
  const ir::PartialShape& xs = ctx.input_shape(0);
  DType dt = ctx.input_dtype(0);
  if (!xs.rank_known) {
    ctx.set_output(0, dt, ir::PartialShape::unknown_rank());
    if (with_indices) ctx.set_output(1, DType::i64, ir::PartialShape::unknown_rank());
    return;
  }
  if (xs.rank() < 3) throw ctx.error("input X must have rank >= 3 (N, C, spatial...), got ", xs.to_string());
  const size_t nsp = xs.rank() - 2;
  Window w = read_window(ctx.node(), nsp, std::vector<int64_t>(nsp, 1));
  std::vector<ir::Dim> dims = {xs.dims[0], xs.dims[1]};
  for (size_t i = 0; i < nsp; ++i) dims.push_back(window_output_dim(ctx.node(), w, i, xs.dims[2 + i]));
  ctx.set_output(0, dt, ir::PartialShape(dims));
  if (with_indices) ctx.set_output(1, DType::i64, ir::PartialShape(dims));
}

const std::vector<ir::AttrSpec> kPoolAttrs = {{"auto_pad", ir::AttrType::s},
                                              {"ceil_mode", ir::AttrType::i},
                                              {"dilations", ir::AttrType::ints},
                                              {"kernel_shape", ir::AttrType::ints, true},
                                              {"pads", ir::AttrType::ints},
                                              {"strides", ir::AttrType::ints}};

// ---------------------------------------------------------------------------
// MaxPool

template <typename T>
void maxpool_kernel(const T* x, T* y, int64_t* ind, const PoolSetup& ps, bool col_major) {
  const Geom3& g = ps.g;
  const int64_t IN = g.in_size(), OUT = g.out_size();
  const int64_t ID = g.in[0], IH = g.in[1], IW = g.in[2];
  for (int64_t pl = 0; pl < ps.planes; ++pl) {
    const T* xp = x + pl * IN;
    T* yp = y + pl * OUT;
    int64_t* ip = ind ? ind + pl * OUT : nullptr;
    for_each_window(g, ps.pe, [&](int64_t o, const Win& w) {
      using A = acc_t<T>;
      bool found = false;
      A best = 0;
      int64_t bd = 0, bh = 0, bw = 0;
      for (int64_t td = w.t0[0]; td < w.t1[0]; ++td) {
        const int64_t id = w.start[0] + td * g.d[0];
        for (int64_t th = w.t0[1]; th < w.t1[1]; ++th) {
          const int64_t ih = w.start[1] + th * g.d[1];
          const T* row = xp + (id * IH + ih) * IW;
          for (int64_t tw = w.t0[2]; tw < w.t1[2]; ++tw) {
            const int64_t iw = w.start[2] + tw * g.d[2];
            const A v = static_cast<A>(row[iw]);
            if (!found || v > best || (std::isnan(v) && !std::isnan(best))) {
              found = true;
              best = v;
              bd = id, bh = ih, bw = iw;
            }
          }
        }
      }
      yp[o] = found ? xp[(bd * IH + bh) * IW + bw] : T(0);
      if (ip) ip[o] = pl * IN + (col_major ? bd + bh * ID + bw * ID * IH : (bd * IH + bh) * IW + bw);
    });
  }
}

void register_maxpool(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "MaxPool";
  s.since_version = 1;
  s.min_outputs = 1;
  s.max_outputs = 2;
  s.attrs = kPoolAttrs;
  s.attrs.push_back({"storage_order", ir::AttrType::i});
  s.validate = [](const ir::Node& n) {
    validate_window_attrs(n);
    int64_t so = n.attr_i("storage_order", 0);
    KILN_CHECK(so == 0 || so == 1, cat(n.describe(), ": attribute 'storage_order' must be 0 or 1, got ", so));
  };
  s.infer = [](ir::InferContext& ctx) { pool_infer(ctx, true); };
  s.run = [](ir::RunContext& ctx) {
    const Tensor& x = ctx.input(0);
    PoolSetup ps = pool_setup(ctx, x.shape());
    const bool col_major = ctx.node().attr_i("storage_order", 0) == 1;
    auto body = [&](auto tag) {
      using T = typename decltype(tag)::type;
      Tensor& y = ctx.allocate_output(0, x.dtype(), ps.out_shape);
      int64_t* ind = nullptr;
      if (ctx.num_outputs() > 1) ind = ctx.allocate_output(1, DType::i64, ps.out_shape).data<int64_t>();
      maxpool_kernel<T>(x.data<T>(), y.data<T>(), ind, ps, col_major);
    };
    switch (x.dtype()) {
      case DType::i8: body(TypeTag<int8_t>{}); break;
      case DType::u8: body(TypeTag<uint8_t>{}); break;
      default: dispatch_float(x.dtype(), body, "MaxPool");
    }
  };
  r.add(std::move(s));
}

// ---------------------------------------------------------------------------
// AveragePool / LpPool

template <typename T>
void avgpool_kernel(const T* x, T* y, const PoolSetup& ps, bool include_pad) {
  using A = acc_t<T>;
  const Geom3& g = ps.g;
  const int64_t IN = g.in_size(), OUT = g.out_size(), IH = g.in[1], IW = g.in[2];
  for (int64_t pl = 0; pl < ps.planes; ++pl) {
    const T* xp = x + pl * IN;
    T* yp = y + pl * OUT;
    for_each_window(g, ps.pe, [&](int64_t o, const Win& w) {
      A sum = 0;
      for (int64_t td = w.t0[0]; td < w.t1[0]; ++td) {
        const int64_t id = w.start[0] + td * g.d[0];
        for (int64_t th = w.t0[1]; th < w.t1[1]; ++th) {
          const T* row = xp + (id * IH + w.start[1] + th * g.d[1]) * IW;
          for (int64_t tw = w.t0[2]; tw < w.t1[2]; ++tw) sum += static_cast<A>(row[w.start[2] + tw * g.d[2]]);
        }
      }
      const int64_t count =
          include_pad ? w.padded_count : (w.t1[0] - w.t0[0]) * (w.t1[1] - w.t0[1]) * (w.t1[2] - w.t0[2]);
      yp[o] = T(count > 0 ? sum / static_cast<A>(count) : A(0));
    });
  }
}

template <typename T>
void lppool_kernel(const T* x, T* y, const PoolSetup& ps, double p) {
  using A = acc_t<T>;
  const Geom3& g = ps.g;
  const int64_t IN = g.in_size(), OUT = g.out_size(), IH = g.in[1], IW = g.in[2];
  const A pa = static_cast<A>(p), inv = static_cast<A>(1.0 / p);
  for (int64_t pl = 0; pl < ps.planes; ++pl) {
    const T* xp = x + pl * IN;
    T* yp = y + pl * OUT;
    for_each_window(g, ps.pe, [&](int64_t o, const Win& w) {
      A sum = 0;
      for (int64_t td = w.t0[0]; td < w.t1[0]; ++td) {
        const int64_t id = w.start[0] + td * g.d[0];
        for (int64_t th = w.t0[1]; th < w.t1[1]; ++th) {
          const T* row = xp + (id * IH + w.start[1] + th * g.d[1]) * IW;
          for (int64_t tw = w.t0[2]; tw < w.t1[2]; ++tw)
            sum += std::pow(std::abs(static_cast<A>(row[w.start[2] + tw * g.d[2]])), pa);
        }
      }
      yp[o] = T(std::pow(sum, inv));
    });
  }
}

void register_avgpool(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "AveragePool";
  s.since_version = 1;
  s.attrs = kPoolAttrs;
  s.attrs.push_back({"count_include_pad", ir::AttrType::i});
  s.validate = validate_window_attrs;
  s.infer = [](ir::InferContext& ctx) { pool_infer(ctx, false); };
  s.run = [](ir::RunContext& ctx) {
    const Tensor& x = ctx.input(0);
    PoolSetup ps = pool_setup(ctx, x.shape());
    const bool include_pad = ctx.node().attr_i("count_include_pad", 0) != 0;
    Tensor& y = ctx.allocate_output(0, x.dtype(), ps.out_shape);
    dispatch_float(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      avgpool_kernel<T>(x.data<T>(), y.data<T>(), ps, include_pad);
    }, "AveragePool");
  };
  r.add(std::move(s));
}

// com.microsoft QLinearAveragePool(X, x_scale, x_zp?, y_scale, y_zp?): AveragePool (same
// attributes) on the dequantized X, quantized to y's parameters (ONNX Runtime's definition).
// channels_last = 1 (an NHWC X) is refused by name.
void register_qlinear_avgpool(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.domain = "com.microsoft";
  s.name = "QLinearAveragePool";
  s.min_inputs = 4;
  s.max_inputs = 5;
  s.optional_inputs = {2};
  s.attrs = kPoolAttrs;
  s.attrs.push_back({"count_include_pad", ir::AttrType::i});
  s.attrs.push_back({"channels_last", ir::AttrType::i});
  s.validate = validate_window_attrs;
  s.infer = [](ir::InferContext& ctx) { pool_infer(ctx, false); };
  s.run = [](ir::RunContext& ctx) {
    const Tensor& x = ctx.input(0);
    check_int8(ctx, x.dtype(), "X");
    if (ctx.node().attr_i("channels_last", 0) != 0)
      throw ctx.error("channels_last = 1 (an NHWC input) is not supported; kiln takes X as [N, C, spatial...]");
    const QParam qx = read_qparam(ctx, 1, 2, x.dtype(), "x"), qy = read_qparam(ctx, 3, 4, x.dtype(), "y");
    PoolSetup ps = pool_setup(ctx, x.shape());
    const bool include_pad = ctx.node().attr_i("count_include_pad", 0) != 0;
    std::vector<float> real(static_cast<size_t>(x.size())), pooled(static_cast<size_t>(shape_size(ps.out_shape)));
    Tensor& y = ctx.allocate_output(0, x.dtype(), ps.out_shape);
    dispatch_int8(x.dtype(), [&](auto tag) {
      using Q = typename decltype(tag)::type;
      const Q* px = x.data<Q>();
      for (int64_t i = 0; i < x.size(); ++i)
        real[static_cast<size_t>(i)] = (static_cast<float>(px[i]) - qx.zero_point) * qx.scale;
      avgpool_kernel<float>(real.data(), pooled.data(), ps, include_pad);
      Q* py = y.data<Q>();
      for (size_t i = 0; i < pooled.size(); ++i) py[i] = saturate_round<Q>(pooled[i] / qy.scale + qy.zero_point);
    });
  };
  r.add(std::move(s));
}

void register_lppool(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "LpPool";
  s.since_version = 2;
  s.attrs = kPoolAttrs;
  s.attrs.push_back({"p", ir::AttrType::i});
  s.validate = [](const ir::Node& n) {
    validate_window_attrs(n);
    KILN_CHECK(n.attr_i("p", 2) >= 1, cat(n.describe(), ": attribute 'p' must be >= 1, got ", n.attr_i("p", 2)));
  };
  s.infer = [](ir::InferContext& ctx) { pool_infer(ctx, false); };
  s.run = [](ir::RunContext& ctx) {
    const Tensor& x = ctx.input(0);
    PoolSetup ps = pool_setup(ctx, x.shape());
    const double p = static_cast<double>(ctx.node().attr_i("p", 2));
    Tensor& y = ctx.allocate_output(0, x.dtype(), ps.out_shape);
    dispatch_float(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      lppool_kernel<T>(x.data<T>(), y.data<T>(), ps, p);
    }, "LpPool");
  };
  r.add(std::move(s));
}

// ---------------------------------------------------------------------------
// Global pools: reduce every spatial dim to 1.

enum class GlobalKind { avg, max, lp };

void register_global_pool(ir::OpRegistry& r, const char* name, GlobalKind kind) {
  ir::OpSchema s;
  s.name = name;
  s.since_version = kind == GlobalKind::lp ? 2 : 1;
  if (kind == GlobalKind::lp) {
    s.attrs = {{"p", ir::AttrType::i}};
    s.validate = [](const ir::Node& n) {
      KILN_CHECK(n.attr_i("p", 2) >= 1, cat(n.describe(), ": attribute 'p' must be >= 1, got ", n.attr_i("p", 2)));
    };
  }
  s.infer = [](ir::InferContext& ctx) {
    const ir::PartialShape& xs = ctx.input_shape(0);
    DType dt = ctx.input_dtype(0);
    if (!xs.rank_known) return ctx.set_output(0, dt, ir::PartialShape::unknown_rank());
    if (xs.rank() < 2) throw ctx.error("input X must have rank >= 2 (N, C, spatial...), got ", xs.to_string());
    std::vector<ir::Dim> dims = xs.dims;
    for (size_t i = 2; i < dims.size(); ++i) dims[i] = 1;
    ctx.set_output(0, dt, ir::PartialShape(dims));
  };
  s.run = [kind, name](ir::RunContext& ctx) {
    const Tensor& x = ctx.input(0);
    const Shape& xs = x.shape();
    KILN_CHECK(xs.size() >= 2, ctx.error("input X must have rank >= 2 (N, C, spatial...), got shape ",
                                         shape_to_string(xs)));
    Shape ys = xs;
    int64_t inner = 1;
    for (size_t i = 2; i < ys.size(); ++i) inner *= ys[i], ys[i] = 1;
    const int64_t planes = xs[0] * xs[1];
    const double p = static_cast<double>(ctx.node().attr_i("p", 2));
    Tensor& y = ctx.allocate_output(0, x.dtype(), ys);
    dispatch_float(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      using A = acc_t<T>;
      const T* px = x.data<T>();
      T* py = y.data<T>();
      for (int64_t pl = 0; pl < planes; ++pl) {
        const T* row = px + pl * inner;
        A acc = 0;
        if (kind == GlobalKind::max) {
          acc = inner > 0 ? static_cast<A>(row[0]) : A(0);
          for (int64_t i = 1; i < inner; ++i) {
            A v = static_cast<A>(row[i]);
            if (v > acc || std::isnan(v)) acc = v;
          }
        } else if (kind == GlobalKind::avg) {
          for (int64_t i = 0; i < inner; ++i) acc += static_cast<A>(row[i]);
          acc = inner > 0 ? acc / static_cast<A>(inner) : A(0);
        } else {
          for (int64_t i = 0; i < inner; ++i) acc += std::pow(std::abs(static_cast<A>(row[i])), static_cast<A>(p));
          acc = std::pow(acc, static_cast<A>(1.0 / p));
        }
        py[pl] = T(acc);
      }
    }, name);
  };
  r.add(std::move(s));
}

// ---------------------------------------------------------------------------
// MaxUnpool

void register_maxunpool(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "MaxUnpool";
  s.since_version = 9;
  s.min_inputs = 2;
  s.max_inputs = 3;
  s.attrs = {{"kernel_shape", ir::AttrType::ints, true}, {"pads", ir::AttrType::ints}, {"strides", ir::AttrType::ints}};
  s.validate = validate_window_attrs;
  s.infer = [](ir::InferContext& ctx) {
    const ir::PartialShape& xs = ctx.input_shape(0);
    DType dt = ctx.input_dtype(0);
    if (ctx.has_input(2)) {
      if (const Tensor* os = ctx.input_constant(2)) return ctx.set_output(0, dt, ir::PartialShape(os->to_i64()));
      const ir::PartialShape& oss = ctx.input_shape(2);
      if (oss.rank_known && oss.rank() == 1 && oss.dims[0].is_static())
        return ctx.set_output(0, dt, ir::PartialShape(std::vector<ir::Dim>(oss.dims[0].value)));
      return ctx.set_output(0, dt, ir::PartialShape::unknown_rank());
    }
    if (!xs.rank_known) return ctx.set_output(0, dt, ir::PartialShape::unknown_rank());
    if (xs.rank() < 3) throw ctx.error("input X must have rank >= 3 (N, C, spatial...), got ", xs.to_string());
    const size_t nsp = xs.rank() - 2;
    Window w = read_window(ctx.node(), nsp, {});
    std::vector<ir::Dim> dims = {xs.dims[0], xs.dims[1]};
    for (size_t i = 0; i < nsp; ++i) {
      const ir::Dim& d = xs.dims[2 + i];
      dims.push_back(d.is_static() ? ir::Dim((d.value - 1) * w.strides[i] + w.kernel[i] - w.pads[i] - w.pads[nsp + i])
                                   : ir::Dim::unknown());
    }
    ctx.set_output(0, dt, ir::PartialShape(dims));
  };
  s.run = [](ir::RunContext& ctx) {
    const Tensor& x = ctx.input(0);
    const Tensor& ind = ctx.input(1);
    const Shape& xs = x.shape();
    KILN_CHECK(xs.size() >= 3, ctx.error("input X must have rank >= 3, got shape ", shape_to_string(xs)));
    KILN_CHECK(ind.dtype() == DType::i64, ctx.error("indices I must be int64, got ", dtype_name(ind.dtype())));
    KILN_CHECK(ind.shape() == xs, ctx.error("indices I must have the shape of X ", shape_to_string(xs), ", got ",
                                            shape_to_string(ind.shape())));
    const size_t nsp = xs.size() - 2;
    Window w = read_window(ctx.node(), nsp, {});
    // Indices address the natural unpooled shape; an explicit output_shape pads that
    // result with zeros at the end of each spatial dim (ONNX reference semantics).
    Shape nat = {xs[0], xs[1]};
    for (size_t i = 0; i < nsp; ++i) {
      int64_t d = (xs[2 + i] - 1) * w.strides[i] + w.kernel[i] - w.pads[i] - w.pads[nsp + i];
      KILN_CHECK(d >= 0, ctx.error("output spatial dim ", i, " would be ", d));
      nat.push_back(d);
    }
    Shape ys = nat;
    if (ctx.has_input(2)) {
      ys = ctx.input(2).to_i64();
      KILN_CHECK(ys.size() == xs.size(), ctx.error("output_shape must have ", xs.size(), " values, got [", join(ys), "]"));
      KILN_CHECK(ys[0] == xs[0] && ys[1] == xs[1], ctx.error("output_shape [", join(ys),
                                                              "] must keep N and C of X ", shape_to_string(xs)));
      for (int64_t d : ys) KILN_CHECK(d >= 0, ctx.error("output_shape has a negative dim: [", join(ys), "]"));
    }
    Tensor& y = ctx.allocate_output(0, x.dtype(), ys);
    const int64_t nat_total = shape_size(nat);
    const std::vector<int64_t> nat_st = strides_of(nat), y_st = strides_of(ys);
    const int64_t* pi = ind.data<int64_t>();
    dispatch_float(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* px = x.data<T>();
      T* py = y.data<T>();
      for (int64_t i = 0; i < x.size(); ++i) {
        int64_t idx = pi[i];
        KILN_CHECK(idx >= 0 && idx < nat_total, ctx.error("index ", idx, " at position ", i,
                                                          " is out of range for the unpooled shape ",
                                                          shape_to_string(nat)));
        int64_t off = 0;
        for (size_t d = 0; d < nat.size(); ++d) {
          const int64_t coord = idx / nat_st[d];
          idx %= nat_st[d];
          KILN_CHECK(coord < ys[d], ctx.error("index ", pi[i], " lies outside output_shape ", shape_to_string(ys)));
          off += coord * y_st[d];
        }
        py[off] = px[i];
      }
    }, "MaxUnpool");
  };
  r.add(std::move(s));
}

}  // namespace

void register_pool_ops(ir::OpRegistry& r) {
  register_maxpool(r);
  register_avgpool(r);
  register_qlinear_avgpool(r);
  register_lppool(r);
  register_global_pool(r, "GlobalAveragePool", GlobalKind::avg);
  register_global_pool(r, "GlobalMaxPool", GlobalKind::max);
  register_global_pool(r, "GlobalLpPool", GlobalKind::lp);
  register_maxunpool(r);
}

}  // namespace kiln::ops::nn
