#pragma once
// Test helper: builds small ONNX ModelProtos through the protobuf API.
#include <kiln/tensor.hpp>
#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

#include "frontend/onnx/tensor_proto.hpp"

namespace kiln::test {

struct OnnxBuilder {
  onnx::ModelProto model;
  onnx::GraphProto* graph;

  explicit OnnxBuilder(int opset = 13, const std::string& name = "test") {
    model.set_ir_version(8);
    auto* op = model.add_opset_import();
    op->set_domain("");
    op->set_version(opset);
    graph = model.mutable_graph();
    graph->set_name(name);
  }
  // dims: >= 0 static, -1 unknown; names in `syms` (same index) make a dim symbolic.
  static void set_type(onnx::ValueInfoProto* vi, int elem, const std::vector<int64_t>& dims,
                       const std::vector<std::string>& syms) {
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem);
    auto* sh = tt->mutable_shape();
    for (size_t i = 0; i < dims.size(); ++i) {
      auto* d = sh->add_dim();
      if (i < syms.size() && !syms[i].empty()) d->set_dim_param(syms[i]);
      else if (dims[i] >= 0) d->set_dim_value(dims[i]);
    }
  }
  void input(const std::string& name, const std::vector<int64_t>& dims, int elem = onnx::TensorProto::FLOAT,
             const std::vector<std::string>& syms = {}) {
    auto* vi = graph->add_input();
    vi->set_name(name);
    set_type(vi, elem, dims, syms);
  }
  void output(const std::string& name, int elem = onnx::TensorProto::FLOAT) {
    auto* vi = graph->add_output();
    vi->set_name(name);
    vi->mutable_type()->mutable_tensor_type()->set_elem_type(elem);
  }
  onnx::TensorProto* initializer(const std::string& name, const Tensor& t) {
    auto* p = graph->add_initializer();
    frontend::tensor_to_proto(t, *p);
    p->set_name(name);
    return p;
  }
  onnx::NodeProto* node(const std::string& op, const std::vector<std::string>& ins,
                        const std::vector<std::string>& outs, const std::string& name = "") {
    auto* n = graph->add_node();
    n->set_op_type(op);
    n->set_name(name.empty() ? op + "_" + std::to_string(graph->node_size()) : name);
    for (auto& i : ins) n->add_input(i);
    for (auto& o : outs) n->add_output(o);
    return n;
  }
  static void attr_f(onnx::NodeProto* n, const std::string& k, float v) {
    auto* a = n->add_attribute();
    a->set_name(k);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(v);
  }
  static void attr_i(onnx::NodeProto* n, const std::string& k, int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(k);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void attr_s(onnx::NodeProto* n, const std::string& k, const std::string& v) {
    auto* a = n->add_attribute();
    a->set_name(k);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(v);
  }
  static void attr_ints(onnx::NodeProto* n, const std::string& k, const std::vector<int64_t>& v) {
    auto* a = n->add_attribute();
    a->set_name(k);
    a->set_type(onnx::AttributeProto::INTS);
    for (auto x : v) a->add_ints(x);
  }
  std::string bytes() const { return model.SerializeAsString(); }
};

}  // namespace kiln::test
