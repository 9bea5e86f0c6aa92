#include "cpu/node.hpp"

#include <cstring>

#include "core/strings.hpp"
#include "cpu/dnnl_util.hpp"

namespace kiln::cpu {

size_t Edge::bytes() const {
  if (blocked) return blocked->get_size();
  return static_cast<size_t>(shape_size(shape)) * dtype_size(dtype);
}

int64_t Edge::image_stride() const {
  if (blocked) return blocked->data.format_desc.blocking.strides[0];
  int64_t n = 1;
  for (size_t i = 1; i < shape.size(); ++i) n *= shape[i];
  return n;
}

void Edge::set_layout(const dnnl::memory::desc& d) {
  if (is_plain_layout(d, shape, dtype)) blocked.reset();
  else blocked = d;
}

dnnl::memory::desc Edge::desc() const {
  if (blocked) return *blocked;
  auto d = plain_desc(shape, dtype);
  KILN_CHECK(d.has_value(), cat("tensor '", name, "' (", dtype_name(dtype), shape_to_string(shape),
                                ") has no oneDNN descriptor"));
  return *d;
}

dnnl::memory Edge::memory() const {
  if (!bound_ && data) bound_ = dnnl::memory(desc(), cpu_engine(), data);  // the first use (see bind_memory)
  if (bound_ && bound_->get_data_handle() == data) return *bound_;
  return dnnl::memory(desc(), cpu_engine(), data);
}

void Edge::bind_memory() {
  // made by the first memory() call: only the edges a primitive reads or writes through
  // memory() get one (nodes on kiln's kernels use `data`), and a plan costs less to build
  bound_.reset();
}

Tensor Edge::tensor() const {
  KILN_CHECK(is_plain(), cat("tensor '", name, "' is in a blocked layout, not viewable as a plain tensor"));
  if (kind == Kind::constant) return constant;
  static char no_data;  // zero-size tensors need a non-null pointer
  return Tensor::wrap(dtype, shape, data ? data : &no_data);
}

std::string Edge::layout_name() const {
  if (!blocked) return "plain";
  // oneDNN 2.6 has no public tag query; describe the blocking from the descriptor
  const dnnl_memory_desc_t& c = blocked->data;
  if (c.format_kind != dnnl_blocked) return "opaque";
  std::string s = "blocked(";
  for (int i = 0; i < c.format_desc.blocking.inner_nblks; ++i)
    s += cat(i ? "," : "", c.format_desc.blocking.inner_blks[i], "@dim", c.format_desc.blocking.inner_idxs[i]);
  return s + ")";
}

void start_from_summand(dnnl::stream& stream, const Edge& summand, Edge& out) {
  if (summand.data == out.data) return;  // planned in place
  stream.wait();
  std::memcpy(out.data, summand.data, out.bytes());
}

std::optional<dnnl::memory::desc> elementwise_layout(const Edge& x, dnnl_data_type_t dt, Edge& out) {
  if (x.is_plain() || has_padding(*x.blocked)) return std::nullopt;
  dnnl_memory_desc_t d = x.blocked->data;
  d.data_type = dt;
  const dnnl::memory::desc md(d);
  out.set_layout(md);
  return md;
}

// Read off the descriptor rather than compared with a plain one made for the purpose (a
// descriptor is 700 bytes to fill in: 5% of an EfficientNet-B0 plan's instructions, for the
// layouts of its nodes' outputs). Plain: oneDNN's blocked format without inner blocks or
// padding, at offset 0, no extra flags, the dims and data type given, and dense row-major
// strides wherever a dim is not 1 (oneDNN's equality does not compare those either).
bool is_plain_layout(const dnnl::memory::desc& d, const Shape& shape, DType dtype) {
  const std::optional<dnnl::memory::data_type> dt = dnnl_type(dtype);
  const dnnl_memory_desc_t& m = d.data;
  if (!dt || shape.empty() || m.ndims != static_cast<int>(shape.size()) || m.format_kind != dnnl_blocked ||
      m.data_type != static_cast<dnnl_data_type_t>(*dt) || m.offset0 != 0 || m.extra.flags != 0 ||
      m.format_desc.blocking.inner_nblks != 0)
    return false;
  for (int64_t n : shape)
    if (n == 0) {  // an empty tensor: as oneDNN compares such descriptors
      const std::optional<dnnl::memory::desc> p = plain_desc(shape, dtype);
      return p && *p == d;
    }
  dnnl_dim_t stride = 1;
  for (int i = m.ndims; i-- > 0;) {
    const int64_t n = shape[static_cast<size_t>(i)];
    if (m.dims[i] != n || m.padded_dims[i] != n || m.padded_offsets[i] != 0) return false;
    if (n != 1 && m.format_desc.blocking.strides[i] != stride) return false;
    stride *= n;
  }
  return true;
}

}  // namespace kiln::cpu
