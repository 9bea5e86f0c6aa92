#include "transforms/fold_as_view.hpp"

namespace kiln::transforms {

std::optional<Tensor> fold_as_view(const ir::Node& n, const std::vector<const Tensor*>& inputs) {
  if (n.op_type() != "Gather" || !n.is_onnx_domain() || inputs.size() != 2 || !inputs[0] || !inputs[1])
    return std::nullopt;
  const Tensor& data = *inputs[0];
  const Tensor& indices = *inputs[1];
  if (!data.is_tensor() || !indices.is_tensor() || data.dtype() == DType::string || data.rank() == 0 ||
      (indices.dtype() != DType::i64 && indices.dtype() != DType::i32) || indices.size() == 0)
    return std::nullopt;  // the kernel says what is wrong with other inputs
  const int64_t rank = static_cast<int64_t>(data.rank());
  int64_t axis = n.attr_i("axis", 0);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return std::nullopt;
  for (int64_t d = 0; d < axis; ++d)
    if (data.shape()[static_cast<size_t>(d)] != 1) return std::nullopt;  // rows of each outer slice: not adjacent
  const int64_t extent = data.shape()[static_cast<size_t>(axis)];
  const std::vector<int64_t> idx = indices.to_i64();
  int64_t first = idx[0] < 0 ? idx[0] + extent : idx[0];
  for (size_t i = 0; i < idx.size(); ++i) {
    const int64_t k = idx[i] < 0 ? idx[i] + extent : idx[i];
    if (k != first + static_cast<int64_t>(i) || k < 0 || k >= extent) return std::nullopt;
  }
  // output: data.shape[:axis] + indices.shape + data.shape[axis + 1:]
  Shape out(data.shape().begin(), data.shape().begin() + axis);
  out.insert(out.end(), indices.shape().begin(), indices.shape().end());
  out.insert(out.end(), data.shape().begin() + axis + 1, data.shape().end());
  int64_t row = 1;
  for (int64_t d = axis + 1; d < rank; ++d) row *= data.shape()[static_cast<size_t>(d)];
  return data.subrange(first * row, std::move(out));
}

}  // namespace kiln::transforms
