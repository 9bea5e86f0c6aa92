// kiln's layer normalisation kernel (cpu/layer_norm_f32.hpp) against a double reference: row
// lengths around the vector widths (8 and 16), with and without the residual and bias, in place,
// at the ISA in use (AVX-512 or AVX2). Below AVX2 the kernel does not run: run() says so.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "cpu/layer_norm_f32.hpp"
#include <kiln/error.hpp>

#include "tensor_test_util.hpp"

namespace test_layer_norm_f32 {

using namespace kiln;
using kiln::test::random_floats;
namespace ln = kiln::cpu::layer_norm_f32;

TEST(LayerNormF32, RowsMatchADoubleReference) {
  if (!ln::available()) {  // below AVX2: an error, never an illegal instruction
    std::vector<float> x(8, 1.0f), y(8);
    EXPECT_THROW(ln::run(x.data(), nullptr, nullptr, x.data(), x.data(), 1, 8, 1e-5f, y.data()), Error);
    return;
  }
  uint32_t seed = 1;
  for (int64_t m : {1, 7, 8, 9, 15, 16, 17, 384, 1000})
    for (int64_t rows : {1, 3, 40})
      for (int variant = 0; variant < 4; ++variant) {  // plain, skip, skip + bias, plain in place
        const bool skip = variant == 1 || variant == 2, bias = variant == 2, in_place = variant == 3;
        SCOPED_TRACE(testing::Message() << "m " << m << " rows " << rows << " variant " << variant);
        const size_t n = static_cast<size_t>(rows * m);
        std::vector<float> x = random_floats(n, seed++, 2.0f, 4.0f);  // an offset: the mean matters
        const std::vector<float> s = random_floats(n, seed++, -1.0f, 1.0f), b = random_floats(static_cast<size_t>(m), seed++, -1, 1),
                                 scale = random_floats(static_cast<size_t>(m), seed++, 0.5f, 2.0f),
                                 shift = random_floats(static_cast<size_t>(m), seed++, -1.0f, 1.0f);
        std::vector<double> want(n);
        for (int64_t r = 0; r < rows; ++r) {
          double mean = 0, var = 0;
          std::vector<double> v(static_cast<size_t>(m));
          for (int64_t j = 0; j < m; ++j) {
            v[j] = x[r * m + j] + (skip ? s[r * m + j] : 0.0) + (bias ? b[j] : 0.0);
            mean += v[j];
          }
          mean /= m;
          for (int64_t j = 0; j < m; ++j) var += (v[j] - mean) * (v[j] - mean);
          var /= m;
          for (int64_t j = 0; j < m; ++j) want[r * m + j] = (v[j] - mean) / std::sqrt(var + 1e-5) * scale[j] + shift[j];
        }
        std::vector<float> y(n + 16, 7.0f);  // past the end must stay
        float* dst = in_place ? x.data() : y.data();
        ln::run(x.data(), skip ? s.data() : nullptr, bias ? b.data() : nullptr, scale.data(), shift.data(), rows, m,
                1e-5f, dst);
        for (size_t i = 0; i < n; ++i) ASSERT_NEAR(dst[i], want[i], 2e-5 * (1 + std::fabs(want[i]))) << "at " << i;
        if (!in_place) {
          for (size_t i = n; i < y.size(); ++i) ASSERT_EQ(y[i], 7.0f) << "wrote past the rows";
        }
      }
}

}  // namespace test_layer_norm_f32
