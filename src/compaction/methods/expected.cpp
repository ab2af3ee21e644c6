// The expected plug-in (see expected.h; expected_attention.h).
#include "compaction/methods/expected.h"

#include <fmt/format.h>

namespace kvcompact {
namespace {

const MethodInfo& info_schema() {
  static const MethodInfo value{"expected",
                       "ExpectedAttention (kvpress): attention expected from future queries (Gaussian of the\n"
                       "context's pre-RoPE queries, mean RoPE rotation of the next positions) times ||v||",
                       expected_option_schema("")};
  return value;
}

}  // namespace

std::vector<MethodOption> expected_option_schema(const std::string& prefix) {
  return {{"future", "N", prefix + "future positions averaged over, N >= 1 (default 512)"},
          {"sink", "S", prefix + "first keys always kept, S >= 0 (default 4)"},
          {"cov", "0|1", prefix + "use the query covariance (default 1)"},
          {"vnorm", "0|1", prefix + "multiply by the value norm (default 1)"},
          {"eps", "X", prefix + "added to the expected attention before the value norm (default 0)"}};
}

ExpectedAttentionOptions parse_expected_options(const MethodSettings& s) {
  ExpectedAttentionOptions e;
  if (s.has("future")) e.n_future = s.integer("future", "N", 1, 1 << 24);
  if (s.has("sink")) e.n_sink = s.integer("sink", "N", 0, 1 << 30);
  if (s.has("cov")) e.use_covariance = s.integer("cov", "0|1", 0, 1) == 1;
  if (s.has("vnorm")) e.use_vnorm = s.integer("vnorm", "0|1", 0, 1) == 1;
  if (s.has("eps")) {
    e.epsilon = s.number("eps", "X");
    if (e.epsilon < 0.0) s.fail(fmt::format("eps {} is negative", e.epsilon));
  }
  return e;
}

void append_expected_settings(const ExpectedAttentionOptions& e, std::vector<std::string>& items) {
  const ExpectedAttentionOptions d;
  if (e.n_future != d.n_future) items.push_back(fmt::format("future={}", e.n_future));
  if (e.n_sink != d.n_sink) items.push_back(fmt::format("sink={}", e.n_sink));
  if (e.use_covariance != d.use_covariance) items.push_back(fmt::format("cov={}", e.use_covariance ? 1 : 0));
  if (e.use_vnorm != d.use_vnorm) items.push_back(fmt::format("vnorm={}", e.use_vnorm ? 1 : 0));
  if (e.epsilon != d.epsilon) items.push_back(format_setting("eps", e.epsilon));
}

std::vector<std::string> ExpectedMethod::settings() const {
  std::vector<std::string> items;
  append_expected_settings(options_, items);
  return items;
}

CompactedHead ExpectedMethod::compact(const HeadCompactionInput& in, int budget, std::uint64_t) const {
  return compact_expected_attention(in, budget, options_);
}

MethodEntry expected_method() {
  return {&info_schema(), [](const MethodSettings& s) -> std::shared_ptr<const Method> {
            const ExpectedAttentionOptions e = parse_expected_options(s);
            return std::make_shared<ExpectedMethod>(info_schema(), e);
          }};
}

}  // namespace kvcompact
