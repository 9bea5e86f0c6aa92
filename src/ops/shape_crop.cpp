// Shape ops of opset 18: CenterCropPad (crop or zero-pad each listed axis around its centre)
// and Col2Im (the inverse of im2col: sums sliding blocks back into an image).
#include <algorithm>
#include <cstring>

#include "ops/shape_common.hpp"

namespace kiln::ops::shape_detail {

namespace {

using ir::Dim;
using ir::PartialShape;

// The listed axes (attribute `axes`, all by default), normalised, no repeats.
std::vector<int64_t> listed_axes(const ir::Node& n, int64_t rank, size_t count) {
  std::vector<int64_t> axes;
  if (!n.has_attr("axes")) {
    KILN_CHECK(static_cast<int64_t>(count) == rank,
               cat(n.describe(), ": shape has ", count, " entries for an input of rank ", rank, " (no axes given)"));
    for (int64_t a = 0; a < rank; ++a) axes.push_back(a);
    return axes;
  }
  for (int64_t a : n.attr_ints("axes")) {
    const int64_t k = ir::normalize_axis(a, rank, n);
    KILN_CHECK(std::find(axes.begin(), axes.end(), k) == axes.end(), cat(n.describe(), ": axis ", a, " is repeated"));
    axes.push_back(k);
  }
  KILN_CHECK(axes.size() == count,
             cat(n.describe(), ": shape has ", count, " entries for ", axes.size(), " axes"));
  return axes;
}

// CenterCropPad: output dim = the given size along each listed axis. A larger input is
// cropped to a centred window starting at (in - size) / 2; a smaller one is padded with zeros,
// (size - in) / 2 before it (integer division: the extra element goes after).
void add_center_crop_pad(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "CenterCropPad";
  s.since_version = 18;
  s.max_version = 18;
  s.min_inputs = s.max_inputs = 2;
  s.attrs = {{"axes", ir::AttrType::ints}};
  s.infer = [](ir::InferContext& ctx) {
    const PartialShape& in = ctx.input_shape(0);
    require_int_dtype(ctx, 1, "CenterCropPad shape");
    std::vector<int64_t> shape;
    if (!in.rank_known) return ctx.set_output(0, ctx.input_dtype(0), PartialShape::unknown_rank());
    if (!const_ints(ctx, 1, shape)) return ctx.set_output(0, ctx.input_dtype(0), unknown_dims(in.rank()));
    const auto axes = listed_axes(ctx.node(), static_cast<int64_t>(in.rank()), shape.size());
    std::vector<Dim> out = in.dims;
    for (size_t i = 0; i < axes.size(); ++i) {
      if (shape[i] < 0) throw ctx.error("shape [", join(shape), "] has a negative entry");
      out[static_cast<size_t>(axes[i])] = Dim(shape[i]);
    }
    ctx.set_output(0, ctx.input_dtype(0), PartialShape(out));
  };
  s.run = [](RunContext& ctx) {
    const Tensor& x = ctx.input(0);
    const std::vector<int64_t> shape = index_values(ctx, 1);
    const int64_t rank = static_cast<int64_t>(x.rank());
    const auto axes = listed_axes(ctx.node(), rank, shape.size());
    Shape out = x.shape();
    std::vector<int64_t> start(static_cast<size_t>(rank), 0);  // source index of output index 0, per dim
    for (size_t i = 0; i < axes.size(); ++i) {
      const size_t a = static_cast<size_t>(axes[i]);
      if (shape[i] < 0) throw ctx.error("shape [", join(shape), "] has a negative entry");
      out[a] = shape[i];
      start[a] = x.shape()[a] >= shape[i] ? (x.shape()[a] - shape[i]) / 2 : -((shape[i] - x.shape()[a]) / 2);
    }
    checked_numel(ctx, out);
    Tensor& y = ctx.allocate_output(0, x.dtype(), out);  // zeroed: the padding
    if (y.size() == 0 || x.size() == 0) return;
    const size_t es = dtype_size(x.dtype());
    // copy row by row along the last dim: the overlap of [start, start + out) and [0, in)
    const size_t last = static_cast<size_t>(rank - 1);
    const int64_t lo = std::max<int64_t>(0, -start[last]), hi = std::min(out[last], x.shape()[last] - start[last]);
    std::vector<int64_t> idx(static_cast<size_t>(rank), 0);  // output index, last dim 0
    const auto* src = static_cast<const unsigned char*>(x.raw());
    auto* dst = static_cast<unsigned char*>(y.raw());
    const int64_t rows = y.size() / out[last];
    for (int64_t row = 0; row < rows; ++row) {
      bool inside = true;
      int64_t s_off = 0;
      for (size_t d = 0; d < last; ++d) {
        const int64_t si = idx[d] + start[d];
        inside = inside && si >= 0 && si < x.shape()[d];
        s_off = s_off * x.shape()[d] + si;
      }
      if (inside && hi > lo)
        std::memcpy(dst + static_cast<size_t>(row * out[last] + lo) * es,
                    src + static_cast<size_t>(s_off * x.shape()[last] + lo + start[last]) * es,
                    static_cast<size_t>(hi - lo) * es);
      for (size_t d = last; d-- > 0;) {
        if (++idx[d] < out[d]) break;
        idx[d] = 0;
      }
    }
  };
  r.add(std::move(s));
}

// Col2Im: input [N, C * prod(block), L] holds the L sliding blocks of an image of shape
// image_shape (after padding); each block element is added to its image position.
void add_col2im(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "Col2Im";
  s.since_version = 18;
  s.max_version = 18;
  s.min_inputs = s.max_inputs = 3;
  s.attrs = {{"dilations", ir::AttrType::ints}, {"pads", ir::AttrType::ints}, {"strides", ir::AttrType::ints}};
  s.infer = [](ir::InferContext& ctx) {
    const PartialShape& in = ctx.input_shape(0);
    std::vector<int64_t> image, block;
    if (in.rank_known && in.rank() != 3) throw ctx.error("input must have rank 3 [N, C * prod(block), L], got ", in.to_string());
    const bool known = const_ints(ctx, 1, image) && const_ints(ctx, 2, block);
    if (!known) {
      const int64_t n = static_length(ctx, 1);
      if (n < 0) return ctx.set_output(0, ctx.input_dtype(0), PartialShape::unknown_rank());
      return ctx.set_output(0, ctx.input_dtype(0), unknown_dims(static_cast<size_t>(n) + 2));
    }
    if (image.size() != block.size() || image.empty())
      throw ctx.error("image_shape [", join(image), "] and block_shape [", join(block), "] must have one entry per spatial dim");
    int64_t kprod = 1;
    for (int64_t b : block) {
      if (b <= 0) throw ctx.error("block_shape [", join(block), "] must be positive");
      kprod *= b;
    }
    std::vector<Dim> out = {in.rank_known ? in.dims[0] : Dim::unknown(), Dim::unknown()};
    if (in.rank_known && in.dims[1].is_static()) {
      if (in.dims[1].value % kprod != 0)
        throw ctx.error("input dim 1 (", in.dims[1].value, ") is not a multiple of prod(block_shape) = ", kprod);
      out[1] = Dim(in.dims[1].value / kprod);
    }
    for (int64_t d : image) out.push_back(Dim(d));
    ctx.set_output(0, ctx.input_dtype(0), PartialShape(out));
  };
  s.run = [](RunContext& ctx) {
    const ir::Node& n = ctx.node();
    const Tensor& x = ctx.input(0);
    if (x.rank() != 3) throw ctx.error("input must have rank 3 [N, C * prod(block), L], got ", shape_to_string(x.shape()));
    const std::vector<int64_t> image = index_values(ctx, 1), block = index_values(ctx, 2);
    const size_t r = image.size();
    if (block.size() != r || r == 0)
      throw ctx.error("image_shape [", join(image), "] and block_shape [", join(block), "] must have one entry per spatial dim");
    auto attr = [&](const char* name, int64_t dflt, size_t count) {
      std::vector<int64_t> v = n.attr_ints(name, std::vector<int64_t>(count, dflt));
      if (v.size() != count) throw ctx.error("attribute '", name, "' has ", v.size(), " values, expected ", count);
      return v;
    };
    const auto dil = attr("dilations", 1, r), str = attr("strides", 1, r), pads = attr("pads", 0, 2 * r);
    int64_t kprod = 1;
    std::vector<int64_t> blocks(r);  // sliding positions per dim
    int64_t L = 1;
    for (size_t i = 0; i < r; ++i) {
      if (block[i] <= 0 || image[i] <= 0 || dil[i] <= 0 || str[i] <= 0 || pads[i] < 0 || pads[i + r] < 0)
        throw ctx.error("image_shape, block_shape, dilations and strides must be positive and pads >= 0");
      kprod *= block[i];
      const int64_t span = dil[i] * (block[i] - 1) + 1;
      const int64_t padded = image[i] + pads[i] + pads[i + r];
      blocks[i] = padded >= span ? (padded - span) / str[i] + 1 : 0;
      L *= blocks[i];
    }
    const int64_t N = x.shape()[0];
    if (x.shape()[1] % kprod != 0)
      throw ctx.error("input dim 1 (", x.shape()[1], ") is not a multiple of prod(block_shape) = ", kprod);
    const int64_t C = x.shape()[1] / kprod;
    if (x.shape()[2] != L)
      throw ctx.error("input dim 2 (", x.shape()[2], ") must be the number of sliding blocks, ", L, ", that image_shape [",
                      join(image), "], block_shape, pads, strides and dilations give");
    Shape os = {N, C};
    int64_t isize = 1;
    for (int64_t d : image) {
      os.push_back(d);
      isize *= d;
    }
    checked_numel(ctx, os);
    Tensor& y = ctx.allocate_output(0, x.dtype(), os);
    dispatch_float(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;
      const T* px = x.data<T>();
      T* py = y.data<T>();
      std::vector<int64_t> k(r), b(r);
      for (int64_t nc = 0; nc < N * C; ++nc) {
        T* plane = py + nc * isize;
        for (int64_t ki = 0; ki < kprod; ++ki) {
          // block element index ki -> k (row-major over block), then each sliding position
          for (int64_t t = ki, i = static_cast<int64_t>(r) - 1; i >= 0; --i) {
            k[static_cast<size_t>(i)] = t % block[static_cast<size_t>(i)];
            t /= block[static_cast<size_t>(i)];
          }
          const T* col = px + (nc * kprod + ki) * L;
          for (int64_t l = 0; l < L; ++l) {
            int64_t off = 0;
            bool inside = true;
            for (int64_t t = l, i = static_cast<int64_t>(r) - 1; i >= 0; --i) {
              const size_t u = static_cast<size_t>(i);
              b[u] = t % blocks[u];
              t /= blocks[u];
            }
            for (size_t i = 0; i < r && inside; ++i) {
              const int64_t pos = b[i] * str[i] + k[i] * dil[i] - pads[i];
              inside = pos >= 0 && pos < image[i];
              off = off * image[i] + pos;
            }
            if (inside) plane[off] = static_cast<T>(static_cast<Acc>(plane[off]) + static_cast<Acc>(col[l]));
          }
        }
      }
    }, "Col2Im");
  };
  r.add(std::move(s));
}

}  // namespace

void register_crop_ops(ir::OpRegistry& r) {
  add_center_crop_pad(r);
  add_col2im(r);
}

}  // namespace kiln::ops::shape_detail
