#include "cpu/release_sources.hpp"

#include <algorithm>
#include <set>

#include "cpu/weights_cache.hpp"
#include "ir/graph.hpp"

namespace kiln::cpu {

namespace {

using Range = std::pair<uintptr_t, uintptr_t>;  // [begin, end)

Range range_of(const Tensor& t) {
  const auto a = reinterpret_cast<uintptr_t>(t.raw());
  return {a, a + t.byte_size()};
}

// Every tensor a node attribute of `g` or of a graph nested in it holds, and every constant
// of a nested graph (the top level's constants are the edges the caller checks).
void collect_held(const ir::Graph& g, bool nested, std::vector<Range>& out) {
  if (nested)
    for (const ir::Node* n : g.nodes())
      for (const ir::Value* v : n->inputs())
        if (v && v->is_constant()) out.push_back(range_of(v->constant()));
  for (const ir::Node* n : g.nodes())
    for (const auto& [name, a] : n->attrs) {
      if (const auto* t = std::get_if<Tensor>(&a.value)) out.push_back(range_of(*t));
      if (const auto* sub = std::get_if<std::shared_ptr<ir::Graph>>(&a.value))
        if (*sub) collect_held(**sub, true, out);
    }
}

// The node kinds that read a constant weight only through pack_weights (no raw read, in
// prepare() or execute()), so a packed copy is all they need.
bool reads_weights_only_packed(NodeKind k) {
  return k == NodeKind::FullyConnected || k == NodeKind::Convolution || k == NodeKind::LSTM ||
         k == NodeKind::GRU;
}

}  // namespace

SourceRelease::SourceRelease(const std::vector<std::unique_ptr<Node>>& nodes, const std::vector<Edge*>& outputs,
                             const ir::Graph& ir, WeightsCache& cache)
    : cache_(cache) {
  for (const auto& n : nodes)
    if (n->kind() == NodeKind::If) return;  // branches are graphs of their own: release nothing
  // every constant a node reads, once per (node, bytes)
  for (const auto& n : nodes) {
    std::set<Key> mine;
    for (const Edge* e : n->inputs)
      if (e && e->kind == Edge::Kind::constant && e->constant.byte_size() > 0) {
        const Key k{e->constant.raw(), e->constant.byte_size()};
        if (mine.insert(k).second) ++sources_[k].readers_left;
        sources_[k].tensor = &e->constant;
      }
  }
  // what else holds bytes: graph outputs, post-op operands, attributes and nested graphs
  std::vector<Range> held;
  for (const Edge* e : outputs)
    if (e && e->kind == Edge::Kind::constant) held.push_back(range_of(e->constant));
  for (const auto& n : nodes)
    if (PostOpList* po = n->post_ops())
      for (const PostOp& op : po->ops) {
        if (op.constant.defined()) held.push_back(range_of(op.constant));
        if (op.dw_bias.defined()) held.push_back(range_of(op.dw_bias));
      }
  collect_held(ir, false, held);
  // the plan's constants that no node reads as an edge (read, if at all, some other way)
  for (const ir::Node* n : ir.nodes())
    for (const ir::Value* v : n->inputs())
      if (v && v->is_constant() && !sources_.count({v->constant().raw(), v->constant().byte_size()}))
        held.push_back(range_of(v->constant()));
  // held ranges by start, with the furthest end so far: a source overlaps one of them when
  // the furthest end among those starting before it ends lies past its start
  std::sort(held.begin(), held.end());
  std::vector<uintptr_t> furthest(held.size());
  for (size_t i = 0; i < held.size(); ++i) furthest[i] = std::max(held[i].second, i ? furthest[i - 1] : 0);
  std::vector<std::pair<Range, Source*>> by_start;
  for (auto& [k, s] : sources_) {
    const auto a = reinterpret_cast<uintptr_t>(k.first);
    by_start.push_back({{a, a + k.second}, &s});
  }
  for (size_t i = 0; i < by_start.size(); ++i) {
    const Range& r = by_start[i].first;
    const auto after = std::lower_bound(held.begin(), held.end(), Range{r.second, 0});
    if (after != held.begin() && furthest[static_cast<size_t>(after - held.begin()) - 1] > r.first)
      by_start[i].second->keep = true;
    // two sources whose bytes overlap (views of one storage) keep each other
    for (size_t j = i + 1; j < by_start.size() && by_start[j].first.first < r.second; ++j)
      by_start[i].second->keep = by_start[j].second->keep = true;
  }
}

void SourceRelease::prepared(const Node& n, const std::vector<Edge*>& inputs, const PackRecorder& packed,
                             const std::vector<bool>& converted) {
  std::set<Key> seen;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Edge* e = inputs[i];
    if (!e || e->kind != Edge::Kind::constant || e->constant.byte_size() == 0) continue;
    const Key k{e->constant.raw(), e->constant.byte_size()};
    auto it = sources_.find(k);
    if (it == sources_.end()) continue;  // (not a constant this graph started with)
    Source& s = it->second;
    // read raw, converted by a Reorder, or by a kind that may read it raw: needed as it is
    if (!reads_weights_only_packed(n.kind()) || !packed.packed(e->constant) || (i < converted.size() && converted[i]))
      s.keep = true;
    // the same bytes twice in one node (say weight and bias): only one input is packed
    if (!seen.insert(k).second) s.keep = true;
  }
  for (const Key& k : seen) {
    Source& s = sources_.at(k);
    if (--s.readers_left == 0 && !s.keep && s.tensor) released_ += cache_.release(*s.tensor);
  }
}

}  // namespace kiln::cpu
