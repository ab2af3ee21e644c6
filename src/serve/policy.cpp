#include "serve/policy.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "compaction/online_compaction.h"
#include "compaction/methods/snapkv.h"
#include "compaction/reference_queries.h"
#include "core/error.h"

namespace kvcompact::serve {

void check_policy(const CompactionPolicy& p) {
  if (p.ctx < 16) throw Error(fmt::format("--ctx {}: must be at least 16 entries per head", p.ctx));
  if (!(p.target_ratio > 0 && p.target_ratio < 1))
    throw Error(fmt::format("--target-ratio {}: must be in (0, 1)", p.target_ratio));
  if (!(p.high_water >= p.target_ratio && p.high_water <= 1))
    throw Error(fmt::format("high-water mark {}: must be in [--target-ratio {}, 1]", p.high_water, p.target_ratio));
  if (p.keep_recent < 0 || p.keep_recent >= p.target_entries())
    throw Error(fmt::format("--keep-recent {}: must be in [0, {}) (--target-ratio {} of --ctx {})", p.keep_recent,
                            p.target_entries(), p.target_ratio, p.ctx));
  if (p.method.name() == "snapkv") {
    if (p.method.as<SnapKvMethod>().options().window != p.keep_recent)
      throw Error(fmt::format("--method {}: mid-conversation SnapKV's observation window is the recent tokens: "
                              "give window={} (= --keep-recent) or plain snapkv", to_string(p.method), p.keep_recent));
    if (p.keep_recent < 1) throw Error("--method snapkv: needs --keep-recent >= 1 (its observation window)");
  } else if (uses_context_queries(p.method) || is_layer_scoped(p.method))
    throw Error(fmt::format("--method {}: needs the context's own queries or a whole layer, which a running "
                            "conversation does not have (use am, snapkv, streaming, recent, knorm, keydiff, random, ...)",
                            to_string(p.method)));
}

bool compact_session(const Transformer& model, const Tokenizer& tokenizer, const CompactionPolicy& policy,
                     Session& s, CompactionReport* report) {
  const auto t0 = std::chrono::steady_clock::now();
  KVCache& cache = s.cache;
  const std::size_t longest = longest_global_head(cache);
  const int prefix = std::max(1, std::min<int>(s.protected_prefix, static_cast<int>(longest)));
  const int target = policy.target_entries();
  // Keep fewer recent entries when the prefix and the recent window alone would pass the target.
  const int recent = std::clamp(std::min(policy.keep_recent, target - prefix - 1), 0,
                                std::max(0, static_cast<int>(longest) - prefix - 1));
  const int middle = static_cast<int>(longest) - prefix - recent;
  if (middle < 2) return false;
  const int keep_middle = std::max(1, target - prefix - recent);
  if (keep_middle >= middle) return false;
  OnlineCompactionOptions oc;
  oc.limit = std::max(static_cast<int>(longest), recent + 1);
  oc.keep_recent = recent;
  oc.keep_prefix = prefix;
  oc.ratio = std::min(1.0, (static_cast<double>(keep_middle) + 0.5) / middle);
  oc.method = policy.method;
  oc.seed = policy.seed;
  // Reference queries: the original tokens of the range being compacted (the history from the
  // end of the prefix to the start of the recent window), repeated after the cache.
  const int end = cache.next_position - recent;
  const int cap = policy.max_query_tokens > 0 ? policy.max_query_tokens : 2 * policy.ctx;
  const int begin = std::max(std::max(0, prefix - 1), end - cap);
  std::span<const int> history(s.tokens.data() + begin, static_cast<std::size_t>(std::max(0, end - begin)));
  CompactionReport r;
  r.entries_before = cache.total_entries();
  r.longest_before = longest;
  if (history.size() < 2) history = std::span<const int>(s.tokens.data(), std::min<std::size_t>(2, s.tokens.size()));
  if (uses_context_queries(policy.method)) {
    // SnapKV: the recent tokens' queries are its observation window. They are taken by feeding
    // those tokens again (their entries are verbatim, so the cache ends as it was).
    if (recent != policy.keep_recent) return false;  // the window would not match the recent tokens
    const std::vector<int> tail(s.tokens.end() - recent, s.tokens.end());
    rollback_to(cache, cache.next_position - recent, s.compacted_until);
    ReferenceQueries rq(cache.n_layers(), cache.n_kv_heads(), cache.head_dim());
    QueryCollector collect(model.config(), 0, rq);
    ForwardOptions fo;
    fo.logits = LogitsMode::None;
    fo.observer = &collect;
    model.forward(tail, cache, fo);
    compact_all_but_recent(model, tokenizer, cache, history, oc, s.compactions, &rq);
  } else {
    compact_all_but_recent(model, tokenizer, cache, history, oc, s.compactions);
  }
  trim_sliding_layers(cache, policy.keep_recent);
  shrink_to_fit(cache);
  r.entries_after = cache.total_entries();
  r.longest_after = longest_global_head(cache);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  s.compactions += 1;
  s.compaction_seconds += r.seconds;
  s.compacted_until = std::max(s.compacted_until, end);
  s.dirty = true;
  if (report) *report = r;
  return true;
}

}  // namespace kvcompact::serve
