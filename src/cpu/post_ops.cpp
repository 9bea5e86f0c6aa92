#include "cpu/post_ops.hpp"

#include "cpu/fusion_decisions.hpp"

#include <cstring>

#include "core/strings.hpp"
#include "cpu/dnnl_util.hpp"

namespace kiln::cpu {

int PostOpList::sum_input() const {
  for (const PostOp& op : ops)
    if (op.kind == PostOp::Kind::sum) return op.input;
  return -1;
}

const PostOp* PostOpList::dw() const {
  for (const PostOp& op : ops)
    if (op.kind == PostOp::Kind::dw) return &op;
  return nullptr;
}

bool to_gemm_epilogue(const PostOpList& list, size_t rank, int64_t channels, gemm_f32::Epilogue& out) {
  for (const PostOp& op : list.ops) {
    gemm_f32::EpilogueOp e;
    e.alg = op.alg;
    if (op.kind == PostOp::Kind::eltwise) {
      if (!gemm_f32::supports_eltwise(op.alg)) return false;
      e.alpha = op.alpha;
      e.beta = op.beta;
    } else if (op.kind == PostOp::Kind::binary) {
      const Tensor& c = op.constant;
      if (!gemm_f32::supports_binary(op.alg) || !c.defined() || c.dtype() != DType::f32 || c.rank() > rank) return false;
      const size_t off = rank - c.rank();  // aligned from the right, as broadcasting does
      for (size_t d = 0; d < c.rank(); ++d)
        if (c.shape()[d] != 1 && (d + off != rank - 1 || c.shape()[d] != channels)) return false;
      e.kind = gemm_f32::EpilogueOp::Kind::binary;
      e.set_operand(c);  // one value, or one per channel
    } else {
      return false;
    }
    out.ops.push_back(std::move(e));
  }
  return true;
}

// `list` (from index `from` on) as a GEMM epilogue over `channels` columns: eltwise ops it
// computes, and binary ops whose operand is one value or one per channel (axis 1 of NCHW).
bool to_gemm_epilogue_per_channel(const PostOpList& list, size_t from, int64_t channels, gemm_f32::Epilogue& e, std::string* why) {
  for (size_t i = from; i < list.ops.size(); ++i) {
    const PostOp& op = list.ops[i];
    gemm_f32::EpilogueOp g;
    g.alg = op.alg;
    if (op.kind == PostOp::Kind::eltwise && gemm_f32::supports_eltwise(op.alg)) {
      g.alpha = op.alpha, g.beta = op.beta;
    } else if (op.kind == PostOp::Kind::binary && gemm_f32::supports_binary(op.alg) && op.constant.defined() &&
               op.constant.dtype() == DType::f32 &&
               (op.constant.size() == 1 || op.constant.size() == channels)) {
      // one value, or one per channel: [C, 1, 1] or [1, C, 1, 1] (the fusion passes give operands
      // the output's rank)
      const Shape& s = op.constant.shape();
      const size_t rank = s.size();
      if (op.constant.size() == channels && channels > 1) {
        const bool channel_dim = rank >= 3 && s[rank - 3] == channels;
        if (!channel_dim) {
          if (why) *why = cat("its ", op.from, " operand ", shape_to_string(s), " is not per channel");
          return false;
        }
      }
      g.kind = gemm_f32::EpilogueOp::Kind::binary;
      g.set_operand(op.constant);
    } else {
      if (why) *why = cat("kiln's kernels do not compute its post-op from ", op.from);
      return false;
    }
    e.ops.push_back(std::move(g));
  }
  return true;
}

namespace {

// The list as oneDNN gets it, adjacent linear ops merged into one: a2 (a1 x + b1) + b2. Calls
// emit(op, alpha, beta) for each op of the merged list in order, `op` the first of its run and
// (alpha, beta) the run's, copying no op (merged() copies them, unsupported_combination reads).
template <class Emit>
void for_each_merged(const std::vector<PostOp>& ops, Emit&& emit) {
  auto linear = [](const PostOp& op) {
    return op.kind == PostOp::Kind::eltwise && op.alg == dnnl::algorithm::eltwise_linear;
  };
  for (size_t i = 0; i < ops.size();) {
    float alpha = ops[i].alpha, beta = ops[i].beta;
    size_t next = i + 1;
    if (linear(ops[i]))
      for (; next < ops.size() && linear(ops[next]); ++next) {
        beta = beta * ops[next].alpha + ops[next].beta;
        alpha = alpha * ops[next].alpha;
      }
    emit(ops[i], alpha, beta);
    i = next;
  }
}

}  // namespace

std::vector<PostOp> PostOpList::merged() const {
  std::vector<PostOp> out;
  for_each_merged(ops, [&](const PostOp& op, float alpha, float beta) {
    out.push_back(op);
    out.back().alpha = alpha;
    out.back().beta = beta;
  });
  return out;
}

std::string PostOpList::unsupported_combination() const {
  // oneDNN 2.6's JIT kernels give every eltwise post-op of one algorithm the parameters
  // of the first (Clip(-1, 2) ... Clip(0, 1) computes two Clip(-1, 2)): measured on
  // brgemm convolutions; refused for every host. Read from the merged list without copying
  // it (asked for every candidate post-op of every new input shape).
  struct Eltwise {
    dnnl::algorithm alg;
    float alpha, beta;
    const std::string* from;
  };
  std::vector<Eltwise> list;
  for_each_merged(ops, [&](const PostOp& op, float alpha, float beta) {
    if (op.kind == PostOp::Kind::eltwise) list.push_back({op.alg, alpha, beta, &op.from});
  });
  for (size_t i = 0; i < list.size(); ++i)
    for (size_t j = i + 1; j < list.size(); ++j) {
      const Eltwise &a = list[i], &b = list[j];
      if (a.alg == b.alg && (a.alpha != b.alpha || a.beta != b.beta))
        return cat("oneDNN 2.6 computes two eltwise post-ops of one algorithm with different parameters wrongly (",
                   *a.from, ", ", *b.from, ")");
    }
  return "";
}

void PostOpList::append_to(dnnl::post_ops& po) {
  operands_.clear();
  const std::vector<PostOp> merged = this->merged();
  for (const PostOp& op : merged) {
    const int index = po.len();
    switch (op.kind) {
      case PostOp::Kind::eltwise:
        po.append_eltwise(1.0f, op.alg, op.alpha, op.beta);
        break;
      case PostOp::Kind::sum:
        po.append_sum(1.0f);
        break;
      case PostOp::Kind::dw: {
        const auto f32 = dnnl::memory::data_type::f32;
        po.append_dw(f32, f32, f32, 3, op.dw_stride, 1, 0, {});
        break;
      }
      case PostOp::Kind::binary:
      case PostOp::Kind::prelu: {
        auto md = plain_desc(op.constant.shape(), DType::f32);
        KILN_CHECK(md.has_value(), cat("post-op from '", op.from, "': operand has no oneDNN layout"));
        dnnl::memory m(*md, cpu_engine());
        std::memcpy(m.get_data_handle(), op.constant.raw(), op.constant.byte_size());
        if (op.kind == PostOp::Kind::binary) {
          po.append_binary(op.alg, *md);
          operands_.push_back({DNNL_ARG_ATTR_MULTIPLE_POST_OP(index) | DNNL_ARG_SRC_1, m});
        } else {
          // slope per channel or one for all (the passes only make these): the same
          // bytes in oneDNN's channels-last weights layout
          int mask = 0;
          for (size_t d = 0; d < op.constant.rank(); ++d)
            if (op.constant.shape()[d] != 1) mask |= 1 << d;
          po.append_prelu(mask);
          operands_.push_back({DNNL_ARG_ATTR_MULTIPLE_POST_OP(index) | DNNL_ARG_WEIGHTS, m});
        }
        break;
      }
    }
  }
}

void PostOpList::add_args(std::unordered_map<int, dnnl::memory>& args) const {
  for (const auto& [arg, m] : operands_) args[arg] = m;
}

std::optional<PostOpList> PostOpList::with(const std::vector<PostOp>& extra, bool allow_sum, const char* host,
                                           std::string* why) const {
  PostOpList trial = *this;
  trial.ops.insert(trial.ops.end(), extra.begin(), extra.end());
  if (std::string bad = trial.unsupported_combination(); !bad.empty()) {
    if (why) *why = bad;
    return std::nullopt;
  }
  if (!allow_sum && trial.sum_input() >= 0) {
    if (why) *why = cat(host, " takes no sum post-op");
    return std::nullopt;
  }
  return trial;
}

bool keeps_jit(PostOpList& trial, PostOpList& current, const std::function<std::string(PostOpList&)>& impl_of,
               const char* primitive, std::string* why, FusionDecisions* decisions, const std::string& host) {
  if (decisions) {
    // (asked for every post-op a fusion tries on every new shape's graph: one string built)
    std::string key;
    key.reserve(64 + host.size() + 24 * (current.ops.size() + trial.ops.size()));
    key.append(primitive).append(" ").append(host).append(": ");
    current.describe_into(key);
    key.append(" -> ");
    trial.describe_into(key);
    return decisions->decide(key, why, [&](std::string* w) { return keeps_jit(trial, current, impl_of, primitive, w); });
  }
  auto is_ref = [](const std::string& impl) { return impl.rfind("ref", 0) == 0; };
  auto is_brgemm = [](const std::string& impl) { return impl.rfind("brg", 0) == 0; };
  try {
    const std::string with = impl_of(trial), without = impl_of(current);
    if (is_ref(with) && !is_ref(without)) {
      if (why) *why = cat("oneDNN has only its reference ", primitive, " with post-ops ", trial.describe());
      return false;
    }
    // e.g. a 1x1 convolution with a depthwise post-op: oneDNN 2.6 leaves brgconv_1x1 for its
    // older jit_1x1 kernel, measured slower here than the two brgemm convolutions apart
    if (is_brgemm(without) && !is_brgemm(with)) {
      if (why) *why = cat("oneDNN would leave its brgemm ", primitive, " (", without, ") for ", with, " with post-ops ",
                          trial.describe());
      return false;
    }
    return true;
  } catch (const dnnl::error& e) {
    if (why) *why = cat("oneDNN rejects the post-ops ", trial.describe(), " (", e.what(), ")");
    return false;
  }
}

std::string PostOpList::describe() const {
  std::string out;
  describe_into(out);
  return out;
}

void PostOpList::describe_into(std::string& out) const {
  for (size_t i = 0; i < ops.size(); ++i) out.append(i ? "+" : "").append(ops[i].from);
}

}  // namespace kiln::cpu
