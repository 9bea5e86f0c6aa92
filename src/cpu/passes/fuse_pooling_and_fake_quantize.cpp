// FusePoolingAndFakeQuantize: a Pooling (max or average) whose output is read only by a
// kiln FakeQuantize (and is no graph output) absorbs it as oneDNN post-ops: binary
// max / min for the clamp, binary mul / add for the scales and one eltwise_round (see
// passes::fake_quantize_post_ops for the chain and where it may differ from the
// reference: inputs within f32 rounding of a rounding tie). The ranges must be constants
// holding one value or one value per channel.
#include "core/strings.hpp"
#include "cpu/graph_optimizer.hpp"
#include "cpu/passes/fuse_util.hpp"

namespace kiln::cpu {

namespace {
constexpr const char* kFusePoolingAndFakeQuantize = "FusePoolingAndFakeQuantize";
}  // namespace

size_t fuse_pooling_and_fake_quantize(Graph& g, transforms::PassLog* log) {
  std::vector<Node*> pools;
  for (auto& n : g.nodes())
    if (n->kind() == NodeKind::Pooling) pools.push_back(n.get());
  size_t fused = 0;
  std::string why;
  for (Node* pool : pools) {
    if (pool->outputs.size() != 1 || !pool->post_ops()) continue;
    Edge* out = pool->outputs[0];
    auto readers = g.consumers(out);
    Node* fq = nullptr;
    std::optional<std::vector<PostOp>> ops;
    for (Node* r : readers) {
      ops = passes::fake_quantize_post_ops(*r, out, 1, &why);
      if (ops || !why.empty()) {
        fq = r;
        break;
      }
    }
    if (!fq) continue;  // no FakeQuantize after this pooling
    const std::string where = log ? passes::arrow(*pool, *fq) : std::string();
    auto skip = [&](const std::string& reason) {
      if (log) log->skipped(kFusePoolingAndFakeQuantize, where, cat(fq->name, " not fused: ", reason));
    };
    if (readers.size() != 1) {
      std::vector<std::string> names;
      for (Node* r : readers)
        if (r != fq) names.push_back(r->name);
      skip(cat(pool->name, "'s output is also read by ", join(names, ", ")));
      continue;
    }
    if (g.is_graph_output(out)) {
      skip(cat(pool->name, "'s output is a graph output"));
      continue;
    }
    if (!ops) {
      skip(why);
      continue;
    }
    if (!pool->accepts_post_ops(*ops, &why)) {
      skip(why);
      continue;
    }
    PostOpList* list = pool->post_ops();
    list->ops.insert(list->ops.end(), ops->begin(), ops->end());
    g.absorb(pool, fq);
    if (log) log->applied(kFusePoolingAndFakeQuantize, where, cat("FakeQuantize as ", ops->size(), " post-ops"));
    ++fused;
  }
  return fused;
}

}  // namespace kiln::cpu
