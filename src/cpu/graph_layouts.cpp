// Compile stage 7 (cpu/compile_pipeline.hpp): every node's prepare() in execution order
// (primitives, output layouts, the input layouts it needs) and a Reorder wherever an input's
// layout is not the one its reader needs (one per edge and target layout, shared). With
// GraphOptions::release_packed_sources, constants whose readers all packed them are given
// back as the last of those readers is prepared (release_sources.hpp).
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "core/strings.hpp"
#include "cpu/dnnl_util.hpp"
#include "cpu/graph.hpp"
#include "cpu/nodes/node_factory.hpp"
#include "cpu/release_sources.hpp"
#include "cpu/weights_cache.hpp"

namespace kiln::cpu {

void Graph::prepare_all(bool release_packed_sources) {
  std::vector<std::unique_ptr<Node>> ordered;
  std::map<std::pair<Edge*, std::string>, Edge*> reordered;  // (edge, target layout) -> converted edge
  auto convert = [&](Edge* e, const dnnl::memory::desc& target, const std::string& key) -> Edge* {
    auto it = reordered.find({e, key});
    if (it != reordered.end()) return it->second;
    auto r = make_reorder_node(e->name + "/reorder", target);
    r->inputs = {e};
    Edge* out = new_edge(e->name + "/" + key, e->dtype, e->shape);
    r->outputs = {out};
    r->prepare();
    ordered.push_back(std::move(r));
    reordered[{e, key}] = out;
    return out;
  };
  auto desc_key = [](const dnnl::memory::desc& d) {
    const auto& c = d.data;
    std::string k = "L";
    for (int i = 0; i < c.ndims; ++i) k += cat(c.padded_dims[i], ".");
    if (c.format_kind == dnnl_blocked) {
      for (int i = 0; i < c.ndims; ++i) k += cat(c.format_desc.blocking.strides[i], ",");
      for (int i = 0; i < c.format_desc.blocking.inner_nblks; ++i)
        k += cat("b", c.format_desc.blocking.inner_blks[i], "@", c.format_desc.blocking.inner_idxs[i]);
    }
    return k + cat("t", static_cast<int>(c.data_type));
  };
  // originals every reader has packed go back to the system as soon as the last is prepared
  std::optional<SourceRelease> release;
  if (release_packed_sources && WeightsCache::current())
    release.emplace(nodes_, output_edges_, *ir_, *WeightsCache::current());
  for (auto& node : nodes_) {  // Node::output_readers, before the loop below moves nodes_
    node->output_readers.clear();
    if (!node->outputs.empty() && node->outputs[0])
      for (const Node* r : readers_of(node->outputs[0])) node->output_readers.push_back(r);
  }
  for (auto& node : nodes_) {
    const std::vector<Edge*> before = node->inputs;
    std::vector<bool> converted(before.size(), false);
    std::vector<InputLayout> reqs;
    {
      PackRecorder packed;
      reqs = node->prepare();
      for (size_t i = 0; i < node->inputs.size() && i < reqs.size(); ++i) {
        Edge* e = node->inputs[i];
        if (!e) continue;
        const InputLayout& r = reqs[i];
        if (r.kind == InputLayout::Kind::plain && !e->is_plain()) {
          node->inputs[i] = convert(e, *plain_desc(e->shape, e->dtype), "plain");
        } else if (r.kind == InputLayout::Kind::exact && !(e->desc() == *r.desc)) {
          node->inputs[i] = convert(e, *r.desc, desc_key(*r.desc));
        }
        converted[i] = node->inputs[i] != e;
      }
      if (release) release->prepared(*node, before, packed, converted);
    }
    ordered.push_back(std::move(node));
  }
  for (auto& e : output_edges_)
    if (!e->is_plain()) e = convert(e, *plain_desc(e->shape, e->dtype), "plain");
  nodes_ = std::move(ordered);
  readers_built_ = false;  // Reorders now sit between edges and their readers
}

}  // namespace kiln::cpu
