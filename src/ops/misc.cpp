#include <cmath>
#include <limits>

#include "ir/infer_util.hpp"
#include "ops/kernel_util.hpp"
#include "ops/op_families.hpp"

namespace kiln::ops {

// Sub-families of "misc", each in its own file.
void register_misc_rnn_ops(ir::OpRegistry& r);     // misc_rnn.cpp: RNN, GRU, LSTM
void register_misc_vision_ops(ir::OpRegistry& r);  // misc_vision.cpp: NonMaxSuppression, RoiAlign, GridSample
void register_misc_signal_ops(ir::OpRegistry& r);  // misc_signal.cpp: windows, DFT, STFT, MelWeightMatrix
void register_misc_random_ops(ir::OpRegistry& r);  // misc_random.cpp: Bernoulli, Multinomial, RandomNormal/Uniform(+Like)
void register_max_roi_pool(ir::OpRegistry& r);      // misc_roi_pool.cpp: MaxRoiPool
void register_misc_tfidf_ops(ir::OpRegistry& r);   // misc_tfidf.cpp: TfIdfVectorizer (integer tokens)

// Stores double values into a tensor of any dtype (integers round to nearest, bool is v != 0).
void misc_store_f64(Tensor& t, const std::vector<double>& v, const char* what) {
  if (static_cast<int64_t>(v.size()) != t.size())
    throw Error(cat(what, ": internal size mismatch storing ", v.size(), " values into ", shape_to_string(t.shape())));
  dispatch_all(t.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = t.data<T>();
    for (size_t i = 0; i < v.size(); ++i) {
      if constexpr (std::is_same_v<T, bool>) {
        p[i] = v[i] != 0;
      } else if constexpr (std::is_integral_v<T>) {
        const double r = std::nearbyint(v[i]);
        if (std::isnan(r)) p[i] = T(0);
        else if (r <= static_cast<double>(std::numeric_limits<T>::lowest())) p[i] = std::numeric_limits<T>::lowest();
        else if (r >= static_cast<double>(std::numeric_limits<T>::max())) p[i] = std::numeric_limits<T>::max();
        else p[i] = static_cast<T>(r);
      } else if constexpr (std::is_same_v<T, double>) {
        p[i] = v[i];
      } else {
        p[i] = static_cast<T>(static_cast<float>(v[i]));
      }
    }
  }, what);
}

void register_misc_ops(ir::OpRegistry& r) {
  register_misc_rnn_ops(r);
  register_misc_vision_ops(r);
  register_max_roi_pool(r);
  register_misc_signal_ops(r);
  register_misc_random_ops(r);
  register_misc_tfidf_ops(r);
}

}  // namespace kiln::ops
