// The snapkv and pyramidkv plug-ins (see snapkv.h).
#include "compaction/methods/snapkv.h"

#include <cstddef>

#include <fmt/format.h>

namespace kvcompact {
namespace {

const MethodOption& window_schema() {
  static const MethodOption value{"window", "W", "observation window, W >= 1 (default 32)"};
  return value;
}
const MethodOption& pool_schema() {
  static const MethodOption value{"pool", "none|avg:K|max:K", "pooling of the votes (default avg:5)"};
  return value;
}

const MethodInfo& snap_kv_schema() {
  static const MethodInfo value{"snapkv", "SnapKV (arXiv 2404.14469): votes of the last W context queries on the earlier keys",
                         {window_schema(), pool_schema()}};
  return value;
}
const MethodInfo& pyramid_kv_schema() {
  static const MethodInfo value{"pyramidkv",
                            "PyramidKV (arXiv 2406.02069): per-layer budgets decreasing linearly bottom to top\n(same "
                            "total), SnapKV selection in each head",
                            {{"beta", "B", "top layer keeps t/B, bottom 2t - t/B; B >= 1 (default 20)"}, window_schema(), pool_schema()}};
  return value;
}

SnapKvOptions parse_snapkv(const MethodSettings& s) {
  SnapKvOptions o;
  if (s.has("window")) o.window = s.integer("window", "N", 1, 1 << 30);
  if (s.has("pool")) o.pool = s.pool("pool");
  return o;
}

std::vector<std::string> snapkv_settings(const SnapKvOptions& o) {
  const SnapKvOptions d;
  std::vector<std::string> items;
  if (o.window != d.window) items.push_back(fmt::format("window={}", o.window));
  if (!(o.pool == d.pool)) items.push_back("pool=" + pooling_name(o.pool));
  return items;
}

}  // namespace

std::vector<std::string> SnapKvMethod::settings() const { return snapkv_settings(options_); }

CompactedHead SnapKvMethod::compact(const HeadCompactionInput& in, int budget, std::uint64_t) const {
  return compact_snapkv(in, budget, options_);
}

std::vector<std::string> PyramidKvMethod::settings() const {
  std::vector<std::string> items;
  if (beta_ != 20.0) items.push_back(format_setting("beta", beta_));
  for (std::string& s : snapkv_settings(options())) items.push_back(std::move(s));
  return items;
}

int PyramidKvMethod::budget(int t, int T, int layer, int n_layers) const {
  return pyramid_budgets_for(n_layers, T, t, beta_)[static_cast<std::size_t>(layer)];
}

MethodEntry snapkv_method() {
  return {&snap_kv_schema(), [](const MethodSettings& s) -> std::shared_ptr<const Method> {
            return std::make_shared<SnapKvMethod>(snap_kv_schema(), parse_snapkv(s));
          }};
}

MethodEntry pyramidkv_method() {
  return {&pyramid_kv_schema(), [](const MethodSettings& s) -> std::shared_ptr<const Method> {
            double beta = 20.0;
            if (s.has("beta")) beta = s.number("beta", "X");
            if (beta < 1.0) s.fail(fmt::format("beta {} must be >= 1", beta));
            return std::make_shared<PyramidKvMethod>(pyramid_kv_schema(), parse_snapkv(s), beta);
          }};
}

}  // namespace kvcompact
