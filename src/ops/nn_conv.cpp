// Conv, ConvTranspose, ConvInteger, QLinearConv: direct (im2col-free) loops over
// 1-D / 2-D / 3-D inputs normalised to 3 spatial dims. The innermost loop runs over a
// contiguous output row, blocked over up to 4 output channels so each input row load
// feeds several accumulations.
#include <algorithm>
#include <cmath>

#include "ir/infer_util.hpp"
#include "ops/kernel_util.hpp"
#include "ops/nn_common.hpp"

namespace kiln::ops::nn {
namespace {

// ---------------------------------------------------------------------------
// Geometry shared by the Conv-like kernels.

struct Tap {
  int64_t widx;                // kernel offset (kd*K1 + kh)*K2 + kw
  int64_t o0[3], o1[3];        // valid output range per dim
  int64_t off[3];              // input index = o*s + off
  bool merge_hw;               // rows oh0..oh1 contiguous in both input and output
};

std::vector<Tap> conv_taps(const Geom3& g) {
  std::vector<Tap> taps;
  for (int64_t kd = 0; kd < g.k[0]; ++kd)
    for (int64_t kh = 0; kh < g.k[1]; ++kh)
      for (int64_t kw = 0; kw < g.k[2]; ++kw) {
        Tap t{};
        t.widx = (kd * g.k[1] + kh) * g.k[2] + kw;
        const int64_t kk[3] = {kd, kh, kw};
        bool empty = false;
        for (int i = 0; i < 3; ++i) {
          t.off[i] = kk[i] * g.d[i] - g.p[i];
          valid_range(g.in[i], g.out[i], g.s[i], t.off[i], t.o0[i], t.o1[i]);
          empty |= t.o0[i] >= t.o1[i];
        }
        if (empty) continue;
        t.merge_hw = g.s[1] == 1 && g.s[2] == 1 && t.o0[2] == 0 && t.o1[2] == g.out[2] && g.out[2] == g.in[2] &&
                     t.off[2] == 0;
        taps.push_back(t);
      }
  return taps;
}

// y_j[i] += w_j * x[i * xs] for j < B, i < len.
template <int B, typename A>
inline void accum_rows(A* const* y, const A* wv, const A* __restrict x, int64_t len, int64_t xs) {
  A* __restrict y0 = y[0];
  const A w0 = wv[0];
  if constexpr (B == 1) {
    if (xs == 1)
      for (int64_t i = 0; i < len; ++i) y0[i] += w0 * x[i];
    else
      for (int64_t i = 0; i < len; ++i) y0[i] += w0 * x[i * xs];
  } else if constexpr (B == 2) {
    A* __restrict y1 = y[1];
    const A w1 = wv[1];
    if (xs == 1)
      for (int64_t i = 0; i < len; ++i) {
        const A v = x[i];
        y0[i] += w0 * v;
        y1[i] += w1 * v;
      }
    else
      for (int64_t i = 0; i < len; ++i) {
        const A v = x[i * xs];
        y0[i] += w0 * v;
        y1[i] += w1 * v;
      }
  } else {
    static_assert(B == 4);
    A* __restrict y1 = y[1];
    A* __restrict y2 = y[2];
    A* __restrict y3 = y[3];
    const A w1 = wv[1], w2 = wv[2], w3 = wv[3];
    if (xs == 1)
      for (int64_t i = 0; i < len; ++i) {
        const A v = x[i];
        y0[i] += w0 * v;
        y1[i] += w1 * v;
        y2[i] += w2 * v;
        y3[i] += w3 * v;
      }
    else
      for (int64_t i = 0; i < len; ++i) {
        const A v = x[i * xs];
        y0[i] += w0 * v;
        y1[i] += w1 * v;
        y2[i] += w2 * v;
        y3[i] += w3 * v;
      }
  }
}

// One block of B output channels of one (n, group): accumulate every input channel.
// xg: first input plane of the group; wg[j]: weights of output channel j (Cg * K values);
// yp[j]: output planes (already initialised with the bias).
template <int B, typename A>
void conv_block(const A* xg, const A* const* wg, A* const* yp, int64_t Cg, const Geom3& g,
                const std::vector<Tap>& taps) {
  const int64_t IN = g.in_size(), K = g.k_size();
  const int64_t IH = g.in[1], IW = g.in[2], OH = g.out[1], OW = g.out[2];
  A* yr[4];
  A wv[4];
  for (int64_t c = 0; c < Cg; ++c) {
    const A* xp = xg + c * IN;
    for (const Tap& t : taps) {
      for (int j = 0; j < B; ++j) wv[j] = wg[j][c * K + t.widx];
      for (int64_t od = t.o0[0]; od < t.o1[0]; ++od) {
        const int64_t id = od * g.s[0] + t.off[0];
        if (t.merge_hw) {
          const int64_t ih0 = t.o0[1] + t.off[1];
          const A* xr = xp + (id * IH + ih0) * IW;
          for (int j = 0; j < B; ++j) yr[j] = yp[j] + (od * OH + t.o0[1]) * OW;
          accum_rows<B>(yr, wv, xr, (t.o1[1] - t.o0[1]) * OW, 1);
          continue;
        }
        const int64_t len = t.o1[2] - t.o0[2];
        for (int64_t oh = t.o0[1]; oh < t.o1[1]; ++oh) {
          const int64_t ih = oh * g.s[1] + t.off[1];
          const A* xr = xp + (id * IH + ih) * IW + (t.o0[2] * g.s[2] + t.off[2]);
          for (int j = 0; j < B; ++j) yr[j] = yp[j] + (od * OH + oh) * OW + t.o0[2];
          accum_rows<B>(yr, wv, xr, len, g.s[2]);
        }
      }
    }
  }
}

// y[N, M, out] = conv(x[N, C, in], w[M, C/group, k]) + bias[M] (bias may be null).
template <typename A>
void conv_forward(const A* x, const A* w, const A* bias, A* y, int64_t N, int64_t C, int64_t M, int64_t group,
                  const Geom3& g) {
  const int64_t Cg = C / group, Mg = M / group;
  const int64_t IN = g.in_size(), OUT = g.out_size(), K = g.k_size();
  const std::vector<Tap> taps = conv_taps(g);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t gr = 0; gr < group; ++gr) {
      const A* xg = x + (n * C + gr * Cg) * IN;
      for (int64_t m0 = 0; m0 < Mg;) {
        const int64_t rem = Mg - m0;
        const int nb = rem >= 4 ? 4 : rem >= 2 ? 2 : 1;
        A* yp[4];
        const A* wg[4];
        for (int j = 0; j < nb; ++j) {
          const int64_t m = gr * Mg + m0 + j;
          yp[j] = y + (n * M + m) * OUT;
          wg[j] = w + m * Cg * K;
          std::fill(yp[j], yp[j] + OUT, bias ? bias[m] : A(0));
        }
        if (nb == 4)
          conv_block<4>(xg, wg, yp, Cg, g, taps);
        else if (nb == 2)
          conv_block<2>(xg, wg, yp, Cg, g, taps);
        else
          conv_block<1>(xg, wg, yp, Cg, g, taps);
        m0 += nb;
      }
    }
}

// y[N, M, out] = conv_transpose(x[N, C, in], w[C, M/group, k]) + bias[M].
template <typename A>
void conv_transpose_forward(const A* x, const A* w, const A* bias, A* y, int64_t N, int64_t C, int64_t M,
                            int64_t group, const Geom3& g) {
  const int64_t Cg = C / group, Mg = M / group;
  const int64_t IN = g.in_size(), OUT = g.out_size(), K = g.k_size();
  const int64_t IH = g.in[1], IW = g.in[2], OH = g.out[1], OW = g.out[2];
  // Taps: output o = i*s + off, so the valid input range is valid_range(out, in, ...).
  struct TTap {
    int64_t widx, i0[3], i1[3], off[3];
  };
  std::vector<TTap> taps;
  for (int64_t kd = 0; kd < g.k[0]; ++kd)
    for (int64_t kh = 0; kh < g.k[1]; ++kh)
      for (int64_t kw = 0; kw < g.k[2]; ++kw) {
        TTap t{};
        t.widx = (kd * g.k[1] + kh) * g.k[2] + kw;
        const int64_t kk[3] = {kd, kh, kw};
        bool empty = false;
        for (int i = 0; i < 3; ++i) {
          t.off[i] = kk[i] * g.d[i] - g.p[i];
          valid_range(g.out[i], g.in[i], g.s[i], t.off[i], t.i0[i], t.i1[i]);
          empty |= t.i0[i] >= t.i1[i];
        }
        if (!empty) taps.push_back(t);
      }
  for (int64_t n = 0; n < N; ++n)
    for (int64_t m = 0; m < M; ++m) {
      A* yp = y + (n * M + m) * OUT;
      std::fill(yp, yp + OUT, bias ? bias[m] : A(0));
    }
  for (int64_t n = 0; n < N; ++n)
    for (int64_t gr = 0; gr < group; ++gr)
      for (int64_t c = 0; c < Cg; ++c) {
        const A* xp = x + (n * C + gr * Cg + c) * IN;
        for (int64_t mm = 0; mm < Mg; ++mm) {
          A* yp = y + (n * M + gr * Mg + mm) * OUT;
          const A* wp = w + ((gr * Cg + c) * Mg + mm) * K;
          for (const TTap& t : taps) {
            const A wv = wp[t.widx];
            const int64_t len = t.i1[2] - t.i0[2];
            for (int64_t id = t.i0[0]; id < t.i1[0]; ++id) {
              const int64_t od = id * g.s[0] + t.off[0];
              for (int64_t ih = t.i0[1]; ih < t.i1[1]; ++ih) {
                const int64_t oh = ih * g.s[1] + t.off[1];
                const A* __restrict xr = xp + (id * IH + ih) * IW + t.i0[2];
                A* __restrict yr = yp + (od * OH + oh) * OW + (t.i0[2] * g.s[2] + t.off[2]);
                const int64_t ys = g.s[2];
                for (int64_t i = 0; i < len; ++i) yr[i * ys] += wv * xr[i];
              }
            }
          }
        }
      }
}

// ---------------------------------------------------------------------------
// Shared Conv attribute handling.

const std::vector<ir::AttrSpec> kConvAttrs = {{"auto_pad", ir::AttrType::s},     {"dilations", ir::AttrType::ints},
                                              {"group", ir::AttrType::i},        {"kernel_shape", ir::AttrType::ints},
                                              {"pads", ir::AttrType::ints},      {"strides", ir::AttrType::ints}};

// Resolved geometry of a Conv-like node on concrete shapes.
struct ConvSetup {
  int64_t N, C, M, group;
  Geom3 g;
  Shape out_shape;
};

ConvSetup conv_setup(const RunContext& ctx, const Shape& xs, const Shape& ws) {
  const ir::Node& n = ctx.node();
  KILN_CHECK(xs.size() >= 3, ctx.error("input X must have rank >= 3 (N, C, spatial...), got shape ",
                                       shape_to_string(xs)));
  KILN_CHECK(ws.size() == xs.size(), ctx.error("weight W must have the rank of X: X ", shape_to_string(xs), ", W ",
                                               shape_to_string(ws)));
  ConvSetup s;
  s.N = xs[0];
  s.C = xs[1];
  s.M = ws[0];
  s.group = n.attr_i("group", 1);
  KILN_CHECK(s.C == ws[1] * s.group,
             ctx.error("input channels ", s.C, " must equal W.shape[1] (", ws[1], ") * group (", s.group, "); X ",
                       shape_to_string(xs), ", W ", shape_to_string(ws)));
  KILN_CHECK(s.M % s.group == 0,
             ctx.error("output channels W.shape[0] = ", s.M, " must be divisible by group ", s.group));
  std::vector<int64_t> wk(ws.begin() + 2, ws.end());
  Window w = read_window(n, xs.size() - 2, wk);
  KILN_CHECK(w.kernel == wk, ctx.error("kernel_shape [", join(w.kernel), "] does not match the weight shape ",
                                       shape_to_string(ws)));
  std::vector<int64_t> in = spatial_of(xs);
  std::vector<int64_t> out = window_output(n, w, in);
  s.g = make_geom3(n, w, in, out);
  s.out_shape = {s.N, s.M};
  s.out_shape.insert(s.out_shape.end(), out.begin(), out.end());
  return s;
}

// Static output shape of Conv-like ops: (N, M, window outputs...).
void conv_infer_shape(ir::InferContext& ctx, DType out_dtype, size_t x_idx, size_t w_idx) {
  const ir::PartialShape& xs = ctx.input_shape(x_idx);
  const ir::PartialShape& ws = ctx.input_shape(w_idx);
  const ir::Node& n = ctx.node();
  size_t rank = xs.rank_known ? xs.rank() : ws.rank_known ? ws.rank() : 0;
  if (rank == 0) {
    ctx.set_output(0, out_dtype, ir::PartialShape::unknown_rank());
    return;
  }
  if (rank < 3) throw ctx.error("input X must have rank >= 3 (N, C, spatial...), got ", xs.to_string());
  if (ws.rank_known && ws.rank() != rank)
    throw ctx.error("weight W must have the rank of X: X ", xs.to_string(), ", W ", ws.to_string());
  // channels: C = W.shape[1] * group, M = W.shape[0] divisible by group
  const int64_t group = n.attr_i("group", 1);
  if (group < 1) throw ctx.error("attribute 'group' must be >= 1, got ", group);
  if (xs.rank_known && ws.rank_known && xs.dims[1].is_static() && ws.dims[1].is_static() &&
      xs.dims[1].value != ws.dims[1].value * group)
    throw ctx.error("input channels ", xs.dims[1].value, " must equal W.shape[1] (", ws.dims[1].value, ") * group (",
                    group, "); X ", xs.to_string(), ", W ", ws.to_string());
  if (ws.rank_known && ws.dims[0].is_static() && ws.dims[0].value % group != 0)
    throw ctx.error("output channels W.shape[0] = ", ws.dims[0].value, " must be divisible by group ", group);
  const size_t nsp = rank - 2;
  std::vector<ir::Dim> dims(rank);
  dims[0] = xs.rank_known ? xs.dims[0] : ir::Dim::unknown();
  dims[1] = ws.rank_known ? ws.dims[0] : ir::Dim::unknown();
  std::vector<int64_t> wk(nsp, -1);
  bool kernel_known = n.has_attr("kernel_shape");
  if (!kernel_known && ws.rank_known) {
    kernel_known = true;
    for (size_t i = 0; i < nsp; ++i) {
      if (ws.dims[2 + i].is_static())
        wk[i] = ws.dims[2 + i].value;
      else
        kernel_known = false;
    }
  }
  if (kernel_known && xs.rank_known) {
    Window w = read_window(n, nsp, wk);
    for (size_t i = 0; i < nsp; ++i) dims[2 + i] = window_output_dim(n, w, i, xs.dims[2 + i]);
  }
  ctx.set_output(0, out_dtype, ir::PartialShape(dims));
}

// ---------------------------------------------------------------------------
// Conv

void register_conv(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "Conv";
  s.since_version = 1;
  s.min_inputs = 2;
  s.max_inputs = 3;
  s.attrs = kConvAttrs;
  s.validate = validate_window_attrs;
  s.infer = [](ir::InferContext& ctx) { conv_infer_shape(ctx, ctx.input_dtype(0), 0, 1); };
  s.run = [](ir::RunContext& ctx) {
    const Tensor& x = ctx.input(0);
    const Tensor& w = ctx.input(1);
    KILN_CHECK(w.dtype() == x.dtype(), ctx.error("W has element type ", dtype_name(w.dtype()), " but X has ",
                                                 dtype_name(x.dtype())));
    ConvSetup cs = conv_setup(ctx, x.shape(), w.shape());
    const Tensor* b = ctx.has_input(2) ? &ctx.input(2) : nullptr;
    if (b) {
      KILN_CHECK(b->dtype() == x.dtype(), ctx.error("B has element type ", dtype_name(b->dtype()), " but X has ",
                                                    dtype_name(x.dtype())));
      KILN_CHECK(b->rank() == 1 && b->shape()[0] == cs.M,
                 ctx.error("bias B must have shape [", cs.M, "], got ", shape_to_string(b->shape())));
    }
    Tensor& y = ctx.allocate_output(0, x.dtype(), cs.out_shape);
    if (y.size() == 0) return;
    dispatch_float(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      using A = acc_t<T>;
      std::vector<A> xb, wb, bb;
      const A* px = as_acc<A, T>(x, xb);
      const A* pw = as_acc<A, T>(w, wb);
      const A* pb = b ? as_acc<A, T>(*b, bb) : nullptr;
      if constexpr (std::is_same_v<A, T>) {
        conv_forward(px, pw, pb, y.data<T>(), cs.N, cs.C, cs.M, cs.group, cs.g);
      } else {
        std::vector<A> yb(static_cast<size_t>(y.size()));
        conv_forward(px, pw, pb, yb.data(), cs.N, cs.C, cs.M, cs.group, cs.g);
        T* py = y.data<T>();
        for (size_t i = 0; i < yb.size(); ++i) py[i] = T(yb[i]);
      }
    }, "Conv");
  };
  r.add(std::move(s));
}

// ---------------------------------------------------------------------------
// ConvTranspose

struct ConvTSetup {
  int64_t N, C, M, group;
  Geom3 g;
  Shape out_shape;
};

// Output spatial size and pads per ConvTranspose rules; in may be -1 (unknown) for
// static inference, then returns -1.
struct ConvTWindow {
  Window w;
  std::vector<int64_t> output_padding, output_shape;
};

ConvTWindow read_convt_window(const ir::Node& n, size_t nsp, const std::vector<int64_t>& kernel) {
  ConvTWindow t;
  t.w = read_window(n, nsp, kernel);
  t.output_padding = n.attr_ints("output_padding", std::vector<int64_t>(nsp, 0));
  KILN_CHECK(t.output_padding.size() == nsp, cat(n.describe(), ": attribute 'output_padding' has ",
                                                 t.output_padding.size(), " values, expected ", nsp));
  if (n.has_attr("output_shape")) {
    t.output_shape = n.attr_ints("output_shape");
    if (t.output_shape.size() == nsp + 2) t.output_shape.erase(t.output_shape.begin(), t.output_shape.begin() + 2);
    KILN_CHECK(t.output_shape.size() == nsp, cat(n.describe(), ": attribute 'output_shape' has ",
                                                 t.output_shape.size(), " values, expected ", nsp));
  }
  return t;
}

int64_t convt_output_size(const ir::Node& n, ConvTWindow& t, size_t i, int64_t in) {
  Window& w = t.w;
  const int64_t s = w.strides[i];
  const int64_t ek = (w.kernel[i] - 1) * w.dilations[i] + 1;
  const int64_t op = t.output_padding[i];
  int64_t& pb = w.pads[i];
  int64_t& pe = w.pads[i + w.nsp];
  const bool same = w.auto_pad == "SAME_UPPER" || w.auto_pad == "SAME_LOWER";
  int64_t out;
  if (!t.output_shape.empty() || same) {
    out = !t.output_shape.empty() ? t.output_shape[i] : in * s;
    int64_t total = s * (in - 1) + op + ek - out;
    if (total < 0) total = 0;  // extra outputs beyond the last contribution stay at the bias
    if (w.auto_pad == "SAME_UPPER") {
      pb = total / 2;
      pe = total - pb;
    } else {
      pe = total / 2;
      pb = total - pe;
    }
  } else {
    if (w.auto_pad == "VALID") pb = pe = 0;
    out = s * (in - 1) + op + ek - pb - pe;
  }
  KILN_CHECK(out >= 1, cat(n.describe(), ": output spatial dim ", i, " would be ", out, " (input ", in, ")"));
  return out;
}

void register_conv_transpose(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "ConvTranspose";
  s.since_version = 1;
  s.min_inputs = 2;
  s.max_inputs = 3;
  s.attrs = kConvAttrs;
  s.attrs.push_back({"output_padding", ir::AttrType::ints});
  s.attrs.push_back({"output_shape", ir::AttrType::ints});
  s.validate = [](const ir::Node& n) {
    validate_window_attrs(n);
    for (int64_t v : n.attr_ints("output_padding", {}))
      KILN_CHECK(v >= 0, cat(n.describe(), ": attribute 'output_padding' values must be >= 0"));
  };
  s.infer = [](ir::InferContext& ctx) {
    const ir::PartialShape& xs = ctx.input_shape(0);
    const ir::PartialShape& ws = ctx.input_shape(1);
    const ir::Node& n = ctx.node();
    DType dt = ctx.input_dtype(0);
    size_t rank = xs.rank_known ? xs.rank() : ws.rank_known ? ws.rank() : 0;
    if (rank == 0) return ctx.set_output(0, dt, ir::PartialShape::unknown_rank());
    if (rank < 3) throw ctx.error("input X must have rank >= 3 (N, C, spatial...), got ", xs.to_string());
    if (ws.rank_known && ws.rank() != rank)
      throw ctx.error("weight W must have the rank of X: X ", xs.to_string(), ", W ", ws.to_string());
    const size_t nsp = rank - 2;
    std::vector<ir::Dim> dims(rank);
    dims[0] = xs.rank_known ? xs.dims[0] : ir::Dim::unknown();
    int64_t group = n.attr_i("group", 1);
    if (group < 1) throw ctx.error("attribute 'group' must be >= 1, got ", group);
    // channels: W is [C, M / group, k...], C divisible by group
    if (xs.rank_known && ws.rank_known && xs.dims[1].is_static() && ws.dims[0].is_static() &&
        xs.dims[1].value != ws.dims[0].value)
      throw ctx.error("W.shape[0] (", ws.dims[0].value, ") must equal the input channels ", xs.dims[1].value, "; X ",
                      xs.to_string(), ", W ", ws.to_string());
    if (xs.rank_known && xs.dims[1].is_static() && xs.dims[1].value % group != 0)
      throw ctx.error("input channels ", xs.dims[1].value, " must be divisible by group ", group);
    dims[1] = ws.rank_known ? ir::dim_mul(ws.dims[1], ir::Dim(group)) : ir::Dim::unknown();
    std::vector<int64_t> wk(nsp, 1);
    bool kernel_known = n.has_attr("kernel_shape");
    if (!kernel_known && ws.rank_known && ws.rank() == rank) {
      kernel_known = true;
      for (size_t i = 0; i < nsp; ++i) {
        if (ws.dims[2 + i].is_static())
          wk[i] = ws.dims[2 + i].value;
        else
          kernel_known = false;
      }
    }
    ConvTWindow t = read_convt_window(n, nsp, wk);
    for (size_t i = 0; i < nsp; ++i) {
      if (!t.output_shape.empty())
        dims[2 + i] = t.output_shape[i];
      else if (kernel_known && xs.rank_known && xs.dims[2 + i].is_static())
        dims[2 + i] = convt_output_size(n, t, i, xs.dims[2 + i].value);
    }
    ctx.set_output(0, dt, ir::PartialShape(dims));
  };
  s.run = [](ir::RunContext& ctx) {
    const Tensor& x = ctx.input(0);
    const Tensor& w = ctx.input(1);
    const ir::Node& n = ctx.node();
    KILN_CHECK(w.dtype() == x.dtype(), ctx.error("W has element type ", dtype_name(w.dtype()), " but X has ",
                                                 dtype_name(x.dtype())));
    const Shape& xs = x.shape();
    const Shape& ws = w.shape();
    KILN_CHECK(xs.size() >= 3, ctx.error("input X must have rank >= 3, got shape ", shape_to_string(xs)));
    KILN_CHECK(ws.size() == xs.size(), ctx.error("weight W must have the rank of X: X ", shape_to_string(xs), ", W ",
                                                 shape_to_string(ws)));
    const int64_t group = n.attr_i("group", 1);
    const int64_t N = xs[0], C = xs[1], M = ws[1] * group;
    KILN_CHECK(ws[0] == C, ctx.error("W.shape[0] (", ws[0], ") must equal the input channels ", C, "; X ",
                                     shape_to_string(xs), ", W ", shape_to_string(ws)));
    KILN_CHECK(C % group == 0, ctx.error("input channels ", C, " must be divisible by group ", group));
    std::vector<int64_t> wk(ws.begin() + 2, ws.end());
    const size_t nsp = xs.size() - 2;
    ConvTWindow t = read_convt_window(n, nsp, wk);
    KILN_CHECK(t.w.kernel == wk, ctx.error("kernel_shape [", join(t.w.kernel),
                                           "] does not match the weight shape ", shape_to_string(ws)));
    std::vector<int64_t> in = spatial_of(xs), out(nsp);
    for (size_t i = 0; i < nsp; ++i) out[i] = convt_output_size(n, t, i, in[i]);
    Geom3 g = make_geom3(n, t.w, in, out);
    Shape out_shape = {N, M};
    out_shape.insert(out_shape.end(), out.begin(), out.end());
    const Tensor* b = ctx.has_input(2) ? &ctx.input(2) : nullptr;
    if (b) {
      KILN_CHECK(b->dtype() == x.dtype(), ctx.error("B has element type ", dtype_name(b->dtype()), " but X has ",
                                                    dtype_name(x.dtype())));
      KILN_CHECK(b->rank() == 1 && b->shape()[0] == M,
                 ctx.error("bias B must have shape [", M, "], got ", shape_to_string(b->shape())));
    }
    Tensor& y = ctx.allocate_output(0, x.dtype(), out_shape);
    if (y.size() == 0) return;
    dispatch_float(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      using A = acc_t<T>;
      std::vector<A> xb, wb, bb;
      const A* px = as_acc<A, T>(x, xb);
      const A* pw = as_acc<A, T>(w, wb);
      const A* pb = b ? as_acc<A, T>(*b, bb) : nullptr;
      if constexpr (std::is_same_v<A, T>) {
        conv_transpose_forward(px, pw, pb, y.data<T>(), N, C, M, group, g);
      } else {
        std::vector<A> yb(static_cast<size_t>(y.size()));
        conv_transpose_forward(px, pw, pb, yb.data(), N, C, M, group, g);
        T* py = y.data<T>();
        for (size_t i = 0; i < yb.size(); ++i) py[i] = T(yb[i]);
      }
    }, "ConvTranspose");
  };
  r.add(std::move(s));
}

// ---------------------------------------------------------------------------
// ConvInteger / QLinearConv: int64 accumulation of (x - x_zp) * (w - w_zp).

// Values of a u8 / i8 tensor minus a zero point (per tensor, or per output channel
// for the weights when zp has M values) as int64.
std::vector<int64_t> centered(const RunContext& ctx, const Tensor& t, const char* what, const Tensor* zp,
                              int64_t channels) {
  KILN_CHECK(t.dtype() == DType::u8 || t.dtype() == DType::i8,
             ctx.error(what, " must be uint8 or int8, got ", dtype_name(t.dtype())));
  std::vector<int64_t> zpv(1, 0);
  if (zp) {
    KILN_CHECK(zp->dtype() == t.dtype(), ctx.error(what, " zero point has element type ", dtype_name(zp->dtype()),
                                                   " but ", what, " is ", dtype_name(t.dtype())));
    zpv = zp->to_i64();
    bool ok = zpv.size() == 1 || (channels > 0 && static_cast<int64_t>(zpv.size()) == channels && zp->rank() == 1);
    KILN_CHECK(ok, ctx.error(what, " zero point must be a scalar", channels > 0 ? cat(" or have ", channels, " values") : "",
                             ", got shape ", shape_to_string(zp->shape())));
  }
  std::vector<int64_t> v = t.to_i64();
  if (zpv.size() == 1) {
    for (auto& e : v) e -= zpv[0];
  } else {
    const size_t per = v.size() / zpv.size();
    for (size_t i = 0; i < v.size(); ++i) v[i] -= zpv[i / per];
  }
  return v;
}

// ConvInteger's int32 result of x, w and their zero points (inputs zx, zw, each optional), in
// `cs`'s output shape: the int64 sums cast to int32, as the reference defines it.
std::vector<int32_t> conv_integer_sums(const RunContext& ctx, size_t zx, size_t zw, ConvSetup& cs) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  cs = conv_setup(ctx, x.shape(), w.shape());
  std::vector<int64_t> xv = centered(ctx, x, "X", ctx.has_input(zx) ? &ctx.input(zx) : nullptr, 0);
  std::vector<int64_t> wv = centered(ctx, w, "W", ctx.has_input(zw) ? &ctx.input(zw) : nullptr, cs.M);
  std::vector<int64_t> acc(static_cast<size_t>(shape_size(cs.out_shape)));
  if (!acc.empty()) conv_forward<int64_t>(xv.data(), wv.data(), nullptr, acc.data(), cs.N, cs.C, cs.M, cs.group, cs.g);
  return std::vector<int32_t>(acc.begin(), acc.end());
}

void register_conv_integer(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "ConvInteger";
  s.since_version = 10;
  s.min_inputs = 2;
  s.max_inputs = 4;
  s.attrs = kConvAttrs;
  s.validate = validate_window_attrs;
  s.infer = [](ir::InferContext& ctx) { conv_infer_shape(ctx, DType::i32, 0, 1); };
  s.run = [](ir::RunContext& ctx) {
    ConvSetup cs;
    const std::vector<int32_t> acc = conv_integer_sums(ctx, 2, 3, cs);
    Tensor& y = ctx.allocate_output(0, DType::i32, cs.out_shape);
    std::copy(acc.begin(), acc.end(), y.data<int32_t>());
  };
  r.add(std::move(s));
}

// ConvIntegerToFloat (domain "kiln"; FuseConvIntegerToFloat makes it of a dynamically quantized
// convolution): (x, w, x_scale, w_scale, x_zero_point?, w_zero_point?, bias?) ->
//   y[n, m, ...] = float(ConvInteger(x, w, x_zp, w_zp)[n, m, ...]) * (x_scale * w_scale[m]) + bias[m]
// each step rounded to f32 as the Cast, the two Muls and the Add it replaces round; x_scale one
// value, w_scale one or one per output channel, bias one per output channel.
void register_conv_integer_to_float(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.domain = "kiln";
  s.name = "ConvIntegerToFloat";
  s.since_version = 1;
  s.min_inputs = 4;
  s.max_inputs = 7;
  s.attrs = kConvAttrs;
  s.validate = validate_window_attrs;
  s.infer = [](ir::InferContext& ctx) { conv_infer_shape(ctx, DType::f32, 0, 1); };
  s.run = [](ir::RunContext& ctx) {
    ConvSetup cs;
    const std::vector<int32_t> acc = conv_integer_sums(ctx, 4, 5, cs);
    auto floats = [&](size_t i, const char* what, bool per_channel) {
      const Tensor& t = ctx.input(i);
      KILN_CHECK(t.dtype() == DType::f32, ctx.error(what, " must be float32, got ", dtype_name(t.dtype())));
      const bool ok = t.size() == 1 || (per_channel && t.size() == cs.M);
      KILN_CHECK(ok, ctx.error(what, " must hold one value", per_channel ? cat(" or ", cs.M) : "", ", got shape ",
                               shape_to_string(t.shape())));
      return to_f32(t);
    };
    const std::vector<float> xs = floats(2, "x_scale", false), ws = floats(3, "w_scale", true);
    std::vector<float> bias;
    if (ctx.has_input(6)) {
      bias = floats(6, "bias", true);
      KILN_CHECK(static_cast<int64_t>(bias.size()) == cs.M, ctx.error("bias must hold ", cs.M, " values, got ", bias.size()));
    }
    Tensor& y = ctx.allocate_output(0, DType::f32, cs.out_shape);
    float* py = y.data<float>();
    const int64_t per = cs.N * cs.M > 0 ? static_cast<int64_t>(acc.size()) / (cs.N * cs.M) : 1;  // positions per channel
    for (size_t i = 0; i < acc.size(); ++i) {
      const auto m = static_cast<size_t>(static_cast<int64_t>(i) / per % cs.M);
      const float scale = xs[0] * ws[ws.size() == 1 ? 0 : m];
      const float v = static_cast<float>(acc[i]) * scale;
      py[i] = bias.empty() ? v : v + bias[m];
    }
  };
  r.add(std::move(s));
}

void register_qlinear_conv(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "QLinearConv";
  s.since_version = 10;
  s.min_inputs = 8;
  s.max_inputs = 9;
  s.attrs = kConvAttrs;
  s.validate = validate_window_attrs;
  s.infer = [](ir::InferContext& ctx) {
    DType out = ctx.has_input(7) ? ctx.input_dtype(7) : DType::u8;
    conv_infer_shape(ctx, out, 0, 3);
  };
  s.run = [](ir::RunContext& ctx) {
    const Tensor& x = ctx.input(0);
    const Tensor& w = ctx.input(3);
    ConvSetup cs = conv_setup(ctx, x.shape(), w.shape());
    auto scale_of = [&](size_t i, const char* what, int64_t channels) {
      const Tensor& t = ctx.input(i);
      KILN_CHECK(t.dtype() == DType::f32, ctx.error(what, " must be float32, got ", dtype_name(t.dtype())));
      std::vector<float> v = to_f32(t);
      bool ok = v.size() == 1 || (channels > 0 && static_cast<int64_t>(v.size()) == channels);
      KILN_CHECK(ok, ctx.error(what, " must be a scalar",
                               channels > 0 ? cat(" or have ", channels, " values") : "", ", got shape ",
                               shape_to_string(t.shape())));
      return v;
    };
    const float x_scale = scale_of(1, "x_scale", 0)[0];
    const std::vector<float> w_scale = scale_of(4, "w_scale", cs.M);
    const float y_scale = scale_of(6, "y_scale", 0)[0];
    std::vector<int64_t> xv = centered(ctx, x, "x", &ctx.input(2), 0);
    std::vector<int64_t> wv = centered(ctx, w, "w", &ctx.input(5), cs.M);
    const Tensor& yzp_t = ctx.input(7);
    KILN_CHECK(yzp_t.dtype() == DType::u8 || yzp_t.dtype() == DType::i8,
               ctx.error("y_zero_point must be uint8 or int8, got ", dtype_name(yzp_t.dtype())));
    KILN_CHECK(yzp_t.size() == 1, ctx.error("y_zero_point must be a scalar, got shape ",
                                            shape_to_string(yzp_t.shape())));
    const int64_t y_zp = yzp_t.to_i64()[0];
    std::vector<int64_t> bias;
    if (ctx.has_input(8)) {
      const Tensor& b = ctx.input(8);
      KILN_CHECK(b.dtype() == DType::i32 && b.rank() == 1 && b.shape()[0] == cs.M,
                 ctx.error("bias B must be int32 of shape [", cs.M, "], got ", dtype_name(b.dtype()), " ",
                           shape_to_string(b.shape())));
      bias = b.to_i64();
    }
    std::vector<int64_t> acc(static_cast<size_t>(shape_size(cs.out_shape)));
    Tensor& y = ctx.allocate_output(0, yzp_t.dtype(), cs.out_shape);
    if (acc.empty()) return;
    conv_forward<int64_t>(xv.data(), wv.data(), bias.empty() ? nullptr : bias.data(), acc.data(), cs.N, cs.C, cs.M,
                          cs.group, cs.g);
    const int64_t lo = yzp_t.dtype() == DType::u8 ? 0 : -128, hi = yzp_t.dtype() == DType::u8 ? 255 : 127;
    const int64_t plane = cs.g.out_size();
    std::vector<float> mult(static_cast<size_t>(cs.M));
    for (int64_t m = 0; m < cs.M; ++m) mult[m] = x_scale * w_scale[w_scale.size() == 1 ? 0 : m] / y_scale;
    auto requant = [&](auto* py) {
      using Q = std::remove_pointer_t<decltype(py)>;
      for (size_t i = 0; i < acc.size(); ++i) {
        const int64_t m = static_cast<int64_t>(i / plane) % cs.M;
        float v = std::nearbyint(static_cast<float>(acc[i]) * mult[m]);
        if (std::isnan(v)) v = 0.f;
        int64_t q = static_cast<int64_t>(std::clamp(v, -1e9f, 1e9f)) + y_zp;
        py[i] = static_cast<Q>(std::clamp(q, lo, hi));
      }
    };
    if (yzp_t.dtype() == DType::u8)
      requant(y.data<uint8_t>());
    else
      requant(y.data<int8_t>());
  };
  r.add(std::move(s));
}

}  // namespace

void register_conv_ops(ir::OpRegistry& r) {
  register_conv(r);
  register_conv_transpose(r);
  register_conv_integer(r);
  register_conv_integer_to_float(r);
  register_qlinear_conv(r);
}

}  // namespace kiln::ops::nn
