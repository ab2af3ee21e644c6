// The "tova" plug-in, layer-scoped: the last context query's attention averaged over the layer's
// query heads ranks the entries of every head of the layer (tova.h; kvpress TOVAPress).
#include <cstddef>

#include <fmt/format.h>

#include "compaction/key_selection.h"
#include "compaction/method.h"
#include "compaction/tova.h"
#include "core/error.h"

namespace kvcompact {
namespace {

const MethodInfo& info_schema() {
  static const MethodInfo value{"tova",
                       "TOVA (arXiv 2401.06104, kvpress TOVAPress): the last context query's attention,\naveraged "
                       "over the layer's query heads (one ranking per layer); last key kept; no keys",
                       {}};
  return value;
}

class TovaMethod final : public Method {
 public:
  TovaMethod() : Method(info_schema()) {}
  std::vector<std::string> settings() const override { return {}; }
  bool needs_context_queries() const override { return true; }
  bool layer_scoped() const override { return true; }
  CompactedHead compact(const HeadCompactionInput&, int, std::uint64_t) const override {
    throw Error("tova ranks entries across a layer's KV heads; compact the whole cache");
  }
  std::vector<double> layer_head_scores(const HeadCompactionInput& in) const override { return tova_head_scores(in); }
  std::vector<std::vector<int>> layer_select(const std::vector<std::vector<double>>& head_scores,
                                             const std::vector<int>& budgets) const override {
    if (budgets.size() != head_scores.size())
      throw Error(fmt::format("layer selection: {} budgets for {} heads", budgets.size(), head_scores.size()));
    const std::vector<int> ranking = rank_keys(tova_layer_scores(head_scores));
    std::vector<std::vector<int>> sel;
    for (int b : budgets) {
      if (b < 0 || static_cast<std::size_t>(b) > ranking.size())
        throw Error(fmt::format("tova: cannot keep {} of {} entries", b, ranking.size()));
      sel.push_back(top_keys(ranking, b));
    }
    return sel;
  }
};

}  // namespace

MethodEntry tova_method() {
  return {&info_schema(), [](const MethodSettings&) -> std::shared_ptr<const Method> { return std::make_shared<TovaMethod>(); }};
}

}  // namespace kvcompact
