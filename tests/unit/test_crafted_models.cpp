// Crafted models that crashed kiln or made it touch gigabytes (found with AddressSanitizer
// and UndefinedBehaviorSanitizer, issue "Correct everywhere"): each is rebuilt here and
// must give a kiln::Error naming what is wrong, through the same paths the CLI takes
// (read_model: parse + shape inference as `kiln info`; compile and run as `kiln run -r`).
// The sanitizer build (scripts/test.sh) runs these too.
#include <gtest/gtest.h>
#include <kiln/core.hpp>
#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "frontend/onnx/onnx_frontend.hpp"
#include "error_util.hpp"
#include "onnx_builder.hpp"
#include "precision_util.hpp"
#include "temp_dir.hpp"

namespace test_crafted_models {

namespace fs = std::filesystem;
using kiln::test::error_of;
using kiln::test::OnnxBuilder;
using kiln::test::ScopedTempDir;
using namespace kiln;

namespace {


// The model's bytes, read and compiled (f32, with `properties`) and run once with zero inputs
// of its declared shapes.
void read_compile_run(const std::string& bytes, const AnyMap& properties = {}) {
  Core core;
  auto model = core.read_model_from_memory(bytes);
  auto req = core.compile_model(model, test::f32_properties(properties)).create_infer_request();
  for (size_t i = 0; i < model->inputs().size(); ++i) {
    Shape s;
    for (const auto& d : model->inputs()[i].shape) s.push_back(d < 0 ? 1 : d);
    req.set_input_tensor(i, Tensor(model->inputs()[i].dtype, s));
  }
  req.infer();
}

bool has(const std::string& msg, const std::string& part) { return msg.find(part) != std::string::npos; }

// x[1] -> Expand to [rows, cols] f32 (node 'expand') -> ReduceSum: an intermediate as large as
// rows x cols x 4 bytes.
std::string expand_then_sum(int64_t rows, int64_t cols) {
  OnnxBuilder b;
  b.input("x", {1});
  b.initializer("shape", Tensor::from_vector<int64_t>({rows, cols}, {2}));
  b.node("Expand", {"x", "shape"}, {"big"}, "expand");
  b.node("ReduceSum", {"big"}, {"y"}, "sum");
  b.output("y");
  return b.bytes();
}

int64_t peak_rss_kib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

}  // namespace

TEST(CraftedModels, ConvTransposeWeightOfRankOneIsAnErrorNotAnOverflow) {
  // was: shape inference indexed W's dims 1.. of a rank-1 weight (heap overflow in `kiln info`)
  OnnxBuilder b;
  b.input("x", {1, 2, 4, 4});
  b.input("w", {2});
  b.node("ConvTranspose", {"x", "w"}, {"y"}, "deconv");
  b.output("y");
  const std::string msg = error_of([&] { Core().read_model_from_memory(b.bytes()); });
  EXPECT_TRUE(has(msg, "deconv") && has(msg, "ConvTranspose") && has(msg, "rank")) << msg;
}

TEST(CraftedModels, ConvChannelsThatGroupDoesNotDivideAreAnError) {
  // was: "internal error" from oneDNN at compile time
  OnnxBuilder b;
  b.input("x", {1, 4, 5, 5});
  b.initializer("w", Tensor(DType::f32, {6, 1, 3, 3}));
  auto* n = b.node("Conv", {"x", "w"}, {"y"}, "conv");
  OnnxBuilder::attr_i(n, "group", 3);
  b.output("y");
  const std::string msg = error_of([&] { read_compile_run(b.bytes()); });
  EXPECT_TRUE(has(msg, "conv") && has(msg, "group") && !has(msg, "internal")) << msg;
  // and a group the output channels are not a multiple of
  OnnxBuilder c;
  c.input("x", {1, 4, 5, 5});
  c.initializer("w", Tensor(DType::f32, {3, 2, 3, 3}));
  n = c.node("Conv", {"x", "w"}, {"y"}, "conv");
  OnnxBuilder::attr_i(n, "group", 2);
  c.output("y");
  const std::string msg2 = error_of([&] { read_compile_run(c.bytes()); });
  EXPECT_TRUE(has(msg2, "divisible by group 2")) << msg2;
}

TEST(CraftedModels, HugeDeclaredShapesAreAnErrorNotAWrappedProduct) {
  // was: a MatMul input declared [2^62, 4]: the element count wrapped around to 0 and the
  // random input was written past a 64-byte buffer
  const std::string msg = error_of([] { Tensor t(DType::f32, {int64_t(1) << 62, 4}); });
  EXPECT_TRUE(has(msg, "[4611686018427387904,4]") && has(msg, "2^58")) << msg;
  EXPECT_TRUE(has(error_of([] { (void)shape_size({int64_t(1) << 40, 0, int64_t(1) << 40}); }), "2^58"));
  EXPECT_EQ(shape_size({3, 0, 5}), 0);
  EXPECT_EQ(shape_size({-1, 4}), -4);  // unknown dims in some callers: as before

  OnnxBuilder b;
  b.input("a", {int64_t(1) << 62, 4});
  b.initializer("w", Tensor(DType::f32, {4, 2}));
  b.node("MatMul", {"a", "w"}, {"y"}, "mm");
  b.output("y");
  // refused when compiled: its output is larger than any tensor limit (2^65 bytes)
  const std::string run = error_of([&] { read_compile_run(b.bytes()); });
  EXPECT_TRUE(has(run, "node 'mm' (MatMul)") && has(run, "[4611686018427387904,2] f32 would take 3.43597e+10 GiB"))
      << run;
}

TEST(CraftedModels, ATerabyteIntermediateIsRefusedBeforeAllocating) {
  // x[1] -> Expand to [2^20, 2^18] f32 (1 TiB) -> ReduceSum: refused while the plan is made,
  // naming the node, its shape and the limit (kiln_max_tensor_bytes; the machine's memory by
  // default), instead of reaching an allocation the machine cannot back
  const std::string msg = error_of([&] { read_compile_run(expand_then_sum(int64_t(1) << 20, int64_t(1) << 18)); });
  EXPECT_TRUE(has(msg, "node 'expand' (Expand)") && has(msg, "[1048576,262144] f32 would take 1024 GiB") &&
              has(msg, "kiln_max_tensor_bytes"))
      << msg;
  // the same Expand of a constant is not folded at compile time either (that would allocate it)
  OnnxBuilder c;
  c.input("x", {1});
  c.initializer("one", Tensor::from_vector<float>({1.0f}, {1}));
  c.initializer("shape", Tensor::from_vector<int64_t>({int64_t(1) << 20, int64_t(1) << 18}, {2}));
  c.node("Expand", {"one", "shape"}, {"big"}, "expand_const");
  c.node("Add", {"big", "x"}, {"y"}, "add");
  c.output("y");
  const std::string folded = error_of([&] { read_compile_run(c.bytes()); });
  EXPECT_TRUE(has(folded, "node 'expand_const' (Expand)") && has(folded, "kiln_max_tensor_bytes")) << folded;
}

TEST(CraftedModels, MemoryTheMachineCannotGiveIsAnErrorNotACrash) {
  // the limit raised past what any machine has: an Expand to 2^48 f32 (1 PiB, more than the
  // address space) passes the check, and the allocation that fails is a kiln::Error
  const std::string bytes = expand_then_sum(int64_t(1) << 25, int64_t(1) << 23);
  const std::string limit = std::to_string(uint64_t(1) << 60);
  for (const char* executor : {"cpu", "reference"}) {
    SCOPED_TRACE(executor);
    const std::string msg =
        error_of([&] { read_compile_run(bytes, {{"kiln_max_tensor_bytes", limit}, {"kiln_executor", executor}}); });
    EXPECT_TRUE(has(msg, "cannot allocate") || has(msg, "out of memory")) << msg;
    EXPECT_FALSE(has(msg, "internal error")) << msg;
  }
}

TEST(CraftedModels, TheTensorLimitAlsoHoldsForShapesKnownOnlyAtRunTime) {
  // Expand to a shape read from an input: the plan cannot know it, the run refuses it
  OnnxBuilder b;
  b.input("shape", {2}, onnx::TensorProto::INT64);
  b.initializer("one", Tensor::from_vector<float>({1.0f}, {1}));
  b.node("Expand", {"one", "shape"}, {"big"}, "expand");
  b.node("ReduceSum", {"big"}, {"y"}, "sum");
  b.output("y");
  Core core;
  auto model = core.read_model_from_memory(b.bytes());
  auto run = [&](std::vector<int64_t> shape, const AnyMap& props) {
    auto req = core.compile_model(model, test::f32_properties(props)).create_infer_request();
    req.set_input_tensor(Tensor::from_vector<int64_t>(shape, {2}));
    req.infer();
    return req.get_output_tensor().clone();
  };
  EXPECT_FLOAT_EQ(run({3, 4}, {}).data<float>()[0], 12.0f);
  for (const char* executor : {"cpu", "reference"}) {
    SCOPED_TRACE(executor);
    // 1 TiB against the machine's memory (the default), 4 MiB against a limit of 1 MiB
    const std::string tib = error_of([&] { run({int64_t(1) << 20, int64_t(1) << 18}, {{"kiln_executor", executor}}); });
    EXPECT_TRUE(has(tib, "node 'expand' (Expand)") && has(tib, "output 0 [1048576,262144] f32 would take 1024 GiB") &&
                has(tib, "kiln_max_tensor_bytes"))
        << tib;
    const std::string mib = error_of(
        [&] { run({1024, 1024}, {{"kiln_executor", executor}, {"kiln_max_tensor_bytes", "1048576"}}); });
    EXPECT_TRUE(has(mib, "node 'expand' (Expand)") && has(mib, "kiln_max_tensor_bytes = 1048576")) << mib;
  }
}

TEST(CraftedModels, ALoopCannotStackMoreThanTheTensorLimit) {
  // Loop, 40 trips, each adding 256 KiB to a scan output: stopped when the stack passes 1 MiB
  OnnxBuilder b;
  b.input("x", {1});
  b.initializer("trips", Tensor::from_vector<int64_t>({40}, {}));
  onnx::GraphProto body;
  body.set_name("body");
  auto in = [&](const char* name, int elem) {
    auto* vi = body.add_input();
    vi->set_name(name);
    OnnxBuilder::set_type(vi, elem, {}, {});
  };
  in("i", onnx::TensorProto::INT64);
  in("c", onnx::TensorProto::BOOL);
  auto* shape = body.add_initializer();
  frontend::tensor_to_proto(Tensor::from_vector<int64_t>({int64_t(1) << 16}, {1}), *shape);
  shape->set_name("part_shape");
  auto* id = body.add_node();
  id->set_op_type("Identity");
  id->add_input("c");
  id->add_output("c_out");
  auto* ex = body.add_node();
  ex->set_op_type("Expand");
  ex->add_input("x");
  ex->add_input("part_shape");
  ex->add_output("part");
  body.add_output()->set_name("c_out");
  body.add_output()->set_name("part");
  auto* loop = b.node("Loop", {"trips", ""}, {"stacked"}, "loop");
  auto* a = loop->add_attribute();
  a->set_name("body");
  a->set_type(onnx::AttributeProto::GRAPH);
  *a->mutable_g() = body;
  b.node("ReduceSum", {"stacked"}, {"y"}, "sum");
  b.output("y");
  Core core;
  auto model = core.read_model_from_memory(b.bytes());
  for (const char* executor : {"cpu", "reference"}) {
    SCOPED_TRACE(executor);
    auto run = [&](const char* limit) {
      auto req = core.compile_model(model, test::f32_properties({{"kiln_executor", executor},
                                                                 {"kiln_max_tensor_bytes", limit}}))
                     .create_infer_request();
      req.set_input_tensor(Tensor::from_vector<float>({0.5f}, {1}));
      req.infer();
      return req.get_output_tensor().clone();
    };
    EXPECT_FLOAT_EQ(run("1073741824").data<float>()[0], 0.5f * 40 * (1 << 16));
    const std::string msg = error_of([&] { run("1048576"); });
    EXPECT_TRUE(has(msg, "node 'loop' (Loop)") && has(msg, "scan output 0 after 5 iterations") &&
                has(msg, "kiln_max_tensor_bytes = 1048576"))
        << msg;
  }
}

TEST(CraftedModels, TheTensorLimitIsAPropertyAndCoversAPlansMemory) {
  Core core;
  // x[5120] f32 (20 KiB) -> Relu, Neg, Abs -> Add, Add: two 20 KiB tensors alive at once
  OnnxBuilder b;
  b.input("x", {5120});
  b.node("Relu", {"x"}, {"a"}, "relu");
  b.node("Neg", {"x"}, {"n"}, "neg");
  b.node("Abs", {"x"}, {"c"}, "abs");
  b.node("Add", {"a", "n"}, {"d"}, "add1");
  b.node("Add", {"d", "c"}, {"y"}, "add2");
  b.output("y");
  auto model = core.read_model_from_memory(b.bytes());
  auto run = [&](const std::string& limit) {
    AnyMap props = test::f32_properties({{"snippets_mode", "DISABLE"}, {"kiln_max_tensor_bytes", limit}});
    auto req = core.compile_model(model, props).create_infer_request();
    req.set_input_tensor(Tensor(DType::f32, {5120}));
    req.infer();
  };
  EXPECT_NO_THROW(run("1048576"));
  // each tensor fits 30 KiB, two alive at once (40 KiB) do not
  const std::string total = error_of([&] { run("30720"); });
  EXPECT_TRUE(has(total, "intermediate tensors need") && has(total, "kiln_max_tensor_bytes = 30720")) << total;
  const std::string one = error_of([&] { run("8192"); });  // one 20 KiB tensor is too much
  EXPECT_TRUE(has(one, "would take") && has(one, "kiln_max_tensor_bytes = 8192")) << one;
  EXPECT_TRUE(has(error_of([&] { run("12"); }), "bytes, an integer >= 1024"));
  EXPECT_TRUE(has(error_of([&] { run("-5"); }), "bytes, an integer >= 1024"));
  // the default: the machine's physical memory
  const std::string def = core.compile_model(model, test::f32_properties()).get_property("kiln_max_tensor_bytes");
  EXPECT_EQ(std::stoull(def), static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<uint64_t>(sysconf(_SC_PAGE_SIZE)));
}

TEST(CraftedModels, SubgraphsNestedBeyondProtobufsDepthSayWhy) {
  // 40 If nodes, each the then-branch of the one outside it: protobuf stops at 100 levels of
  // messages, which the error names instead of only "corrupt"
  onnx::GraphProto inner;
  {
    auto* n = inner.add_node();
    n->set_op_type("Identity");
    n->add_input("x");
    n->add_output("o");
    inner.set_name("leaf");
    inner.add_output()->set_name("o");
  }
  const onnx::GraphProto leaf = inner;
  for (int i = 0; i < 40; ++i) {
    onnx::GraphProto outer;
    outer.set_name("g" + std::to_string(i));
    auto* n = outer.add_node();
    n->set_op_type("If");
    n->add_input("c");
    n->add_output("o");
    auto* t = n->add_attribute();
    t->set_name("then_branch");
    t->set_type(onnx::AttributeProto::GRAPH);
    *t->mutable_g() = inner;
    auto* e = n->add_attribute();
    e->set_name("else_branch");
    e->set_type(onnx::AttributeProto::GRAPH);
    *e->mutable_g() = leaf;
    outer.add_output()->set_name("o");
    inner = outer;
  }
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  *m.mutable_graph() = inner;
  const std::string msg = error_of([&] { Core().read_model_from_memory(m.SerializeAsString()); });
  EXPECT_TRUE(has(msg, "nested more than 32 deep")) << msg;
}

TEST(CraftedModels, TenThousandNestedLoopsAreRefusedWithoutRecursing) {
  // 10,000 Loops, each the body of the one outside it. The bytes are written by hand, outer
  // headers first (protobuf's own serializer would recurse 30,000 deep to write them), and
  // the parser must stop at its depth limit instead of overflowing the stack.
  auto varint = [](uint64_t v) {
    std::string b;
    do {
      b += static_cast<char>((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
      v >>= 7;
    } while (v);
    return b;
  };
  const std::string leaf = std::string("\x12\x04") + "leaf";  // GraphProto{name: "leaf"}
  const int kDepth = 10000;
  std::vector<std::string> headers(kDepth);
  size_t inner = leaf.size();
  for (int k = kDepth - 1; k >= 0; --k) {  // from the innermost Loop out
    // AttributeProto{name: "body", type: GRAPH, g: <inner>}
    std::string attr_head = std::string("\x0a\x04") + "body" + "\xa0\x01\x05" + "\x32" + varint(inner);
    const size_t attr = attr_head.size() + inner;
    // NodeProto{op_type: "Loop", attribute: <attr>}
    std::string node_head = std::string("\x22\x04") + "Loop" + "\x2a" + varint(attr);
    const size_t node = node_head.size() + attr;
    // GraphProto{node: <node>}
    headers[static_cast<size_t>(k)] = "\x0a" + varint(node) + node_head + attr_head;
    inner = 1 + varint(node).size() + node;
  }
  std::string bytes = std::string("\x08\x08") + "\x42\x02\x10\x11" + "\x3a" + varint(inner);  // ir 8, opset 17
  for (const std::string& h : headers) bytes += h;
  bytes += leaf;
  EXPECT_GT(bytes.size(), 200000u);
  const std::string msg = error_of([&] { Core().read_model_from_memory(bytes); });
  EXPECT_TRUE(has(msg, "nested more than 32 deep")) << msg;
}

TEST(CraftedModels, InitializerDeclaringMoreThanItHoldsIsRefusedBeforeAllocating) {
  // was: an initializer declared [2^25, 2^39] without data read as 0 elements (wrapped),
  // then Gather indexed it (segfault)
  OnnxBuilder b;
  b.input("i", {2}, onnx::TensorProto::INT64);
  auto* t = b.graph->add_initializer();
  t->set_name("table");
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(int64_t(1) << 25);
  t->add_dims(int64_t(1) << 39);
  b.node("Gather", {"table", "i"}, {"y"}, "gather");
  b.output("y");
  std::string msg = error_of([&] { Core().read_model_from_memory(b.bytes()); });
  EXPECT_TRUE(has(msg, "2^58")) << msg;

  // was: 600M floats (2.4 GB) allocated and zeroed before noticing there are no values
  const int64_t before = peak_rss_kib();
  for (const bool raw : {false, true}) {
    t->clear_dims();
    t->add_dims(600000000);
    if (raw) t->set_raw_data(std::string(8, '\0'));
    msg = error_of([&] { Core().read_model_from_memory(b.bytes()); });
    EXPECT_TRUE(has(msg, "'table'") && (has(msg, "raw_data has 8 bytes") || has(msg, "has 0 values"))) << msg;
  }
  EXPECT_LT(peak_rss_kib() - before, 256 * 1024) << "KiB of peak RSS grew while refusing";
}

TEST(CraftedModels, ExternalDataOffsetsAndLengthsAreChecked) {
  const ScopedTempDir tmp("crafted_ext");
  const fs::path& d = tmp.path();
  std::ofstream(d / "w.bin", std::ios::binary) << std::string(24, '\0');
  auto model_with = [&](const std::vector<std::pair<std::string, std::string>>& keys) {
    OnnxBuilder b;
    b.input("x", {2, 3});
    b.initializer("w", Tensor(DType::f32, {2, 3}));
    auto* w = b.graph->mutable_initializer(0);
    w->clear_raw_data();
    w->set_data_location(onnx::TensorProto::EXTERNAL);
    for (const auto& [k, v] : keys) {
      auto* kv = w->add_external_data();
      kv->set_key(k);
      kv->set_value(v);
    }
    b.node("Add", {"x", "w"}, {"y"}, "add");
    b.output("y");
    std::ofstream(d / "m.onnx", std::ios::binary) << b.bytes();
    return (d / "m.onnx").string();
  };
  // in range: loads
  EXPECT_NO_THROW(frontend::load_onnx_file(model_with({{"location", "w.bin"}, {"offset", "0"}, {"length", "24"}})));
  // offset + length past the end, also where the sum overflows an int64
  for (const std::string off : {"8", "9223372036854775807"}) {
    const std::string msg = error_of([&] { frontend::load_onnx_file(model_with({{"location", "w.bin"}, {"offset", off}})); });
    EXPECT_TRUE(has(msg, "'w'") && has(msg, "has 24 bytes, need 24 at offset " + off)) << msg;
  }
  // negative or malformed numbers name the key
  for (const auto& [k, v] : std::vector<std::pair<std::string, std::string>>{
           {"length", "-5"}, {"offset", "-1"}, {"offset", "12abc"}, {"length", ""}, {"offset", "99999999999999999999"}}) {
    const std::pair<std::string, std::string> kv{k, v};  // clang 14 cannot capture a structured binding
    const std::string msg = error_of([&] { frontend::load_onnx_file(model_with({{"location", "w.bin"}, kv})); });
    EXPECT_TRUE(has(msg, "'" + k + "'") && has(msg, "non-negative integer")) << k << "=" << v << ": " << msg;
  }
  fs::remove_all(d);
}

TEST(CraftedModels, OpsetVersionsAreCheckedBeforeNarrowing) {
  // was: 2^32 + 13 read as opset 13
  OnnxBuilder b;
  b.model.mutable_opset_import(0)->set_version((int64_t(1) << 32) + 13);
  b.input("x", {2});
  b.node("Relu", {"x"}, {"y"}, "relu");
  b.output("y");
  std::string msg = error_of([&] { Core().read_model_from_memory(b.bytes()); });
  EXPECT_TRUE(has(msg, "4294967309")) << msg;
  b.model.mutable_opset_import(0)->set_version(-3);
  msg = error_of([&] { Core().read_model_from_memory(b.bytes()); });
  EXPECT_TRUE(has(msg, "-3")) << msg;
}

}  // namespace test_crafted_models
