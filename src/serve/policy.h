// The server's compaction policy: when a session's KV cache is compacted and to what size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "compaction/method_spec.h"
#include "io/tokenizer.h"
#include "model/transformer.h"
#include "serve/session.h"

namespace kvcompact::serve {

/// How a compaction shares its target among the stretches of a conversation.
enum class Allocation {
  /// Every stretch keeps entries in proportion to the original tokens it stands for: the
  /// entries of earlier compactions (positions before Session::compacted_until) and the
  /// verbatim entries since are compacted separately, each to its share of the target, so an
  /// early turn keeps about target / tokens-so-far of its entries however many compactions ran.
  /// SnapKV (whose observation window votes over one range) always compacts the whole range.
  Proportional,
  /// The whole range is compacted at one ratio: at the k-th compaction the oldest turns are
  /// compacted for the k-th time (about ratio^k of their entries survive).
  Whole,
};

/// "proportional" or "whole".
std::string to_string(Allocation a);
/// Parses "proportional" or "whole"; throws Error naming the option otherwise.
Allocation parse_allocation(const std::string& s);

/// Limits and method of compaction on the server (`kvcompact serve --ctx --method --keep-recent
/// --target-ratio`). A session's largest global-layer head may hold at most `ctx` entries; when it
/// would pass that, everything but the protected prefix (chat template + system messages) and
/// the newest keep_recent entries is compacted by `method`, so that the largest head then holds
/// about target_ratio * ctx entries.
struct CompactionPolicy {
  int ctx = 4096;             ///< entries per KV head a session may hold (>= 16)
  MethodSpec method;          ///< default am (Attention Matching with repeat-prefill reference queries)
  int keep_recent = 256;      ///< newest entries kept verbatim (W)
  double target_ratio = 0.5;  ///< after a compaction the largest head holds ~target_ratio * ctx entries
  Allocation allocation = Allocation::Proportional;  ///< how the target is shared (`--allocation`)
  /// Between turns a session is compacted ahead of time when its largest head holds more than
  /// high_water * ctx entries, so that the next turn's prefill does not wait for it.
  double high_water = 0.75;
  /// Reference queries: the original tokens of the compacted range repeated after the cache, at
  /// most this many (0 = 2 * ctx; a longer range gives blocks of 256 tokens spread evenly over
  /// it, so that every stretch gets queries); bounds a compaction's cost on very long histories.
  int max_query_tokens = 0;
  uint64_t seed = 1;

  /// Entries a compaction aims for: floor(target_ratio * ctx).
  int target_entries() const { return static_cast<int>(target_ratio * ctx); }
};

/// Checks a policy: ctx >= 16, target_ratio in (0, 1), high_water in [target_ratio, 1],
/// keep_recent in [0, target_entries), a method usable mid-conversation (no method that needs the
/// context's own queries or a whole layer). Throws Error naming the option.
void check_policy(const CompactionPolicy& policy);

/// What one compaction did.
struct CompactionReport {
  std::size_t entries_before = 0, entries_after = 0;  ///< all heads
  std::size_t longest_before = 0, longest_after = 0;  ///< largest global head
  double seconds = 0;
};

/// Compacts `s` in place by `policy`: in every global head the entries after the first
/// s.protected_prefix and before the newest keep_recent (fewer where needed to reach the target)
/// are compacted so that the largest head holds policy.target_entries(), shared between the
/// stretches by policy.allocation;
/// sliding-window layers drop what no later query sees. s.compactions, compaction_seconds and
/// compacted_until are updated. Returns false (and changes nothing) when there is nothing to
/// compact. Throws Error when the method fails.
bool compact_session(const Transformer& model, const Tokenizer& tokenizer, const CompactionPolicy& policy,
                     Session& s, CompactionReport* report = nullptr);

}  // namespace kvcompact::serve
