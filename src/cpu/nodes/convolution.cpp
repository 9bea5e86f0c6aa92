// Convolution: ONNX Conv (1D/2D/3D, grouped, depthwise, dilated, strided, padded,
// auto_pad) on oneDNN's convolution_forward. oneDNN picks the activation layout
// (format_tag::any: nChw16c on AVX-512, nChw8c on AVX2), so chains of convolutions stay
// blocked; the weights are reordered once per compiled model, into the layout it wants,
// through the weights cache (cpu/weights_cache.hpp) that every stream's graph shares.
// Post-ops from the fusion passes (src/cpu/passes/) are applied by the primitive; a sum
// post-op accumulates into its input's buffer, which the memory plan makes the output's
// buffer when nothing reads it later (else execute() copies it into the output first).
// A dense f32 3x3 stride-1 convolution runs oneDNN's Winograd kernel where it pays (see
// winograd_pays). The primitive's scratchpad is the node's working memory in the graph's
// arena (Node::scratch_bytes), not oneDNN's per-thread one: that one is made again at the
// size of each larger primitive, so a stream of growing shapes faulted in fresh pages of
// Winograd's transformed tiles (11 MB for a recogniser width) on every new shape.
// Where the model's input shapes vary, 1x1 convolutions, windows over few channels (stems),
// windows that mostly read padding (conv_taps_f32.hpp) and, in the graph of a new shape,
// windows over many channels (window_gemm) run kiln's GEMM instead (kiln_gemm_conv):
// nothing is made per shape.
#include <algorithm>
#include <cstring>
#include <functional>
#include <optional>

#include <omp.h>

#include "core/strings.hpp"
#include "cpu/arena.hpp"
#include "cpu/conv_taps_f32.hpp"
#include "cpu/dnnl_util.hpp"
#include "cpu/gemm_f32.hpp"
#include "cpu/grouped_conv_f32.hpp"
#include "cpu/im2col_f32.hpp"
#include "cpu/isa.hpp"
#include "cpu/nodes/conv_geometry.hpp"
#include "cpu/nodes/node_factory.hpp"
#include "cpu/simd_avx2.hpp"
#include "cpu/weights_cache.hpp"
#include "cpu/winograd_f32.hpp"
#include "cpu/work_share.hpp"

namespace kiln::cpu {

namespace {

using dnnl::memory;
using tag = memory::format_tag;


class ConvolutionNode : public Node {
 public:
  explicit ConvolutionNode(const ir::Node& n) : Node(n) {}
  const char* type() const override { return "Convolution"; }
  NodeKind kind() const override { return NodeKind::Convolution; }
  PostOpList* post_ops() override { return &post_ops_; }
  int inplace_input() const override { return post_ops_.sum_input(); }

  bool accepts_post_ops(const std::vector<PostOp>& extra, std::string* why) override {
    auto trial = post_ops_.with(extra, /*allow_sum=*/true, "Convolution", why);
    // keyed by precision too: a new shape's graph may compute in f32 what a hot one does in bf16
    return trial && keeps_jit(*trial, post_ops_, [&](PostOpList& l) { return impl_for(l); }, "convolution", why,
                              fusion_decisions, cat(name, " -> ", outputs.at(0)->name, bf16 ? " bf16" : ""));
  }

  std::vector<InputLayout> prepare() override {
    gemm_.reset();
    grouped_.reset();
    if (auto k = kiln_gemm_conv()) return prepare_kiln_gemm(*k);
    if (auto g = kiln_grouped()) return prepare_kiln_grouped(*g);
    bool until_hot = false;
    if (auto g = kiln_winograd(&until_hot)) return prepare_kiln_winograd(*g, until_hot);
    wino_.reset();
    const ir::Node& n = *source;
    const bool quick = shapes_vary && quick_to_create_is_safe();
    auto made = make_primitive(post_ops_, quick);
    pd_ = made.pd;
    prim_ = made.prim;
    quick_impl = made.chosen;
    impl = pd_.impl_info_str();

    // weights: plain (g)oi[d][h]w -> the primitive's layout, once
    const size_t sp = inputs[0]->shape.size() - 2;
    const int64_t group = n.attr_i("group", 1);
    memory::desc wplain(weight_dims(), memory::data_type::f32, plain_conv_weights_tag(sp, group > 1));
    // through the compiled model's weights cache: packed once, shared by every stream
    weights_ = pack_weights(inputs[1]->constant, cat("conv/g", group), pd_.weights_desc(), [&](memory& dst) {
      memory wsrc(wplain, cpu_engine(), inputs[1]->data);
      reorder_into(wsrc, dst);
    });
    if (has_bias()) bias_ = memory(memory::desc({inputs[1]->shape[0]}, memory::data_type::f32, tag::a), cpu_engine(),
                                   inputs[2]->data);

    if (const PostOp* dw = post_ops_.dw()) {
      // the depthwise weights [C, 1, 3, 3] (as g o i h w) and bias in the layouts it wants
      const memory::desc wmd = pd_.query_md(dnnl::query::exec_arg_md, DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_WEIGHTS);
      dw_weights_ = memory(wmd, cpu_engine());
      memory wsrc(memory::desc(wmd.dims(), memory::data_type::f32, tag::goihw), cpu_engine(),
                  const_cast<void*>(dw->constant.raw()));
      reorder_into(wsrc, dw_weights_);
      const memory::desc bmd = pd_.query_md(dnnl::query::exec_arg_md, DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_BIAS);
      if (bmd.get_size() > 0) {
        dw_bias_ = memory(bmd, cpu_engine());
        std::vector<float> b(static_cast<size_t>(dw->constant.shape()[0]), 0.0f);
        if (dw->dw_bias.defined()) std::memcpy(b.data(), dw->dw_bias.raw(), b.size() * sizeof(float));
        memory bsrc(memory::desc({static_cast<int64_t>(b.size())}, memory::data_type::f32, tag::a), cpu_engine(),
                    b.data());
        reorder_into(bsrc, dw_bias_);
      }
    }
    outputs[0]->set_layout(pd_.dst_desc());
    std::vector<InputLayout> req(inputs.size(), InputLayout::any());
    req[0] = InputLayout::exact(pd_.src_desc());
    if (int k = post_ops_.sum_input(); k >= 0) req[static_cast<size_t>(k)] = InputLayout::exact(pd_.dst_desc());
    return req;
  }

  // kiln's kernels take channels-last (an im2col stem plain NCHW; a 1x1 its producer's channel
  // blocks too); oneDNN's decide in prepare(). A summand: the output's layout as the node would
  // choose it with the edges as they are.
  InputLayout expected_input_layout(size_t i) const override {
    const int sum = post_ops_.sum_input();
    if (i != 0 && static_cast<int>(i) != sum) return InputLayout::any();
    const memory::desc nhwc(to_dims(inputs[i]->shape), memory::data_type::f32, tag::nhwc);
    if (const std::optional<KilnGemm> k = kiln_gemm_conv(false)) {
      if (static_cast<int>(i) == sum)
        return InputLayout::exact(k->block ? memory::desc(to_dims(outputs[0]->shape), memory::data_type::f32, blocked_tag(k->block))
                                           : nhwc);
      if (k->window) return InputLayout::any();  // gathered from channel blocks or channels-last
      // a pointwise one reads its producer's channel blocks too (KilnGemm::in_block)
      if (k->pointwise && k->tap < 0 && k->K % isa_block() == 0) return InputLayout::any();
      return k->pointwise || k->strided || k->taps ? InputLayout::exact(nhwc) : InputLayout::plain();
    }
    if (i == 0 && kiln_grouped()) return InputLayout::exact(nhwc);
    return InputLayout::any();
  }

  size_t scratch_bytes() const override {
    if (grouped_) return Arena::aligned(static_cast<size_t>(grouped_conv_f32::scratch_floats(*grouped_)) * sizeof(float)) *
                         static_cast<size_t>(grouped_threads_);
    if (gemm_ && gemm_->taps) return Arena::aligned(static_cast<size_t>(conv_taps_f32::scratch_floats(*gemm_->taps)) * sizeof(float));
    if (gemm_) return gemm_->scratch_bytes();
    return wino_ ? winograd_f32::scratch_bytes(*wino_, wino_threads_) : pd_.scratchpad_desc().get_size();
  }

  // kiln's Winograd, and its GEMM over channel blocks of the pointwise and window products, address
  // the output per image (Edge::image_stride); not with a summand (start_from_summand copies it in
  // as a whole tensor)
  bool writes_images_apart() const override {
    if (post_ops_.sum_input() >= 0) return false;
    return wino_ || (gemm_ && gemm_->block != 0 && !gemm_->taps && (gemm_->pointwise || gemm_->window));
  }

  void execute(dnnl::stream& stream) override {
    // a sum post-op adds to what the output holds: the summand, unless planned into its buffer
    if (int k = post_ops_.sum_input(); k >= 0) start_from_summand(stream, *inputs[static_cast<size_t>(k)], *outputs[0]);
    if (gemm_) {
      run_kiln_gemm();
      return;
    }
    if (grouped_) {
      run_kiln_grouped();
      return;
    }
    if (wino_) {
      winograd_f32::Geometry g = *wino_;
      g.dst_image = outputs[0]->image_stride();  // a Concat's slice: images further apart
      winograd_f32::run(g, static_cast<const float*>(inputs[0]->data), static_cast<const float*>(weights_.get_data_handle()),
                        has_bias() ? static_cast<const float*>(inputs[2]->data) : nullptr, static_cast<float*>(outputs[0]->data),
                        scratch, wino_threads_);
      return;
    }
    std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, inputs[0]->memory()},
                                            {DNNL_ARG_WEIGHTS, weights_},
                                            {DNNL_ARG_DST, outputs[0]->memory()}};
    if (bias_) args[DNNL_ARG_BIAS] = bias_;
    scratchpad_.add_to(args, pd_.scratchpad_desc(), scratch);
    post_ops_.add_args(args);
    if (dw_weights_) args[DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_WEIGHTS] = dw_weights_;
    if (dw_bias_) args[DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_BIAS] = dw_bias_;
    prim_.execute(stream, args);
  }

 private:
  // kiln's GEMM where the model's input shapes vary (Node::shape_agnostic: nothing made per
  // shape, where oneDNN makes a primitive for every new one): a 1x1 convolution (stride 1,
  // unpadded, group 1) is the GEMM of its channels-last pixels [N*H*W, Cin] by [Cin, Cout]; at a
  // stride (unpadded: a ResNet's downsampling shortcut), of the pixels it reads, gathered from
  // the channels-last input a few output rows at a time per thread, or for the team's GEMM
  // (kTeamGatherMinB) (oneDNN made a brgconv_1x1 primitive for each new shape: RegNet-Y-400MF,
  // 26 in 12 shapes, 7.3 ms); a
  // window over few channels (K = Cin * kh * kw up to im2col_f32::kMaxColumns: an image stem,
  // 3 x 3 x 3) the GEMM of its im2col rows, made per thread a few output rows at a time from
  // plain NCHW; in a new shape's graph, a window over more channels (a multiple of 8) that kiln's Winograd
  // does not take (`window`: GoogLeNet's 3x3s over 14 x 14 and 7 x 7 maps, strided ones) the
  // GEMM of its im2col rows gathered from channel blocks or channels-last (window_rows). f32,
  // 2-D, post-ops the GEMM's epilogue computes (a sum first). Other convolutions keep oneDNN's
  // kernels.
  struct KilnGemm {
    bool pointwise = true;
    // a window over many channels: A's rows gathered by im2col_f32::window_rows from the input
    // in channel blocks of `in_block` (0: channels-last; a pointwise one's input too, see
    // `block`), in items of `block_rows` output pixels
    // (or all of them: `block_team`) as for `block`; the output in channel blocks of `block`
    // (blocks of 16: stored straight into them, direct16(); blocks of 8: whole blocks of 6 pixels
    // stored straight into them where gemm_f32::blocked8_supports, the rest scattered from C's
    // rows), or channels-last (0: the GEMM writes it)
    bool window = false;
    int64_t in_block = 0;
    bool strided = false;      // a strided 1x1 window: A gathered from x channels-last (strided_pixels)
    int64_t tap = -1;          // a window whose other taps all read padding: this one's offset (kh * KW + kw)
    std::optional<conv_taps_f32::Plan> taps;  // a window that mostly reads padding: a GEMM per live tap
    im2col_f32::Geometry geo;  // im2col
    int64_t K = 0, N = 0;
    int threads = 1;
    int64_t rows = 1;  // output rows per im2col (or gathering) step
    // strided and team_gather: output rows (of all images, one after another) gathered at a
    // time, each group then one GEMM for the team; else each thread gathers (or im2col's)
    // `rows` output rows of an image and runs a GEMM of its own on them
    bool team_gather = false;
    int64_t gather_rows = 0;
    // pointwise on channel blocks of `in_block` (nChw8c / nChw16c, where the producer wrote
    // them), its output in blocks of `block` (the same, where its readers and its summand take
    // them; a window's or an image stem's output too: stem_into_blocks), else 0 (channels-last):
    // pixels of an image `block_rows` at a time, each thread its own, or, with fewer such items
    // than twice the team (a 7 x 7 map), all pixels at once for the team (`block_team`): with
    // blocks of 16 the product reads and writes the blocks itself (direct16()); with blocks of 8
    // the pixels gathered into channels-last rows of A, their product's rows scattered back into
    // blocks (but whole blocks of 6 pixels, gemm_f32::blocked8_supports) or written as the
    // output's rows
    int64_t block = 0;
    int64_t block_rows = 0;
    bool block_team = false;
    int64_t lda() const { return strided ? geo.c : geo.row_stride(); }
    // AVX-512 (gemm_f32::run_serial_blocked16): a pointwise product over blocks of 16 reads them
    // and writes the output's blocks of 16 or its rows itself, a window's gathered rows go
    // straight into the output's blocks of 16 (a stem's too: run_kiln_gemm). No C rows; a
    // pointwise one no A rows either (1x1 over 2400 pixels, one thread, Zen 4, against gathered
    // rows and a scatter: 64 -> 64 channels 220 -> 179 us, 128 -> 16 137 -> 86, 16 -> 64 69 ->
    // 52; 600 x 512 -> 64 402 -> 337)
    bool direct16() const {
      const bool a16 = pointwise && in_block == 16;
      return (a16 || (window && block == 16)) && (block == 16 || block == 0) &&
             gemm_f32::blocked16_supports(a16, block == 16, K, N);
    }
    size_t scratch_floats() const {
      if (window || (in_block && pointwise)) {
        if (direct16()) return static_cast<size_t>(window ? block_rows * K : 0);
        return static_cast<size_t>(block_rows * (K + (block ? N : 0)));
      }
      // (a stem into blocks of 8: C's rows after A's, for a step's last pixels, fewer than 6)
      return static_cast<size_t>((team_gather ? gather_rows : rows) * geo.ow * lda() + (block == 8 ? 6 * N : 0));
    }
    size_t scratch_bytes() const {
      if (pointwise && !in_block) return 0;
      return Arena::aligned(scratch_floats() * sizeof(float)) * (team_gather || block_team ? 1 : static_cast<size_t>(threads));
    }
    // rows of A in about `floats` (a multiple of the GEMM's 6-row blocks) per item of an image's
    // `pixels` output pixels, or all pixels at once for the team's GEMM where that leaves fewer
    // items than twice the team
    void share_rows(int64_t images, int64_t pixels, int64_t floats) {
      block_rows = std::min(pixels, std::clamp<int64_t>(floats / K / 6 * 6, 24, 240));
      const int64_t items = images * ((pixels + block_rows - 1) / block_rows);
      block_team = items < 2 * threads;
      if (block_team) block_rows = images * pixels;
    }
  };
  // A strided 1x1 runs its GEMM for the team, on its pixels gathered kGatherBytes at a time (all
  // of them at a ResNet's sizes), where the per-thread items would leave a thread idle or each
  // read a packed B of kTeamGatherMinB or more again: ResNeXt's last downsample at 7 x 7 output
  // pixels was one item, on one thread (2.7 ms, 1.35 for the team), and its second stage's
  // items of 2 rows each read B's 512 KiB again (1.27 -> 1.19 ms). RegNet's smaller shortcuts
  // keep the per-thread items: their gathered rows stay in cache, and the team's split of
  // N = 440 into 7 panels ran 14% slower.
  static constexpr size_t kGatherBytes = size_t{4} << 20;
  static constexpr size_t kTeamGatherMinB = size_t{512} << 10;

  // `with_readers`: the channel blocks only where the output's readers take them (readers_take);
  // without, as the edges alone allow (what expected_input_layout answers: no asking further on)
  std::optional<KilnGemm> kiln_gemm_conv(bool with_readers = true) const {
    const Shape &x = inputs[0]->shape, &w = inputs[1]->shape, &y = outputs[0]->shape;
    if (!shape_agnostic || bf16 || !gemm_f32::available() || x.size() != 4 || post_ops_.dw()) return std::nullopt;
    if (source->attr_i("group", 1) != 1) return std::nullopt;
    const int sum = post_ops_.sum_input();
    if (sum >= 0 && post_ops_.ops.front().kind != PostOp::Kind::sum) return std::nullopt;
    gemm_f32::Epilogue probe;
    if (!to_gemm_epilogue_per_channel(post_ops_, sum >= 0 ? 1 : 0, w[0], probe, nullptr)) return std::nullopt;
    KilnGemm k;
    k.N = w[0];
    k.threads = omp_get_max_threads();
    k.geo = im2col_geometry(*source, x, w, y);
    const im2col_f32::Geometry& g = k.geo;
    k.pointwise = g.pointwise();
    k.K = g.columns();
    if (!k.pointwise) {
      if (const std::optional<int64_t> tap = lone_live_tap(g)) {
        k.pointwise = true;
        k.tap = *tap;
        k.K = g.c;
      } else if (g.strided_pointwise()) {
        k.strided = true;
      }
    }
    if (!k.pointwise && !k.strided && k.K > im2col_f32::kMaxColumns) {
      k.taps = conv_taps_f32::plan(g, x[0], k.N);  // (DeepLab's atrous pyramid over a small map)
      if (!k.taps && !window_gemm(k, with_readers)) return std::nullopt;
      if (k.window) return k;
    }
    k.rows = std::max<int64_t>(1, std::min<int64_t>((48 + g.ow - 1) / g.ow, g.oh));  // 8 blocks of 6 rows of A
    const int64_t items = x[0] * ((g.oh + k.rows - 1) / k.rows);
    k.team_gather = k.strided && (items < k.threads || static_cast<size_t>(gemm_f32::packed_size(k.K, k.N)) *
                                                               sizeof(float) >= kTeamGatherMinB);
    if (k.team_gather)
      k.gather_rows = std::clamp<int64_t>(static_cast<int64_t>(kGatherBytes / (static_cast<size_t>(g.ow * g.c) * sizeof(float))),
                                          1, x[0] * g.oh);
    // a pointwise product reads its producer's channel blocks (no Reorder before it), and writes
    // blocks where its readers and summand take them, else channels-last (no Reorder after it:
    // SqueezeNet's 1000-channel classifier and GoogLeNet's 1x1s into 24 channels with AVX-512's
    // blocks of 16, ResNeXt's first 1x1s read by kiln's channels-last grouped convolution)
    if (const int64_t b = channel_block(*inputs[0]); b > 0 && k.pointwise && k.tap < 0 && k.K % b == 0) {
      const int64_t sum_block = sum < 0 ? -1 : channel_block(*inputs[sum]);  // -1: no summand, 0: channels-last
      const bool out_blocks =
          k.N % b == 0 && (sum_block < 0 || sum_block == b) &&
          (!with_readers || readers_take(memory::desc(to_dims(y), memory::data_type::f32, blocked_tag(b))));
      if (out_blocks || sum_block <= 0) {  // a channels-last output: its summand channels-last too
        k.in_block = b;
        k.block = out_blocks ? b : 0;
        k.share_rows(x[0], g.h * g.w, int64_t{32} << 10);  // A's rows in about 128 KiB
      }
    }
    if (!k.pointwise && !k.strided && !k.taps && with_readers) k.block = stem_into_blocks(k, probe);
    return k;
  }

  // The channel block (8 or 16) an image stem (im2col rows from plain NCHW) writes, or 0 for
  // channels-last: where only poolings read it and take the blocks, output channels a multiple
  // of the block, no sum. Below AVX-512 blocks of 8, its whole blocks of 6 pixels stored
  // straight into them (gemm_f32::run_serial_to_blocked8: a clamp epilogue); with AVX-512
  // blocks of 16, all its rows straight into them (run_serial_blocked16). SqueezeNet's stem wrote channels-last,
  // its pool too, so its first Fire module's 1x1s ran channels-last and its Concat reordered a
  // source into channel blocks (a oneDNN reorder made for every new shape); the recogniser's
  // first 3x3 after the pool takes blocks as well (a Reorder of the pool's output with AVX-512).
  int64_t stem_into_blocks(const KilnGemm& k, const gemm_f32::Epilogue& probe) const {
    const int64_t b = isa_block();
    if (post_ops_.sum_input() >= 0 || output_readers.empty() || k.N % b != 0 ||
        (b == 8 && !gemm_f32::blocked8_supports(probe, 8, k.N)))
      return 0;
    for (const Node* r : output_readers)
      if (r->kind() != NodeKind::Pooling) return 0;
    return readers_take(memory::desc(to_dims(outputs[0]->shape), memory::data_type::f32, blocked_tag(b))) ? b : 0;
  }

  // window_gemm's conditions but Winograd's: the graph of a new shape and window_channels.
  bool window_gemm_fits(int64_t in_channels, int64_t out_channels) const {
    return shapes_vary && window_channels(in_channels, out_channels);
  }
  // The channels window_gemm takes (kiln_winograd asks them too): input channels a multiple
  // of 8, 48 output channels or more.
  static bool window_channels(int64_t in_channels, int64_t out_channels) {
    return in_channels % 8 == 0 && out_channels >= 48;
  }

  // Whether kiln's GEMM runs this window convolution (KilnGemm::window), and then its layouts and
  // items into `k`. oneDNN's direct kernel makes a primitive (JIT code) for every new shape:
  // GoogLeNet's 16 such convolutions took about 3 ms of its 4 ms plan. Run as the GEMM of
  // gathered windows they cost nothing to plan but run slower where the products are small
  // against the copies (AMD Zen 2, 2 threads, in the model against oneDNN's direct kernel, with
  // the product still scattered into blocks: GoogLeNet's 3x3s over 96-192 channels into 208-384
  // 0.91-1.10 of the time, 16-48 channels into 48-128 1.05-1.3; SqueezeNet's 1.04-1.33; CRNN's
  // 1.26-1.38 at [1, 3, 48, 96], whose stores straight into the blocks then took 0.941). So the
  // node counts as a quick one (Node::quick_impl): the graph of a shape that turns hot is built
  // again with oneDNN's kernel. Where:
  // - a graph for a new shape of a model whose shapes vary (not its hot rebuild);
  // - with AVX-512 too (AMD Zen 4, 2 threads, interleaved runs of each stream, least of 4: with
  //   Winograd's rule of AVX2 as well, the first pass of SqueezeNet's stream took 0.61 of the
  //   time with oneDNN's kernels made per shape, GoogLeNet's 0.77, DenseNet's 0.89, the
  //   recogniser's 0.88; later passes 0.90, 0.96, 0.94 and 0.96: each shape's own JIT code and
  //   weights, brought into cache again at each shape, cost more than the gathered windows);
  // - input channels a multiple of 8 (whole vectors of a tap), output channels 48 or more: a
  //   narrower product fills half of the GEMM's 64-column panel (312 x 1152 x 32 ran at 154
  //   GFLOP/s against 189 for x 64), and DenseNet's 3x3s into 32 channels, alike in a whole
  //   dense block, share one primitive of oneDNN's between them (densenet_hw 1.025 of the time);
  //   GoogLeNet's 16 -> 48 at 14 x 14 costs 0.01 ms a run more than oneDNN's kernel, which costs
  //   about 0.13 ms to make for each new shape;
  // - where kiln's Winograd does not run it.
  // The input read as the edge holds it, in channel blocks or else channels-last; the output in
  // the blocks of the ISA's convolutions (8, or 16 with AVX-512) where the readers (and the
  // summand) take them, else channels-last.
  bool window_gemm(KilnGemm& k, bool with_readers) const {
    const im2col_f32::Geometry& g = k.geo;
    if (!window_gemm_fits(g.c, k.N) || kiln_winograd()) return false;
    k.window = true;
    if (const int64_t b = channel_block(*inputs[0]); b > 0 && g.c % b == 0) k.in_block = b;
    const int sum = post_ops_.sum_input();
    const int64_t b = isa_block();
    const memory::desc blocked(to_dims(outputs[0]->shape), memory::data_type::f32, blocked_tag(b));
    if (k.N % b == 0 && (sum < 0 || channel_block(*inputs[static_cast<size_t>(sum)]) == b) &&
        (!with_readers || readers_take(blocked)))
      k.block = b;
    // A's rows in about 64 KiB (16 K floats: 1.5% faster than 64 K on GoogLeNet's windows)
    k.share_rows(inputs[0]->shape[0], g.oh * g.ow, int64_t{16} << 10);
    return true;
  }

  // Whether every reader of the output takes it in layout `d` (Node::expected_input_layout): a
  // 1x1 convolution keeps its input's channel blocks only where no reader would reorder its
  // output (ResNeXt's first 1x1s after the pool read by kiln's channels-last grouped
  // convolution: one Reorder of the pool's 64 channels, not two of their 128 and 256).
  bool readers_take(const memory::desc& d) const {
    for (const Node* r : output_readers)
      for (size_t j = 0; j < r->inputs.size(); ++j) {
        if (r->inputs[j] != outputs[0]) continue;
        const InputLayout want = r->expected_input_layout(j);
        if (want.kind == InputLayout::Kind::plain || (want.kind == InputLayout::Kind::exact && !(*want.desc == d)))
          return false;
      }
    return true;
  }

  // The channel block of a 4-D edge in nChw8c / nChw16c (cpu::channel_block), else 0.
  static int64_t channel_block(const Edge& e) {
    if (e.is_plain() || e.shape.size() != 4) return 0;
    const std::optional<int64_t> b = cpu::channel_block(*e.blocked);
    return b && (*b == 8 || *b == 16) ? *b : 0;
  }

  // The channel-blocked layout of blocks of b (8 or 16)
  static tag blocked_tag(int64_t b) { return b == 16 ? tag::nChw16c : tag::nChw8c; }
  // The channel block of the ISA's convolutions: 16 with AVX-512 (oneDNN's nChw16c), else 8
  static int64_t isa_block() { return isa_at_least(Isa::avx512_core) ? 16 : 8; }

  // A dilated window over a map smaller than its dilation (DeepLab's atrous pyramid: dilations
  // 12, 24 and 36 over a 10 x 15 map) where, at stride 1, every tap but one reads only padding
  // for every output pixel and that one reads the pixel at the output's place: the convolution
  // is the 1x1 one of that tap's weights. Its offset in the window, or nothing. (oneDNN has
  // only brgconv for such a window, 1.5 ms to make for every new shape.)
  static std::optional<int64_t> lone_live_tap(const im2col_f32::Geometry& g) {
    if (g.stride_h != 1 || g.stride_w != 1 || g.oh != g.h || g.ow != g.w) return std::nullopt;
    // the one tap of an axis that reads the input (kernel size, dilation, pad before, size)
    auto live = [](int64_t k, int64_t d, int64_t pad, int64_t n) -> std::optional<int64_t> {
      std::optional<int64_t> found;
      for (int64_t t = 0; t < k; ++t) {
        const int64_t first = t * d - pad, last = n - 1 + t * d - pad;  // inputs its outputs 0 .. n-1 read
        if (last < 0 || first >= n) continue;
        if (found || first != 0) return std::nullopt;  // a second live tap, or one off the output's place
        found = t;
      }
      return found;
    };
    const auto th = live(g.kh, g.dil_h, g.pad_t, g.h), tw = live(g.kw, g.dil_w, g.pad_l, g.w);
    if (!th || !tw) return std::nullopt;
    return *th * g.kw + *tw;
  }

  std::vector<InputLayout> prepare_kiln_gemm(const KilnGemm& k) {
    gemm_ = k;
    quick_impl = k.window;  // the hot rebuild takes oneDNN's direct kernel (window_gemm)
    impl = k.pointwise || k.strided ? std::string(gemm_f32::impl_name())
           : k.taps                 ? cat("kiln_taps_", gemm_f32::impl_name() + 5)     // kiln_taps_gemm:...
                                    : cat("kiln_im2col_", gemm_f32::impl_name() + 5);  // kiln_im2col_gemm:...
    if (k.taps) return prepare_kiln_taps(*k.taps);
    const memory::desc packed({gemm_f32::packed_size(k.K, k.N)}, memory::data_type::f32, tag::a);
    // B(k, n) = W[n][k], k over (in channel, kernel row, kernel column); with a lone live tap,
    // B(c, n) = W[n][c][tap]: every window-th float from the tap's
    const bool tap = k.tap >= 0;
    const int64_t stride_k = tap ? k.geo.kh * k.geo.kw : 1;
    const std::string key = tap        ? cat("conv/kiln_gemm/tap", k.tap, "/", gemm_f32::impl_name())
                            : k.window ? cat("conv/kiln_gemm/window/", gemm_f32::impl_name())
                                       : cat("conv/kiln_gemm/", gemm_f32::impl_name());
    weights_ = pack_weights(inputs[1]->constant, key, packed, [&](memory& dst) {
      const float* w = static_cast<const float*>(inputs[1]->data);
      std::vector<float> reordered;  // a window's columns (tap, channel): window_rows' order
      if (k.window) {
        reordered.resize(static_cast<size_t>(k.K * k.N));
        im2col_f32::window_weights(k.geo, k.N, w, reordered.data());
        w = reordered.data();
      }
      gemm_f32::pack_b(w + (tap ? k.tap : 0), k.K, k.N, stride_k, k.K * stride_k, 1.0f,
                       static_cast<float*>(dst.get_data_handle()));
    });
    const int sum = post_ops_.sum_input();
    gemm_ep_ = {};
    gemm_ep_.bias = has_bias() ? static_cast<const float*>(inputs[2]->data) : nullptr;
    gemm_ep_.accumulate = sum >= 0;  // execute() starts the output from the summand
    to_gemm_epilogue_per_channel(post_ops_, sum >= 0 ? 1 : 0, k.N, gemm_ep_, nullptr);
    const Shape &x = inputs[0]->shape, &y = outputs[0]->shape;
    const tag layout = k.block ? blocked_tag(k.block) : tag::nhwc;
    const memory::desc out_desc(to_dims(y), memory::data_type::f32, layout);
    outputs[0]->set_layout(out_desc);
    std::vector<InputLayout> req(inputs.size(), InputLayout::any());
    req[0] = k.pointwise || k.strided || k.window
                 ? InputLayout::exact(memory::desc(to_dims(x), memory::data_type::f32, k.in_block ? blocked_tag(k.in_block) : tag::nhwc))
                 : InputLayout::plain();
    if (sum >= 0) req[static_cast<size_t>(sum)] = InputLayout::exact(out_desc);
    return req;
  }

  // kiln_gemm_conv's `taps` (conv_taps_f32.hpp): every tap's weights packed once, channels-last
  // in and out, the epilogue split between the first GEMM and the end.
  std::vector<InputLayout> prepare_kiln_taps(const conv_taps_f32::Plan& p) {
    const memory::desc packed({conv_taps_f32::packed_floats(p.c, p.m, p.window)}, memory::data_type::f32, tag::a);
    weights_ = pack_weights(inputs[1]->constant, cat("conv/kiln_taps/", gemm_f32::impl_name()), packed, [&](memory& dst) {
      conv_taps_f32::pack(static_cast<const float*>(inputs[1]->data), p.c, p.m, p.window,
                          static_cast<float*>(dst.get_data_handle()));
    });
    const int sum = post_ops_.sum_input();
    gemm_f32::Epilogue ep;
    ep.bias = has_bias() ? static_cast<const float*>(inputs[2]->data) : nullptr;
    ep.accumulate = sum >= 0;  // execute() starts the output from the summand
    to_gemm_epilogue_per_channel(post_ops_, sum >= 0 ? 1 : 0, p.m, ep, nullptr);
    conv_taps_f32::split_epilogue(p, ep, &gemm_ep_, &taps_last_);
    const memory::desc out_nhwc(to_dims(outputs[0]->shape), memory::data_type::f32, tag::nhwc);
    outputs[0]->set_layout(out_nhwc);
    std::vector<InputLayout> req(inputs.size(), InputLayout::any());
    req[0] = InputLayout::exact(memory::desc(to_dims(inputs[0]->shape), memory::data_type::f32, tag::nhwc));
    if (sum >= 0) req[static_cast<size_t>(sum)] = InputLayout::exact(out_nhwc);
    return req;
  }

  void run_kiln_gemm() {
    const KilnGemm& k = *gemm_;
    const float* x = static_cast<const float*>(inputs[0]->data);
    float* y = static_cast<float*>(outputs[0]->data);
    const float* w = static_cast<const float*>(weights_.get_data_handle());
    const im2col_f32::Geometry& g = k.geo;
    if (k.taps) {
      conv_taps_f32::run(*k.taps, x, w, y, gemm_ep_, taps_last_, static_cast<float*>(scratch), k.threads);
      return;
    }
    if ((k.in_block && k.pointwise) || k.window) {
      run_kiln_gemm_rows(x, w, y);
      return;
    }
    if (k.pointwise) {
      gemm_f32::run(x, inputs[0]->shape[0] * g.h * g.w, k.K, k.K, w, k.N, y, k.N, gemm_ep_);
      return;
    }
    if (k.team_gather) {
      float* cols = static_cast<float*>(scratch);
      const int64_t out_rows = inputs[0]->shape[0] * g.oh;
      for (int64_t r0 = 0; r0 < out_rows; r0 += k.gather_rows) {
        const int64_t n = std::min(k.gather_rows, out_rows - r0);
#pragma omp parallel for num_threads(k.threads) schedule(static)
        for (int64_t r = r0; r < r0 + n; ++r)
          im2col_f32::strided_pixels(g, x + r / g.oh * g.c * g.h * g.w, r % g.oh, 1, cols + (r - r0) * g.ow * g.c);
        gemm_f32::run(cols, n * g.ow, k.K, g.c, w, k.N, y + r0 * g.ow * k.N, k.N, gemm_ep_);
      }
      return;
    }
    const int64_t chunks = (g.oh + k.rows - 1) / k.rows, items = inputs[0]->shape[0] * chunks;
    const size_t per_thread = Arena::aligned(k.scratch_floats() * sizeof(float));
    WorkShare shared(items, k.threads);  // each thread its items, then the others' last ones
#pragma omp parallel num_threads(k.threads)
    {
      const int t = omp_get_thread_num();
      float* cols = reinterpret_cast<float*>(static_cast<char*>(scratch) + per_thread * static_cast<size_t>(t));
      shared.run(t, [&](int64_t item) {
        const int64_t img = item / chunks, oh0 = item % chunks * k.rows, rows = std::min(k.rows, g.oh - oh0);
        if (k.strided)
          im2col_f32::strided_pixels(g, x + img * g.c * g.h * g.w, oh0, rows, cols);
        else
          im2col_f32::rows(g, x + img * g.c * g.h * g.w, oh0, rows, cols);
        if (k.block) {  // a stem into the output's channel blocks (stem_into_blocks)
          const int64_t pixels = g.oh * g.ow, p0 = oh0 * g.ow, n = rows * g.ow, whole = k.block == 8 ? n / 6 * 6 : 0;
          if (k.block == 16) {  // AVX-512: straight into them
            gemm_f32::run_serial_blocked16(cols, n, k.K, k.lda(), 0, w, k.N, y + img * k.N * pixels + p0 * 16, 0,
                                           pixels * 16, gemm_ep_);
            return;
          }
          if (whole > 0)
            gemm_f32::run_serial_to_blocked8(cols, whole, k.K, k.lda(), w, k.N, y + img * k.N * pixels + p0 * 8,
                                             pixels * 8, gemm_ep_);
          if (whole == n) return;
          float* c = cols + n * k.lda();
          gemm_f32::run_serial(cols + whole * k.lda(), n - whole, k.K, k.lda(), w, k.N, c, k.N, gemm_ep_);
          BlockRows{k.N, k.block, pixels, img, p0 + whole, n - whole}.scatter(c, y);
          return;
        }
        gemm_f32::run_serial(cols, rows * g.ow, k.K, k.lda(), w, k.N, y + (img * g.oh + oh0) * g.ow * k.N, k.N, gemm_ep_);
      });
    }
  }

  // Pixels [p0, p0 + rows) of image `img` of a channel-blocked tensor of `c` channels (blocks of
  // b, `pixels` an image) as channels-last rows ([rows][c]): gathered from the blocks, or
  // scattered back into them.
  struct BlockRows {
    int64_t c, b, pixels, img, p0, rows;
    void gather(const float* blocked, float* out) const { b == 8 ? copy<8>(blocked, out, false) : copy<16>(blocked, out, false); }
    void scatter(const float* in, float* blocked) const { b == 8 ? copy<8>(in, blocked, true) : copy<16>(in, blocked, true); }
    // B floats at a time, as AVX2 vectors (the node runs kiln's GEMM: AVX2 at least; a 32-byte
    // memcpy in the baseline build was two 16-byte moves: DenseNet-121 0.974-0.982 of the time)
    template <int64_t B>
    KILN_AVX2 void copy(const float* from, float* to, bool to_blocks) const {
      for (int64_t cb = 0; cb < c / B; ++cb) {
        const int64_t plane = ((img * (c / B) + cb) * pixels + p0) * B;
        const int64_t from_step = to_blocks ? c : B, to_step = to_blocks ? B : c;
        const float* f = from + (to_blocks ? cb * B : plane);
        float* t = to + (to_blocks ? plane : cb * B);
        for (int64_t p = 0; p < rows; ++p, f += from_step, t += to_step)
          for (int64_t v = 0; v < B; v += 8) _mm256_storeu_ps(t + v, _mm256_loadu_ps(f + v));
      }
    }
  };

  // KilnGemm::block (a pointwise product over channel blocks) and KilnGemm::window (see there):
  // A's rows gathered, then the GEMM into C's rows, scattered into the output's channel blocks
  // (or, channels-last, the output's own rows). The output holds the summand when the epilogue
  // accumulates (execute()), gathered into C's rows with A's. Where the output is in blocks of 8
  // and the epilogue a clamp (gemm_f32::blocked8_supports), whole blocks of 6 pixels skip the
  // copies: a pointwise product reads and writes the blocks themselves (run_serial_blocked8), a
  // window's stores its rows straight into the output's blocks (run_serial_to_blocked8).
  void run_kiln_gemm_rows(const float* x, const float* w, float* y) {
    const KilnGemm& k = *gemm_;
    const im2col_f32::Geometry& g = k.geo;
    const int64_t images = inputs[0]->shape[0], pixels = g.oh * g.ow;
    auto gather_a = [&](int64_t img, int64_t p0, int64_t rows, float* a) {
      if (k.window)
        im2col_f32::window_rows(g, k.in_block ? k.in_block : g.c, x + img * g.c * g.h * g.w, p0, rows, a);
      else
        BlockRows{k.K, k.in_block, pixels, img, p0, rows}.gather(x, a);
    };
    const bool direct = k.block == 8 && gemm_f32::blocked8_supports(gemm_ep_, k.window ? 8 : k.K, k.N);
    const bool direct16 = k.direct16(), a16 = direct16 && !k.window;  // (a16: A is the input's blocks)
    // image `img` of the output in channel blocks: its own size apart, or further where the output
    // is a slice of a Concat's (writes_images_apart)
    const int64_t y_image = k.block ? outputs[0]->image_stride() : k.N * pixels;
    auto yi = [&](int64_t img) { return y + img * y_image; };
    // rows [p0, p0 + rows) of image img, columns [n0, n1): A from the input's blocks, or `rows_a`
    // (a window's gathered rows)
    auto product16 = [&](const float* rows_a, int64_t img, int64_t p0, int64_t rows, int64_t n0, int64_t n1) {
      const float* a = a16 ? x + img * k.K * pixels + p0 * 16 : rows_a;
      if (k.block)
        gemm_f32::run_serial_blocked16(a, rows, k.K, k.K, a16 ? pixels * 16 : 0, w, k.N, yi(img) + p0 * 16, 0,
                                       pixels * 16, gemm_ep_, n0, n1);
      else
        gemm_f32::run_serial_blocked16(a, rows, k.K, k.K, a16 ? pixels * 16 : 0, w, k.N, yi(img) + p0 * k.N, k.N, 0,
                                       gemm_ep_, n0, n1);
    };
    // rows [p0, p0 + rows) of image `img` from A's rows `a` into C's rows `c`, scattered back
    auto rows_via_c = [&](const float* a, float* c, int64_t img, int64_t p0, int64_t rows) {
      const BlockRows out{k.N, k.block, pixels, 0, p0, rows};
      if (gemm_ep_.accumulate) out.gather(yi(img), c);
      gemm_f32::run_serial(a, rows, k.K, k.K, w, k.N, c, k.N, gemm_ep_);
      out.scatter(c, yi(img));
    };
    if (k.block_team && direct16) {  // every pixel at once, the team split by C's panels (or pixels)
      float* a = static_cast<float*>(scratch);
      if (k.window) {
#pragma omp parallel for num_threads(k.threads) schedule(static)
        for (int64_t item = 0; item < images * k.threads; ++item) {
          const int64_t img = item / k.threads, p0 = pixels * (item % k.threads) / k.threads,
                        p1 = pixels * (item % k.threads + 1) / k.threads;
          gather_a(img, p0, p1 - p0, a + (img * pixels + p0) * k.K);
        }
      }
      const int64_t panels = (k.N + gemm_f32::kPanel - 1) / gemm_f32::kPanel;
#pragma omp parallel num_threads(k.threads)
      {
        const int t = omp_get_thread_num(), nt = omp_get_num_threads();
        const bool by_panels = panels >= nt;
        const int64_t n0 = by_panels ? panels * t / nt * gemm_f32::kPanel : 0;
        const int64_t n1 = by_panels ? std::min(k.N, panels * (t + 1) / nt * gemm_f32::kPanel) : k.N;
        const int64_t p0 = by_panels ? 0 : pixels * t / nt, p1 = by_panels ? pixels : pixels * (t + 1) / nt;
        for (int64_t img = 0; img < images && n0 < n1 && p0 < p1; ++img)
          product16(k.window ? a + (img * pixels + p0) * k.K : nullptr, img, p0, p1 - p0, n0, n1);
      }
      return;
    }
    if (k.block_team) {  // every pixel at once: A [images * pixels][K], C after it (or the output)
      float* a = static_cast<float*>(scratch);
      float* c = k.block ? a + k.block_rows * k.K : y;
      if (direct && !k.window) {  // A is the input itself
        team_blocks8(images, pixels, [&](int64_t img, int64_t b0, int64_t nb, int64_t n0, int64_t n1) {
          gemm_f32::run_serial_blocked8(x + img * k.K * pixels + b0 * 48, nb * 6, k.K, pixels * 8, w, k.N,
                                        yi(img) + b0 * 48, pixels * 8, gemm_ep_, n0, n1);
        }, [&](int64_t img, int64_t p0, int64_t rows) {
          gather_a(img, p0, rows, a + (img * pixels + p0) * k.K);
          rows_via_c(a + (img * pixels + p0) * k.K, c + (img * pixels + p0) * k.N, img, p0, rows);
        });
        return;
      }
#pragma omp parallel for num_threads(k.threads) schedule(static)
      for (int64_t item = 0; item < images * k.threads; ++item) {  // each image's pixels in a share per thread
        const int64_t img = item / k.threads, p0 = pixels * (item % k.threads) / k.threads,
                      p1 = pixels * (item % k.threads + 1) / k.threads;
        gather_a(img, p0, p1 - p0, a + (img * pixels + p0) * k.K);
        if (gemm_ep_.accumulate && k.block && !direct)
          BlockRows{k.N, k.block, pixels, 0, p0, p1 - p0}.gather(yi(img), c + (img * pixels + p0) * k.N);
      }
      if (direct) {  // a window's gathered rows into the output's blocks
        team_blocks8(images, pixels, [&](int64_t img, int64_t b0, int64_t nb, int64_t n0, int64_t n1) {
          gemm_f32::run_serial_to_blocked8(a + (img * pixels + b0 * 6) * k.K, nb * 6, k.K, k.K, w, k.N,
                                           yi(img) + b0 * 48, pixels * 8, gemm_ep_, n0, n1);
        }, [&](int64_t img, int64_t p0, int64_t rows) {
          rows_via_c(a + (img * pixels + p0) * k.K, c + (img * pixels + p0) * k.N, img, p0, rows);
        });
        return;
      }
      gemm_f32::run(a, images * pixels, k.K, k.K, w, k.N, c, k.N, gemm_ep_);
      if (!k.block) return;
#pragma omp parallel for num_threads(k.threads) schedule(static)
      for (int64_t item = 0; item < images * k.threads; ++item) {
        const int64_t img = item / k.threads, p0 = pixels * (item % k.threads) / k.threads,
                      p1 = pixels * (item % k.threads + 1) / k.threads;
        BlockRows{k.N, k.block, pixels, 0, p0, p1 - p0}.scatter(c + (img * pixels + p0) * k.N, yi(img));
      }
      return;
    }
    const int64_t chunks = (pixels + k.block_rows - 1) / k.block_rows, items = images * chunks;
    const size_t per_thread = Arena::aligned(k.scratch_floats() * sizeof(float));
    WorkShare shared(items, k.threads);  // each thread its items, then the others' last ones
#pragma omp parallel num_threads(k.threads)
    {
      const int t = omp_get_thread_num();
      float* const a = reinterpret_cast<float*>(static_cast<char*>(scratch) + per_thread * static_cast<size_t>(t));
      shared.run(t, [&](int64_t item) {
        const int64_t img = item / chunks;
        int64_t p0 = item % chunks * k.block_rows, rows = std::min(k.block_rows, pixels - p0);
        if (direct16) {  // (a pointwise one has no scratch)
          if (k.window) gather_a(img, p0, rows, a);
          product16(k.window ? a : nullptr, img, p0, rows, 0, k.N);
          return;
        }
        float* const c = a + k.block_rows * k.K;
        int64_t whole = direct ? rows / 6 * 6 : 0;
        if (whole > 0 && !k.window) {  // the whole blocks of 6 pixels from the input's blocks into the output's
          gemm_f32::run_serial_blocked8(x + img * k.K * pixels + p0 * 8, whole, k.K, pixels * 8, w, k.N,
                                        yi(img) + p0 * 8, pixels * 8, gemm_ep_);
          p0 += whole, rows -= whole, whole = 0;  // the rest (fewer than 6) through C's rows below
          if (rows == 0) return;
        }
        gather_a(img, p0, rows, a);
        if (!k.block) {  // channels-last: the output's rows are C's
          gemm_f32::run_serial(a, rows, k.K, k.K, w, k.N, y + (img * pixels + p0) * k.N, k.N, gemm_ep_);
          return;
        }
        if (whole > 0)  // a window's whole blocks of 6 rows straight into the output's blocks
          gemm_f32::run_serial_to_blocked8(a, whole, k.K, k.K, w, k.N, yi(img) + p0 * 8, pixels * 8, gemm_ep_);
        if (whole < rows) rows_via_c(a + whole * k.K, c, img, p0 + whole, rows - whole);
      });
    }
  }

  // The whole blocks of 6 output pixels of every image, over the team: split by blocks of pixels
  // where they share out evenly (a multiple of the team, or 8 a thread or more) and C is at most
  // 512 columns wide, else by C's groups of 16 columns (each thread reads its share of B and all
  // of the small A) where there are as many as threads. By pixels, each thread reads all of B
  // but only its share of A, and its share's blocks run every column group. 2 threads, asm over
  // blocks, GFLOP/s by pixels against by columns: GoogLeNet's inception 4 at batch 1, 168 x 528
  // x 256, 188 against 154; 48 x 528 x 256 162 / 140; 48 x 2048 x 512 181 / 171; but 48 x 320 x
  // 1280 (MobileNet-v2's last 1x1) 175 / 200, 48 x 512 x 2048 188 / 201, and 42 x 832 x 384 (7
  // blocks) 156 / 160: `whole(img, first block, blocks, n0, n1)` computes columns
  // [n0, n1) of blocks [first, first + blocks) of image img in place. Then each image's last
  // pixels (fewer than 6): `tail(img, p0, rows)`, images shared by the threads. (KilnGemm::block_team
  // where gemm_f32::blocked8_supports.)
  template <class Whole, class Tail>
  void team_blocks8(int64_t images, int64_t pixels, const Whole& whole, const Tail& tail) {
    const KilnGemm& k = *gemm_;
    // (groups of 16 columns; N's last 8 count as one: gemm_f32's HalfGroup)
    const int64_t per_image = pixels / 6, groups = (k.N + 15) / 16, blocks = images * per_image;
    const int team = k.threads;
    const bool by_pixels = k.N <= 512 && blocks >= 2 * team && (blocks % team == 0 || blocks >= 8 * team);
    const bool by_columns = groups >= team && !by_pixels;
    // By pixels: each image's blocks in equal parts, about 4 a thread in all (2 blocks or more
    // each), shared by WorkShare: a thread starts on its own images' parts (the images it wrote
    // as the node before) and then takes the other's last ones, as the chunked path above does
    // (on this host one vCPU ran at half speed for minutes at a time while the other was busy:
    // there GoogLeNet's conv2, 64 -> 64 over [2, 64, 50, 52], took 418 us split statically, 317
    // shared).
    // By columns: items of 4 groups (a panel of B), every image's blocks each.
    const int64_t parts = per_image > 0 ? std::clamp<int64_t>((4 * team + images - 1) / images, 1, std::max<int64_t>(1, per_image / 2)) : 0;
    const int64_t panels = (groups + 3) / 4;
    WorkShare shared(by_columns ? (per_image > 0 ? panels : 0) : images * parts, team);
#pragma omp parallel num_threads(team)
    {
      const int t = omp_get_thread_num(), nt = omp_get_num_threads();
      if (by_columns) {
        shared.run(t, [&](int64_t p) {
          const int64_t n0 = p * 64, n1 = std::min(k.N, (p + 1) * 64);
          for (int64_t img = 0; img < images; ++img) whole(img, 0, per_image, n0, n1);
        });
      } else {
        shared.run(t, [&](int64_t item) {
          const int64_t img = item / parts, j = item % parts, first = per_image * j / parts;
          whole(img, first, per_image * (j + 1) / parts - first, 0, k.N);
        });
      }
      if (per_image * 6 < pixels)
        for (int64_t img = t; img < images; img += nt) tail(img, per_image * 6, pixels - per_image * 6);
    }
  }

  // kiln's grouped convolution (grouped_conv_f32.hpp) in the graph of a new input shape of a
  // model whose shapes vary (Node::shapes_vary: nothing made per shape, where oneDNN makes a JIT
  // kernel for every new one, about 1 ms a shape for RegNet-Y-400MF's 16), and in other graphs
  // where kiln_grouped_when_fixed() says: f32, 2-D, group > 1 with more than one input channel a
  // group (depthwise ones have kernels of their own), channels a group the kernel computes (8,
  // 16, 24 or 32 outputs; or 4 in and 4 out), post-ops the GEMM's epilogue computes after it (no
  // sum). Channels-last in and out. Where a fixed-shape graph would take oneDNN's JIT kernel
  // instead, the node counts as a quick one and a shape's hot rebuild takes oneDNN's.
  std::optional<grouped_conv_f32::Geometry> kiln_grouped() const {
    const Shape &x = inputs[0]->shape, &w = inputs[1]->shape, &y = outputs[0]->shape;
    if (bf16 || !grouped_conv_f32::available() || !gemm_f32::available() || x.size() != 4 || post_ops_.dw() ||
        post_ops_.sum_input() >= 0)
      return std::nullopt;
    const int64_t group = source->attr_i("group", 1);
    if (group <= 1 || w[1] == 1 || !grouped_conv_f32::supports(w[1], w[0] / group, group)) return std::nullopt;
    // where shapes vary: nothing made per shape. Else where kiln_grouped_when_fixed() says
    if (!(shapes_vary && shape_agnostic) && !kiln_grouped_when_fixed()) return std::nullopt;
    gemm_f32::Epilogue probe;
    if (!to_gemm_epilogue_per_channel(post_ops_, 0, w[0], probe, nullptr)) return std::nullopt;
    const im2col_f32::Geometry i = im2col_geometry(*source, x, w, y);
    grouped_conv_f32::Geometry g;
    g.c = i.c, g.h = i.h, g.w = i.w, g.m = w[0], g.groups = group, g.kh = i.kh, g.kw = i.kw, g.oh = i.oh, g.ow = i.ow;
    g.stride_h = i.stride_h, g.stride_w = i.stride_w, g.dil_h = i.dil_h, g.dil_w = i.dil_w;
    g.pad_t = i.pad_t, g.pad_l = i.pad_l;
    return g;
  }

  // Whether oneDNN 2.6 has a JIT kernel for this grouped convolution: on AVX-512, or channels a
  // group a multiple of 8 (else it runs its GEMM-based convolution).
  bool onednn_grouped_jit() const {
    const Shape& w = inputs[1]->shape;
    const int64_t group = source->attr_i("group", 1);
    return isa_at_least(Isa::avx512_core) || (w[1] % 8 == 0 && (w[0] / group) % 8 == 0);
  }

  // Whether a graph of fixed shapes (a hot rebuild's too) takes kiln's kernel for this grouped
  // convolution:
  // - where oneDNN 2.6 has no JIT kernel for the groups (below AVX-512, channels a group not a
  //   multiple of 8: its GEMM-based convolution, ResNeXt-50's first stage at [2, 3, 208, 200]
  //   4.7-4.9 ms a layer against ONNX Runtime's 1.5; kiln's 0.9-1.0);
  // - in the graphs of a model whose shapes vary (shape_agnostic: its 1x1 convolutions on kiln's
  //   GEMM, channels-last) below AVX-512, where oneDNN's AVX2 kernel for ResNeXt's groups wants
  //   channel blocks, with Reorders on either side. AMD EPYC Zen 2 (AVX2), 2 threads, a shape
  //   run 60 times, kiln's kernel kept against oneDNN's (adjacent pairs): resnext_hw at [2, 3,
  //   208, 200] 0.96-0.98, regnet_hw at [2, 3, 200, 208] 0.92-0.93 of the time;
  // - in those graphs with AVX-512, for groups of 4 input and 4 output channels, where oneDNN's
  //   JIT kernel wants channel blocks too: resnext_hw at [2, 3, 200, 208] hot, the first stage's
  //   three grouped layers and their Reorders 2660 us, kiln's kernel 1316 (AMD Zen 4, 2 threads,
  //   node medians, 2 alternations). Its other groups stay on oneDNN's kernel there, which reads
  //   channels-last: groups of 8 1413 us against kiln's 1700, of 16 and 32 level.
  bool kiln_grouped_when_fixed() const {
    if (!onednn_grouped_jit()) return true;
    if (!shape_agnostic) return false;
    const Shape& w = inputs[1]->shape;
    const bool fours = w[1] == 4 && w[0] / source->attr_i("group", 1) == 4;
    return !isa_at_least(Isa::avx512_core) || fours;
  }

  std::vector<InputLayout> prepare_kiln_grouped(const grouped_conv_f32::Geometry& g) {
    grouped_ = g;
    grouped_threads_ = omp_get_max_threads();
    quick_impl = !kiln_grouped_when_fixed();  // the hot rebuild takes oneDNN's JIT kernel
    impl = grouped_conv_f32::impl_name();
    const memory::desc packed({grouped_conv_f32::packed_size(g)}, memory::data_type::f32, tag::a);
    weights_ = pack_weights(inputs[1]->constant, "conv/kiln_grouped", packed, [&](memory& dst) {
      grouped_conv_f32::pack_weights(g, static_cast<const float*>(inputs[1]->data), static_cast<float*>(dst.get_data_handle()));
    });
    gemm_ep_ = {};
    gemm_ep_.bias = has_bias() ? static_cast<const float*>(inputs[2]->data) : nullptr;
    to_gemm_epilogue_per_channel(post_ops_, 0, g.m, gemm_ep_, nullptr);
    const memory::desc out_nhwc(to_dims(outputs[0]->shape), memory::data_type::f32, tag::nhwc);
    outputs[0]->set_layout(out_nhwc);
    std::vector<InputLayout> req(inputs.size(), InputLayout::any());
    req[0] = InputLayout::exact(memory::desc(to_dims(inputs[0]->shape), memory::data_type::f32, tag::nhwc));
    return req;
  }

  // Bands of output rows shared by the team (grouped_conv_f32::band_rows a band, or fewer where
  // that leaves a thread less than two), each band's bias and post-ops applied while it is in cache.
  void run_kiln_grouped() {
    const grouped_conv_f32::Geometry& g = *grouped_;
    const float* x = static_cast<const float*>(inputs[0]->data);
    const float* w = static_cast<const float*>(weights_.get_data_handle());
    float* y = static_cast<float*>(outputs[0]->data);
    const int64_t images = inputs[0]->shape[0], per_band = grouped_conv_f32::band_rows(g);
    const int64_t bands = std::min(g.oh, std::max((g.oh + per_band - 1) / per_band, (2 * grouped_threads_ + images - 1) / images));
    const int64_t items = images * bands;
    const bool epilogue = gemm_ep_.bias || !gemm_ep_.ops.empty();
    const size_t per_thread = Arena::aligned(static_cast<size_t>(grouped_conv_f32::scratch_floats(g)) * sizeof(float));
    WorkShare shared(items, grouped_threads_);  // each thread its bands, then the others' last ones
#pragma omp parallel num_threads(grouped_threads_)
    {
      const int t = omp_get_thread_num();
      float* rows = reinterpret_cast<float*>(static_cast<char*>(scratch) + per_thread * static_cast<size_t>(t));
      shared.run(t, [&](int64_t item) {
        const int64_t img = item / bands, band = item % bands;
        const int64_t oy0 = g.oh * band / bands, oy1 = g.oh * (band + 1) / bands;
        float* out = y + img * g.oh * g.ow * g.m;
        grouped_conv_f32::rows(g, x + img * g.h * g.w * g.c, w, oy0, oy1, out, rows);
        if (epilogue) gemm_f32::apply_epilogue(out + oy0 * g.ow * g.m, (oy1 - oy0) * g.ow, g.m, g.m, gemm_ep_);
      });
    }
  }

  // Where the direct JIT kernel runs as fast for a new shape: f32, dense (group 1), a kernel
  // wider than 1x1 and no depthwise post-op; oneDNN's 1x1 and depthwise brgemm kernels ran
  // up to 40% faster than the alternatives (MobileNet-v2: 3.7 -> 5.2 ms when taken everywhere).
  bool quick_to_create_is_safe() const {
    const Shape& w = inputs[1]->shape;
    const bool wide = std::any_of(w.begin() + 2, w.end(), [](int64_t k) { return k > 1; });
    return source->attr_i("group", 1) == 1 && wide && !post_ops_.dw();
  }

  // kiln's Winograd F(4x4, 3x3) (winograd_f32.hpp) where oneDNN has none (a CPU with AVX2 and no
  // AVX-512), or where oneDNN's would make a JIT kernel for every new shape (AVX-512, a model
  // whose input shapes vary: a graph for a new shape, and its hot rebuild, where oneDNN's
  // kernels ran slower);
  // a convolution oneDNN's Winograd would take (winograd_candidate: f32, dense, stride 1), 4-D,
  // padding under the window, post-ops it computes (kiln_winograd_post_ops), and channels and
  // tiles enough that it pays (winograd_f32::pays): against oneDNN's direct kernel, or in the
  // graph of a new shape, against kiln's im2col GEMM that window_gemm would run
  // it on (then below AVX-512 `*until_hot` is set: the hot rebuild asks again and takes
  // oneDNN's direct kernel; with AVX-512 the hot rebuild keeps it). In the blocked layout of the
  // ISA's convolutions: nChw16c with AVX-512, nChw8c with AVX2.
  std::optional<winograd_f32::Geometry> kiln_winograd(bool* until_hot = nullptr) const {
    const bool avx512 = isa_at_least(Isa::avx512_core);
    // (with AVX-512 only in the graphs of a model whose shapes vary, its hot rebuilds included;
    // fixed shapes keep oneDNN's Winograd where winograd_pays)
    if (!winograd_f32::available() || (avx512 && !shape_agnostic) || !winograd_candidate(post_ops_)) return std::nullopt;
    const Shape &x = inputs[0]->shape, &w = inputs[1]->shape, &y = outputs[0]->shape;
    if (x.size() != 4) return std::nullopt;
    const ConvGeometry geo = conv_geometry(*source, x, w, y);
    if (geo.pad_l[0] > 2 || geo.pad_l[1] > 2) return std::nullopt;
    winograd_f32::Geometry g;
    g.batch = x[0], g.ic = w[1], g.oc = w[0];
    g.ih = x[2], g.iw = x[3], g.oh = y[2], g.ow = y[3];
    g.pad_t = geo.pad_l[0], g.pad_l = geo.pad_l[1];
    g.block = isa_block();
    if (!kiln_winograd_post_ops(g)) return std::nullopt;
    if (winograd_f32::pays(g)) return g;
    // where window_gemm would run it (its channels), against the im2col GEMM
    if (!window_channels(g.ic, g.oc) || !winograd_f32::pays(g, true)) return std::nullopt;
    // With AVX-512 in a hot rebuild too: there oneDNN's brgconv and 2x3 Winograd took 1.15-1.6x
    // kiln's time on these layers (AMD Zen 4, 2 threads, SqueezeNet at [1, 3, 176, 232]: its
    // 64 -> 256 over 10 x 14, 12 tiles, 140 us against 176; 32 -> 128 over 21 x 28 118 against
    // 189-195), so nothing to rebuild it for
    if (avx512) return g;
    if (!shapes_vary) return std::nullopt;  // below AVX-512 a hot rebuild takes oneDNN's direct kernel
    if (until_hot) *until_hot = true;
    return g;
  }

  // The post-ops kiln's Winograd computes, into `g`: none, a ReLU (leaky or not), a sum (the
  // residual of a ResNet block), or a sum then a ReLU. Anything else keeps oneDNN's direct kernel.
  bool kiln_winograd_post_ops(winograd_f32::Geometry& g) const {
    size_t i = 0;
    const std::vector<PostOp>& ops = post_ops_.ops;
    if (i < ops.size() && ops[i].kind == PostOp::Kind::sum) g.sum = true, ++i;
    if (i < ops.size() && ops[i].kind == PostOp::Kind::eltwise && ops[i].alg == dnnl::algorithm::eltwise_relu)
      g.relu = true, g.relu_alpha = ops[i].alpha, ++i;
    return i == ops.size();
  }

  // until_hot: taken where it beats only the im2col GEMM (kiln_winograd): a quick node, whose
  // hot rebuild asks again against oneDNN's direct kernel.
  std::vector<InputLayout> prepare_kiln_winograd(const winograd_f32::Geometry& g, bool until_hot) {
    const Shape &x = inputs[0]->shape, &y = outputs[0]->shape;
    wino_ = g;
    wino_threads_ = omp_get_max_threads();
    quick_impl = until_hot;
    impl = winograd_f32::impl_name();
    // transformed once per compiled model, through the weights cache
    const memory::desc packed({static_cast<int64_t>(winograd_f32::weights_floats(g.ic, g.oc))}, memory::data_type::f32, tag::a);
    weights_ = pack_weights(inputs[1]->constant, cat("conv/kiln_wino_4x3/", g.ic, "x", g.oc), packed, [&](memory& dst) {
      winograd_f32::transform_weights(static_cast<const float*>(inputs[1]->data), g.ic, g.oc,
                                      static_cast<float*>(dst.get_data_handle()));
    });
    const tag layout = blocked_tag(g.block);
    const memory::desc in_blocked(to_dims(x), memory::data_type::f32, layout);
    const memory::desc out_blocked(to_dims(y), memory::data_type::f32, layout);
    outputs[0]->set_layout(out_blocked);
    std::vector<InputLayout> req(inputs.size(), InputLayout::any());
    req[0] = InputLayout::exact(in_blocked);
    // the summand in the output's layout: the output is planned into its buffer (inplace_input)
    if (int k = post_ops_.sum_input(); k >= 0) req[static_cast<size_t>(k)] = InputLayout::exact(out_blocked);
    return req;
  }

  bool has_bias() const { return inputs.size() > 2 && inputs[2] && inputs[2]->kind == Edge::Kind::constant; }

  memory::dims weight_dims() const { return conv_weight_dims(inputs[1]->shape, source->attr_i("group", 1)); }

  using PD = dnnl::convolution_forward::primitive_desc;

  // oneDNN's implementation for these post-ops, for the fusion passes (remembered per process).
  std::string impl_for(PostOpList& post_ops) const {
    auto [d, attr] = describe(post_ops);
    return impl_name<PD>(d, attr);
  }

  // The primitive for these post-ops, with oneDNN's choice of layouts (through the thread's
  // memo: layers alike share one). quick: an implementation quicker to create where there is
  // one (prefer_quick_to_create).
  MemoPrimitive<PD, dnnl::convolution_forward> make_primitive(PostOpList& post_ops, bool quick) const {
    // (oneDNN 2.6's Winograd is AVX-512's: below, asking refused the descriptor after trying
    // every implementation, 40 us a convolution, GoogLeNet 0.7 ms of a new shape's plan)
    if (isa_at_least(Isa::avx512_core) && winograd_candidate(post_ops)) {
      auto [d, attr] = describe(post_ops, dnnl::algorithm::convolution_winograd);
      const int64_t out_pixels = outputs[0]->shape[2] * outputs[0]->shape[3];
      const int64_t channels = std::min(inputs[1]->shape[0], inputs[1]->shape[1]);  // in and out
      const bool minor = minor_part_of_a_concat();
      auto made = cached_primitive_if<PD, dnnl::convolution_forward>(
          d, attr, minor ? "minor part of a concat" : "",
          [&](const PD& pd) { return winograd_pays(pd.impl_info_str(), out_pixels, channels, minor); });
      if (made) return *made;
    }
    if (grouped_channels_last()) {
      auto [d, attr] = describe(post_ops, dnnl::algorithm::convolution_direct, tag::nhwc);
      auto made = cached_primitive_if<PD, dnnl::convolution_forward>(
          d, attr, "channels-last", [](const PD& pd) { return std::string(pd.impl_info_str()).rfind("jit", 0) == 0; });
      if (made) return *made;
    }
    auto [d, attr] = describe(post_ops);
    return cached_primitive<PD, dnnl::convolution_forward>(d, attr, quick ? "quick" : "",
                                                           quick ? [](PD& pd) { return prefer_quick_to_create(pd); }
                                                                 : std::function<bool(PD&)>());
  }

  // A grouped convolution (not depthwise) whose input comes channels-last, in a graph for a model
  // whose shapes vary: kiln's GEMM runs the 1x1 convolutions around it channels-last, and
  // oneDNN's choice (channel blocks) put Reorders on both sides, made for every new shape.
  // RegNet-Y-400MF: 4 Reorders a block, 0.11 ms against the grouped convolution's 0.16. oneDNN's
  // direct kernel runs channels-last too, where it is a JIT one. Measured (oneDNN 2.6, AVX-512,
  // 2 threads, 3x3, against channel blocks without the Reorders): 16 channels a group or more,
  // 0.97-1.02x the time; 8 a group, 0.83-1.37x, except where the channels are a power of two
  // (ResNeXt's 32 groups: 128 channels 1.9x, 256 1.8-3.0x, 512 3.4x), as with 4 a group (2.2x):
  // those keep the blocks and the Reorders.
  bool grouped_channels_last() const {
    const Shape &x = inputs[0]->shape, &w = inputs[1]->shape;
    const int64_t group = source->attr_i("group", 1);
    if (!shape_agnostic || bf16 || x.size() != 4 || group == 1 || w[1] == 1) return false;
    const int64_t channels = x[1];
    const bool power_of_two = (channels & (channels - 1)) == 0;
    if (w[1] < 16 && power_of_two) return false;
    return !inputs[0]->is_plain() && inputs[0]->desc() == memory::desc(to_dims(x), memory::data_type::f32, tag::nhwc);
  }

  // Does a Concat read the output as less than half of its own (along any axis but the
  // channels: always)? Then the Concat's layout is its other sources' (see winograd_pays).
  bool minor_part_of_a_concat() const {
    for (const Node* r : output_readers) {
      if (r->kind() != NodeKind::Concat) continue;
      const Shape& whole = r->outputs.at(0)->shape;
      int64_t axis = r->source ? r->source->attr_i("axis", -1) : -1;  // the Concat is not prepared yet
      if (axis < 0) axis += static_cast<int64_t>(whole.size());
      if (axis != 1 || whole.size() < 2 || 2 * outputs[0]->shape[1] < whole[1]) return true;
    }
    return false;
  }

  // Whether oneDNN's Winograd convolution may run this one: f32 (it has no bf16 kernel), 2D,
  // dense, a 3x3 window at stride 1 without dilation, at least 8 input channels (with the
  // 3 of an image, the transforms cost more than they save: 0.3-0.4x the direct kernel's
  // speed) and no depthwise post-op. oneDNN 2.6 has it for AVX-512 only; elsewhere the
  // descriptor is refused and the direct one taken.
  bool winograd_candidate(const PostOpList& post_ops) const {
    const Shape& w = inputs[1]->shape;
    if (bf16 || w.size() != 4 || w[2] != 3 || w[3] != 3 || w[1] < 8 || post_ops.dw()) return false;
    if (source->attr_i("group", 1) != 1) return false;
    const ConvGeometry geo = conv_geometry(*source, inputs[0]->shape, w, outputs[0]->shape);
    auto all = [](const memory::dims& v, int64_t x) {
      return std::all_of(v.begin(), v.end(), [x](int64_t d) { return d == x; });
    };
    return all(geo.strides, 1) && all(geo.dilations, 0);
  }

  // The operation and attributes for these post-ops (`alg`: direct unless asked otherwise).
  std::pair<dnnl::convolution_forward::desc, dnnl::primitive_attr> describe(
      PostOpList& post_ops, dnnl::algorithm alg = dnnl::algorithm::convolution_direct,
      tag activations = tag::any) const {
    const Shape& x = inputs[0]->shape;
    const Shape& w = inputs[1]->shape;
    // with a depthwise post-op the primitive's own output is the host convolution's
    const Shape& y = post_ops.dw() ? post_ops.dw()->conv_out : outputs[0]->shape;
    const ConvGeometry geo = conv_geometry(*source, x, w, y);
    const auto f32 = memory::data_type::f32;
    const auto in_dt = bf16 && !post_ops.dw() ? memory::data_type::bf16 : f32;  // activations and weights
    memory::desc src_any(to_dims(x), in_dt, activations);
    memory::desc dst_any(to_dims(y), bf16_output && in_dt == memory::data_type::bf16 ? memory::data_type::bf16 : f32,
                         activations);
    memory::desc wei_any(weight_dims(), in_dt, tag::any);
    auto d = has_bias() ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, alg, src_any,
                                                          wei_any, memory::desc({w[0]}, f32, tag::a), dst_any,
                                                          geo.strides, geo.dilations, geo.pad_l, geo.pad_r)
                        : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, alg, src_any,
                                                          wei_any, dst_any, geo.strides, geo.dilations, geo.pad_l, geo.pad_r);
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);  // execute() passes the node's scratch
    if (!post_ops.empty()) {
      dnnl::post_ops po;
      post_ops.append_to(po);
      attr.set_post_ops(po);
    }
    return {d, attr};
  }

  PostOpList post_ops_;
  dnnl::convolution_forward::primitive_desc pd_;
  dnnl::convolution_forward prim_;
  memory weights_, bias_;
  memory dw_weights_, dw_bias_;  // of a depthwise post-op
  UserScratchpad scratchpad_;
  std::optional<winograd_f32::Geometry> wino_;  // kiln's Winograd runs the node
  std::optional<KilnGemm> gemm_;                // kiln's GEMM runs the node
  std::optional<grouped_conv_f32::Geometry> grouped_;  // kiln's grouped convolution runs the node
  int grouped_threads_ = 1;
  gemm_f32::Epilogue gemm_ep_;
  gemm_f32::Epilogue taps_last_;  // gemm_->taps: the ops after the last tap (conv_taps_f32::split_epilogue)
  int wino_threads_ = 1;
};

}  // namespace

bool winograd_pays(const std::string& impl, int64_t out_pixels, int64_t channels, bool minor_part_of_a_concat) {
  // F(4x4, 3x3) ("jit_wino_4x3", which oneDNN takes where its blocking fits) ran 2.0-5.5x
  // faster than the direct (brgemm) kernel on every shape measured with 8 or more input
  // channels (16-256 channels, 6x24 to 112x112 outputs). F(2x2, 3x3) ("jit_fp32_wino_2x3",
  // its fallback) ran 1.4-2.1x faster on outputs of 27x27 and more, and 1.4-3.9x with 256
  // channels or more in and out on 10x10 and more; otherwise anywhere from 0.35x to 2x,
  // depending on the channel counts' factors (96 -> 208 at 14x14: 0.35x; 832 -> 384 at 7x7:
  // 0.75x). (AMD Zen 4, 2 threads, f32, relu post-op; docs/performance.md.)
  // Both write channel blocks (nChw16c) where the direct kernel writes channels-last. A
  // Concat takes the layout of most of its data: DenseNet-121 concatenates every earlier
  // layer's 32 channels, all F(2x2) outputs, so its dense blocks went over to channel blocks
  // (Concats 1.1 -> 8.5 ms, Reorders around every layer; 29.6 -> 32.4 ms). Where the
  // Winograd output is half of a Concat or more (SqueezeNet-1.1's Fire modules), the Concat
  // writes it into its channels-last slice by a reorder and the rest by rows: SqueezeNet ran
  // 8% faster. So F(2x2) is not taken as a minor part of a Concat; F(4x4) saves enough anyway.
  if (impl.rfind("jit_wino_4x3", 0) == 0) return true;
  if (impl.rfind("jit_fp32_wino_2x3", 0) != 0 || minor_part_of_a_concat) return false;
  return out_pixels >= 27 * 27 || (channels >= 256 && out_pixels >= 10 * 10);
}

bool convolution_supports(const ir::Node& n) {
  if (n.op_type() != "Conv" || !n.is_onnx_domain() || n.num_inputs() < 2) return false;
  const ir::Value *x = n.input(0), *w = n.input(1), *b = n.input(2);
  if (!x || !w || !w->is_constant() || (b && !b->is_constant())) return false;
  if (x->type.dtype != DType::f32 || w->constant().dtype() != DType::f32) return false;
  if (!x->type.shape.is_static()) return false;
  size_t rank = x->type.shape.rank();
  if (rank < 3 || rank > 5 || w->constant().rank() != rank) return false;
  int64_t group = n.attr_i("group", 1);
  int64_t oc = w->constant().shape()[0];
  return group >= 1 && oc % group == 0;
}

std::unique_ptr<Node> make_convolution_node(const ir::Node& n) { return std::make_unique<ConvolutionNode>(n); }

}  // namespace kiln::cpu
