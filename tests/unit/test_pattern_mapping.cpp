// pattern_mapping on hand-built graphs: the spec's LayerNorm example, branches, node_name
// search, the {k: [a, b]} rule, graph-node sources, outputs used outside the pattern,
// cycles, overlaps and per-match names. Each rewrite is checked for structure and, where it
// must be equivalent, against the unrewritten graph on the reference executor.
#include <gtest/gtest.h>

#include <kiln/error.hpp>

#include <functional>
#include <nlohmann/json.hpp>

#include "pattern/pattern_mapping.hpp"
#include "test_pattern_util.hpp"

namespace test_pattern_mapping {

using namespace kiln;
using namespace kiln::pattern;
using kiln::test::count_ops;
using kiln::test::expect_close;
using kiln::test::GraphBuilder;
using json = nlohmann::json;

namespace {

// The spec's LayerNorm dict (out op named after ONNX's LayerNormalization).
const char* kSpecLayerNorm = R"({
  "patterns": {
    "in": [[[0, "ReduceMean"], [1, "Sub"], [2, "Pow"], [3, "ReduceMean"], [4, "Add"], [5, "Sqrt"], [6, "Div"],
            [7, "Mul"], [8, "Add"]]],
    "out": [[[0, "LayerNormalization"]]]
  },
  "search_mode": "op_type",
  "node_names": {"0": 8},
  "input_tensors": {"0": [[{"0": [0]}, {"7": [1]}, {"8": [1]}], [[0, 1, 2], 3]]},
  "output_tensors": {"0": [[{"8": [0]}], [[0], 1]]},
  "returns": [4]
})";

// Sets LayerNormalization's epsilon from the returned Add (old node 4).
void set_epsilon(Rewrite& r, ir::Graph&) {
  const OldNode& add = r.returned(4);
  ASSERT_EQ(add.op_type, "Add");
  const Tensor* eps = add.constant_input(1);
  ASSERT_NE(eps, nullptr);
  r.new_nodes[0]->attrs["epsilon"] = ir::Attribute(static_cast<float>(eps->to_f64()[0]));
}

}  // namespace

TEST(PatternMapping, SpecLayerNormExample) {
  GraphBuilder b;
  ir::Value* x = b.input("x", {2, 5, 8});
  ir::Value* ln = kiln::test::decomposed_layer_norm(b, x, "ln", 8, 0.25f);
  b.output(ln);
  const std::string out_name = ln->name();
  auto before = b.run_on(b.g->clone());

  PatternResult res = pattern_mapping(*b.g, parse_pattern_config_string(kSpecLayerNorm), {{}, set_epsilon});
  ASSERT_EQ(res.count(), 1u);
  ASSERT_EQ(b.g->num_nodes(), 1u);
  ir::Node* n = res.rewrites[0].new_nodes.at(0);
  EXPECT_EQ(n->op_type(), "LayerNormalization");
  EXPECT_EQ(n->name(), "ln/Add_1");  // node_names {0: 8}
  ASSERT_EQ(n->num_inputs(), 3u);
  EXPECT_EQ(n->input(0), x);
  EXPECT_TRUE(n->input(1)->is_constant());
  EXPECT_TRUE(n->input(2)->is_constant());
  EXPECT_FLOAT_EQ(n->attr_f("epsilon"), 0.25f);
  // the graph output keeps its tensor name and is now produced by the new node
  EXPECT_EQ(b.g->outputs().at(0)->name(), out_name);
  EXPECT_EQ(b.g->outputs().at(0)->producer(), n);
  // returned snapshot stays readable after the old nodes are gone
  EXPECT_EQ(res.rewrites[0].returns.at(0).name, "ln/Add");
  EXPECT_EQ(res.rewrites[0].old_names.at(2), "ln/Pow");
  expect_close(before, b.run());
}

// The message of the kiln::Error that `f` throws ("" when it throws none).
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(PatternMapping, NodesByLabel) {
  GraphBuilder b;
  ir::Value* x = b.input("x", {2, 5, 8});
  b.output(kiln::test::decomposed_layer_norm(b, x, "ln", 8, 0.25f));
  json j = json::parse(kSpecLayerNorm);
  j["name"] = "spec_ln";
  j["labels"] = json::parse(R"({"0": "mean", "4": "add_eps", "7": "scale", "8": "bias"})");
  PatternConfig cfg = parse_pattern_config(j);

  std::vector<Match> found = find_matches(*b.g, cfg);
  ASSERT_EQ(found.size(), 1u);
  const Match& m = found[0];
  EXPECT_EQ(m.node("mean"), m.node(0));
  EXPECT_EQ(m.node("add_eps")->name(), "ln/Add");
  EXPECT_TRUE(m.has("scale"));
  EXPECT_FALSE(m.has("sqrt"));  // node 5 has no label
  EXPECT_EQ(m.input("mean", {0}), x);
  EXPECT_EQ(m.input("bias", {0, 1}), m.input(8, {0, 1}));
  const std::string err = error_of([&] { m.node("gamma"); });
  EXPECT_NE(err.find("pattern 'spec_ln'"), std::string::npos) << err;
  EXPECT_NE(err.find("'gamma'"), std::string::npos) << err;
  EXPECT_NE(error_of([&] { m.input("gamma", {1}); }).find("'gamma'"), std::string::npos);

  std::string returned_name, not_returned;
  PatternResult res = pattern_mapping(*b.g, cfg, {{}, [&](Rewrite& r, ir::Graph&) {
    returned_name = r.returned("add_eps").name;
    EXPECT_EQ(&r.returned("add_eps"), &r.returned(4));
    not_returned = error_of([&] { r.returned("scale"); });  // labelled, but not in returns
  }});
  ASSERT_EQ(res.count(), 1u);
  EXPECT_EQ(returned_name, "ln/Add");
  EXPECT_NE(not_returned.find("pattern 'spec_ln'"), std::string::npos) << not_returned;
  EXPECT_NE(not_returned.find("'scale'"), std::string::npos) << not_returned;
}

TEST(PatternMapping, BranchEdgeIsChecked) {
  // Div's numerator is another tensor: the plain chain of the spec would still fire (wrongly);
  // with the branch Sub -> Div the match is refused.
  auto build = [](GraphBuilder& b, bool proper) {
    ir::Value* x = b.input("x", {3, 6});
    ir::Value* other = b.input("other", {3, 6});
    ir::Value* mean = b.op("ReduceMean", {x}, "mean", {{"axes", std::vector<int64_t>{-1}}});
    ir::Value* d = b.op("Sub", {x, mean}, "sub");
    ir::Value* var = b.op("ReduceMean", {b.op("Pow", {d, b.scalar(2)}, "pow")}, "var",
                          {{"axes", std::vector<int64_t>{-1}}});
    ir::Value* sd = b.op("Sqrt", {b.op("Add", {var, b.scalar(1e-5f)}, "add")}, "sqrt");
    ir::Value* y = b.op("Div", {proper ? d : other, sd}, "div");
    y = b.op("Add", {b.op("Mul", {y, b.vec({6})}, "mul"), b.vec({6})}, "add_1");
    b.output(y);
  };
  json branched = json::parse(kSpecLayerNorm);
  branched["patterns"]["in"].push_back(json::parse(R"([[1, "Sub"], [6, "Div", 0]])"));
  PatternConfig cfg = parse_pattern_config(branched);
  ASSERT_EQ(cfg.edges.size(), 9u);

  GraphBuilder wrong;
  build(wrong, false);
  PatternResult res = pattern_mapping(*wrong.g, cfg);
  EXPECT_EQ(res.count(), 0u);
  EXPECT_EQ(count_ops(*wrong.g, "LayerNormalization"), 0u);

  GraphBuilder right;
  build(right, true);
  auto before = right.run_on(right.g->clone());
  res = pattern_mapping(*right.g, cfg, {{}, set_epsilon});
  EXPECT_EQ(res.count(), 1u);
  EXPECT_EQ(right.g->num_nodes(), 1u);
  expect_close(before, right.run());
}

TEST(PatternMapping, BranchWithoutHeadAndTwoNodeOutChain) {
  // Add(Relu(x), Neg(y)) -> Sub(Relu(x), y): the Neg is a branch without head ending in the Add;
  // the new Sub takes Relu's output automatically (slot 0) and y from input_tensors (slot 1).
  GraphBuilder b;
  ir::Value* x = b.input("x", {4, 3});
  ir::Value* y = b.input("y", {4, 3});
  ir::Value* s = b.op("Add", {b.op("Relu", {x}, "relu"), b.op("Neg", {y}, "neg")}, "add");
  b.output(b.op("Tanh", {s}, "tanh"));
  auto before = b.run_on(b.g->clone());
  PatternConfig cfg = parse_pattern_config_string(R"({
    "patterns": {"in": [[[0, "Relu"], [1, "Add"]], [[], [2, "Neg"], [1]]],
                 "out": [[[0, "Relu"], [1, "Sub"]]]},
    "node_names": {"0": 0, "1": 1},
    "input_tensors": {"0": [[{"0": [0]}], [[0], 1]], "1": [[{"2": [0]}], [[1], 2]]},
    "output_tensors": {"0": [[], [[], 1]], "1": [[{"1": [0]}], [[0], 1]]}
  })");
  PatternResult res = pattern_mapping(*b.g, cfg);
  ASSERT_EQ(res.count(), 1u);
  EXPECT_EQ(count_ops(*b.g, "Neg"), 0u);
  ir::Node* sub = b.g->find_node("add");
  ASSERT_NE(sub, nullptr);
  EXPECT_EQ(sub->op_type(), "Sub");
  EXPECT_EQ(sub->input(0)->producer(), b.g->find_node("relu"));
  EXPECT_EQ(sub->input(1), y);
  expect_close(before, b.run());
}

TEST(PatternMapping, NodeNameSearchMode) {
  GraphBuilder b;
  ir::Value* x = b.input("x", {5});
  ir::Value* a = b.op("Relu", {b.op("Relu", {x}, "first")}, "second");
  b.output(b.op("Relu", {b.op("Relu", {a}, "third")}, "fourth"));
  auto before = b.run_on(b.g->clone());
  json j = json::parse(R"({
    "patterns": {"in": [[[0, "third"], [1, "fourth"]]], "out": [[[0, "Relu"]]]},
    "search_mode": "node_name",
    "node_names": {"0": "merged"},
    "input_tensors": {"0": [[{"0": [0]}], [[0], 1]]},
    "output_tensors": {"0": [[{"1": [0]}], [[0], 1]]}
  })");
  PatternResult res = pattern_mapping(*b.g, parse_pattern_config(j));
  ASSERT_EQ(res.count(), 1u);
  EXPECT_EQ(b.g->num_nodes(), 3u);
  EXPECT_NE(b.g->find_node("first"), nullptr);   // the same op pattern elsewhere is not touched
  EXPECT_NE(b.g->find_node("second"), nullptr);
  EXPECT_EQ(b.g->find_node("third"), nullptr);
  EXPECT_NE(b.g->find_node("merged_0"), nullptr);
  expect_close(before, b.run());

  j["patterns"]["in"][0][0][1] = "no_such_node";
  try {
    pattern_mapping(*b.g, parse_pattern_config(j));
    ADD_FAILURE() << "expected an error for a missing node name";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no node named 'no_such_node'"), std::string::npos) << e.what();
  }
}

namespace {

// Add(Neg(a), b) -> Sub(b, a), with the Add's outside operand at port 1 in one place and at
// port 0 in the other.
const char* kNegAddToSub = R"({
  "patterns": {"in": [[[0, "Neg"], [1, "Add"]]], "out": [[[0, "Sub"]]]},
  "node_names": {"0": "fused_sub"},
  "input_tensors": {"0": [[{"1": [0, 1]}, {"0": [0]}], [[0, 1], 2]]},
  "output_tensors": {"0": [[{"1": [0]}], [[0], 1]]}
})";

void build_two_neg_adds(GraphBuilder& b) {
  ir::Value* a1 = b.input("a1", {6});
  ir::Value* b1 = b.input("b1", {6});
  ir::Value* a2 = b.input("a2", {6});
  ir::Value* b2 = b.input("b2", {6});
  b.output(b.op("Add", {b.op("Neg", {a1}, "neg1"), b1}, "add1"));  // outside operand at port 1
  b.output(b.op("Add", {b2, b.op("Neg", {a2}, "neg2")}, "add2"));  // outside operand at port 0
}

}  // namespace

TEST(PatternMapping, AmbiguousInputIndexPicksTheTensorFromOutside) {
  GraphBuilder b;
  build_two_neg_adds(b);
  auto before = b.run_on(b.g->clone());
  PatternResult res = pattern_mapping(*b.g, parse_pattern_config_string(kNegAddToSub));
  ASSERT_EQ(res.count(), 2u);
  for (const Rewrite& r : res.rewrites) {
    ir::Node* sub = r.new_nodes[0];
    EXPECT_EQ(sub->op_type(), "Sub");
    EXPECT_TRUE(sub->input(0)->is_graph_input());
    EXPECT_EQ(sub->input(0)->name()[0], 'b');  // b1 / b2, whatever its port in the Add
    EXPECT_EQ(sub->input(1)->name()[0], 'a');
  }
  expect_close(before, b.run());
}

TEST(PatternMapping, TwoMatchesGetNumberedNames) {
  GraphBuilder b;
  build_two_neg_adds(b);
  PatternResult res = pattern_mapping(*b.g, parse_pattern_config_string(kNegAddToSub));
  ASSERT_EQ(res.count(), 2u);
  EXPECT_EQ(res.rewrites[0].number, 0u);
  EXPECT_EQ(res.rewrites[1].number, 1u);
  EXPECT_EQ(res.rewrites[0].new_nodes[0]->name(), "fused_sub_0");
  EXPECT_EQ(res.rewrites[1].new_nodes[0]->name(), "fused_sub_1");
  EXPECT_EQ(res.rewrites[0].old_names, (std::vector<std::string>{"neg1", "add1"}));
  EXPECT_EQ(res.rewrites[1].old_names, (std::vector<std::string>{"neg2", "add2"}));
}

TEST(PatternMapping, GraphNodeNameSource) {
  // {"shift": [0]}: output 0 of the graph node named "shift", outside the pattern.
  GraphBuilder b;
  ir::Value* x = b.input("x", {4});
  ir::Value* s = b.op("Relu", {b.input("z", {4})}, "shift");
  b.output(b.op("Add", {x, b.op("Neg", {s}, "neg")}, "add"));
  auto before = b.run_on(b.g->clone());
  PatternResult res = pattern_mapping(*b.g, parse_pattern_config_string(R"({
    "patterns": {"in": [[[0, "Neg"], [1, "Add"]]], "out": [[[0, "Sub"]]]},
    "input_tensors": {"0": [[{"1": [0, 1]}, {"shift": [0]}], [[0, 1], 2]]},
    "output_tensors": {"0": [[{"1": [0]}], [[0], 1]]}
  })"));
  ASSERT_EQ(res.count(), 1u);
  EXPECT_EQ(res.rewrites[0].new_nodes[0]->input(1), s);
  expect_close(before, b.run());
}

TEST(PatternMapping, IntermediateUsedOutsideDoesNotFire) {
  GraphBuilder b;
  ir::Value* x = b.input("x", {2, 8});
  b.output(kiln::test::decomposed_layer_norm(b, x, "ln", 8, 1e-5f));
  // the variance is also read by another node: fusing would lose it
  b.output(b.op("Sqrt", {b.g->find_node("ln/Add")->output(0)}, "extra"));
  const size_t nodes = b.g->num_nodes();
  PatternResult res = pattern_mapping(*b.g, parse_pattern_config_string(kSpecLayerNorm), {{}, set_epsilon});
  EXPECT_EQ(res.count(), 0u);
  EXPECT_EQ(b.g->num_nodes(), nodes);
  ASSERT_FALSE(res.skipped.empty());
  EXPECT_NE(res.skipped[0].find("is used outside the pattern"), std::string::npos) << res.skipped[0];

  // the same when the intermediate is a graph output
  GraphBuilder c;
  ir::Value* y = c.input("x", {2, 8});
  c.output(kiln::test::decomposed_layer_norm(c, y, "ln", 8, 1e-5f));
  c.output(c.g->find_node("ln/Sqrt")->output(0));
  EXPECT_EQ(pattern_mapping(*c.g, parse_pattern_config_string(kSpecLayerNorm)).count(), 0u);
}

TEST(PatternMapping, NeverCreatesACycle) {
  // r = Relu(x); n = Neg(r); s = Add(r, n). Fusing Relu+Add into one node that also outputs r
  // would put Neg both after and before the fused node.
  GraphBuilder b;
  ir::Value* x = b.input("x", {3});
  ir::Value* r = b.op("Relu", {x}, "relu");
  ir::Value* n = b.op("Neg", {r}, "neg");
  b.output(b.op("Add", {r, n}, "add"));
  PatternResult res = pattern_mapping(*b.g, parse_pattern_config_string(R"({
    "patterns": {"in": [[[0, "Relu"], [1, "Add"]]], "out": [[[0, "FusedReluAdd"]]]},
    "input_tensors": {"0": [[{"0": [0]}, {"1": [0, 1]}], [[0, 1], 2]]},
    "output_tensors": {"0": [[{"1": [0]}, {"0": [0]}], [[0, 1], 2]]}
  })"));
  EXPECT_EQ(res.count(), 0u);
  ASSERT_FALSE(res.skipped.empty());
  EXPECT_NE(res.skipped[0].find("cycle"), std::string::npos) << res.skipped[0];
  EXPECT_NO_THROW(b.g->topo_order());
  EXPECT_EQ(b.g->num_nodes(), 3u);
}

TEST(PatternMapping, OverlapsFirstInTopologicalOrderWins) {
  // Relu -> Relu -> Relu with pattern [Relu, Relu]: the first two are fused, the third is left.
  GraphBuilder b;
  ir::Value* x = b.input("x", {7});
  // inserted out of order on purpose: topological order, not insertion order, decides
  ir::Node* r3 = b.node("Relu", {}, "r3");
  ir::Node* r2 = b.node("Relu", {}, "r2");
  ir::Node* r1 = b.node("Relu", {x}, "r1");
  b.g->append_node_input(r2, r1->output(0));
  b.g->append_node_input(r3, r2->output(0));
  b.output(r3->output(0));
  auto before = b.run_on(b.g->clone());
  PatternResult res = pattern_mapping(*b.g, parse_pattern_config_string(R"({
    "patterns": {"in": [[[0, "Relu"], [1, "Relu"]]], "out": [[[0, "Relu"]]]},
    "node_names": {"0": 0},
    "input_tensors": {"0": [[{"0": [0]}], [[0], 1]]},
    "output_tensors": {"0": [[{"1": [0]}], [[0], 1]]}
  })"));
  ASSERT_EQ(res.count(), 1u);
  EXPECT_EQ(res.rewrites[0].old_names, (std::vector<std::string>{"r1", "r2"}));
  EXPECT_EQ(b.g->num_nodes(), 2u);
  EXPECT_NE(b.g->find_node("r1"), nullptr);
  EXPECT_NE(b.g->find_node("r3"), nullptr);
  expect_close(before, b.run());
}

TEST(PatternMapping, FilterLeavesMatchesAlone) {
  GraphBuilder b;
  build_two_neg_adds(b);
  PatternOptions opt;
  opt.filter = [](const Match& m) { return m.node(1)->name() == "add2"; };
  PatternResult res = pattern_mapping(*b.g, parse_pattern_config_string(kNegAddToSub), opt);
  ASSERT_EQ(res.count(), 1u);
  EXPECT_EQ(res.rewrites[0].old_names[1], "add2");
  EXPECT_EQ(res.rewrites[0].new_nodes[0]->name(), "fused_sub_0");
  EXPECT_NE(b.g->find_node("add1"), nullptr);
}

TEST(PatternMapping, PortPinsTheInputOfAnEdge) {
  // Sub(x, Relu(y)) vs Sub(Relu(y), x): [1, "Sub", 1] only takes the first.
  GraphBuilder b;
  ir::Value* x = b.input("x", {3});
  ir::Value* y = b.input("y", {3});
  b.output(b.op("Sub", {x, b.op("Relu", {y}, "ra")}, "sa"));
  b.output(b.op("Sub", {b.op("Relu", {y}, "rb"), x}, "sb"));
  PatternResult res = pattern_mapping(*b.g, parse_pattern_config_string(R"({
    "patterns": {"in": [[[0, "Relu"], [1, "Sub", 1]]], "out": [[[0, "Sub"]]]},
    "node_names": {"0": 1},
    "input_tensors": {"0": [[{"1": [0]}, {"0": [0]}], [[0, 1], 2]]},
    "output_tensors": {"0": [[{"1": [0]}], [[0], 1]]}
  })"));
  ASSERT_EQ(res.count(), 1u);
  EXPECT_EQ(res.rewrites[0].old_names[1], "sa");
}

// ---------------- docs/pattern_mapping.md walk-through ----------------

namespace {

// Same text as docs/pattern_mapping.md.
const char* kLeakyRelu = R"json({
  "name": "leaky_relu",
  "description": "Where(x > 0, x, x * alpha) -> LeakyRelu(x, alpha)",
  "patterns": {
    "in": [
      [[0, "Greater"], [1, "Where", 0]],
      [[], [2, "Mul"], [1, "Where", 2]]
    ],
    "out": [[[0, "LeakyRelu"]]]
  },
  "labels": {"0": "compare", "1": "select", "2": "scaled"},
  "search_mode": "op_type",
  "node_names": {"0": 1},
  "same_tensors": [[{"0": [0]}, {"1": [1]}, {"2": [0, 1]}]],
  "input_tensors": {"0": [[{"1": [1]}], [[0], 1]]},
  "output_tensors": {"0": [[{"1": [0]}], [[0], 1]]},
  "returns": [2]
})json";

// The rank-0 constant next to `x` in a two-input node, or nullptr.
const Tensor* scalar_beside(const ir::Node* n, const ir::Value* x) {
  if (n->num_inputs() != 2) return nullptr;
  const ir::Value* c = n->input(0) == x ? n->input(1) : n->input(0);
  return c->is_constant() && c->constant().rank() == 0 ? &c->constant() : nullptr;
}

}  // namespace

TEST(PatternMapping, DocWalkthroughLeakyRelu) {
  GraphBuilder b;
  ir::Value* x = b.input("x", {2, 9});
  ir::Value* x2 = b.input("x2", {2, 9});
  // fires: Where(x > 0, x, 0.1 * x)
  ir::Value* cond = b.op("Greater", {x, b.scalar(0)}, "gt");
  b.output(b.op("Where", {cond, x, b.op("Mul", {b.scalar(0.1f), x}, "scaled")}, "leaky"));
  // does not fire: compares with 1, not 0
  ir::Value* cond2 = b.op("Greater", {x2, b.scalar(1)}, "gt2");
  b.output(b.op("Where", {cond2, x2, b.op("Mul", {x2, b.scalar(0.1f)}, "scaled2")}, "not_leaky"));
  auto before = b.run_on(b.g->clone());

  PatternConfig cfg = parse_pattern_config_string(kLeakyRelu);
  PatternOptions opt;
  opt.filter = [](const Match& m) {
    const ir::Value* x = m.input("select", {1});  // Where's input 1, checked equal to the others by same_tensors
    const Tensor* zero = scalar_beside(m.node("compare"), x);
    const Tensor* alpha = scalar_beside(m.node("scaled"), x);
    return zero && zero->to_f64()[0] == 0.0 && alpha && alpha->to_f64()[0] >= 0.0;
  };
  opt.on_rewrite = [](Rewrite& r, ir::Graph&) {
    const OldNode& mul = r.returned("scaled");
    const Tensor* alpha = mul.constant_input(0) ? mul.constant_input(0) : mul.constant_input(1);
    r.new_nodes[0]->attrs["alpha"] = ir::Attribute(static_cast<float>(alpha->to_f64()[0]));
  };
  PatternResult res = pattern_mapping(*b.g, cfg, opt);
  ASSERT_EQ(res.count(), 1u);
  ir::Node* leaky = b.g->find_node("leaky");
  ASSERT_NE(leaky, nullptr);
  EXPECT_EQ(leaky->op_type(), "LeakyRelu");
  EXPECT_FLOAT_EQ(leaky->attr_f("alpha"), 0.1f);
  EXPECT_EQ(b.g->find_node("not_leaky")->op_type(), "Where");
  ir::infer_shapes(*b.g);
  expect_close(before, b.run());
}

}  // namespace test_pattern_mapping
