// Einsum: a general, simple implementation.
//
// The equation is resolved into integer labels per input dimension (letters a-z -> 0..25,
// A-Z -> 26..51, the dims covered by "..." -> 52.., right-aligned across inputs as in
// numpy broadcasting). The kernel then walks the full index space of all labels (output
// labels first, summed labels after) with an odometer; each input is addressed through
// per-label strides (a label repeated within one input sums its strides, which is how
// diagonals such as "ii->i" come out). Accumulation is in double for floating types and
// in wrapping uint64 for integers.
#include <algorithm>
#include <array>
#include <type_traits>

#include "ir/infer_util.hpp"
#include "ops/kernel_util.hpp"
#include "ops/op_families.hpp"

namespace kiln::ops {

namespace {

using ir::Dim;
using ir::PartialShape;

constexpr int kEllipsisBase = 52;

struct Term {
  std::vector<int> before;  // letter labels before "..." (all of them if no ellipsis)
  std::vector<int> after;   // letter labels after "..."
  bool ellipsis = false;
};

struct Equation {
  std::vector<Term> inputs;
  Term output;
  bool explicit_output = false;
};

int letter_label(char c) {
  if (c >= 'a' && c <= 'z') return c - 'a';
  if (c >= 'A' && c <= 'Z') return 26 + (c - 'A');
  return -1;
}

Term parse_term(const std::string& t, const ir::Node& n, const std::string& eq) {
  Term term;
  for (size_t i = 0; i < t.size();) {
    if (t[i] == '.') {
      if (t.compare(i, 3, "...") != 0 || term.ellipsis)
        throw Error(cat(n.describe(), ": Einsum equation '", eq, "': malformed ellipsis in term '", t, "'"));
      term.ellipsis = true;
      i += 3;
      continue;
    }
    int l = letter_label(t[i]);
    if (l < 0) throw Error(cat(n.describe(), ": Einsum equation '", eq, "': invalid character '", t[i], "'"));
    (term.ellipsis ? term.after : term.before).push_back(l);
    ++i;
  }
  return term;
}

Equation parse_equation(const std::string& raw, const ir::Node& n) {
  std::string eq;
  for (char c : raw)
    if (c != ' ') eq += c;
  Equation e;
  std::string lhs = eq, rhs;
  size_t arrow = eq.find("->");
  if (arrow != std::string::npos) {
    lhs = eq.substr(0, arrow);
    rhs = eq.substr(arrow + 2);
    e.explicit_output = true;
    if (rhs.find("->") != std::string::npos)
      throw Error(cat(n.describe(), ": Einsum equation '", raw, "' has more than one '->'"));
  }
  size_t start = 0;
  for (;;) {
    size_t comma = lhs.find(',', start);
    e.inputs.push_back(parse_term(lhs.substr(start, comma - start), n, raw));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (e.explicit_output) {
    if (rhs.find(',') != std::string::npos)
      throw Error(cat(n.describe(), ": Einsum equation '", raw, "' has a ',' in its output"));
    e.output = parse_term(rhs, n, raw);
  }
  return e;
}

// Labels of every dimension of every input, and of the output.
struct Resolved {
  std::vector<std::vector<int>> in;
  std::vector<int> out;
  int num_ellipsis = 0;
};

std::string letter_name(int l) {
  if (l < 26) return std::string(1, static_cast<char>('a' + l));
  if (l < kEllipsisBase) return std::string(1, static_cast<char>('A' + l - 26));
  return cat("...[", l - kEllipsisBase, "]");
}

Resolved resolve(const Equation& e, const std::vector<int64_t>& ranks, const ir::Node& n, const std::string& raw) {
  if (e.inputs.size() != ranks.size())
    throw Error(cat(n.describe(), ": Einsum equation '", raw, "' has ", e.inputs.size(), " input terms but the node has ",
                    ranks.size(), " inputs"));
  Resolved r;
  std::vector<int64_t> ell(ranks.size(), 0);
  for (size_t k = 0; k < ranks.size(); ++k) {
    const Term& t = e.inputs[k];
    int64_t letters = static_cast<int64_t>(t.before.size() + t.after.size());
    if (t.ellipsis ? ranks[k] < letters : ranks[k] != letters)
      throw Error(cat(n.describe(), ": Einsum equation '", raw, "': term ", k, " has ", letters,
                      " labels but input ", k, " has rank ", ranks[k]));
    ell[k] = ranks[k] - letters;
    r.num_ellipsis = std::max<int>(r.num_ellipsis, static_cast<int>(ell[k]));
  }
  const int E = r.num_ellipsis;
  std::array<int, kEllipsisBase> count{};
  bool any_ellipsis = false;
  for (size_t k = 0; k < ranks.size(); ++k) {
    const Term& t = e.inputs[k];
    std::vector<int> labels = t.before;
    if (t.ellipsis) {
      any_ellipsis = true;
      for (int64_t i = 0; i < ell[k]; ++i) labels.push_back(kEllipsisBase + E - static_cast<int>(ell[k]) + static_cast<int>(i));
    }
    labels.insert(labels.end(), t.after.begin(), t.after.end());
    for (int l : t.before) ++count[l];
    for (int l : t.after) ++count[l];
    r.in.push_back(std::move(labels));
  }
  if (e.explicit_output) {
    const Term& t = e.output;
    r.out = t.before;
    if (t.ellipsis)
      for (int i = 0; i < E; ++i) r.out.push_back(kEllipsisBase + i);
    r.out.insert(r.out.end(), t.after.begin(), t.after.end());
    std::array<bool, kEllipsisBase> seen{};
    for (int l : t.before) {
      if (count[l] == 0 || seen[l])
        throw Error(cat(n.describe(), ": Einsum equation '", raw, "': output label '", letter_name(l),
                        seen[l] ? "' is repeated" : "' does not appear in any input"));
      seen[l] = true;
    }
    for (int l : t.after) {
      if (count[l] == 0 || seen[l])
        throw Error(cat(n.describe(), ": Einsum equation '", raw, "': output label '", letter_name(l),
                        seen[l] ? "' is repeated" : "' does not appear in any input"));
      seen[l] = true;
    }
  } else {
    if (any_ellipsis)
      for (int i = 0; i < E; ++i) r.out.push_back(kEllipsisBase + i);
    // Labels seen exactly once, in character-code order (uppercase before lowercase).
    for (int l = 26; l < kEllipsisBase; ++l)
      if (count[l] == 1) r.out.push_back(l);
    for (int l = 0; l < 26; ++l)
      if (count[l] == 1) r.out.push_back(l);
  }
  return r;
}

// Size of every label from concrete shapes; ellipsis dims broadcast (size 1 stretches).
std::vector<int64_t> label_sizes(const Resolved& r, const std::vector<const Tensor*>& xs, const RunContext& ctx) {
  std::vector<int64_t> size(static_cast<size_t>(kEllipsisBase + r.num_ellipsis), -1);
  for (size_t k = 0; k < xs.size(); ++k) {
    const Shape& s = xs[k]->shape();
    for (size_t d = 0; d < s.size(); ++d) {
      const int l = r.in[k][d];
      int64_t& cur = size[l];
      if (cur < 0 || cur == s[d]) {
        cur = s[d];
      } else if (l >= kEllipsisBase && (cur == 1 || s[d] == 1)) {
        if (cur == 1) cur = s[d];  // broadcast (a size-1 dim stretches, also to 0)
      } else {
        throw ctx.error("Einsum label '", letter_name(l), "' has inconsistent sizes ", cur, " and ", s[d],
                        " (input ", k, " has shape ", shape_to_string(s), ")");
      }
    }
  }
  for (auto& v : size)
    if (v < 0) v = 1;  // an ellipsis dim no input has (cannot happen) or an unused letter
  return size;
}

template <typename Acc>
void einsum_kernel(const Resolved& r, const std::vector<int64_t>& size, const std::vector<std::vector<Acc>>& xs,
                   const std::vector<Shape>& shapes, std::vector<Acc>& acc) {
  const size_t K = xs.size();
  // Iteration order: output labels, then labels summed over (first appearance order).
  std::vector<int> order = r.out;
  for (auto& labels : r.in)
    for (int l : labels)
      if (std::find(order.begin(), order.end(), l) == order.end()) order.push_back(l);
  const size_t L = order.size();
  // Per-input and output strides for each position of `order`.
  std::vector<std::vector<int64_t>> st(K, std::vector<int64_t>(L, 0));
  for (size_t k = 0; k < K; ++k) {
    auto s = strides_of(shapes[k]);
    for (size_t d = 0; d < shapes[k].size(); ++d) {
      if (shapes[k][d] == 1 && size[r.in[k][d]] != 1) continue;  // broadcast ellipsis dim
      size_t pos = static_cast<size_t>(std::find(order.begin(), order.end(), r.in[k][d]) - order.begin());
      st[k][pos] += s[d];
    }
  }
  std::vector<int64_t> ost(L, 0);
  {
    int64_t stride = 1;
    for (size_t i = r.out.size(); i-- > 0;) {
      ost[i] = stride;
      stride *= size[r.out[i]];
    }
  }
  int64_t total = 1;
  for (int l : order) total *= size[l];
  if (total == 0) return;
  if (L == 0) {
    Acc p = Acc(1);
    for (size_t k = 0; k < K; ++k) p *= xs[k][0];
    acc[0] += p;
    return;
  }
  const int64_t n_inner = size[order[L - 1]];
  const int64_t o_inner = ost[L - 1];
  std::vector<int64_t> in_inner(K);
  for (size_t k = 0; k < K; ++k) in_inner[k] = st[k][L - 1];
  std::vector<int64_t> idx(L, 0), off(K, 0);
  int64_t oo = 0;
  std::vector<Acc> tmp(static_cast<size_t>(n_inner));
  for (;;) {
    // Innermost label as a plain loop.
    {
      const Acc* x0 = xs[0].data() + off[0];
      for (int64_t t = 0; t < n_inner; ++t) tmp[t] = x0[t * in_inner[0]];
      for (size_t k = 1; k < K; ++k) {
        const Acc* xk = xs[k].data() + off[k];
        const int64_t sk = in_inner[k];
        for (int64_t t = 0; t < n_inner; ++t) tmp[t] *= xk[t * sk];
      }
      Acc* o = acc.data() + oo;
      if (o_inner == 0) {
        Acc sum = Acc(0);
        for (int64_t t = 0; t < n_inner; ++t) sum += tmp[t];
        o[0] += sum;
      } else {
        for (int64_t t = 0; t < n_inner; ++t) o[t * o_inner] += tmp[t];
      }
    }
    // Advance the odometer over the outer labels.
    size_t d = L - 1;
    for (;;) {
      if (d == 0) return;
      --d;
      ++idx[d];
      for (size_t k = 0; k < K; ++k) off[k] += st[k][d];
      oo += ost[d];
      if (idx[d] < size[order[d]]) break;
      for (size_t k = 0; k < K; ++k) off[k] -= st[k][d] * idx[d];
      oo -= ost[d] * idx[d];
      idx[d] = 0;
    }
  }
}

}  // namespace

void register_einsum_op(ir::OpRegistry& r) {
  ir::OpSchema s;
  s.name = "Einsum";
  s.since_version = 12;
  s.min_inputs = 1;
  s.max_inputs = 1024;
  s.attrs = {{"equation", ir::AttrType::s, true}};
  s.validate = [](const ir::Node& n) {
    Equation e = parse_equation(n.attr_s("equation"), n);
    if (e.inputs.size() != n.num_inputs())
      throw Error(cat(n.describe(), ": Einsum equation '", n.attr_s("equation"), "' has ", e.inputs.size(),
                      " input terms but the node has ", n.num_inputs(), " inputs"));
  };
  s.infer = [](ir::InferContext& ctx) {
    const auto& n = ctx.node();
    DType dt = ctx.input_dtype(0);
    std::vector<int64_t> ranks;
    for (size_t i = 0; i < ctx.num_inputs(); ++i) {
      if (!ctx.has_input(i)) throw ctx.error("Einsum input ", i, " is missing");
      DType t = ctx.input_dtype(i);
      if (t != DType::undefined && dt != DType::undefined && t != dt)
        throw ctx.error("Einsum inputs have different element types: ", dtype_name(dt), " and ", dtype_name(t));
      const PartialShape& s = ctx.input_shape(i);
      if (!s.rank_known) {
        ctx.set_output(0, dt, PartialShape::unknown_rank());
        return;
      }
      ranks.push_back(static_cast<int64_t>(s.rank()));
    }
    const std::string raw = n.attr_s("equation");
    Resolved r = resolve(parse_equation(raw, n), ranks, n, raw);
    std::vector<Dim> out;
    for (int l : r.out) {
      std::vector<PartialShape> dims;
      for (size_t k = 0; k < r.in.size(); ++k)
        for (size_t d = 0; d < r.in[k].size(); ++d)
          if (r.in[k][d] == l) dims.push_back(PartialShape(std::vector<Dim>{ctx.input_shape(k).dims[d]}));
      PartialShape b = ir::broadcast_shapes(dims, n);
      out.push_back(b.rank() == 1 ? b.dims[0] : Dim(1));
    }
    ctx.set_output(0, dt, PartialShape(out));
  };
  s.run = [](ir::RunContext& ctx) {
    const auto& n = ctx.node();
    std::vector<const Tensor*> xs;
    std::vector<int64_t> ranks;
    std::vector<Shape> shapes;
    for (size_t i = 0; i < ctx.num_inputs(); ++i) {
      xs.push_back(&ctx.input(i));
      ranks.push_back(static_cast<int64_t>(xs.back()->rank()));
      shapes.push_back(xs.back()->shape());
      if (xs.back()->dtype() != xs[0]->dtype())
        throw ctx.error("Einsum inputs have different element types: ", dtype_name(xs[0]->dtype()), " and ",
                        dtype_name(xs.back()->dtype()));
    }
    const std::string raw = n.attr_s("equation");
    Resolved r = resolve(parse_equation(raw, n), ranks, n, raw);
    std::vector<int64_t> size = label_sizes(r, xs, ctx);
    Shape out;
    for (int l : r.out) out.push_back(size[l]);
    Tensor& y = ctx.allocate_output(0, xs[0]->dtype(), out);
    dispatch_numeric(xs[0]->dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      using Acc = std::conditional_t<std::is_integral_v<T>, uint64_t, double>;
      std::vector<std::vector<Acc>> vals(xs.size());
      for (size_t k = 0; k < xs.size(); ++k) {
        const T* p = xs[k]->data<T>();
        vals[k].resize(static_cast<size_t>(xs[k]->size()));
        for (int64_t i = 0; i < xs[k]->size(); ++i) {
          if constexpr (std::is_integral_v<T>)
            vals[k][i] = static_cast<Acc>(p[i]);
          else
            vals[k][i] = static_cast<double>(static_cast<std::conditional_t<std::is_same_v<T, double>, double, float>>(p[i]));
        }
      }
      std::vector<Acc> acc(static_cast<size_t>(y.size()), Acc(0));
      einsum_kernel<Acc>(r, size, vals, shapes, acc);
      T* py = y.data<T>();
      for (int64_t i = 0; i < y.size(); ++i) {
        if constexpr (std::is_integral_v<T>)
          py[i] = static_cast<T>(acc[i]);
        else
          py[i] = static_cast<T>(static_cast<std::conditional_t<std::is_same_v<T, double>, double, float>>(acc[i]));
      }
    }, ctx.node().describe().c_str());
  };
  r.add(std::move(s));
}

}  // namespace kiln::ops
