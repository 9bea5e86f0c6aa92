#pragma once
// cpu::Graph building blocks: Edge (a runtime tensor with a static shape, a layout and a
// place in memory) and Node (one runtime node kind per file under src/cpu/nodes/).
#include <kiln/profiling.hpp>
#include <kiln/tensor.hpp>

#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cpu/post_ops.hpp"
#include "ir/graph.hpp"
#include "snippets/target_machine.hpp"

namespace kiln::cpu {

class FusionDecisions;
struct GraphOptions;

// An optional oneDNN layout, held by pointer: a dnnl::memory::desc is about 700 bytes and most
// edges are plain, so an Edge stays small (a plan of a BERT has some 200 edges, and every new
// input shape of a model makes a plan). The interface of the std::optional it replaces.
class LayoutDesc {
 public:
  LayoutDesc() = default;
  LayoutDesc(std::nullopt_t) {}  // NOLINT: as std::optional
  LayoutDesc(const dnnl::memory::desc& d) : p_(std::make_shared<const dnnl::memory::desc>(d)) {}  // NOLINT
  LayoutDesc& operator=(const dnnl::memory::desc& d) {
    p_ = std::make_shared<const dnnl::memory::desc>(d);
    return *this;
  }
  void reset() { p_.reset(); }
  bool has_value() const { return p_ != nullptr; }
  explicit operator bool() const { return has_value(); }
  const dnnl::memory::desc& operator*() const { return *p_; }
  const dnnl::memory::desc* operator->() const { return p_.get(); }

 private:
  std::shared_ptr<const dnnl::memory::desc> p_;  // null: plain row-major
};

class Node;

struct Edge {
  enum class Kind { arena, constant, input };
  std::string name;
  DType dtype = DType::undefined;
  Shape shape;
  // Graph::consumers()' index: the nodes that read this edge (valid while the graph's index is
  // built; kept here rather than in a map from edges, which a new shape's graph filled anew)
  std::vector<Node*> readers;
  // nullopt: plain row-major (what reference kernels and users see); else a oneDNN
  // layout such as nChw16c chosen by a primitive.
  LayoutDesc blocked;
  Kind kind = Kind::arena;
  Tensor constant;    // Kind::constant
  size_t offset = 0;  // Kind::arena: byte offset in the arena
  void* data = nullptr;  // bound before execution
  Edge* alias_of = nullptr;  // a view: shares the bytes of this edge (its root) ...
  size_t alias_offset = 0;   // ... starting this many bytes in (a Concat input inside the Concat's output)

  size_t bytes() const;
  // Elements from one index of dim 0 (an image) to the next: the layout's stride, which the
  // memory plan may make larger than an image's own size (Node::writes_images_apart).
  int64_t image_stride() const;
  bool is_plain() const { return !blocked.has_value(); }
  // Takes a primitive's layout for this edge: plain when it is the row-major one.
  void set_layout(const dnnl::memory::desc& d);
  // The oneDNN descriptor of this edge (blocked, or plain; throws if oneDNN has no such dtype).
  dnnl::memory::desc desc() const;
  dnnl::memory memory() const;  // over `data` (kept from the first call while `data` stays, else a new one)
  // Called by the graph once layouts and addresses are final: the oneDNN memory object that
  // execute() hands to primitives is made by the first memory() call and kept, so no node
  // creates one per inference.
  void bind_memory();
  // After `data` moved (a new user input): points the cached memory object at it.
  void rebind_data() {
    if (bound_ && bound_->get_data_handle() != data) bound_->set_data_handle(data);
  }
  Tensor tensor() const;        // plain only: a view of `data`
  std::string layout_name() const;  // "plain" or oneDNN's tag, e.g. "aBcd16b"

 private:
  mutable std::optional<dnnl::memory> bound_;
};

// What a node needs an input to look like.
struct InputLayout {
  enum class Kind { any, plain, exact } kind = Kind::any;
  // Kind::exact. By pointer, as an Edge's: every node's prepare() returns one per input, most of
  // them any or plain, for every new input shape's plan (a vector of them with the descriptor
  // inline was 3% of a mobilenet_v3_small plan, its bytes allocated and copied)
  LayoutDesc desc;
  static InputLayout any() { return {}; }
  static InputLayout plain() { return {Kind::plain, {}}; }
  static InputLayout exact(const dnnl::memory::desc& d) { return {Kind::exact, LayoutDesc(d)}; }
};

// The runtime node kinds (one file each under src/cpu/nodes/), for the decisions of the passes;
// type() is the name the counters and describe() show.
enum class NodeKind { Attention, BatchNorm, Binary, Cast, Concat, ConvInteger, Convolution, Deconvolution, DepthwiseBlock, Dequantize, DynamicQuantize, Eltwise, FakeQuantize, If, FullyConnected, GRU, InstanceNorm, LRN, LSTM, LayerNorm, MatMul, MatMulInteger, Pooling, Quantize, QuantizedConvolution, Reduce, Reference, Reorder, Resize, SliceCopy, SliceView, Softmax, SqueezeExcite, Subgraph, Transpose, View };

class Node {
 public:
  Node() = default;  // an inserted node (a Reorder): no IR node, named by the graph
  // A node that runs the IR node `n`: its source, and its name (the IR node's)
  explicit Node(const ir::Node& n) : name(n.name()), source(&n) {}
  virtual ~Node() = default;
  virtual const char* type() const = 0;  // "Convolution", "Reorder", "Reference", ...
  virtual NodeKind kind() const = 0;

  std::string name;
  const ir::Node* source = nullptr;  // the ir node it runs (null for inserted nodes)
  std::vector<Edge*> inputs;         // nullptr for an omitted optional input
  std::vector<Edge*> outputs;
  std::string impl = "ref:any";      // primitive implementation chosen (oneDNN's impl name)
  std::vector<std::string> fused;    // names of the ONNX nodes fused into this one, in order
  // inference_precision = bf16: Convolution / FullyConnected compute on bf16 activations and
  // weights (f32 accumulation and output); the graph inserts the f32 -> bf16 Reorders.
  bool bf16 = false;
  // Convolution (or snippets Subgraph) in bf16 mode whose readers all take bf16: writes its
  // output in bf16 (the edge keeps its logical f32 dtype, its layout says bf16; see
  // keep_bf16_between_convolutions).
  bool bf16_output = false;
  // kiln_snippets_isa: the instruction set Subgraph nodes generate their kernels for.
  snippets::Isa snippets_isa = snippets::Isa::Auto;
  // The model's input shapes vary (GraphOptions::shapes_vary): this node's primitive is made
  // again for every new shape, so where oneDNN has two equally fast kernels, take the one
  // that is cheaper to create.
  bool shapes_vary = false;
  // GraphOptions::shape_agnostic: run kiln's own kernel where the node has one.
  bool shape_agnostic = false;
  // Fusion answers shared by the plans of a model whose shapes vary (GraphOptions), else null.
  FusionDecisions* fusion_decisions = nullptr;
  // Set by the graph just before prepare(): the nodes that read output 0 (not yet prepared;
  // their kind and edges are set), for a node whose best kernel depends on its readers
  // (Convolution: Winograd's blocked output as a small part of a Concat).
  std::vector<const Node*> output_readers;
  // Set by prepare(): shapes_vary made it take an implementation quicker to create than
  // oneDNN's first choice, which may run slower (Graph::quick_nodes()).
  bool quick_impl = false;

  // Called once after construction with the options of the graph being built, for node kinds
  // that compile graphs of their own (If: its branches).
  virtual void take_options(const GraphOptions& options) { (void)options; }

  // Node kinds that take post-ops (Convolution, FullyConnected): their list, else null.
  virtual PostOpList* post_ops() { return nullptr; }
  // Would oneDNN still give this node an optimised (non-reference) kernel with `extra`
  // appended to its post-ops? Asked by the fusion passes before they fuse; `why` gets
  // the reason when not. Called before prepare().
  virtual bool accepts_post_ops(const std::vector<PostOp>& extra, std::string* why) {
    (void)extra;
    if (why) *why = "this node kind takes no post-ops";
    return false;
  }

  // Compile step, called in execution order once the producers are prepared: decides
  // the layout of every output edge, creates primitives, and says which layout each
  // input must have (the graph inserts a Reorder where an input does not match).
  virtual std::vector<InputLayout> prepare() = 0;
  // The layout prepare() will ask of input `i` at the current shapes, asked before it runs (its
  // producer is being prepared: a Concat, which can write several layouts, writes the one its
  // readers take, and no Reorder follows it). any() where the node takes what it is given or
  // decides only in prepare().
  virtual InputLayout expected_input_layout(size_t i) const {
    (void)i;
    return InputLayout::any();
  }
  virtual void execute(dnnl::stream& stream) = 0;
  // >= 0: output 0 is a view of that input's memory (no copy; the graph aliases them).
  virtual int output_aliases_input() const { return -1; }
  // Output `i` as a view: the bytes of input `input` from `offset` on (no copy; the graph
  // aliases them); nullopt: a buffer of its own. By default output 0 of output_aliases_input().
  struct OutputView {
    int input = 0;
    size_t offset = 0;  // bytes
  };
  virtual std::optional<OutputView> output_view(size_t i) const {
    const int k = output_aliases_input();
    return i == 0 && k >= 0 ? std::optional<OutputView>(OutputView{k, 0}) : std::nullopt;
  }
  // >= 0 (valid after prepare()): the kernel may write output 0 over that input (same
  // size and layout). The memory plan does so when nothing reads the input afterwards.
  virtual int inplace_input() const { return -1; }
  // Concat (FuseConcatAndBatchNorm): computes y = x * scale[c] + shift[c] per channel (then
  // max(y, 0) with `relu`) on what it concatenates, as a BatchNormalization after it would;
  // false, with `why`, when this node cannot. Called before prepare().
  struct ChannelAffine {
    std::vector<float> scale, shift;  // one per channel (dim 1)
    bool relu = false;
  };
  virtual bool take_channel_affine(ChannelAffine affine, std::string* why) {
    (void)affine;
    if (why) *why = "this node kind computes no per-channel affine";
    return false;
  }
  // Concat: >= 0 is the concatenation axis. The memory plan may then place every input
  // inside the output (producers write their slice directly) and call
  // set_inputs_in_output(), after which execute() has nothing to copy.
  virtual int concat_axis() const { return -1; }
  virtual void set_inputs_in_output() {}
  // Whether execute() writes output 0 wherever its layout puts each image, so that the memory
  // plan may give it images further apart than its own size (its slice of a Concat's output
  // of more channels, for a batch of more than one image): kiln's own kernels that address
  // the output per image. Asked after prepare().
  virtual bool writes_images_apart() const { return false; }

  // Working memory execute() needs besides its inputs and outputs (valid after prepare()),
  // e.g. attention scores. The graph's memory plan places it in the arena, alive during
  // this node's step only, and points `scratch` at it (Arena::kAlignment-aligned) before
  // execute(): a plan per shape then costs no memory of its own, and nodes share the bytes.
  virtual size_t scratch_bytes() const { return 0; }
  void* scratch = nullptr;

  // Set by Graph::run when it profiles this run. A node that runs graphs of its own (If: its
  // branch) then leaves their rows in `nested_profile`; the graph lists them after its own,
  // named "<this node>/<row>", and the node's own row keeps only the time outside them.
  bool profiling = false;
  std::vector<ProfilingInfo> nested_profile;
};

// A node whose work is one oneDNN primitive from input 0 (SRC) to output 0 (DST):
// prepare() creates `prim_`; execute() is shared.
class SrcDstPrimitiveNode : public Node {
 public:
  explicit SrcDstPrimitiveNode(const ir::Node& n) : Node(n) {}
  void execute(dnnl::stream& stream) override {
    prim_.execute(stream, {{DNNL_ARG_SRC, inputs[0]->memory()}, {DNNL_ARG_DST, outputs[0]->memory()}});
  }

 protected:
  dnnl::primitive prim_;
};

// A plain descriptor when the shape/dtype allows, for comparisons.
bool is_plain_layout(const dnnl::memory::desc& d, const Shape& shape, DType dtype);

// A node with a sum post-op accumulates into its output, which the memory plan makes the
// summand's buffer when nobody reads that later: where it could not, copy the summand in first.
void start_from_summand(dnnl::stream& stream, const Edge& summand, Edge& out);

// The layout an elementwise node writes its output in: its input x's blocked layout with the
// output's element type `dt`, when x has one that pads no dim (padding must stay zero); nullopt
// when the node works on plain data. Sets `out`'s layout when it returns one.
std::optional<dnnl::memory::desc> elementwise_layout(const Edge& x, dnnl_data_type_t dt, Edge& out);

}  // namespace kiln::cpu
