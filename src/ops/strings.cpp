// Ops on string tensors: StringNormalizer (10), RegexFullMatch, StringConcat, StringSplit (20),
// and Equal on strings (19, wrapped around the numeric Equal of elementwise_binary.cpp).
// Models holding strings run on the reference executor (cpu::Executor falls back).
#include <algorithm>
#include <cctype>
#include <re2/re2.h>

#include <memory>
#include <set>

#include "ir/infer_util.hpp"
#include "ops/kernel_util.hpp"
#include "ops/op_families.hpp"

namespace kiln::ops {

namespace {

using ir::PartialShape;

void require_strings(const ir::InferContext& ctx, size_t i) {
  const DType t = ctx.input_dtype(i);
  if (t != DType::undefined && t != DType::string) throw ctx.error("input ", i, " must be a string tensor, got ", dtype_name(t));
}

void require_strings(const RunContext& ctx, size_t i) {
  if (ctx.input(i).dtype() != DType::string)
    throw ctx.error("input ", i, " must be a string tensor, got ", dtype_name(ctx.input(i).dtype()));
}

// out[i] = fn(a, b) over two string tensors with numpy broadcasting (StringConcat, Equal).
template <class Out, class Fn>
void string_binary(RunContext& ctx, DType out_dtype, Fn fn) {
  require_strings(ctx, 0);
  require_strings(ctx, 1);
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  const Shape out = broadcast_shape({a.shape(), b.shape()}, ctx.node());
  Tensor& y = ctx.allocate_output(0, out_dtype, out);
  const std::string *pa = a.data<std::string>(), *pb = b.data<std::string>();
  Out* py = y.data<Out>();
  for_each_broadcast<2>(out, {a.shape(), b.shape()},
                        [&](int64_t i, const std::array<int64_t, 2>& off) { py[i] = fn(pa[off[0]], pb[off[1]]); });
}

std::string change_case(std::string s, int how) {  // how: -1 lower, 1 upper (ASCII)
  for (char& c : s)
    c = static_cast<char>(how < 0 ? std::tolower(static_cast<unsigned char>(c)) : std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// StringNormalizer: drops the stopwords (case-sensitively or not), then changes the case of the
// rest. X is [C] or [1, C]; when every string is dropped the output is one empty string.
void register_string_normalizer(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "StringNormalizer";
  s.since_version = 10;
  s.attrs = {{"case_change_action", ir::AttrType::s},
             {"is_case_sensitive", ir::AttrType::i},
             {"locale", ir::AttrType::s},
             {"stopwords", ir::AttrType::strings}};
  s.validate = [](const ir::Node& n) {
    const std::string a = n.attr_s("case_change_action", "NONE");
    KILN_CHECK(a == "NONE" || a == "LOWER" || a == "UPPER",
               cat(n.describe(), ": case_change_action must be NONE, LOWER or UPPER, got '", a, "'"));
  };
  s.infer = [](ir::InferContext& ctx) {
    require_strings(ctx, 0);
    const PartialShape& in = ctx.input_shape(0);
    if (in.rank_known && in.rank() != 1 && !(in.rank() == 2 && in.dims[0].is_static() && in.dims[0].value == 1))
      throw ctx.error("X must be [C] or [1, C], got ", in.to_string());
    // how many strings survive depends on the data
    ctx.set_output(0, DType::string,
                   in.rank_known ? PartialShape(std::vector<ir::Dim>(in.rank() == 2 ? std::vector<ir::Dim>{1, ir::Dim::unknown()}
                                                                                    : std::vector<ir::Dim>{ir::Dim::unknown()}))
                                 : PartialShape::unknown_rank());
  };
  s.run = [](RunContext& ctx) {
    require_strings(ctx, 0);
    const ir::Node& n = ctx.node();
    const Tensor& x = ctx.input(0);
    if (x.rank() != 1 && !(x.rank() == 2 && x.shape()[0] == 1))
      throw ctx.error("X must be [C] or [1, C], got ", shape_to_string(x.shape()));
    const bool sensitive = n.attr_i("is_case_sensitive", 0) != 0;
    const std::string action = n.attr_s("case_change_action", "NONE");
    std::set<std::string> stop;
    if (n.has_attr("stopwords"))
      for (const std::string& w : n.attr_strings("stopwords")) stop.insert(sensitive ? w : change_case(w, -1));
    std::vector<std::string> kept;
    const std::string* px = x.data<std::string>();
    for (int64_t i = 0; i < x.size(); ++i) {
      if (stop.count(sensitive ? px[i] : change_case(px[i], -1))) continue;
      kept.push_back(action == "LOWER" ? change_case(px[i], -1) : action == "UPPER" ? change_case(px[i], 1) : px[i]);
    }
    if (kept.empty()) kept.emplace_back();
    const int64_t c = static_cast<int64_t>(kept.size());
    Tensor& y = ctx.allocate_output(0, DType::string, x.rank() == 2 ? Shape{1, c} : Shape{c});
    std::copy(kept.begin(), kept.end(), y.data<std::string>());
  };
  r.add(std::move(s));
}

// RegexFullMatch: whether each string matches the whole pattern, in RE2 syntax as ONNX
// specifies. RE2 matches in time linear in the input, whatever the pattern.
namespace {
std::unique_ptr<re2::RE2> compile_pattern(const ir::Node& n) {
  re2::RE2::Options opt;
  opt.set_log_errors(false);
  auto re = std::make_unique<re2::RE2>(n.attr_s("pattern"), opt);
  if (!re->ok())
    throw Error(cat(n.describe(), ": pattern '", n.attr_s("pattern"), "' is not a valid RE2 regular expression (",
                    re->error(), ")"));
  return re;
}
}  // namespace

void register_regex_full_match(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "RegexFullMatch";
  s.since_version = 20;
  s.max_version = 20;
  s.attrs = {{"pattern", ir::AttrType::s, true}};
  s.validate = [](const ir::Node& n) { compile_pattern(n); };
  s.infer = [](ir::InferContext& ctx) {
    require_strings(ctx, 0);
    ctx.set_output(0, DType::boolean, ctx.input_shape(0));
  };
  s.run = [](RunContext& ctx) {
    require_strings(ctx, 0);
    const Tensor& x = ctx.input(0);
    const auto re = compile_pattern(ctx.node());
    Tensor& y = ctx.allocate_output(0, DType::boolean, x.shape());
    const std::string* px = x.data<std::string>();
    bool* py = y.data<bool>();
    for (int64_t i = 0; i < x.size(); ++i) py[i] = re2::RE2::FullMatch(px[i], *re);
  };
  r.add(std::move(s));
}

// StringConcat: elementwise a + b with numpy broadcasting.
void register_string_concat(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "StringConcat";
  s.since_version = 20;
  s.max_version = 20;
  s.min_inputs = s.max_inputs = 2;
  s.infer = [](ir::InferContext& ctx) {
    require_strings(ctx, 0);
    require_strings(ctx, 1);
    ctx.set_output(0, DType::string, ir::broadcast_shapes({ctx.input_shape(0), ctx.input_shape(1)}, ctx.node()));
  };
  s.run = [](RunContext& ctx) {
    string_binary<std::string>(ctx, DType::string, [](const std::string& a, const std::string& b) { return a + b; });
  };
  r.add(std::move(s));
}

// Python's str.split: on `delimiter` (each occurrence), or without one on runs of whitespace
// with the ends ignored; at most `maxsplit` splits (negative: all). An empty string has no pieces.
std::vector<std::string> split_string(const std::string& s, const std::string& delim, int64_t maxsplit) {
  std::vector<std::string> out;
  if (s.empty()) return out;  // no pieces at all (ONNX Runtime; Python would give one empty one)
  if (delim.empty()) {
    size_t i = 0;
    while (true) {
      while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
      if (i >= s.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
        size_t e = s.size();
        while (e > i && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
        out.push_back(s.substr(i, e - i));
        break;
      }
      size_t j = i;
      while (j < s.size() && !std::isspace(static_cast<unsigned char>(s[j]))) ++j;
      out.push_back(s.substr(i, j - i));
      i = j;
    }
    return out;
  }
  size_t start = 0;
  while (true) {
    const size_t at = s.find(delim, start);
    if (at == std::string::npos || (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit)) {
      out.push_back(s.substr(start));
      break;
    }
    out.push_back(s.substr(start, at - start));
    start = at + delim.size();
  }
  return out;
}

// StringSplit: Y [..., max pieces] (missing pieces are empty strings), Z [...] the pieces of each.
void register_string_split(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "StringSplit";
  s.since_version = 20;
  s.max_version = 20;
  s.min_outputs = s.max_outputs = 2;
  s.attrs = {{"delimiter", ir::AttrType::s}, {"maxsplit", ir::AttrType::i}};
  s.infer = [](ir::InferContext& ctx) {
    require_strings(ctx, 0);
    const PartialShape& in = ctx.input_shape(0);
    PartialShape y = in;
    if (y.rank_known) y.dims.push_back(ir::Dim::unknown());
    ctx.set_output(0, DType::string, y);
    ctx.set_output(1, DType::i64, in);
  };
  s.run = [](RunContext& ctx) {
    require_strings(ctx, 0);
    const Tensor& x = ctx.input(0);
    const std::string delim = ctx.node().attr_s("delimiter", "");
    const int64_t maxsplit = ctx.node().has_attr("maxsplit") ? ctx.node().attr_i("maxsplit") : -1;
    std::vector<std::vector<std::string>> parts(static_cast<size_t>(x.size()));
    int64_t width = 0;
    for (int64_t i = 0; i < x.size(); ++i) {
      parts[static_cast<size_t>(i)] = split_string(x.data<std::string>()[i], delim, maxsplit);
      width = std::max<int64_t>(width, static_cast<int64_t>(parts[static_cast<size_t>(i)].size()));
    }
    Shape ys = x.shape();
    ys.push_back(width);
    Tensor& y = ctx.allocate_output(0, DType::string, ys);
    Tensor& z = ctx.allocate_output(1, DType::i64, x.shape());
    for (int64_t i = 0; i < x.size(); ++i) {
      const auto& p = parts[static_cast<size_t>(i)];
      std::copy(p.begin(), p.end(), y.data<std::string>() + i * width);
      z.data<int64_t>()[i] = static_cast<int64_t>(p.size());
    }
  };
  r.add(std::move(s));
}

// Equal on strings (opset 19): the numeric schema with a string path in front of it.
void extend_equal_to_strings(ir::OpRegistry& r) {
  ir::OpSchema s = *r.find("", "Equal");
  auto numeric_infer = s.infer;
  auto numeric_run = s.run;
  s.infer = [numeric_infer](ir::InferContext& ctx) {
    if (ctx.input_dtype(0) != DType::string && ctx.input_dtype(1) != DType::string) return numeric_infer(ctx);
    require_strings(ctx, 0);
    require_strings(ctx, 1);
    ctx.set_output(0, DType::boolean, ir::broadcast_shapes({ctx.input_shape(0), ctx.input_shape(1)}, ctx.node()));
  };
  s.run = [numeric_run](RunContext& ctx) {
    if (ctx.input(0).dtype() != DType::string && ctx.input(1).dtype() != DType::string) return numeric_run(ctx);
    string_binary<bool>(ctx, DType::boolean, [](const std::string& a, const std::string& b) { return a == b; });
  };
  r.add(std::move(s));
}

}  // namespace

void register_string_ops(ir::OpRegistry& r) {
  register_string_normalizer(r);
  register_regex_full_match(r);
  register_string_concat(r);
  register_string_split(r);
  extend_equal_to_strings(r);
}

}  // namespace kiln::ops
