// The h2o plug-in (see h2o.h; token_eviction.h).
#include "compaction/methods/h2o.h"

#include <fmt/format.h>

#include "compaction/token_eviction.h"

namespace kvcompact {
namespace {

const MethodInfo& info_schema() {
  static const MethodInfo value{"h2o", "H2O (arXiv 2306.14048): heavy hitters by accumulated causal attention + recent keys",
                       {{"recent", "F", "fraction of the budget kept as recent keys, in [0, 1] (default 0.5)"}}};
  return value;
}

}  // namespace

std::vector<std::string> H2oMethod::settings() const {
  if (recent_ == 0.5) return {};
  return {format_setting("recent", recent_)};
}

CompactedHead H2oMethod::compact(const HeadCompactionInput& in, int budget, std::uint64_t) const {
  return compact_h2o(in, budget, recent_);
}

MethodEntry h2o_method() {
  return {&info_schema(), [](const MethodSettings& s) -> std::shared_ptr<const Method> {
            double recent = 0.5;
            if (s.has("recent")) {
              recent = s.number("recent", "X");
              if (recent < 0.0 || recent > 1.0)
                s.fail(fmt::format("recent: {} is outside [0, 1] (a fraction of the budget)", recent));
            }
            return std::make_shared<H2oMethod>(info_schema(), recent);
          }};
}

}  // namespace kvcompact
