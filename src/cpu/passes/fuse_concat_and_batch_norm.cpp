// FuseConcatAndBatchNorm: Concat (two or more inputs, along the channels) -> BatchNormalization
// (+ the ReLU FuseBatchNormAndRelu gave it) becomes one Concat that writes
// relu(x * a[c] + b[c]) as it copies. DenseNet normalises every dense layer's concatenated
// features before its 1x1 convolution, so the Concat wrote the whole tensor and the batch
// normalization read and wrote it again: one pass over the data instead of two. Only when the
// BatchNormalization is the Concat's one reader and the Concat's output is no graph output:
// the un-normalised tensor then exists nowhere.
#include "core/strings.hpp"
#include "cpu/fusion_rules.hpp"
#include "cpu/graph_optimizer.hpp"
#include "cpu/nodes/node_factory.hpp"
#include "cpu/passes/fuse_util.hpp"

namespace kiln::cpu {

namespace {
constexpr const char* kFuseConcatAndBatchNorm = "FuseConcatAndBatchNorm";
}  // namespace

size_t fuse_concat_and_batch_norm(Graph& g, transforms::PassLog* log) {
  size_t fused = 0;
  for (Node* concat : passes::nodes_of_kind(g, NodeKind::Concat)) {
    if (concat->outputs.size() != 1 || !concat->source) continue;
    auto readers = g.consumers(concat->outputs[0]);
    const auto bn_at = std::find_if(readers.begin(), readers.end(),
                                    [](const Node* r) { return r->kind() == NodeKind::BatchNorm && r->source; });
    if (bn_at == readers.end()) continue;
    Node* bn = *bn_at;
    const std::string where = log ? passes::arrow(*concat, *bn) : std::string();
    auto skip = [&](const std::string& why) {
      if (log) log->skipped(kFuseConcatAndBatchNorm, where, cat("BatchNormalization not fused: ", why));
    };
    std::string why;
    if (!concat_takes_batch_norm(*concat->source, *bn->source, &why)) {  // cpu/fusion_rules.hpp
      skip(why);
      continue;
    }
    if (readers.size() != 1) {
      skip(cat(concat->name, "'s output is read by ", readers.size(), " nodes"));
      continue;
    }
    if (g.is_graph_output(concat->outputs[0])) {
      skip(cat(concat->name, "'s output is a graph output"));
      continue;
    }
    const bool relu = !bn->post_ops()->empty();
    if (!concat->take_channel_affine(batch_norm_affine(*bn), &why)) {
      skip(why);
      continue;
    }
    g.absorb(concat, bn);
    if (log) log->applied(kFuseConcatAndBatchNorm, where, relu ? "BatchNormalization + ReLU computed while concatenating"
                                             : "BatchNormalization computed while concatenating");
    ++fused;
  }
  return fused;
}

}  // namespace kiln::cpu
