#include "cpu/nodes/rnn_forms.hpp"

#include <cctype>

namespace kiln::cpu {

int64_t rnn_directions(const ir::Node& n) { return n.attr_s("direction", "forward") == "bidirectional" ? 2 : 1; }

namespace {

// The constant tensor of input i, or null when absent or not a constant.
const Tensor* rnn_constant_input(const ir::Node& n, size_t i) {
  const ir::Value* v = i < n.num_inputs() ? n.input(i) : nullptr;
  return v && v->is_constant() ? &v->constant() : nullptr;
}

}  // namespace

bool rnn_default_activations(const ir::Node& n, const std::vector<std::string>& defaults) {
  if (!n.has_attr("activations")) return true;
  const std::vector<std::string> acts = n.attr_strings("activations");
  for (size_t i = 0; i < acts.size(); ++i) {
    std::string low;
    for (char c : acts[i]) low += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (low != defaults[i % defaults.size()]) return false;
  }
  return true;
}

bool rnn_full_length(const ir::Node& n, int64_t T) {
  if (n.num_inputs() <= 4 || !n.input(4)) return true;
  const Tensor* L = rnn_constant_input(n, 4);
  if (!L) return false;
  for (int64_t v : L->to_i64())
    if (v != T) return false;
  return true;
}

std::optional<RnnSizes> rnn_f32_sizes(const ir::Node& n, int64_t gates) {
  if (!n.is_onnx_domain() || n.num_inputs() < 3) return std::nullopt;
  const ir::Value* x = n.input(0);
  if (!x || x->type.dtype != DType::f32 || !x->type.shape.is_static() || x->type.shape.rank() != 3) return std::nullopt;
  const Shape xs = x->type.shape.to_shape();
  if (xs[0] < 1 || xs[1] < 1 || xs[2] < 1) return std::nullopt;
  RnnSizes r{xs[0], xs[1], xs[2], 0, rnn_directions(n)};
  const Tensor *W = rnn_constant_input(n, 1), *R = rnn_constant_input(n, 2);
  if (!W || !R || W->dtype() != DType::f32 || R->dtype() != DType::f32 || W->rank() != 3 || R->rank() != 3)
    return std::nullopt;
  r.H = R->shape()[2];
  if (r.H < 1 || W->shape() != Shape{r.D, gates * r.H, r.C} || R->shape() != Shape{r.D, gates * r.H, r.H})
    return std::nullopt;
  if (n.has_attr("hidden_size") && n.attr_i("hidden_size") != r.H) return std::nullopt;
  if (n.attr_i("layout", 0) != 0 || n.has_attr("clip")) return std::nullopt;
  return r;
}

bool rnn_optional_f32(const ir::Node& n, size_t i, const Shape& want, bool constant) {
  const ir::Value* v = i < n.num_inputs() ? n.input(i) : nullptr;
  if (!v) return true;
  if (constant) return v->is_constant() && v->constant().dtype() == DType::f32 && v->constant().shape() == want;
  return v->type.dtype == DType::f32 && v->type.shape.is_static() && v->type.shape.to_shape() == want;
}

bool rnn_f32_outputs(const ir::Node& n) {
  for (const ir::Value* o : n.outputs())
    if (o && o->type.dtype != DType::f32) return false;
  return true;
}

}  // namespace kiln::cpu
