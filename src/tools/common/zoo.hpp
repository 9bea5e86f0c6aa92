#pragma once
// The model zoo: small real architectures with fixed pseudo-random weights, built
// through the ONNX protobuf API. Used by `kiln zoo` and by tests as end-to-end models.
//   resnet18   torchvision ResNet-18 (BatchNormalization kept as nodes), input [1,3,224,224]
//   mlp        MatMul+Add+Relu+MatMul+Add+Softmax, input [batch,16] -> [batch,10]
//   bert_tiny  2-layer BERT encoder, hidden 64, decomposed LayerNorm and erf GELU,
//              inputs input_ids / attention_mask i64 [batch,seq]
// Weights are deterministic for a given seed (std::mt19937).
#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::tools {

struct ZooEntry {
  std::string name;
  std::string description;
};

const std::vector<ZooEntry>& zoo_entries();

// Throws kiln::Error for an unknown name (the message lists the known ones).
onnx::ModelProto zoo_model(const std::string& name, uint32_t seed = 0);
// zoo_model serialized; write_zoo_model writes it to a file.
std::string zoo_model_bytes(const std::string& name, uint32_t seed = 0);
void write_zoo_model(const std::string& name, const std::string& path, uint32_t seed = 0);

}  // namespace kiln::tools
