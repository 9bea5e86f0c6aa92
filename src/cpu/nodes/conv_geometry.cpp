#include "cpu/nodes/conv_geometry.hpp"

#include <algorithm>

namespace kiln::cpu {

im2col_f32::Geometry im2col_geometry(const ir::Node& n, const Shape& x, const Shape& w, const Shape& y) {
  const ConvGeometry geo = conv_geometry(n, x, w, y);
  im2col_f32::Geometry g;
  g.c = x[1], g.h = x[2], g.w = x[3], g.kh = w[2], g.kw = w[3], g.oh = y[2], g.ow = y[3];
  g.stride_h = geo.strides[0], g.stride_w = geo.strides[1];
  g.dil_h = geo.dilations[0] + 1, g.dil_w = geo.dilations[1] + 1;
  g.pad_t = geo.pad_l[0], g.pad_l = geo.pad_l[1];
  return g;
}

dnnl::memory::dims conv_weight_dims(const Shape& w, int64_t group) {
  if (group <= 1) return dnnl::memory::dims(w.begin(), w.end());
  dnnl::memory::dims d = {group, w[0] / group, w[1]};
  d.insert(d.end(), w.begin() + 2, w.end());
  return d;
}

dnnl::memory::format_tag plain_conv_weights_tag(size_t spatial, bool grouped) {
  using tag = dnnl::memory::format_tag;
  static const tag w[] = {tag::oiw, tag::oihw, tag::oidhw};
  static const tag gw[] = {tag::goiw, tag::goihw, tag::goidhw};
  return grouped ? gw[spatial - 1] : w[spatial - 1];
}

dnnl::memory::format_tag channels_last_tag(size_t spatial) {
  using tag = dnnl::memory::format_tag;
  return spatial == 1 ? tag::nwc : spatial == 2 ? tag::nhwc : tag::ndhwc;
}

ConvGeometry conv_geometry(const ir::Node& n, const Shape& x, const Shape& w, const Shape& y) {
  const size_t sp = x.size() - 2;
  ConvGeometry g;
  // (asked several times for each convolution of every new shape's graph: attributes read in place)
  const std::vector<int64_t>* strides_attr = n.find_ints("strides");
  const std::vector<int64_t>* dil_attr = n.find_ints("dilations");
  const std::vector<int64_t>* pads_attr = n.find_ints("pads");
  const std::string* auto_pad_attr = n.find_string("auto_pad");
  const std::string auto_pad = auto_pad_attr ? *auto_pad_attr : "NOTSET";
  auto at = [](const std::vector<int64_t>* v, size_t i, int64_t def) { return v && i < v->size() ? (*v)[i] : def; };
  g.strides.resize(sp);
  for (size_t i = 0; i < sp; ++i) g.strides[i] = at(strides_attr, i, 1);
  const auto& strides = g.strides;
  g.kernel.assign(w.begin() + 2, w.end());
  g.dilations.resize(sp);
  g.pad_l.assign(sp, 0);
  g.pad_r.assign(sp, 0);
  for (size_t i = 0; i < sp; ++i) {
    const int64_t dil = at(dil_attr, i, 1);
    g.dilations[i] = dil - 1;
    const int64_t eff = (g.kernel[i] - 1) * dil + 1;
    if (auto_pad == "NOTSET") {
      g.pad_l[i] = at(pads_attr, i, 0);
    } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      const int64_t total = std::max<int64_t>(0, (y[2 + i] - 1) * strides[i] + eff - x[2 + i]);
      const int64_t small = total / 2, big = total - small;
      g.pad_l[i] = auto_pad == "SAME_UPPER" ? small : big;
    }
    // oneDNN wants the right padding that reproduces the output size exactly
    g.pad_r[i] = (y[2 + i] - 1) * strides[i] + eff - x[2 + i] - g.pad_l[i];
  }
  return g;
}

}  // namespace kiln::cpu
