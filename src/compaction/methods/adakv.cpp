// The adakv plug-in (see adakv.h; compaction/adakv.h).
#include "compaction/methods/adakv.h"

#include <fmt/format.h>

#include "compaction/methods/expected.h"
#include "core/error.h"

namespace kvcompact {
namespace {

const MethodInfo& info_schema() {
  static const MethodInfo value = [] {
    MethodInfo info{"adakv",
                       "AdaKV (arXiv 2407.11550, kvpress AdaKVPress) over kvpress's SnapKV or ExpectedAttention\n"
                       "scores: each head keeps its floor(alpha*t) best entries, the layer's rest goes to its\n"
                       "best scores overall",
                       {{"alpha", "X", "safeguard fraction in [0, 1] (default 0.2)"},
                        {"scorer", "snapkv|expected", "per-head scores (default snapkv; kvpress's registry entry\n"
                                                      "\"expected_attention\" is scorer=expected,eps=0.01)"},
                        {"window", "W", "SnapKV scorer's observation window, W >= 1 (default 64)"},
                        {"pool", "none|avg:K|max:K", "SnapKV scorer's pooling (default avg:5)"}}};
    for (MethodOption& o : expected_option_schema("scorer=expected: ")) info.options.push_back(std::move(o));
    return info;
  }();
  return value;
}

}  // namespace

std::vector<std::string> AdaKvMethod::settings() const {
  const AdaKvOptions d;
  std::vector<std::string> items;
  if (options_.alpha != d.alpha) items.push_back(format_setting("alpha", options_.alpha));
  if (options_.scorer == AdaKvScorer::Expected) {
    items.push_back("scorer=expected");
    append_expected_settings(options_.expected, items);
    return items;
  }
  if (options_.snapkv.window != d.snapkv.window) items.push_back(fmt::format("window={}", options_.snapkv.window));
  if (!(options_.snapkv.pool == d.snapkv.pool)) items.push_back("pool=" + pooling_name(options_.snapkv.pool));
  return items;
}

CompactedHead AdaKvMethod::compact(const HeadCompactionInput&, int, std::uint64_t) const {
  throw Error("adakv ranks entries across a layer's KV heads; compact the whole cache");
}

std::vector<double> AdaKvMethod::layer_head_scores(const HeadCompactionInput& in) const {
  if (options_.scorer == AdaKvScorer::Expected) return expected_attention_scores(in, options_.expected);
  return snapkv_press_scores(in, options_.snapkv);
}

std::vector<std::vector<int>> AdaKvMethod::layer_select(const std::vector<std::vector<double>>& head_scores,
                                                        const std::vector<int>& budgets) const {
  if (budgets.size() != head_scores.size())
    throw Error(fmt::format("layer selection: {} budgets for {} heads", budgets.size(), head_scores.size()));
  std::vector<std::vector<double>> scores = head_scores;
  adakv_raise_forced(scores, options_);
  return adakv_select(scores, budgets, options_.alpha);
}

MethodEntry adakv_method() {
  return {&info_schema(), [](const MethodSettings& s) -> std::shared_ptr<const Method> {
            AdaKvOptions o;
            if (s.has("alpha")) o.alpha = s.number_in("alpha", "X", 0.0, 1.0);
            if (s.has("scorer"))
              o.scorer = s.choice<AdaKvScorer>("scorer", "snapkv|expected",
                                               {{"snapkv", AdaKvScorer::SnapKv}, {"expected", AdaKvScorer::Expected}});
            const bool expected = o.scorer == AdaKvScorer::Expected;
            for (const char* key : {"window", "pool"})
              if (expected && s.has(key)) s.fail(fmt::format("{} applies to scorer=snapkv only", key));
            for (const MethodOption& opt : expected_option_schema(""))  // the expected scorer's keys
              if (!expected && s.has(opt.key)) s.fail(fmt::format("{} applies to scorer=expected only", opt.key));
            if (s.has("window")) o.snapkv.window = s.integer("window", "N", 1, 1 << 30);
            if (s.has("pool")) o.snapkv.pool = s.pool("pool");
            o.expected = parse_expected_options(s);
            return std::make_shared<AdaKvMethod>(info_schema(), o);
          }};
}

}  // namespace kvcompact
