// Resize / Upsample (f32, nearest or linear, spatial dims only) on oneDNN's resampling.
// oneDNN has one coordinate mapping: x_in = (x_out + 0.5) * in / out - 0.5 (edge-clamped;
// nearest rounds half away from zero). ONNX has many (coordinate_transformation_mode,
// nearest_mode, scales that differ from out/in). Rather than trusting a table of
// equivalences, resize_supports() computes, per spatial axis, the taps and weights of
// the reference kernel and of oneDNN for every output coordinate and accepts the node
// only where they agree: e.g. nearest asymmetric/floor or half_pixel at integer
// upscales, linear half_pixel / pytorch_half_pixel whenever scale == out / in.
// Where oneDNN does not agree (align_corners at most sizes, half_pixel_symmetric, scales
// other than out / in), and where the input is plain or the output leaves the graph (a
// segmentation model's last upsampling: no Reorder after it), 4-D plain tensors take kiln's
// kernel (cpu/resize_f32.hpp) with the reference's own taps, when the CPU has AVX2. Cubic,
// tf_crop_and_resize and antialias stay on Reference.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "core/strings.hpp"
#include "cpu/arena.hpp"
#include "cpu/dnnl_util.hpp"
#include "cpu/resize_f32.hpp"
#include "cpu/nodes/node_factory.hpp"

namespace kiln::cpu {

namespace {

using dnnl::memory;

enum class Coord { half_pixel, half_pixel_symmetric, pytorch_half_pixel, align_corners, asymmetric, tf_half_pixel_for_nn };
enum class Rounding { round_prefer_floor, round_prefer_ceil, floor, ceil, simple };

// ONNX reference (src/ops/shape_resize.cpp): input coordinate of output coordinate o of `out`.
double onnx_coord(Coord c, int64_t o, double scale, int64_t in, int64_t out, double out_len) {
  const double x = static_cast<double>(o);
  switch (c) {
    case Coord::half_pixel: return (x + 0.5) / scale - 0.5;
    case Coord::half_pixel_symmetric: {
      const double adjustment = static_cast<double>(out) / out_len, center = static_cast<double>(in) / 2;
      return center * (1 - adjustment) + (x + 0.5) / scale - 0.5;
    }
    case Coord::pytorch_half_pixel: return out_len > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
    case Coord::align_corners: return out_len == 1 ? 0.0 : x * static_cast<double>(in - 1) / (out_len - 1);
    case Coord::asymmetric: return x / scale;
    case Coord::tf_half_pixel_for_nn: return (x + 0.5) / scale;
  }
  return x;
}

int64_t onnx_nearest(Rounding r, double x, double scale) {
  const double f = std::floor(x);
  switch (r) {
    case Rounding::round_prefer_floor: return static_cast<int64_t>(x - f == 0.5 ? f : std::round(x));
    case Rounding::round_prefer_ceil: return static_cast<int64_t>(x - f == 0.5 ? f + 1 : std::round(x));
    case Rounding::floor: return static_cast<int64_t>(f);
    case Rounding::ceil: return static_cast<int64_t>(std::ceil(x));
    case Rounding::simple: return static_cast<int64_t>(scale < 1 ? std::ceil(x) : f);
  }
  return static_cast<int64_t>(f);
}

// oneDNN (cpu/resampling_utils.hpp): the same mapping in float.
float dnnl_coord(int64_t o, int64_t out, int64_t in) {
  return ((static_cast<float>(o) + 0.5f) * static_cast<float>(in) / static_cast<float>(out)) - 0.5f;
}

// The input positions one output coordinate reads and their weights (at most two).
struct Taps {
  int64_t index[2] = {0, 0};
  double weight[2] = {0, 0};
  int n = 0;
  void add(int64_t i, double w) {
    for (int k = 0; k < n; ++k)
      if (index[k] == i) {
        weight[k] += w;
        return;
      }
    index[n] = i;
    weight[n++] = w;
  }
  double at(int64_t i) const {
    for (int k = 0; k < n; ++k)
      if (index[k] == i) return weight[k];
    return 0.0;
  }
  // every tap here has the weight `o` gives its index
  bool same(const Taps& o) const {
    for (int k = 0; k < n; ++k)
      if (std::fabs(weight[k] - o.at(index[k])) > 1e-5) return false;
    return true;
  }
};

// What the reference computes for a Resize/Upsample node that kiln can run: f32, rank 3-5,
// nearest or linear over the spatial dims, the scales of every axis (given, or out / in).
struct ResizeSpec {
  Shape xs, ys;
  bool linear = false;
  Coord coord = Coord::asymmetric;
  Rounding rounding = Rounding::simple;
  std::vector<double> scales, out_len;
  // the taps of one output coordinate along axis k (a spatial one)
  Taps taps(size_t k, int64_t o) const {
    Taps t;
    const int64_t in = xs[k], out = ys[k];
    if (in == out && scales[k] == 1.0) {  // the reference skips the axis
      t.add(o, 1.0);
      return t;
    }
    const double x = onnx_coord(coord, o, scales[k], in, out, out_len[k]);
    if (!linear) {
      t.add(std::clamp<int64_t>(onnx_nearest(rounding, x, scales[k]), 0, in - 1), 1.0);
      return t;
    }
    const double f = std::floor(x), w = x - f;
    const int64_t x0 = static_cast<int64_t>(f);
    t.index[0] = std::clamp<int64_t>(x0, 0, in - 1), t.weight[0] = 1.0 - w;  // kept apart, as the reference
    t.index[1] = std::clamp<int64_t>(x0 + 1, 0, in - 1), t.weight[1] = w;    // keeps them
    t.n = 2;
    return t;
  }
};

std::optional<ResizeSpec> resize_spec(const ir::Node& n) {
  const bool upsample = n.op_type() == "Upsample";
  const ir::Value *x = n.input(0), *y = n.output(0);
  if (!x || x->type.dtype != DType::f32 || y->type.dtype != DType::f32) return std::nullopt;
  if (!x->type.shape.is_static() || !y->type.shape.is_static()) return std::nullopt;
  ResizeSpec r;
  r.xs = x->type.shape.to_shape(), r.ys = y->type.shape.to_shape();
  const Shape &xs = r.xs, &ys = r.ys;
  const size_t rank = xs.size();
  if (rank < 3 || rank > 5 || ys.size() != rank || shape_size(xs) == 0 || shape_size(ys) == 0) return std::nullopt;

  const std::string mode = n.attr_s("mode", "nearest");
  bool& linear = r.linear;
  if (mode == "nearest") linear = false;
  else if (mode == "linear" || mode == "bilinear") linear = true;
  else return std::nullopt;
  Coord& coord = r.coord;
  Rounding& rounding = r.rounding;
  if (!upsample && n.opset() != 10) {
    const std::string c = n.attr_s("coordinate_transformation_mode", "half_pixel");
    if (c == "half_pixel") coord = Coord::half_pixel;
    else if (c == "half_pixel_symmetric") coord = Coord::half_pixel_symmetric;
    else if (c == "pytorch_half_pixel") coord = Coord::pytorch_half_pixel;
    else if (c == "align_corners") coord = Coord::align_corners;
    else if (c == "asymmetric") coord = Coord::asymmetric;
    else if (c == "tf_half_pixel_for_nn") coord = Coord::tf_half_pixel_for_nn;
    else return std::nullopt;  // tf_crop_and_resize: roi, extrapolation
    const std::string nm = n.attr_s("nearest_mode", "round_prefer_floor");
    if (nm == "round_prefer_floor") rounding = Rounding::round_prefer_floor;
    else if (nm == "round_prefer_ceil") rounding = Rounding::round_prefer_ceil;
    else if (nm == "floor") rounding = Rounding::floor;
    else if (nm == "ceil") rounding = Rounding::ceil;
    else return std::nullopt;
    // (exclude_outside changes nothing here: a linear tap outside the input is clamped onto
    // its neighbour's index, whose weight the normalisation then gives it)
    if (n.attr_i("antialias", 0) != 0 || n.has_attr("axes")) return std::nullopt;
    if (n.attr_s("keep_aspect_ratio_policy", "stretch") != "stretch") return std::nullopt;
  }

  // the scales the reference uses (given, or out / in when sizes are given)
  std::vector<double>& scales = r.scales;
  std::vector<double>& out_len = r.out_len;
  // an optional input: absent (nullptr), a constant, or present but computed (reject)
  bool computed = false;
  auto constant_of = [&](size_t i) -> const Tensor* {
    const ir::Value* v = n.input(i);
    if (!v) return nullptr;
    if (!v->is_constant()) computed = true;
    return v->is_constant() && v->constant().size() > 0 ? &v->constant() : nullptr;
  };
  const Tensor *sc = nullptr, *sz = nullptr;
  if (upsample) {
    sc = constant_of(1);
    if (!sc && !computed) {
      if (!n.has_attr("scales")) return std::nullopt;
      for (float f : n.attr_floats("scales")) scales.push_back(f);
    }
  } else {
    sc = constant_of(2);
    sz = constant_of(3);
    if ((sc != nullptr) == (sz != nullptr)) return std::nullopt;
  }
  if (computed) return std::nullopt;
  if (sz) {
    if (sz->dtype() != DType::i64 || static_cast<size_t>(sz->size()) != rank) return std::nullopt;
    const auto sizes = sz->to_i64();
    for (size_t k = 0; k < rank; ++k) {
      if (sizes[k] != ys[k]) return std::nullopt;
      scales.push_back(static_cast<double>(ys[k]) / static_cast<double>(xs[k]));
      out_len.push_back(static_cast<double>(ys[k]));
    }
  } else {
    if (sc) {
      if (!is_floating(sc->dtype())) return std::nullopt;
      scales = sc->to_f64();
    }
    if (scales.size() != rank) return std::nullopt;
    for (size_t k = 0; k < rank; ++k) {
      if (!(scales[k] > 0) || !std::isfinite(scales[k])) return std::nullopt;
      out_len.push_back(static_cast<double>(xs[k]) * scales[k]);
    }
  }
  if (ys[0] != xs[0] || ys[1] != xs[1] || scales[0] != 1.0 || scales[1] != 1.0) return std::nullopt;
  return r;
}

// Does oneDNN reproduce the reference along axis k (a spatial one)?
bool axis_matches(const ResizeSpec& r, size_t k) {
  const int64_t in = r.xs[k], out = r.ys[k];
  for (int64_t o = 0; o < out; ++o) {
    const float s = dnnl_coord(o, out, in);
    const Taps want = r.taps(k, o);  // the reference's
    if (!r.linear) {
      if (static_cast<int64_t>(std::roundf(s)) != want.index[0]) return false;
      continue;
    }
    // each side's taps: at most two (index, weight) pairs, an index listed once (asked for
    // every output coordinate of every Resize of every new input shape: no allocation)
    Taps ref, got;
    for (int t = 0; t < want.n; ++t) ref.add(want.index[t], want.weight[t]);
    const int64_t i0 = std::max<int64_t>(static_cast<int64_t>(s), 0);
    int64_t i1 = 0;
    if (s >= 0) {
      const int64_t tr = static_cast<int64_t>(s);
      i1 = static_cast<float>(tr) == s ? tr : tr + 1;
    }
    i1 = std::min(i1, in - 1);
    if (i0 >= in) return false;
    const float w1 = std::fabs(s - static_cast<float>(i0));
    got.add(i0, 1.0 - static_cast<double>(w1));
    got.add(i1, static_cast<double>(w1));
    if (!ref.same(got) || !got.same(ref)) return false;
  }
  return true;
}

// The oneDNN algorithm for a Resize/Upsample node, if it reproduces the reference.
bool resize_algorithm(const ResizeSpec& r, dnnl::algorithm& alg) {
  // (half_pixel_symmetric, opset 19, goes to kiln's kernel or the reference: oneDNN's resampling
  // is not taken for it)
  if (r.coord == Coord::half_pixel_symmetric) return false;
  for (size_t k = 2; k < r.xs.size(); ++k)
    if (!axis_matches(r, k)) return false;
  alg = r.linear ? dnnl::algorithm::resampling_linear : dnnl::algorithm::resampling_nearest;
  return true;
}

// Whether kiln's kernel runs it: 4-D (the two last dims resized), AVX2, sizes an int32 indexes.
bool kiln_runs(const ResizeSpec& r) {
  return resize_f32::available() && r.xs.size() == 4 && r.xs[2] < INT32_MAX && r.xs[3] < INT32_MAX;
}

// kiln's kernel's geometry: the reference's taps of each output row and column.
resize_f32::Geometry kiln_geometry(const ResizeSpec& r) {
  resize_f32::Geometry g;
  g.planes = r.xs[0] * r.xs[1];
  g.ih = r.xs[2], g.iw = r.xs[3], g.oh = r.ys[2], g.ow = r.ys[3];
  g.linear = r.linear;
  auto fill = [&](size_t k, resize_f32::Axis& a) {
    const size_t n = static_cast<size_t>(r.ys[k]);
    a.i0.resize(n), a.i1.resize(n), a.w0.resize(n), a.w1.resize(n);
    for (size_t o = 0; o < n; ++o) {
      const Taps t = r.taps(k, static_cast<int64_t>(o));
      a.i0[o] = static_cast<int32_t>(t.index[0]);
      a.w0[o] = static_cast<float>(t.weight[0]);
      a.i1[o] = static_cast<int32_t>(t.n > 1 ? t.index[1] : t.index[0]);
      a.w1[o] = t.n > 1 ? static_cast<float>(t.weight[1]) : 0.0f;
    }
  };
  fill(2, g.h);
  fill(3, g.w);
  return g;
}

class ResizeNode : public SrcDstPrimitiveNode {
 public:
  explicit ResizeNode(const ir::Node& n) : SrcDstPrimitiveNode(n) {}
  const char* type() const override { return "Resize"; }
  NodeKind kind() const override { return NodeKind::Resize; }

  std::vector<InputLayout> prepare() override {
    kiln_.reset();
    const std::optional<ResizeSpec> spec = resize_spec(*source);
    KILN_CHECK(spec, cat(source->describe(), ": not a resize kiln runs"));
    dnnl::algorithm alg;
    const bool dnnl_agrees = resize_algorithm(*spec, alg);
    std::vector<InputLayout> req(inputs.size(), InputLayout::any());
    // kiln's kernel where oneDNN does not agree, and where it costs no Reorder: a plain input,
    // or an output that leaves the graph (oneDNN writes the input's blocked layout)
    if (kiln_runs(*spec) && (!dnnl_agrees || inputs[0]->is_plain() || output_readers.empty())) {
      kiln_ = kiln_geometry(*spec);
      threads_ = omp_get_max_threads();
      impl = resize_f32::impl_name();
      outputs[0]->blocked.reset();
      req[0] = InputLayout::plain();
      return req;
    }
    KILN_CHECK(dnnl_agrees, cat(source->describe(), ": not reproducible by oneDNN resampling"));
    Edge* out = outputs[0];
    memory::desc dst_any(to_dims(out->shape), memory::data_type::f32, memory::format_tag::any);
    dnnl::resampling_forward::desc d(dnnl::prop_kind::forward_inference, alg, inputs[0]->desc(), dst_any);
    pd_ = dnnl::resampling_forward::primitive_desc(d, cpu_engine());
    prim_ = dnnl::resampling_forward(pd_);
    impl = pd_.impl_info_str();
    out->set_layout(pd_.dst_desc());
    return req;
  }

  size_t scratch_bytes() const override {
    return kiln_ ? Arena::aligned(static_cast<size_t>(resize_f32::scratch_floats(*kiln_, threads_)) * sizeof(float)) : 0;
  }

  void execute(dnnl::stream& stream) override {
    if (!kiln_) {
      SrcDstPrimitiveNode::execute(stream);
      return;
    }
    resize_f32::run(*kiln_, static_cast<const float*>(inputs[0]->data), static_cast<float*>(outputs[0]->data),
                    static_cast<float*>(scratch), threads_);
  }

 private:
  dnnl::resampling_forward::primitive_desc pd_;
  std::optional<resize_f32::Geometry> kiln_;  // kiln's kernel runs the node
  int threads_ = 1;
};

}  // namespace

bool resize_supports(const ir::Node& n) {
  if ((n.op_type() != "Resize" && n.op_type() != "Upsample") || !n.is_onnx_domain()) return false;
  if (n.num_outputs() != 1 || n.num_inputs() < 1) return false;
  const std::optional<ResizeSpec> spec = resize_spec(n);
  dnnl::algorithm alg;
  return spec && (kiln_runs(*spec) || resize_algorithm(*spec, alg));
}

std::unique_ptr<Node> make_resize_node(const ir::Node& n) { return std::make_unique<ResizeNode>(n); }

}  // namespace kiln::cpu
