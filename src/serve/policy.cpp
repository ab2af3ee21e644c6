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

std::string to_string(Allocation a) { return a == Allocation::Whole ? "whole" : "proportional"; }

Allocation parse_allocation(const std::string& s) {
  if (s == "proportional") return Allocation::Proportional;
  if (s == "whole") return Allocation::Whole;
  throw Error(fmt::format("--allocation {}: must be proportional or whole", s));
}

namespace {

/// Tokens whose repeat-prefill gives reference queries for positions [begin, end) (begin >= 1):
/// the token before begin (the repeat skips its first token), then the range itself or, when it
/// is longer than cap, blocks of 256 tokens spread evenly over it.
std::vector<int> reference_history(const std::vector<int>& tokens, int begin, int end, int cap) {
  std::vector<int> h{tokens[static_cast<std::size_t>(begin - 1)]};
  const int n = end - begin;
  const auto at = [&](int i) { return tokens.begin() + i; };
  if (n <= cap) {
    h.insert(h.end(), at(begin), at(end));
    return h;
  }
  const int blocks = std::max(1, cap / 256), len = cap / blocks;
  for (int b = 0; b < blocks; ++b) {
    const int start = blocks == 1 ? end - len : begin + static_cast<int>(static_cast<long>(b) * (n - len) / (blocks - 1));
    h.insert(h.end(), at(start), at(start + len));
  }
  return h;
}

/// Compacts the `n` entries of every global head after its first `keep_prefix` (and before its
/// newest `keep_recent`) to `keep`, with reference queries from positions [begin, end).
void compact_stretch(const Transformer& model, const Tokenizer& tokenizer, const CompactionPolicy& policy,
                     Session& s, int keep_prefix, int keep_recent, int n, int keep, int begin, int end, int cap,
                     const ReferenceQueries* recent_queries = nullptr) {
  OnlineCompactionOptions oc;
  oc.limit = static_cast<int>(s.cache.longest_global_length()) + 1;
  oc.keep_recent = keep_recent;
  oc.keep_prefix = keep_prefix;
  oc.ratio = std::min(1.0, (static_cast<double>(keep) + 0.5) / n);
  oc.method = policy.method;
  oc.seed = policy.seed;
  std::vector<int> history = reference_history(s.tokens, std::max(1, begin), std::max(std::max(1, begin) + 1, end), cap);
  compact_all_but_recent(model, tokenizer, s.cache, history, oc, s.compactions, recent_queries);
}

}  // namespace

bool compact_session(const Transformer& model, const Tokenizer& tokenizer, const CompactionPolicy& policy,
                     Session& s, CompactionReport* report) {
  const auto t0 = std::chrono::steady_clock::now();
  KVCache& cache = s.cache;
  const std::size_t longest = cache.longest_global_length();
  const int prefix = std::max(1, std::min<int>(s.protected_prefix, static_cast<int>(longest)));
  const int target = policy.target_entries();
  // Keep fewer recent entries when the prefix and the recent window alone would pass the target.
  const int recent = std::clamp(std::min(policy.keep_recent, target - prefix - 1), 0,
                                std::max(0, static_cast<int>(longest) - prefix - 1));
  const int middle = static_cast<int>(longest) - prefix - recent;
  if (middle < 2) return false;
  const int keep_middle = std::max(1, target - prefix - recent);
  if (keep_middle >= middle) return false;
  // Reference queries: the original tokens of the range being compacted (the history from the
  // end of the prefix to the start of the recent window), repeated after the cache.
  const int end = cache.next_position - recent;
  const int cap = policy.max_query_tokens > 0 ? policy.max_query_tokens : 2 * policy.ctx;
  CompactionReport r;
  r.entries_before = cache.total_entries();
  r.longest_before = longest;
  const bool window_votes = uses_context_queries(policy.method);
  // The stretch earlier compactions produced: entries of the largest head before compacted_until,
  // standing for the original tokens [prefix, compacted_until).
  int old_entries = 0;
  if (const HeadCache* h = cache.longest_global_head())
    for (int i = prefix; i < prefix + middle; ++i)
      if (h->positions[static_cast<std::size_t>(i)] < s.compacted_until) ++old_entries;
  const int old_tokens = s.compacted_until - prefix, new_entries = middle - old_entries;
  if (policy.allocation == Allocation::Proportional && !window_votes && old_entries > 0 && old_tokens > 0 &&
      new_entries >= 2 && keep_middle >= 2) {
    // Each stretch keeps its share of keep_middle by the original tokens it covers, and its share
    // of the reference query tokens.
    const double share = static_cast<double>(old_tokens) / (old_tokens + new_entries);
    const int keep_old = std::min(old_entries, std::clamp(static_cast<int>(std::lround(keep_middle * share)), 1, keep_middle - 1));
    const int keep_new = keep_middle - keep_old;
    const int cap_old = std::max(256, static_cast<int>(cap * share)), cap_new = std::max(256, cap - cap_old);
    if (keep_old < old_entries)
      compact_stretch(model, tokenizer, policy, s, prefix, new_entries + recent, old_entries, keep_old, prefix,
                      s.compacted_until, cap_old);
    if (keep_new < new_entries)
      compact_stretch(model, tokenizer, policy, s, prefix + keep_old, recent, new_entries, keep_new, s.compacted_until,
                      end, cap_new);
  } else if (window_votes) {
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
    compact_stretch(model, tokenizer, policy, s, prefix, recent, middle, keep_middle, prefix, end, cap, &rq);
  } else {
    compact_stretch(model, tokenizer, policy, s, prefix, recent, middle, keep_middle, prefix, end, cap);
  }
  trim_sliding_layers(cache, policy.keep_recent);
  shrink_to_fit(cache);
  r.entries_after = cache.total_entries();
  r.longest_after = cache.longest_global_length();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  s.compactions += 1;
  s.compaction_seconds += r.seconds;
  s.compacted_until = std::max(s.compacted_until, end);
  s.dirty = true;
  if (report) *report = r;
  return true;
}

}  // namespace kvcompact::serve
