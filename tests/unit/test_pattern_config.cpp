// Pattern mapping configs: the JSON form of the spec's dict is parsed into PatternConfig, and
// every kind of mistake is a kiln::Error naming the key and what was expected.
#include <gtest/gtest.h>

#include <kiln/error.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "pattern/pattern_config.hpp"
#include "temp_dir.hpp"

namespace test_pattern_config {

using namespace kiln;
using namespace kiln::pattern;
using json = nlohmann::json;

namespace {

// The spec's LayerNorm example, as JSON.
json spec_layer_norm() {
  return json::parse(R"({
    "name": "ln",
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
  })");
}

// Parsing `j` must fail with a message containing every string of `parts`.
void expect_config_error(const json& j, const std::vector<std::string>& parts) {
  try {
    parse_pattern_config(j);
    ADD_FAILURE() << "expected kiln::Error containing '" << parts.at(0) << "'";
  } catch (const Error& e) {
    for (const std::string& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

}  // namespace

TEST(PatternConfig, ParsesSpecLayerNormExample) {
  PatternConfig c = parse_pattern_config(spec_layer_norm());
  EXPECT_EQ(c.name, "ln");
  ASSERT_EQ(c.num_in(), 9u);
  EXPECT_EQ(c.in_nodes[3].ops, std::vector<std::string>{"ReduceMean"});
  ASSERT_EQ(c.edges.size(), 8u);
  EXPECT_EQ(c.edges[5].from, 5);
  EXPECT_EQ(c.edges[5].to, 6);
  EXPECT_EQ(c.edges[5].port, -1);
  ASSERT_EQ(c.num_out(), 1u);
  EXPECT_EQ(c.out_nodes[0].op_type, "LayerNormalization");
  EXPECT_EQ(c.out_nodes[0].domain, "");
  EXPECT_EQ(c.search_mode, SearchMode::op_type);
  EXPECT_EQ(c.node_names.at(0).old_index, 8);
  const TensorMap& in = c.input_tensors.at(0);
  ASSERT_EQ(in.sources.size(), 3u);
  EXPECT_EQ(in.sources[1].node, 7);
  EXPECT_EQ(in.sources[1].ports, std::vector<int>{1});
  EXPECT_EQ(in.positions, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(in.total, 3);
  EXPECT_EQ(c.output_tensors.at(0).sources[0].node, 8);
  EXPECT_EQ(c.returns, std::vector<int>{4});
}

TEST(PatternConfig, BranchesReferencesPortsDomainsAndAlternatives) {
  json j = spec_layer_norm();
  j["patterns"]["in"] = json::parse(R"([
    [[0, ["Div", "Mul"]], [1, "Erf", 0], [2, "Add"], [3, "Mul"]],
    [[], [4, "Mul"], [3, "Mul", 1]],
    [[0], [2]]
  ])");
  j["patterns"]["out"] = json::parse(R"([[[0, "com.microsoft:Gelu"], [1, "Relu"]]])");
  j["node_names"] = json::parse(R"({"0": "gelu", "1": 3})");
  j["input_tensors"] = json::parse(R"({"0": [[{"4": [0, 1]}], [[0], 1]], "1": [[], [[], 1]]})");
  j["output_tensors"] = json::parse(R"({"1": [[{"3": [0]}], [[0], 1]]})");
  j["returns"] = json::array();
  j["same_tensors"] = json::parse(R"([[{"0": [0]}, {"4": [0, 1]}]])");
  PatternConfig c = parse_pattern_config(j);
  ASSERT_EQ(c.num_in(), 5u);
  EXPECT_EQ(c.in_nodes[0].ops, (std::vector<std::string>{"Div", "Mul"}));
  // main chain 0->1->2->3, branch (no head) 4->3 into input 1, extra edge 0->2
  ASSERT_EQ(c.edges.size(), 5u);
  EXPECT_EQ(c.edges[0].port, 0);
  EXPECT_EQ(c.edges[3].from, 4);
  EXPECT_EQ(c.edges[3].to, 3);
  EXPECT_EQ(c.edges[3].port, 1);
  EXPECT_EQ(c.edges[4].from, 0);
  EXPECT_EQ(c.edges[4].to, 2);
  EXPECT_EQ(c.out_nodes[0].domain, "com.microsoft");
  EXPECT_EQ(c.out_nodes[0].op_type, "Gelu");
  EXPECT_EQ(c.node_names.at(0).name, "gelu");
  EXPECT_EQ(c.node_names.at(1).old_index, 3);
  EXPECT_EQ(c.input_tensors.at(1).total, 1);
  EXPECT_EQ(c.same_tensors.size(), 1u);
  EXPECT_EQ(c.out_outputs(0), 1);
}

TEST(PatternConfig, GraphNodeNameSourceAndBareOutChain) {
  json j = spec_layer_norm();
  j["patterns"]["out"] = json::parse(R"([[0, "LayerNormalization"]])");  // a bare chain is accepted too
  j["input_tensors"]["0"][0][1] = json::parse(R"({"gamma_node": [0]})");
  j["input_tensors"]["0"][0][2] = json::parse(R"({"node:42": [0]})");
  PatternConfig c = parse_pattern_config(j);
  EXPECT_EQ(c.num_out(), 1u);
  EXPECT_EQ(c.input_tensors.at(0).sources[1].node, -1);
  EXPECT_EQ(c.input_tensors.at(0).sources[1].graph_node, "gamma_node");
  EXPECT_EQ(c.input_tensors.at(0).sources[2].graph_node, "42");
}

TEST(PatternConfig, FromStringAndFile) {
  PatternConfig a = parse_pattern_config_string(spec_layer_norm().dump());
  EXPECT_EQ(a.num_in(), 9u);
  const kiln::test::ScopedTempDir tmp("pattern_config");
  const auto path = tmp / "layer_norm.json";
  {
    std::ofstream f(path);
    f << spec_layer_norm().dump(2);
  }
  PatternConfig b = load_pattern_config(path.string());
  EXPECT_EQ(b.num_in(), 9u);
  std::filesystem::remove(path);
  try {
    load_pattern_config(path.string());
    ADD_FAILURE() << "expected an error for a missing file";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot open"), std::string::npos) << e.what();
  }
  std::vector<PatternConfig> many = parse_pattern_configs_string("[" + spec_layer_norm().dump() + "]");
  EXPECT_EQ(many.size(), 1u);
}

TEST(PatternConfig, ErrorNotJson) {
  try {
    parse_pattern_config_string("{\"patterns\": ", "cfg.json");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cfg.json: not valid JSON"), std::string::npos) << e.what();
  }
  // a number JSON's grammar allows but a double cannot hold (found by fuzz_pattern_json: it
  // escaped as nlohmann's out_of_range)
  try {
    parse_pattern_configs_string("[{\"name\": \"x\", \"eps\": 1e999}]", "cfg.json");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cfg.json: not valid JSON"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("1e999"), std::string::npos) << e.what();
  }
}

TEST(PatternConfig, ErrorTopLevelNotObject) { expect_config_error(json::array(), {"expected a JSON object"}); }

TEST(PatternConfig, ErrorUnknownKey) {
  json j = spec_layer_norm();
  j["retruns"] = json::array();
  expect_config_error(j, {"pattern 'ln'", "retruns: unknown key"});
}

TEST(PatternConfig, ErrorMissingPatterns) {
  json j = spec_layer_norm();
  j.erase("patterns");
  expect_config_error(j, {"patterns: missing required key"});
}

TEST(PatternConfig, ErrorMissingInputTensors) {
  json j = spec_layer_norm();
  j.erase("input_tensors");
  expect_config_error(j, {"input_tensors: missing required key"});
}

TEST(PatternConfig, ErrorMissingOut) {
  json j = spec_layer_norm();
  j["patterns"].erase("out");
  expect_config_error(j, {"patterns.out: missing required key"});
}

TEST(PatternConfig, ErrorBadSearchMode) {
  json j = spec_layer_norm();
  j["search_mode"] = "fuzzy";
  expect_config_error(j, {"search_mode", "\"op_type\" or \"node_name\"", "fuzzy"});
}

TEST(PatternConfig, ErrorChainElementNotAList) {
  json j = spec_layer_norm();
  j["patterns"]["in"][0][1] = "Sub";
  expect_config_error(j, {"patterns.in[0][1]", "expected [index, op_type]"});
}

TEST(PatternConfig, ErrorOpTypeNotAString) {
  json j = spec_layer_norm();
  j["patterns"]["in"][0][2][1] = 5;
  expect_config_error(j, {"patterns.in[0][2][1]", "op type"});
}

TEST(PatternConfig, ErrorNegativeIndex) {
  json j = spec_layer_norm();
  j["patterns"]["in"][0][0][0] = -1;
  expect_config_error(j, {"patterns.in[0][0][0]", "node index"});
}

TEST(PatternConfig, ErrorIndexGap) {
  json j = spec_layer_norm();
  j["patterns"]["in"][0][8][0] = 9;
  expect_config_error(j, {"patterns.in", "8 is missing"});
}

TEST(PatternConfig, ErrorIndexDeclaredTwice) {
  json j = spec_layer_norm();
  j["patterns"]["in"][0][8][0] = 1;
  expect_config_error(j, {"patterns.in[0][8]", "declared twice"});
}

TEST(PatternConfig, ErrorBranchNotConnected) {
  json j = spec_layer_norm();
  j["patterns"]["in"].push_back(json::parse(R"([[], [9, "Relu"], []])"));
  expect_config_error(j, {"patterns.in", "node 9 is not connected"});
}

TEST(PatternConfig, ErrorReferenceInsideABranch) {
  json j = spec_layer_norm();
  j["patterns"]["in"].push_back(json::parse(R"([[1], [6], [9, "Relu"]])"));
  expect_config_error(j, {"patterns.in[1][1]", "only the first (head) and last (tail)"});
}

TEST(PatternConfig, ErrorReferenceWithOtherOp) {
  json j = spec_layer_norm();
  j["patterns"]["in"].push_back(json::parse(R"([[1, "Add"], [6]])"));
  expect_config_error(j, {"patterns.in[1][0][1]", "declared as Sub, here as Add"});
}

TEST(PatternConfig, ErrorNewBranchNodeWithoutOp) {
  json j = spec_layer_norm();
  j["patterns"]["in"].push_back(json::parse(R"([[1], [9]])"));
  expect_config_error(j, {"patterns.in[1][1]", "needs an op type"});
}

TEST(PatternConfig, ErrorPortOnChainHead) {
  json j = spec_layer_norm();
  j["patterns"]["in"][0][0] = json::parse(R"([0, "ReduceMean", 0])");
  expect_config_error(j, {"patterns.in[0][0][2]", "takes no input port"});
}

TEST(PatternConfig, ErrorEmptyElementInMainChain) {
  json j = spec_layer_norm();
  j["patterns"]["in"][0][3] = json::array();
  expect_config_error(j, {"patterns.in[0][3]", "main chain cannot contain []"});
}

TEST(PatternConfig, ErrorOutWithBranches) {
  json j = spec_layer_norm();
  j["patterns"]["out"].push_back(json::parse(R"([[1, "Relu"]])"));
  expect_config_error(j, {"patterns.out", "one chain of new nodes"});
}

TEST(PatternConfig, ErrorOutIndexOutOfOrder) {
  json j = spec_layer_norm();
  j["patterns"]["out"][0].push_back(json::parse(R"([3, "Relu"])"));
  expect_config_error(j, {"patterns.out[0][1][0]", "expected index 1, got 3"});
}

TEST(PatternConfig, ErrorOutOpAlternatives) {
  json j = spec_layer_norm();
  j["patterns"]["out"][0][0][1] = json::parse(R"(["A", "B"])");
  expect_config_error(j, {"patterns.out[0][0]", "one op type"});
}

TEST(PatternConfig, ErrorNodeNamesKeyNotAnIndex) {
  json j = spec_layer_norm();
  j["node_names"] = json::parse(R"({"first": 8})");
  expect_config_error(j, {"node_names", "\"first\""});
}

TEST(PatternConfig, ErrorNodeNamesKeyOutOfRange) {
  json j = spec_layer_norm();
  j["node_names"] = json::parse(R"({"1": 8})");
  expect_config_error(j, {"node_names.1", "no node 1"});
}

TEST(PatternConfig, ErrorNodeNamesValueOutOfRange) {
  json j = spec_layer_norm();
  j["node_names"]["0"] = 12;
  expect_config_error(j, {"node_names.0", "no node 12"});
}

TEST(PatternConfig, ErrorNodeNamesValueWrongType) {
  json j = spec_layer_norm();
  j["node_names"]["0"] = 1.5;
  expect_config_error(j, {"node_names.0", "index of patterns.in or a name"});
}

TEST(PatternConfig, ErrorInputTensorsWrongShape) {
  json j = spec_layer_norm();
  j["input_tensors"]["0"] = json::parse(R"([{"0": [0]}])");
  expect_config_error(j, {"input_tensors.0", "expected [[{"});
}

TEST(PatternConfig, ErrorInputTensorsSourceNotOneObject) {
  json j = spec_layer_norm();
  j["input_tensors"]["0"][0][1] = json::parse(R"({"7": [1], "8": [1]})");
  expect_config_error(j, {"input_tensors.0[0][1]", "expected one"});
}

TEST(PatternConfig, ErrorInputTensorsUnknownOldNode) {
  json j = spec_layer_norm();
  j["input_tensors"]["0"][0][1] = json::parse(R"({"17": [1]})");
  expect_config_error(j, {"input_tensors.0[0][1]", "no node 17"});
}

TEST(PatternConfig, ErrorInputTensorsEmptyPorts) {
  json j = spec_layer_norm();
  j["input_tensors"]["0"][0][1] = json::parse(R"({"7": []})");
  expect_config_error(j, {"input_tensors.0[0][1].7", "non-empty list"});
}

TEST(PatternConfig, ErrorInputTensorsPositionCount) {
  json j = spec_layer_norm();
  j["input_tensors"]["0"][1][0] = json::parse("[0, 1]");
  expect_config_error(j, {"input_tensors.0[1][0]", "expected 3 position(s)"});
}

TEST(PatternConfig, ErrorInputTensorsPositionOutOfRange) {
  json j = spec_layer_norm();
  j["input_tensors"]["0"][1][0][2] = 3;
  expect_config_error(j, {"input_tensors.0[1][0][2]", "out of range for total 3"});
}

TEST(PatternConfig, ErrorInputTensorsPositionTwice) {
  json j = spec_layer_norm();
  j["input_tensors"]["0"][1][0][2] = 1;
  expect_config_error(j, {"input_tensors.0[1][0][2]", "given twice"});
}

TEST(PatternConfig, ErrorInputTensorsTotalTooSmall) {
  json j = spec_layer_norm();
  j["input_tensors"]["0"][1][1] = 2;
  expect_config_error(j, {"input_tensors.0[1][1]", "smaller than the 3 tensors"});
}

TEST(PatternConfig, ErrorFirstOutNodeWithUnfilledInputs) {
  json j = spec_layer_norm();
  j["input_tensors"]["0"][1][1] = 4;
  expect_config_error(j, {"input_tensors.0", "no previous new node"});
}

TEST(PatternConfig, ErrorFirstOutNodeWithoutInputs) {
  json j = spec_layer_norm();
  j["input_tensors"] = json::object();
  expect_config_error(j, {"input_tensors", "out node 0 needs an entry"});
}

TEST(PatternConfig, ErrorTooManyInputsFromPreviousNode) {
  json j = spec_layer_norm();
  j["patterns"]["out"][0].push_back(json::parse(R"([1, "Add"])"));
  j["input_tensors"]["1"] = json::parse(R"([[], [[], 2]])");
  expect_config_error(j, {"input_tensors.1", "out node 0, which has only 1 output"});
}

TEST(PatternConfig, ErrorOutputTensorsTwoPorts) {
  json j = spec_layer_norm();
  j["output_tensors"]["0"][0][0] = json::parse(R"({"8": [0, 1]})");
  expect_config_error(j, {"output_tensors.0[0][0].8", "exactly one output index"});
}

TEST(PatternConfig, ErrorOutputTensorsGraphNodeName) {
  json j = spec_layer_norm();
  j["output_tensors"]["0"][0][0] = json::parse(R"({"reshape_0": [0]})");
  expect_config_error(j, {"output_tensors.0[0][0]", "\"reshape_0\""});
}

TEST(PatternConfig, ErrorOutputTakenTwice) {
  json j = spec_layer_norm();
  j["output_tensors"]["0"] = json::parse(R"([[{"8": [0]}, {"8": [0]}], [[0, 1], 2]])");
  expect_config_error(j, {"output_tensors.0[0][1]", "already an output"});
}

TEST(PatternConfig, ErrorReturnsOutOfRange) {
  json j = spec_layer_norm();
  j["returns"] = json::parse("[4, 9]");
  expect_config_error(j, {"returns[1]", "no node 9"});
}

TEST(PatternConfig, ErrorReturnsNotAList) {
  json j = spec_layer_norm();
  j["returns"] = 4;
  expect_config_error(j, {"returns", "expected a list"});
}

TEST(PatternConfig, ErrorSameTensorsGroupTooSmall) {
  json j = spec_layer_norm();
  j["same_tensors"] = json::parse(R"([[{"0": [0]}]])");
  expect_config_error(j, {"same_tensors[0]", "at least two"});
}

TEST(PatternConfig, ErrorNodeNameModeTakesOneName) {
  json j = spec_layer_norm();
  j["search_mode"] = "node_name";
  j["patterns"]["in"][0][1][1] = json::parse(R"(["a", "b"])");
  expect_config_error(j, {"patterns.in[0][1][1]", "a node name"});
}

// ---------------- labels (kiln extension) ----------------

TEST(PatternConfig, ParsesLabels) {
  json j = spec_layer_norm();
  j["labels"] = json::parse(R"({"0": "mean", "4": "add_eps", "7": "scale", "8": "_bias2"})");
  PatternConfig c = parse_pattern_config(j);
  EXPECT_EQ(c.in_nodes[4].label, "add_eps");
  EXPECT_EQ(c.in_nodes[1].label, "");  // unlabelled nodes are fine
  EXPECT_EQ(c.find_label("scale"), 7);
  EXPECT_EQ(c.find_label("_bias2"), 8);
  EXPECT_EQ(c.find_label("sqrt"), -1);
  EXPECT_EQ(c.find_label(""), -1);
  EXPECT_EQ(c.labelled("mean"), 0);
  // without "labels" no node has one
  EXPECT_EQ(parse_pattern_config(spec_layer_norm()).find_label("mean"), -1);
}

TEST(PatternConfig, UnknownLabelNamesThePatternAndTheLabel) {
  json j = spec_layer_norm();
  j["labels"] = json::parse(R"({"0": "mean", "4": "add_eps"})");
  PatternConfig c = parse_pattern_config(j);
  try {
    c.labelled("gamma");
    ADD_FAILURE() << "expected kiln::Error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const char* part : {"pattern 'ln'", "'gamma'", "mean, add_eps"})
      EXPECT_NE(msg.find(part), std::string::npos) << msg;
  }
}

TEST(PatternConfig, ErrorLabelsNotAnObject) {
  json j = spec_layer_norm();
  j["labels"] = json::parse(R"(["mean", "centre"])");
  expect_config_error(j, {"pattern 'ln'", "labels", "expected an object"});
}

TEST(PatternConfig, ErrorLabelOfUnknownNode) {
  json j = spec_layer_norm();
  j["labels"] = json::parse(R"({"0": "mean", "9": "extra"})");
  expect_config_error(j, {"pattern 'ln'", "labels.9", "patterns.in has 9 node(s)", "no node 9"});
}

TEST(PatternConfig, ErrorLabelsKeyedByLabel) {
  // the label -> index way round is refused: the key is the node index
  json j = spec_layer_norm();
  j["labels"] = json::parse(R"({"mean": 0})");
  expect_config_error(j, {"pattern 'ln'", "labels", "expected a node index of patterns.in as key", "\"mean\""});
}

TEST(PatternConfig, ErrorDuplicateLabel) {
  json j = spec_layer_norm();
  j["labels"] = json::parse(R"({"0": "mean", "3": "mean"})");
  expect_config_error(j, {"pattern 'ln'", "labels.3", "label \"mean\" is already the label of node 0"});
}

TEST(PatternConfig, ErrorLabelNotAnIdentifier) {
  for (const char* bad : {"2nd_mean", "add-eps", "add eps", ""}) {
    json j = spec_layer_norm();
    j["labels"] = json{{"4", bad}};
    expect_config_error(j, {"pattern 'ln'", "labels.4", "is not an identifier"});
  }
}

TEST(PatternConfig, ErrorLabelNotAString) {
  json j = spec_layer_norm();
  j["labels"] = json::parse(R"({"4": 4})");
  expect_config_error(j, {"pattern 'ln'", "labels.4", "expected a label (string)"});
}

}  // namespace test_pattern_config
