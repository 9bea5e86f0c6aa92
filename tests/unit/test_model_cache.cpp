// The model cache (property cache_dir): the IR's binary form alone, then whole compiles
// through the cache (hit, miss, damaged files, keys, external data).
#include <gtest/gtest.h>
#include <kiln/core.hpp>
#include <onnx/onnx_pb.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "cpu/model_cache.hpp"
#include "ir/printer.hpp"
#include "ir/serialize.hpp"
#include "temp_dir.hpp"
#include "tools/common/zoo.hpp"

namespace test_model_cache {

using namespace kiln;
namespace fs = std::filesystem;

namespace {

// A graph with every attribute kind, a symbolic dim, a constant and a subgraph.
std::shared_ptr<ir::Graph> sample_graph() {
  auto g = std::make_shared<ir::Graph>();
  g->name = "sample";
  g->opset_imports[""] = 17;
  g->opset_imports["kiln"] = 1;
  ir::ValueType t;
  t.dtype = DType::f32;
  t.shape = ir::PartialShape(std::vector<ir::Dim>{ir::Dim::sym("batch"), ir::Dim(4)});
  ir::Value* x = g->add_input("x", t);
  ir::Value* w = g->add_constant("w", Tensor::from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8}, {4, 2}));
  ir::Node* mm = g->add_node("MatMul", {x, w}, std::vector<std::string>{"y"}, "mm");
  mm->output(0)->type.dtype = DType::f32;
  mm->attrs["i"] = int64_t(-3);
  mm->attrs["f"] = 0.25f;
  mm->attrs["s"] = std::string("text");
  mm->attrs["ints"] = std::vector<int64_t>{1, -2, 3};
  mm->attrs["floats"] = std::vector<float>{0.5f, 1.5f};
  mm->attrs["strings"] = std::vector<std::string>{"a", "", "c"};
  mm->attrs["tensor"] = Tensor::from_vector<int64_t>({7, 8, 9}, {3});
  auto body = std::make_shared<ir::Graph>();
  body->name = "body";
  ir::Value* one = body->add_constant("one", Tensor::scalar<float>(1.0f));
  ir::Node* id = body->add_node("Identity", {one}, std::vector<std::string>{"out"}, "id");
  body->add_output(id->output(0));
  mm->attrs["graph"] = body;
  g->add_output(mm->output(0));
  return g;
}

std::string serialized(const ir::Graph& g, std::vector<Tensor>* tensors) {
  ir::ByteWriter w;
  ir::write_graph(g, w, [&](const Tensor& t) {
    tensors->push_back(t);
    return tensors->size() - 1;
  });
  return w.take();
}

std::shared_ptr<ir::Graph> deserialized(const std::string& bytes, const std::vector<Tensor>& tensors) {
  ir::ByteReader r(bytes, "test graph");
  auto g = ir::read_graph(r, [&](uint64_t id, DType dt, const Shape& shape, size_t bytes_wanted) {
    if (id >= tensors.size() || tensors[id].byte_size() != bytes_wanted) throw Error("bad tensor id");
    Tensor t(dt, shape);
    std::memcpy(t.raw(), tensors[id].raw(), bytes_wanted);
    return t;
  });
  if (!r.done()) throw Error("bytes left");
  return g;
}

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}
void write_file(const fs::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << bytes;
}

std::vector<fs::path> cache_files(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".kilncache") out.push_back(e.path());
  return out;
}

// Runs `compiled` on `input` (its one input), returns the first output's bytes.
std::string run_once(const CompiledModel& compiled, const Tensor& input) {
  InferRequest r = compiled.create_infer_request();
  r.set_input_tensor(0, input);
  r.infer();
  Tensor out = r.get_output_tensor(0);
  return std::string(static_cast<const char*>(out.raw()), out.byte_size());
}

Tensor image_input(const Shape& shape) {
  Tensor t(DType::f32, shape);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.size(); ++i) p[i] = static_cast<float>((i * 7919) % 255) / 255.0f - 0.5f;
  return t;
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

// The zoo's MLP with batch 2 instead of a dynamic batch (the cache holds static models).
onnx::ModelProto static_mlp(uint32_t seed) {
  onnx::ModelProto m = tools::zoo_model("mlp", seed);
  for (auto* port : {m.mutable_graph()->mutable_input(0), m.mutable_graph()->mutable_output(0)})
    port->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_value(2);
  return m;
}

void write_model(const onnx::ModelProto& m, const std::string& path) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!m.SerializeToOstream(&f)) throw Error("cannot write " + path);
}

}  // namespace

TEST(IrSerialize, RoundTripKeepsStructureTypesAndTensors) {
  auto g = sample_graph();
  std::vector<Tensor> tensors;
  const std::string bytes = serialized(*g, &tensors);
  auto back = deserialized(bytes, tensors);
  EXPECT_EQ(ir::graph_to_string(*back), ir::graph_to_string(*g));
  const ir::Node* mm = back->find_node("mm");
  ASSERT_NE(mm, nullptr);
  EXPECT_EQ(mm->attr_strings("strings"), (std::vector<std::string>{"a", "", "c"}));
  EXPECT_EQ(mm->attr_tensor("tensor").to_i64(), (std::vector<int64_t>{7, 8, 9}));
  EXPECT_EQ(mm->attr_graph("graph")->outputs().at(0)->name(), "out");
  EXPECT_EQ(back->inputs()[0]->type.shape.dims[0].symbol, "batch");
  EXPECT_EQ(back->find_value("w")->constant().to_f64(), g->find_value("w")->constant().to_f64());
  EXPECT_EQ(back->opset_imports, g->opset_imports);
  // written again, byte for byte the same
  std::vector<Tensor> again;
  EXPECT_EQ(serialized(*back, &again), bytes);
}

TEST(IrSerialize, EveryTruncationIsAnError) {
  auto g = sample_graph();
  std::vector<Tensor> tensors;
  const std::string bytes = serialized(*g, &tensors);
  for (size_t n = 0; n < bytes.size(); ++n)
    EXPECT_THROW(deserialized(bytes.substr(0, n), tensors), Error) << "prefix of " << n << " bytes";
}

TEST(IrSerialize, DamagedBytesNeverCrash) {
  auto g = sample_graph();
  std::vector<Tensor> tensors;
  const std::string bytes = serialized(*g, &tensors);
  size_t errors = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string bad = bytes;
    bad[i] = static_cast<char>(bad[i] ^ 0x5a);
    try {
      deserialized(bad, tensors);
    } catch (const Error&) {
      ++errors;
    }
  }
  EXPECT_GT(errors, bytes.size() / 4);  // most damage is noticed; none crashes (ASan checks reads)
}

TEST(IrSerialize, RefusesWhatItCannotStore) {
  ir::Graph g;
  ir::Value* s = g.add_constant("names", Tensor::from_vector<std::string>({"a", "b"}, {2}));
  ir::Node* n = g.add_node("Identity", {s}, std::vector<std::string>{"out"}, "id");
  g.add_output(n->output(0));
  ir::ByteWriter w;
  try {
    ir::write_graph(g, w, [](const Tensor&) { return uint64_t(0); });
    FAIL() << "a string constant was written";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'names'"), std::string::npos) << e.what();
  }
}

TEST(ModelCache, WarmCompileRunsTheSameGraphBitForBit) {
  test::ScopedTempDir dir("model_cache_warm");
  const std::string model = (dir / "resnet18.onnx").string();
  tools::write_zoo_model("resnet18", model);
  const std::string cache = (dir / "cache").string();
  const Tensor x = image_input({1, 3, 224, 224});
  Core core;
  const CompiledModel plain = core.compile_model(model);
  EXPECT_EQ(plain.get_property("kiln_model_cache"), "off");
  const std::string expected = run_once(plain, x);

  const CompiledModel cold = core.compile_model(model, {{"cache_dir", cache}});
  EXPECT_TRUE(starts_with(cold.get_property("kiln_model_cache"), "written: ")) << cold.get_property("kiln_model_cache");
  ASSERT_EQ(cache_files(cache).size(), 1u);
  EXPECT_TRUE(run_once(cold, x) == expected);

  const CompiledModel warm = core.compile_model(model, {{"CACHE_DIR", cache}});
  EXPECT_EQ(warm.get_property("kiln_model_cache"), "hit: " + cache_files(cache)[0].string());
  EXPECT_EQ(warm.get_property("cache_dir"), cache);
  EXPECT_TRUE(run_once(warm, x) == expected);
  // the same runtime graph: nodes, implementations, fusion decisions of stages 0-3 and of the CPU passes
  const RuntimeModel a = cold.get_runtime_model(), b = warm.get_runtime_model();
  ASSERT_EQ(a.nodes.size(), b.nodes.size());
  for (size_t i = 0; i < a.nodes.size(); ++i) {
    EXPECT_EQ(a.nodes[i].name, b.nodes[i].name);
    EXPECT_EQ(a.nodes[i].exec_type, b.nodes[i].exec_type);
  }
  EXPECT_EQ(a.fusions.size(), b.fusions.size());
  EXPECT_EQ(a.arena_bytes, b.arena_bytes);
  ASSERT_EQ(warm.inputs().size(), 1u);
  EXPECT_EQ(warm.inputs()[0].shape, (std::vector<int64_t>{1, 3, 224, 224}));
  EXPECT_EQ(warm.outputs()[0].name, plain.outputs()[0].name);
}

TEST(ModelCache, ModelInMemoryHitsByItsContent) {
  test::ScopedTempDir dir("model_cache_memory");
  const std::string cache = (dir / "cache").string();
  Core core;
  auto model = core.read_model_from_memory(tools::zoo_model_bytes("resnet18", 1));
  const Tensor x = image_input({1, 3, 224, 224});
  const CompiledModel cold = core.compile_model(model, {{"cache_dir", cache}});
  EXPECT_TRUE(starts_with(cold.get_property("kiln_model_cache"), "written: "));
  const CompiledModel warm = core.compile_model(model, {{"cache_dir", cache}});
  EXPECT_TRUE(starts_with(warm.get_property("kiln_model_cache"), "hit: "));
  EXPECT_TRUE(run_once(warm, x) == run_once(cold, x));
  // other weights: another model
  auto other = core.read_model_from_memory(tools::zoo_model_bytes("resnet18", 2));
  const CompiledModel third = core.compile_model(other, {{"cache_dir", cache}});
  EXPECT_TRUE(starts_with(third.get_property("kiln_model_cache"), "written: "));
  EXPECT_EQ(cache_files(cache).size(), 2u);
}

TEST(ModelCache, SettingsAndModelChangesAreOtherKeys) {
  test::ScopedTempDir dir("model_cache_keys");
  const std::string model = (dir / "mlp.onnx").string(), cache = (dir / "cache").string();
  write_model(static_mlp(0), model);
  Core core;
  auto status = [&](const AnyMap& extra) {
    AnyMap p{{"cache_dir", cache}};
    p.insert(extra.begin(), extra.end());
    return core.compile_model(model, p).get_property("kiln_model_cache");
  };
  EXPECT_TRUE(starts_with(status({}), "written: "));
  EXPECT_TRUE(starts_with(status({}), "hit: "));
  EXPECT_TRUE(starts_with(status({{"inference_precision", "f32"}, {"kiln_disable_passes", "all-fusions"}}), "written: "));
  EXPECT_TRUE(starts_with(status({{"inference_num_threads", "1"}, {"snippets_mode", "DISABLE"}}), "written: "));
  EXPECT_TRUE(starts_with(status({{"inference_precision", "f32"}, {"kiln_disable_passes", "all-fusions"}}), "hit: "));
  // the file changes: its content is the key, whatever its name
  write_model(static_mlp(5), model);
  EXPECT_TRUE(starts_with(status({}), "written: "));
  EXPECT_EQ(cache_files(cache).size(), 4u);
}

TEST(ModelCache, DamagedFilesAreRefusedAndWrittenAgain) {
  test::ScopedTempDir dir("model_cache_damaged");
  const std::string model = (dir / "mlp.onnx").string(), cache = (dir / "cache").string();
  write_model(static_mlp(0), model);
  const Tensor x = image_input({2, 16});
  Core core;
  const AnyMap props{{"cache_dir", cache}, {"inference_precision", "f32"}};
  const std::string expected = run_once(core.compile_model(model, props), x);
  ASSERT_EQ(cache_files(cache).size(), 1u);
  const fs::path file = cache_files(cache)[0];
  const std::string good = read_file(file);
  ASSERT_GT(good.size(), 8192u);

  struct Damage {
    const char* name;
    std::string bytes;
    const char* reason;
  };
  std::string flipped_data = good, flipped_meta = good;
  flipped_data[good.size() - 100] ^= 1;   // a weight
  flipped_meta[200] ^= 1;                 // the chunk table / metadata
  const std::vector<Damage> damages = {
      {"one bit in the weights", flipped_data, "checksum mismatch"},
      {"one bit in the metadata", flipped_meta, "checksum mismatch"},
      {"cut short", good.substr(0, good.size() / 2), "truncated"},
      {"empty", "", "not a kiln model cache file"},
      {"another file", std::string(4096, 'x'), "not a kiln model cache file"},
  };
  for (const Damage& d : damages) {
    write_file(file, d.bytes);
    testing::internal::CaptureStderr();
    const CompiledModel c = core.compile_model(model, props);
    const std::string warning = testing::internal::GetCapturedStderr();
    EXPECT_TRUE(starts_with(c.get_property("kiln_model_cache"), "written again: ")) << d.name;
    EXPECT_NE(warning.find(d.reason), std::string::npos) << d.name << ": " << warning;
    EXPECT_TRUE(run_once(c, x) == expected) << d.name;
    EXPECT_TRUE(read_file(file) == good) << d.name << ": the file is written again as it was";
  }
  // the rewritten file is a hit again
  EXPECT_TRUE(starts_with(core.compile_model(model, props).get_property("kiln_model_cache"), "hit: "));
}

TEST(ModelCache, ExternalDataIsPartOfTheModel) {
  test::ScopedTempDir dir("model_cache_external");
  // the MLP with its initializers in weights.bin
  onnx::ModelProto m = static_mlp(0);
  std::string blob;
  for (onnx::TensorProto& t : *m.mutable_graph()->mutable_initializer()) {
    ASSERT_TRUE(t.has_raw_data());
    const std::string raw = t.raw_data();
    t.clear_raw_data();
    t.set_data_location(onnx::TensorProto::EXTERNAL);
    auto* loc = t.add_external_data();
    loc->set_key("location");
    loc->set_value("weights.bin");
    auto* off = t.add_external_data();
    off->set_key("offset");
    off->set_value(std::to_string(blob.size()));
    blob += raw;
  }
  const std::string model = (dir / "mlp.onnx").string(), cache = (dir / "cache").string();
  write_model(m, model);
  write_file(dir / "weights.bin", blob);
  Core core;
  auto port = core.read_model(model)->inputs().at(0);
  const Tensor x = image_input(port.shape);
  const AnyMap props{{"cache_dir", cache}};
  const CompiledModel first = core.compile_model(model, props);
  EXPECT_TRUE(starts_with(first.get_property("kiln_model_cache"), "written: "));
  const std::string before = run_once(first, x);
  EXPECT_TRUE(starts_with(core.compile_model(model, props).get_property("kiln_model_cache"), "hit: "));
  // other weights in the external file, the .onnx file unchanged: not the cached model
  for (size_t i = 0; i < blob.size(); i += 4) blob[i + 1] ^= 0x10;
  write_file(dir / "weights.bin", blob);
  testing::internal::CaptureStderr();
  const CompiledModel changed = core.compile_model(model, props);
  const std::string warning = testing::internal::GetCapturedStderr();
  EXPECT_TRUE(starts_with(changed.get_property("kiln_model_cache"), "written again: "));
  EXPECT_NE(warning.find("weights.bin' changed"), std::string::npos) << warning;
  const std::string after = run_once(changed, x);
  EXPECT_FALSE(after == before);
  EXPECT_TRUE(after == run_once(core.compile_model(model), x));
}

TEST(ModelCache, DynamicShapesAreNotWritten) {
  test::ScopedTempDir dir("model_cache_dynamic");
  const std::string model = (dir / "bert.onnx").string(), cache = (dir / "cache").string();
  tools::write_zoo_model("bert_tiny", model);
  Core core;
  const auto ports = core.read_model(model)->inputs();
  ASSERT_FALSE(ports.at(0).is_static()) << "the zoo's bert_tiny has a dynamic sequence length";
  const CompiledModel c = core.compile_model(model, {{"cache_dir", cache}});
  EXPECT_NE(c.get_property("kiln_model_cache").find("not written: the model's input shapes are dynamic"),
            std::string::npos);
  EXPECT_TRUE(cache_files(cache).empty());
}

TEST(ModelCache, UnusableFolderIsAnError) {
  test::ScopedTempDir dir("model_cache_folder");
  write_file(dir / "file", "x");
  const std::string model = (dir / "mlp.onnx").string();
  write_model(static_mlp(0), model);
  Core core;
  try {
    core.compile_model(model, {{"cache_dir", (dir / "file").string()}});
    FAIL() << "a file as cache_dir was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cache_dir"), std::string::npos) << e.what();
  }
}

TEST(ModelCache, FileDigestIsTheContentHash) {
  test::ScopedTempDir dir("model_cache_digest");
  cpu::ModelCache cache((dir / "cache").string());
  const fs::path f = dir / "a.bin";
  write_file(f, std::string(100000, 'a'));
  const std::string h1 = cache.file_digest(f.string());
  EXPECT_EQ(h1, cpu::hash_file(f.string()));
  EXPECT_EQ(cache.file_digest(f.string()), h1);
  write_file(f, std::string(100000, 'b'));
  EXPECT_NE(cache.file_digest(f.string()), h1);
  EXPECT_EQ(cache.file_digest(f.string()), cpu::hash_file(f.string()));
  EXPECT_THROW(cache.file_digest((dir / "missing").string()), Error);
}

}  // namespace test_model_cache
