// TfIdfVectorizer (opset 9) over integer tokens (kiln has no string tensors, so
// pool_strings is rejected). Counting follows onnxruntime: for each skip distance,
// every start position gathers n-grams of length min..max; unigrams count only once.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "ir/infer_util.hpp"
#include "ops/kernel_util.hpp"
#include "ops/op_families.hpp"

namespace kiln::ops {

namespace {

struct TfIdfConfig {
  int64_t min_n = 1, max_n = 1, max_skip = 0;
  std::string mode;
  std::vector<int64_t> out_index;  // per n-gram (pool order)
  std::vector<float> weights;
  int64_t out_dim = 0;
  std::vector<std::map<std::vector<int64_t>, int64_t>> grams;  // [n-1]: n-gram -> n-gram id
};

TfIdfConfig parse_tfidf(const ir::Node& n) {
  TfIdfConfig c;
  auto fail = [&](const std::string& m) { return Error(cat(n.describe(), ": ", m)); };
  c.min_n = n.attr_i("min_gram_length");
  c.max_n = n.attr_i("max_gram_length");
  c.max_skip = n.attr_i("max_skip_count");
  c.mode = n.attr_s("mode");
  if (c.mode != "TF" && c.mode != "IDF" && c.mode != "TFIDF")
    throw fail(cat("attribute 'mode' must be TF, IDF or TFIDF, got '", c.mode, "'"));
  if (c.min_n < 1 || c.max_n < c.min_n)
    throw fail(cat("need 1 <= min_gram_length <= max_gram_length, got ", c.min_n, " and ", c.max_n));
  if (c.max_skip < 0) throw fail(cat("max_skip_count must be >= 0, got ", c.max_skip));
  if (n.has_attr("pool_strings")) throw fail("string pools (pool_strings) are not supported: kiln has no string tensors");
  if (!n.has_attr("pool_int64s")) throw fail("attribute 'pool_int64s' is required");
  const std::vector<int64_t> pool = n.attr_ints("pool_int64s");
  const std::vector<int64_t> counts = n.attr_ints("ngram_counts");
  c.out_index = n.attr_ints("ngram_indexes");
  c.weights = n.attr_floats("weights", {});
  // ngram_counts[k] is where the (k+1)-grams start in the pool
  int64_t id = 0;
  c.grams.resize(counts.size());
  for (size_t k = 0; k < counts.size(); ++k) {
    const int64_t begin = counts[k];
    const int64_t end = k + 1 < counts.size() ? counts[k + 1] : static_cast<int64_t>(pool.size());
    const int64_t len = static_cast<int64_t>(k) + 1;
    if (begin < 0 || end < begin || end > static_cast<int64_t>(pool.size()) || (end - begin) % len != 0)
      throw fail(cat("ngram_counts ", join(counts), " do not describe pool_int64s of ", pool.size(), " values"));
    for (int64_t p = begin; p < end; p += len) {
      c.grams[k].emplace(std::vector<int64_t>(pool.begin() + p, pool.begin() + p + len), id);
      ++id;
    }
  }
  if (static_cast<int64_t>(c.out_index.size()) != id)
    throw fail(cat("ngram_indexes has ", c.out_index.size(), " entries but the pool holds ", id, " n-grams"));
  for (int64_t v : c.out_index) {
    if (v < 0) throw fail(cat("ngram_indexes has a negative entry ", v));
    c.out_dim = std::max(c.out_dim, v + 1);
  }
  if (!c.weights.empty() && static_cast<int64_t>(c.weights.size()) < c.out_dim)
    throw fail(cat("weights has ", c.weights.size(), " entries, need ", c.out_dim));
  return c;
}

}  // namespace

void register_misc_tfidf_ops(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "TfIdfVectorizer";
  s.since_version = 9;
  s.attrs = {{"max_gram_length", ir::AttrType::i, true}, {"max_skip_count", ir::AttrType::i, true},
             {"min_gram_length", ir::AttrType::i, true}, {"mode", ir::AttrType::s, true},
             {"ngram_counts", ir::AttrType::ints, true}, {"ngram_indexes", ir::AttrType::ints, true},
             {"pool_int64s", ir::AttrType::ints}, {"pool_strings", ir::AttrType::strings},
             {"weights", ir::AttrType::floats}};
  s.validate = [](const ir::Node& n) { parse_tfidf(n); };
  s.infer = [](ir::InferContext& ctx) {
    const TfIdfConfig c = parse_tfidf(ctx.node());
    const auto& xs = ctx.input_shape(0);
    if (!xs.rank_known) {
      ctx.set_output(0, DType::f32, ir::PartialShape::unknown_rank());
      return;
    }
    if (xs.rank() == 1) {
      ctx.set_output(0, DType::f32, ir::PartialShape(std::vector<ir::Dim>{c.out_dim}));
    } else if (xs.rank() == 2) {
      ctx.set_output(0, DType::f32, ir::PartialShape({xs.dims[0], c.out_dim}));
    } else {
      throw ctx.error("input must be 1-D [C] or 2-D [N, C], got ", xs.to_string());
    }
  };
  s.run = [](RunContext& ctx) {
    const TfIdfConfig c = parse_tfidf(ctx.node());
    const Tensor& X = ctx.input(0);
    if (X.dtype() != DType::i32 && X.dtype() != DType::i64)
      throw ctx.error("input must be int32 or int64, got ", dtype_name(X.dtype()));
    if (X.rank() != 1 && X.rank() != 2)
      throw ctx.error("input must be 1-D [C] or 2-D [N, C], got ", shape_to_string(X.shape()));
    const int64_t rows = X.rank() == 2 ? X.shape()[0] : 1;
    const int64_t C = X.shape().back();
    const std::vector<int64_t> x = X.to_i64();
    std::vector<double> counts(static_cast<size_t>(rows * c.out_dim), 0.0);
    const int64_t max_n = std::min<int64_t>(c.max_n, static_cast<int64_t>(c.grams.size()));
    std::vector<int64_t> gram;
    for (int64_t row = 0; row < rows; ++row) {
      const int64_t* items = x.data() + row * C;
      double* out = counts.data() + row * c.out_dim;
      int64_t start_n = c.min_n;
      for (int64_t skip = 1; skip <= c.max_skip + 1 && start_n <= max_n; ++skip) {
        for (int64_t s0 = 0; s0 < C; ++s0) {
          gram.clear();
          for (int64_t n = 1; n <= max_n; ++n) {
            const int64_t pos = s0 + (n - 1) * skip;
            if (pos >= C) break;
            gram.push_back(items[pos]);
            if (n < start_n) continue;
            const auto& table = c.grams[static_cast<size_t>(n - 1)];
            auto it = table.find(gram);
            if (it != table.end()) out[c.out_index[static_cast<size_t>(it->second)]] += 1;
          }
        }
        if (start_n == 1) ++start_n;  // unigrams do not depend on the skip: count them once
      }
    }
    for (int64_t i = 0; i < rows * c.out_dim; ++i) {
      double& v = counts[static_cast<size_t>(i)];
      const double w = c.weights.empty() ? 1.0 : c.weights[static_cast<size_t>(i % c.out_dim)];
      if (c.mode == "IDF") v = v > 0 ? w : 0.0;
      else if (c.mode == "TFIDF") v = v * w;
    }
    Tensor& y = ctx.allocate_output(0, DType::f32, X.rank() == 2 ? Shape{rows, c.out_dim} : Shape{c.out_dim});
    float* py = y.data<float>();
    for (size_t i = 0; i < counts.size(); ++i) py[i] = static_cast<float>(counts[i]);
  };
  r.add(std::move(s));
}

}  // namespace kiln::ops
