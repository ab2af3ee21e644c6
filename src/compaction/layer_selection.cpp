// Layer-scoped selection (see layer_selection.h).
#include "compaction/layer_selection.h"

#include <cstddef>

#include <fmt/format.h>

#include "compaction/adakv.h"
#include "compaction/key_selection.h"
#include "compaction/tova.h"
#include "io/error.h"

namespace kvcompact {

std::vector<double> layer_scoped_head_scores(const MethodSpec& spec, const HeadCompactionInput& in) {
  switch (spec.family) {
    case MethodFamily::Tova: return tova_head_scores(in);
    case MethodFamily::AdaKv: return snapkv_press_scores(in, spec.adakv.snapkv);
    default: throw Error(fmt::format("{} is not a layer-scoped method", method_family_name(spec.family)));
  }
}

std::vector<std::vector<int>> layer_scoped_select(const MethodSpec& spec,
                                                  const std::vector<std::vector<double>>& head_scores,
                                                  const std::vector<int>& budgets) {
  if (budgets.size() != head_scores.size())
    throw Error(fmt::format("layer selection: {} budgets for {} heads", budgets.size(), head_scores.size()));
  switch (spec.family) {
    case MethodFamily::Tova: {
      const std::vector<int> ranking = rank_keys(tova_layer_scores(head_scores));
      std::vector<std::vector<int>> sel;
      for (int b : budgets) {
        if (b < 0 || static_cast<std::size_t>(b) > ranking.size())
          throw Error(fmt::format("tova: cannot keep {} of {} entries", b, ranking.size()));
        sel.push_back(top_keys(ranking, b));
      }
      return sel;
    }
    case MethodFamily::AdaKv: return adakv_select(head_scores, budgets, spec.adakv.alpha);
    default: throw Error(fmt::format("{} is not a layer-scoped method", method_family_name(spec.family)));
  }
}

}  // namespace kvcompact
