// DepthwiseBlock: MobileNet's inverted residual as one node, channels-last f32:
//   [E = ep1(x * W1 + b1)]  1x1 expansion (optional: else E is x), or a window convolution over
//                           few channels (an image stem, 3x3 stride 2 over 3 channels: im2col
//                           from plain NCHW x, then the GEMM), so E never goes to memory either
//   D = ep2(depthwise_k x k,stride s(E) + b2)
//   [y = ep3(D * W3 + b3 (+ R))]  1x1 projection (optional: else y is D), R the residual (a sum post-op)
// made by FuseDepthwiseBlock from the Convolution nodes it replaces, with their post-ops.
// Nothing is made per shape: the 1x1 convolutions run kiln's GEMM (gemm_f32.hpp), the
// depthwise one kiln's row kernel (depthwise_f32.hpp), sizes as arguments; a model whose input
// shapes vary creates no oneDNN primitive for the block (MobileNet-v2: 50 of its 52).
// And E never goes to memory: each thread runs whole images on a ring of E rows in its own cache
// (a window's k rows and the next GEMM's), the depthwise rows into a small D and their projection
// into y, a few rows at a time; nothing shared, no barrier. The images left where the thread
// count does not divide the batch go to all threads, by row bands, or by channels at 7x7 (see
// plan()). oneDNN's convolutions write the 6x wider E and D to memory and read them back.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "core/strings.hpp"
#include "cpu/work_share.hpp"
#include "cpu/arena.hpp"
#include "cpu/depthwise_f32.hpp"
#include "cpu/dnnl_util.hpp"
#include "cpu/gemm_f32.hpp"
#include "cpu/im2col_f32.hpp"
#include "cpu/isa.hpp"
#include "cpu/nodes/conv_geometry.hpp"
#include "cpu/nodes/node_factory.hpp"
#include "cpu/weights_cache.hpp"

namespace kiln::cpu {

namespace {

using dnnl::memory;
using tag = memory::format_tag;

// The node's inputs, in this order (null where the block has no such part).
enum Input { kX = 0, kW1, kB1, kW2, kB2, kW3, kB3, kResidual, kInputs };

constexpr int64_t kGemmPixels = 48;  // pixels (rows of A) per GEMM at least: 8 blocks of 6 rows
constexpr int64_t kSharedBytes = 512 << 10;  // run_shared's E and D of an image, per thread at most

class DepthwiseBlockNode : public Node {
 public:
  DepthwiseBlockNode(Node* expand, Node& dw, Node* project) : Node(*(expand ? expand : &dw)->source) {
    inputs.assign(kInputs, nullptr);
    Node& first = expand ? *expand : dw;
    inputs[kX] = first.inputs[0];
    auto take = [&](Node* n, Input w, Input b, PostOpList& post_ops) {
      if (!n) return;
      inputs[w] = n->inputs[1];
      inputs[b] = n->inputs.size() > 2 ? n->inputs[2] : nullptr;
      post_ops = *n->post_ops();
    };
    take(expand, kW1, kB1, expand_ops_);
    take(&dw, kW2, kB2, dw_ops_);
    take(project, kW3, kB3, project_ops_);
    if (project && project_ops_.sum_input() >= 0)
      inputs[kResidual] = project->inputs[static_cast<size_t>(project_ops_.sum_input())];
    outputs = first.outputs;  // the pass absorbs the others: they hand over theirs
    if (expand) {
      expand_source_ = expand->source;
      e_ = dw.inputs[0];  // E's edge, which no node writes once the pass is done (its shape: E's)
    }
    k_ = dw.inputs[1]->shape[2];
    stride_ = dw.source->attr_ints("strides", {1, 1})[0];
    dil_ = dw.source->attr_ints("dilations", {1, 1})[0];
    dw_source_ = dw.source;
  }
  const char* type() const override { return "DepthwiseBlock"; }
  NodeKind kind() const override { return NodeKind::DepthwiseBlock; }
  // The projection may accumulate in the residual's buffer (the plan's choice) when one thread
  // runs a whole image (it writes an output row once the rows of x its windows read are
  // expanded) or the team runs it by channels (x read whole before a barrier). Bands of an
  // image on several threads read x's rows around their borders, which the neighbour's output
  // would have overwritten.
  int inplace_input() const override {
    return inputs[kResidual] && inputs[kW1] && (n_ % threads_ == 0 || split_channels_) ? kResidual : -1;
  }

  std::vector<InputLayout> prepare() override {
    const Shape& x = inputs[kX]->shape;
    const Shape& y = outputs[0]->shape;
    n_ = x[0], h_ = x[2], w_ = x[3], cin_ = x[1];
    x_image_ = x[1] * x[2] * x[3];
    window_ = false;
    if (inputs[kW1]) {  // E's rows from x: a 1x1 GEMM, or im2col and a GEMM
      const Shape& e = e_->shape;
      im2col_ = im2col_geometry(*expand_source_, x, inputs[kW1]->shape, e);
      window_ = !im2col_.pointwise();
      h_ = e[2], w_ = e[3];
      k1_ = window_ ? im2col_.columns() : cin_;
    }
    ce_ = inputs[kW2]->shape[0];
    ho_ = y[2], wo_ = y[3], cout_ = y[1];
    const Shape e_shape = {n_, ce_, h_, w_}, d_shape = {n_, ce_, ho_, wo_};
    const ConvGeometry geo = conv_geometry(*dw_source_, e_shape, inputs[kW2]->shape, d_shape);
    pad_t_ = geo.pad_l[0], pad_l_ = geo.pad_l[1];
    threads_ = omp_get_max_threads();
    impl = cat("kiln_dwblock:", isa_at_least(Isa::avx512_core) ? "avx512_core" : "avx2");

    const std::string isa = gemm_f32::impl_name();
    if (inputs[kW1]) {  // B(k, n) = W1[n][k], k over (input channel[, kernel row, kernel column])
      w1_ = pack_gemm(*inputs[kW1], k1_, ce_, cat(window_ ? "dwblock/im2col/" : "dwblock/1x1/", isa));
      ep1_ = {};
      ep1_.bias = bias_of(kB1);
      to_gemm_epilogue_per_channel(expand_ops_, 0, ce_, ep1_, nullptr);  // the pass asked refuses() first
      // AVX2: a lone Swish after the expansion's product, over its rows two vectors at a time
      // (apply_epilogue), where the product's pass stays the asm pass of bias and store:
      // EfficientNet-B0 at [1, 3, 200, 208] 0.95 of the time (6 pairs); over each 6-row tile
      // as the GEMM stores it (run_blocks' lean Swish) 1.01 against this
      ep1_after_ = {};
      if (!isa_at_least(Isa::avx512_core) && gemm_f32::is_lone_swish(ep1_.ops)) std::swap(ep1_.ops, ep1_after_.ops);
    }
    w2_ = pack_weights(inputs[kW2]->constant, cat("dwblock/dw/", k_), memory::desc({depthwise_f32::packed_size(ce_, k_)}, memory::data_type::f32, tag::a),
                       [&](memory& dst) {
                         depthwise_f32::pack_weights(static_cast<const float*>(inputs[kW2]->data), ce_, k_,
                                                     static_cast<float*>(dst.get_data_handle()));
                       });
    ep2_ = {};
    to_gemm_epilogue_per_channel(dw_ops_, 0, ce_, ep2_, nullptr);
    // ReLUs and Clips: the depthwise kernel clamps as it stores, no pass of its own over D
    dw_lo_ = -std::numeric_limits<float>::infinity(), dw_hi_ = std::numeric_limits<float>::infinity();
    if (gemm_f32::as_clamp(ep2_.ops, &dw_lo_, &dw_hi_)) ep2_.ops.clear();
    // a lone HardSwish (MobileNet-v3's) as the kernel stores, not in a pass of its own over D:
    // that pass cost MobileNet-v3-small's blocks at batch 1 (13x13 and 7x7 maps, channels split
    // between the threads) 10-27 us each of their 80-140
    dw_hardswish_ = ep2_.ops.size() == 1 && ep2_.ops[0].kind == gemm_f32::EpilogueOp::Kind::eltwise &&
                    ep2_.ops[0].alg == dnnl::algorithm::eltwise_hardswish;
    if (dw_hardswish_) {
      dw_hs_alpha_ = ep2_.ops[0].alpha, dw_hs_beta_ = ep2_.ops[0].beta;
      ep2_.ops.clear();
    }
    if (inputs[kW3]) {
      w3_ = pack_gemm(*inputs[kW3], ce_, cout_, cat("dwblock/1x1/", isa));
      ep3_ = {};
      ep3_.bias = bias_of(kB3);
      ep3_.accumulate = inputs[kResidual] != nullptr;
      to_gemm_epilogue_per_channel(project_ops_, inputs[kResidual] ? 1 : 0, cout_, ep3_, nullptr);
    }
    plan();

    const memory::desc nhwc_out(to_dims(y), memory::data_type::f32, tag::nhwc);
    outputs[0]->set_layout(nhwc_out);
    std::vector<InputLayout> req(inputs.size(), InputLayout::any());
    req[kX] = window_ ? InputLayout::plain() : InputLayout::exact(memory::desc(to_dims(x), memory::data_type::f32, tag::nhwc));
    if (inputs[kResidual]) req[kResidual] = InputLayout::exact(nhwc_out);
    return req;
  }

  size_t scratch_bytes() const override { return shared_bytes_ + thread_bytes_ * static_cast<size_t>(threads_); }

  void execute(dnnl::stream&) override {
    const float* x = static_cast<const float*>(inputs[kX]->data);
    float* y = static_cast<float*>(outputs[0]->data);
    const float* residual = inputs[kResidual] ? static_cast<const float*>(inputs[kResidual]->data) : nullptr;
    const bool in_place = residual && residual == y;
    if (in_place) residual = nullptr;  // y holds it already
    // whole images, one thread each, shared by WorkShare (each thread its own images first, then
    // the other's last ones: a thread the host runs slower for a while does not hold the team);
    // then the rest, by all the threads together
    const int64_t whole = n_ - n_ % threads_;
    WorkShare images(whole, threads_);
#pragma omp parallel num_threads(threads_)
    {
      const int t = omp_get_thread_num(), nt = omp_get_num_threads();
      char* mine = static_cast<char*>(scratch) + shared_bytes_ + thread_bytes_ * static_cast<size_t>(t);
      float* ring = reinterpret_cast<float*>(mine);
      float* d = reinterpret_cast<float*>(mine + ring_bytes_);
      float* cols = reinterpret_cast<float*>(mine + ring_bytes_ + d_bytes_);  // im2col's rows (window_)
      images.run(t, [&](int64_t img) { run_band(img, 0, 1, x, y, residual, ring, d, cols); });
      for (int64_t img = whole; img < n_; ++img) {
        if (split_channels_) {
          run_shared(img, t, nt, x, y, residual);
        } else if (in_place && t == 0) {  // (a team smaller than planned: bands would race)
          run_band(img, 0, 1, x, y, residual, ring, d, cols);
        } else if (!in_place) {
          run_band(img, t, nt, x, y, residual, ring, d, cols);
        }
      }
    }
  }

 private:
  // Output rows [Ho * band / bands, Ho * (band + 1) / bands) of image `img`, on this thread: E's
  // rows computed into the thread's ring as the depthwise rows need them (a GEMM over enough rows
  // at a time), the depthwise rows into d, a few at a time, then their projection into y.
  void run_band(int64_t img, int64_t band, int64_t bands, const float* x, float* y, const float* residual, float* ring,
                float* d, float* cols) const {
    const bool expand = inputs[kW1] != nullptr;
    const int64_t e_row = w_ * ce_;  // floats of a row of E
    const float* x_img = x + img * x_image_;
    int64_t done = 0;  // E rows [.., done) of this image are in the ring (its last ring_rows_ of them)
    const int64_t o_begin = ho_ * band / bands, o_end = ho_ * (band + 1) / bands;
    // E's rows past what the band's last window reads are the next band's to expand: a GEMM of
    // expand_rows_ there ran the first of two bands 12 rows of 14 for its 8 (EfficientNet-B0's
    // 14x14 blocks at batch 1: that thread's products took 1.6x the other's time)
    const int64_t last = std::min(h_, (o_end - 1) * stride_ - pad_t_ + span());
    const float* rows[5] = {};
    const depthwise_f32::Row g = row_geometry();
    const float* w2 = static_cast<const float*>(w2_.get_data_handle());
    for (int64_t o = o_begin; o < o_end; o += batch_rows_) {
      const int64_t m = std::min(batch_rows_, o_end - o);
      float* out_rows = y + (img * ho_ + o) * wo_ * cout_;
      float* dst = inputs[kW3] ? d : out_rows;
      for (int64_t i = 0; i < m; ++i) {
        const int64_t top = (o + i) * stride_ - pad_t_;  // the window's first input row
        if (expand) {
          const int64_t need = std::min(h_, top + span());
          if (need > done) {  // a GEMM over expand_rows_ rows at least (fewer at the image's end)
            const int64_t from = std::max(done, std::max<int64_t>(top, 0));
            const int64_t to = std::min(last, std::max(need, from + expand_rows_));
            for (int64_t r = from; r < to;) {  // runs of rows contiguous in the ring
              const int64_t run = std::min(to - r, ring_rows_ - r % ring_rows_);
              float* e_rows = ring + r % ring_rows_ * e_row;
              if (window_) {
                im2col_f32::rows(im2col_, x_img, r, run, cols);
                gemm_f32::run_serial(cols, run * w_, k1_, im2col_.row_stride(), w1(), ce_, e_rows, ce_, ep1_);
              } else {
                gemm_f32::run_serial(x_img + r * w_ * cin_, run * w_, cin_, cin_, w1(), ce_, e_rows, ce_, ep1_);
              }
              gemm_f32::apply_epilogue(e_rows, run * w_, ce_, ce_, ep1_after_);
              r += run;
            }
            done = to;
          }
        }
        for (int64_t j = 0; j < k_; ++j) {
          const int64_t h = top + j * dil_;
          rows[j] = h < 0 || h >= h_ ? nullptr : expand ? ring + h % ring_rows_ * e_row : x_img + h * e_row;
        }
        dw_row(g, rows, w2, bias_of(kB2), dst + i * wo_ * ce_);
      }
      gemm_f32::apply_epilogue(dst, m * wo_, ce_, ce_, ep2_);  // what the clamp did not (usually nothing)
      if (!inputs[kW3]) continue;
      if (residual)
        std::memcpy(out_rows, residual + (img * ho_ + o) * wo_ * cout_, static_cast<size_t>(m * wo_ * cout_) * sizeof(float));
      gemm_f32::run_serial(d, m * wo_, ce_, ce_, w3(), cout_, out_rows, cout_, ep3_);
    }
  }

  // Image `img` by the whole team: each thread expands and convolves its share of the channels
  // (whole GEMM panels) over the image into E and D, kept whole; then, after a barrier, projects
  // its share of D's rows. An image's rows split between threads would each expand the rows
  // around the seam (7x7: 9 rows for 7); its channels split, nothing is computed twice.
  void run_shared(int64_t img, int t, int nt, const float* x, float* y, const float* residual) const {
    float* e = static_cast<float*>(scratch);
    float* d = reinterpret_cast<float*>(static_cast<char*>(scratch) + shared_e_bytes_);
    const int64_t panels = (ce_ + gemm_f32::kPanel - 1) / gemm_f32::kPanel;
    const int64_t c0 = std::min(ce_, panels * t / nt * gemm_f32::kPanel);
    const int64_t c1 = std::min(ce_, panels * (t + 1) / nt * gemm_f32::kPanel);
    const float* x_img = x + img * x_image_;
    float* dst = inputs[kW3] ? d : y + img * ho_ * wo_ * ce_;
    if (c0 < c1) {
      const bool expand = inputs[kW1] != nullptr;
      if (expand)
        gemm_f32::run_serial(x_img, h_ * w_, cin_, cin_, w1() + c0 / gemm_f32::kPanel * cin_ * gemm_f32::kPanel, c1 - c0,
                             e + c0, ce_, shifted(ep1_, c0));
      if (expand) gemm_f32::apply_epilogue(e + c0, h_ * w_, c1 - c0, ce_, ep1_after_);
      const float* src = expand ? e : x_img;
      depthwise_f32::Row g = row_geometry();
      g.channels = c1 - c0, g.pixel_stride = ce_, g.weight_stride = depthwise_f32::weight_stride(ce_);
      const float* w2 = static_cast<const float*>(w2_.get_data_handle()) + c0;
      const float* b2 = bias_of(kB2) ? bias_of(kB2) + c0 : nullptr;
      const float* rows[5] = {};
      for (int64_t o = 0; o < ho_; ++o) {
        for (int64_t j = 0; j < k_; ++j) {
          const int64_t h = o * stride_ - pad_t_ + j * dil_;
          rows[j] = h < 0 || h >= h_ ? nullptr : src + h * w_ * ce_ + c0;
        }
        dw_row(g, rows, w2, b2, dst + o * wo_ * ce_ + c0);
      }
      gemm_f32::apply_epilogue(dst + c0, ho_ * wo_, c1 - c0, ce_, shifted(ep2_, c0));
    }
    if (!inputs[kW3]) return;  // D was the output
#pragma omp barrier
    const int64_t a = ho_ * t / nt, b = ho_ * (t + 1) / nt;
    float* out = y + (img * ho_ + a) * wo_ * cout_;
    if (residual && b > a)
      std::memcpy(out, residual + (img * ho_ + a) * wo_ * cout_, static_cast<size_t>((b - a) * wo_ * cout_) * sizeof(float));
    gemm_f32::run_serial(d + a * wo_ * ce_, (b - a) * wo_, ce_, ce_, w3(), cout_, out, cout_, ep3_);
#pragma omp barrier
  }

  // `e` for columns from c0 on: its bias and per-column operands from there.
  static gemm_f32::Epilogue shifted(const gemm_f32::Epilogue& e, int64_t c0) {
    gemm_f32::Epilogue s = e;
    if (s.bias) s.bias += c0;
    for (gemm_f32::EpilogueOp& op : s.ops)
      if (op.kind == gemm_f32::EpilogueOp::Kind::binary && op.operand_count > 1) op.operand += c0;
    return s;
  }

  // Rows of the window taken `dil_` apart (the kernel's rows are the caller's to pick).
  int64_t span() const { return (k_ - 1) * dil_ + 1; }

  // One output row. Dilated (stride 1, the left padding a multiple of the dilation: refuses()
  // says so), the columns of each phase mod the dilation are an undilated convolution of the
  // input's columns of that phase: pixels dil_ apart in the rows and in the output.
  void dw_row(const depthwise_f32::Row& g, const float* const* rows, const float* w2, const float* b2, float* out) const {
    if (dil_ == 1) {
      depthwise_f32::row(g, rows, w2, b2, out);
      return;
    }
    const int64_t px = g.pixels_apart();
    const float* phase_rows[5] = {};
    for (int64_t phase = 0; phase < std::min(dil_, g.out_width); ++phase) {
      depthwise_f32::Row v = g;
      v.pixel_stride = px * dil_;
      v.in_width = (g.in_width - phase + dil_ - 1) / dil_;
      v.out_width = (g.out_width - phase + dil_ - 1) / dil_;
      v.pad_left = g.pad_left / dil_;
      for (int64_t j = 0; j < k_; ++j) phase_rows[j] = rows[j] ? rows[j] + phase * px : nullptr;
      depthwise_f32::row(v, phase_rows, w2, b2, out + phase * px);
    }
  }

  depthwise_f32::Row row_geometry() const {
    depthwise_f32::Row g;
    g.channels = ce_, g.in_width = w_, g.out_width = wo_, g.k = k_, g.stride = stride_, g.pad_left = pad_l_;
    g.lo = dw_lo_, g.hi = dw_hi_;
    g.hardswish = dw_hardswish_, g.hs_alpha = dw_hs_alpha_, g.hs_beta = dw_hs_beta_;
    return g;
  }

  // How the images go to the threads, and the working memory: whole images one thread each; the
  // images left when the thread count does not divide the batch by all the threads, their
  // channels split (E and D of one image kept whole, where they fit the threads' L2 together),
  // else their rows; rows per GEMM.
  void plan() {
    const int64_t e_image = h_ * w_ * ce_ * static_cast<int64_t>(sizeof(float));
    const int64_t d_image = inputs[kW3] ? ho_ * wo_ * ce_ * static_cast<int64_t>(sizeof(float)) : 0;
    // by channels only where bands would expand over a fifth of the rows twice (the rows each
    // seam's window reaches across, k - stride of them): 7x7 at stride 1. Elsewhere bands ran
    // 1.3-3x faster on MobileNet-v2's layers at batch 1 (whole GEMM panels split unevenly, E
    // written and read across the whole image instead of a ring in L1 / L2).
    // (a window expansion's im2col goes by rows: bands)
    const bool halo = (span() - stride_) * (threads_ - 1) * 5 > h_;
    split_channels_ = n_ % threads_ != 0 && halo && !window_ &&
                      (inputs[kW1] ? e_image : 0) + d_image <= kSharedBytes * threads_;
    shared_e_bytes_ = split_channels_ && inputs[kW1] ? Arena::aligned(static_cast<size_t>(e_image)) : 0;
    shared_bytes_ = split_channels_ ? shared_e_bytes_ + Arena::aligned(static_cast<size_t>(d_image)) : 0;
    // Rows per GEMM: kGemmPixels pixels at least, and up to 5 rows more where that makes the
    // pixels whole blocks of 6 rows of A (the GEMM's 2- and 4-row tail blocks took 3.4% of
    // MobileNet-v2's time at batch 8, 56- and 28-wide rows): the mnv2-batch stream 0.989 of the
    // time, EfficientNet-B0 (effb0-hw) 0.993
    auto rows_for = [](int64_t width, int64_t limit) {
      int64_t r = std::max<int64_t>(1, std::min<int64_t>((kGemmPixels + width - 1) / width, limit));
      for (int64_t t = r; t < r + 6 && t <= limit; ++t)
        if (t * width % 6 == 0) return t;
      return r;
    };
    batch_rows_ = rows_for(wo_, ho_);
    expand_rows_ = rows_for(w_, h_);
    // the ring holds a window (k rows) and a GEMM's new rows: a window may start before the
    // rows a GEMM adds, which then take the slots of rows no later window reads
    ring_rows_ = inputs[kW1] ? std::min<int64_t>(h_, span() + expand_rows_) : 0;
    ring_bytes_ = Arena::aligned(static_cast<size_t>(ring_rows_ * w_ * ce_) * sizeof(float));
    d_bytes_ = inputs[kW3] ? Arena::aligned(static_cast<size_t>(batch_rows_ * wo_ * ce_) * sizeof(float)) : 0;
    // a GEMM's new rows never pass the ring's end (run_band splits them there)
    const size_t cols_bytes =
        window_ ? Arena::aligned(static_cast<size_t>(ring_rows_ * w_ * im2col_.row_stride()) * sizeof(float)) : 0;
    thread_bytes_ = ring_bytes_ + d_bytes_ + cols_bytes;
  }

  const float* bias_of(Input i) const { return inputs[i] ? static_cast<const float*>(inputs[i]->data) : nullptr; }
  const float* w1() const { return static_cast<const float*>(w1_.get_data_handle()); }
  const float* w3() const { return static_cast<const float*>(w3_.get_data_handle()); }

  // A 1x1 convolution's weights [N, K, 1, 1] as the GEMM's packed B (through the weights cache).
  memory pack_gemm(const Edge& w, int64_t K, int64_t N, const std::string& variant) {
    const memory::desc packed({gemm_f32::packed_size(K, N)}, memory::data_type::f32, tag::a);
    return pack_weights(w.constant, variant, packed, [&](memory& dst) {
      gemm_f32::pack_b(static_cast<const float*>(w.data), K, N, 1, K, 1.0f, static_cast<float*>(dst.get_data_handle()));
    });
  }

  PostOpList expand_ops_, dw_ops_, project_ops_;  // the post-ops of the convolutions it replaced
  const ir::Node* dw_source_ = nullptr;
  const ir::Node* expand_source_ = nullptr;
  const Edge* e_ = nullptr;  // E, the expansion's output
  bool window_ = false;      // the expansion is a window convolution (im2col_), else 1x1
  im2col_f32::Geometry im2col_;
  int64_t k1_ = 0, x_image_ = 0;  // the expansion's K (columns); floats of an image of x
  int64_t k_ = 3, stride_ = 1, dil_ = 1;
  int64_t n_ = 0, h_ = 0, w_ = 0, cin_ = 0, ce_ = 0, ho_ = 0, wo_ = 0, cout_ = 0, pad_t_ = 0, pad_l_ = 0;
  int threads_ = 1;
  memory w1_, w2_, w3_;
  gemm_f32::Epilogue ep1_, ep2_, ep3_;
  gemm_f32::Epilogue ep1_after_;  // ops of ep1_ applied after the product's pass (a lone Swish, AVX2)
  float dw_lo_ = 0.0f, dw_hi_ = 0.0f;  // the depthwise kernel's clamp (ep2_ then holds the rest) ...
  bool dw_hardswish_ = false;          // ... or its HardSwish
  float dw_hs_alpha_ = 0.0f, dw_hs_beta_ = 0.0f;
  bool split_channels_ = false;  // images left over go by channels (run_shared), else by rows
  int64_t batch_rows_ = 1, expand_rows_ = 1, ring_rows_ = 0;
  size_t shared_e_bytes_ = 0, shared_bytes_ = 0;  // run_shared's E and D, at the scratch's start
  size_t ring_bytes_ = 0, d_bytes_ = 0, thread_bytes_ = 0;  // then each thread's ring, D and im2col rows
};

}  // namespace

std::string depthwise_block_refuses(const Node* expand, const Node& dw, const Node* project) {
  if (!gemm_f32::available() || !depthwise_f32::available())
    return cat("kiln's GEMM and depthwise kernels need AVX2 (", isa_description(), ")");
  const Shape& wd = dw.inputs[1]->shape;
  const ir::Node& s = *dw.source;
  if (wd.size() != 4 || wd[1] != 1 || wd[2] != wd[3]) return cat(dw.name, " is not a square depthwise window");
  const auto strides = s.attr_ints("strides", {1, 1});
  if (strides.size() != 2 || strides[0] != strides[1] || !depthwise_f32::supports(wd[2], strides[0]))
    return cat(dw.name, ": kiln's depthwise kernel takes 3x3 or 5x5 windows at stride 1 or 2 both ways");
  // dilated: at stride 1, the same both ways, the left and top padding a multiple of it (each
  // phase of the columns is then an undilated convolution: DepthwiseBlockNode::dw_row)
  const auto dilations = s.attr_ints("dilations", {1, 1});
  if (dilations.size() != 2 || dilations[0] != dilations[1] || dilations[0] < 1)
    return cat(dw.name, "'s dilations differ between the axes");
  const int64_t dil = dilations[0], span = (wd[2] - 1) * dil + 1;
  if (dil > 1 && strides[0] != 1) return cat(dw.name, " is dilated and strided");
  const ConvGeometry geo = conv_geometry(s, dw.inputs[0]->shape, wd, dw.outputs[0]->shape);
  for (size_t i = 0; i < 2; ++i)
    if (geo.pad_l[i] < 0 || geo.pad_l[i] >= span || geo.pad_r[i] < 0 || geo.pad_r[i] >= span)
      return cat(dw.name, "'s padding is not under its window");
  if (geo.pad_l[0] % dil != 0 || geo.pad_l[1] % dil != 0)
    return cat(dw.name, "'s padding is not a multiple of its dilation");
  std::string why;
  gemm_f32::Epilogue e;
  auto& self = const_cast<Node&>(dw);  // post_ops() is not const; nothing changes
  if (!to_gemm_epilogue_per_channel(*self.post_ops(), 0, wd[0], e, &why)) return cat(dw.name, ": ", why);
  if (expand && !to_gemm_epilogue_per_channel(*const_cast<Node*>(expand)->post_ops(), 0, wd[0], e, &why)) return cat(expand->name, ": ", why);
  if (project) {
    const PostOpList& l = *const_cast<Node*>(project)->post_ops();
    const int sum = l.sum_input();
    if (sum >= 0 && l.ops.front().kind != PostOp::Kind::sum)
      return cat(project->name, ": its residual sum comes after another post-op");
    if (!to_gemm_epilogue_per_channel(l, sum >= 0 ? 1 : 0, project->inputs[1]->shape[0], e, &why)) return cat(project->name, ": ", why);
  }
  return "";
}

std::unique_ptr<Node> make_depthwise_block_node(Node* expand, Node& dw, Node* project) {
  return std::make_unique<DepthwiseBlockNode>(expand, dw, project);
}

}  // namespace kiln::cpu
