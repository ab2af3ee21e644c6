// The adakv plug-in (see adakv.h; compaction/adakv.h).
#include "compaction/methods/adakv.h"

#include <fmt/format.h>

#include "core/error.h"

namespace kvcompact {
namespace {

const MethodInfo& info_schema() {
  static const MethodInfo value{"adakv",
                       "AdaKV (arXiv 2407.11550, kvpress AdaKVPress) over kvpress's SnapKV scores: each head\nkeeps "
                       "its floor(alpha*t) best entries, the layer's rest goes to its best scores overall",
                       {{"alpha", "X", "safeguard fraction in [0, 1] (default 0.2)"},
                        {"window", "W", "SnapKV scorer's observation window, W >= 1 (default 64)"},
                        {"pool", "none|avg:K|max:K", "SnapKV scorer's pooling (default avg:5)"}}};
  return value;
}

}  // namespace

std::vector<std::string> AdaKvMethod::settings() const {
  const AdaKvOptions d;
  std::vector<std::string> items;
  if (options_.alpha != d.alpha) items.push_back(format_setting("alpha", options_.alpha));
  if (options_.snapkv.window != d.snapkv.window) items.push_back(fmt::format("window={}", options_.snapkv.window));
  if (!(options_.snapkv.pool == d.snapkv.pool)) items.push_back("pool=" + pooling_name(options_.snapkv.pool));
  return items;
}

CompactedHead AdaKvMethod::compact(const HeadCompactionInput&, int, std::uint64_t) const {
  throw Error("adakv ranks entries across a layer's KV heads; compact the whole cache");
}

std::vector<double> AdaKvMethod::layer_head_scores(const HeadCompactionInput& in) const {
  return snapkv_press_scores(in, options_.snapkv);
}

std::vector<std::vector<int>> AdaKvMethod::layer_select(const std::vector<std::vector<double>>& head_scores,
                                                        const std::vector<int>& budgets) const {
  if (budgets.size() != head_scores.size())
    throw Error(fmt::format("layer selection: {} budgets for {} heads", budgets.size(), head_scores.size()));
  return adakv_select(head_scores, budgets, options_.alpha);
}

MethodEntry adakv_method() {
  return {&info_schema(), [](const MethodSettings& s) -> std::shared_ptr<const Method> {
            AdaKvOptions o;
            if (s.has("alpha")) o.alpha = s.number_in("alpha", "X", 0.0, 1.0);
            if (s.has("window")) o.snapkv.window = s.integer("window", "N", 1, 1 << 30);
            if (s.has("pool")) o.snapkv.pool = s.pool("pool");
            return std::make_shared<AdaKvMethod>(info_schema(), o);
          }};
}

}  // namespace kvcompact
