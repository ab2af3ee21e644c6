#include "compaction/online_compaction.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>

#include "compaction/compact_cache.h"
#include "compaction/head_compaction.h"
#include "compaction/reference_queries.h"
#include "core/error.h"
#include "core/log.h"

namespace kvcompact {
namespace {

void check_options(const OnlineCompactionOptions& o, bool recent_queries = false) {
  if (o.keep_recent < 0) throw Error(fmt::format("online compaction: keep_recent {} is negative", o.keep_recent));
  if (o.keep_prefix < 0) throw Error(fmt::format("online compaction: keep_prefix {} is negative", o.keep_prefix));
  if (o.limit <= o.keep_recent)
    throw Error(fmt::format("online compaction: the limit {} must exceed keep_recent {}", o.limit, o.keep_recent));
  if (!(o.ratio > 0 && o.ratio <= 1)) throw Error(fmt::format("online compaction: ratio {} is outside (0, 1]", o.ratio));
  if (o.max_compactions < 0)
    throw Error(fmt::format("online compaction: max_compactions {} is negative", o.max_compactions));
  if (uses_context_queries(o.method) && !(recent_queries && o.method.name() == "snapkv"))
    throw Error(fmt::format("online compaction: {} needs the context's own queries, which do not exist during "
                            "generation (use am, attn-nofit, random, recent, knorm, ...)", to_string(o.method)));
  if (is_layer_scoped(o.method))
    throw Error(fmt::format("online compaction: {} selects over a whole layer and is not supported here",
                            to_string(o.method)));
  for (const QuerySource& s : o.method.queries.sources)
    if (s.kind != QuerySourceKind::Repeat || o.method.queries.on_policy)
      throw Error("online compaction: the reference queries are repeat-prefill of the tokens so far "
                  "(queries=repeat); other sources and onpolicy are not supported");
}

/// True when the method only selected entries: values are the originals and beta is 0.
bool is_selection(const CompactedHead& c, const HeadCache& h, int d, std::size_t offset) {
  for (float b : c.beta)
    if (b != 0.0f) return false;
  const std::size_t D = static_cast<std::size_t>(d);
  for (std::size_t i = 0; i < c.selected.size(); ++i)
    if (!std::equal(c.values.begin() + i * D, c.values.begin() + (i + 1) * D,
                    h.values.begin() + (offset + static_cast<std::size_t>(c.selected[i])) * D))
      return false;
  return true;
}

}  // namespace

OnlineCompactionEvent compact_all_but_recent(const Transformer& model, const Tokenizer& tokenizer, KVCache& cache,
                                             std::span<const int> history, const OnlineCompactionOptions& options,
                                             int compaction_index, const ReferenceQueries* recent_queries) {
  check_options(options, recent_queries != nullptr);
  const bool window_votes = uses_context_queries(options.method);  // snapkv over the recent tokens' queries
  const auto t0 = std::chrono::steady_clock::now();
  OnlineCompactionEvent ev;
  ev.tokens_fed = static_cast<int>(history.size());
  ev.entries_before = cache.total_entries();
  const bool need_queries = uses_reference_queries(options.method);
  ReferenceQueries queries;
  if (need_queries) {
    queries = repeat_queries_over(model, tokenizer, cache, history);
    queries.subsample(options.method.queries.total_cap, options.seed + static_cast<uint64_t>(compaction_index));
  }
  const int L = cache.n_layers(), H = cache.n_kv_heads(), d = cache.head_dim();
  const std::size_t D = static_cast<std::size_t>(d), keep = static_cast<std::size_t>(options.keep_recent);
  const std::size_t pre = static_cast<std::size_t>(options.keep_prefix);
  std::exception_ptr failure;
#pragma omp parallel for schedule(dynamic, 1)
  for (int idx = 0; idx < L * H; ++idx) {
    const int l = idx / H, g = idx % H;
    if (cache.sliding(l)) continue;
    try {
      HeadCache& h = cache.head(l, g);
      if (h.length() <= pre + keep) continue;
      const std::size_t P = h.length() - keep;  // entries [pre, P) are compacted
      HeadCompactionInput in;
      in.keys = h.keys.data() + pre * D;
      in.values = h.values.data() + pre * D;
      in.T = static_cast<int>(P - pre);
      in.head_dim = d;
      if (need_queries) {
        in.queries = queries.at(l, g).data();
        in.n_queries = queries.count(l, g);
      }
      if (h.has_bias()) in.key_bias = h.beta.data() + pre;
      int t = kept_entries(options.ratio, in.T);
      std::vector<float> window_queries;
      if (window_votes) {
        // SnapKV's context is the compacted range plus the recent entries, whose queries are its
        // observation window (the rows before them are never read): it keeps the window verbatim.
        const std::vector<float>& rq = recent_queries->at(l, g);
        const std::size_t rows = static_cast<std::size_t>(recent_queries->count(l, g));
        if (keep == 0 || rows % keep != 0)
          throw Error(fmt::format("online compaction: {} recent query rows for {} recent entries", rows, keep));
        in.T = static_cast<int>(h.length() - pre);
        in.group_size = static_cast<int>(rows / keep);
        window_queries.assign(static_cast<std::size_t>(in.T) * rows / keep * D, 0.0f);
        std::copy(rq.begin(), rq.end(), window_queries.end() - static_cast<std::ptrdiff_t>(rq.size()));
        in.context_queries = window_queries.data();
        t += static_cast<int>(keep);
      }
      CompactedHead c = compact_head(options.method, in, t, l, L,
                                     head_seed(options.seed + static_cast<uint64_t>(compaction_index), l, g, H));
      if (in.key_bias != nullptr && is_selection(c, h, d, pre))  // selected entries keep their old bias
        for (std::size_t i = 0; i < c.selected.size(); ++i) c.beta[i] = h.beta[pre + static_cast<std::size_t>(c.selected[i])];
      HeadCache out;
      out.keys.assign(h.keys.begin(), h.keys.begin() + pre * D);
      out.values.assign(h.values.begin(), h.values.begin() + pre * D);
      out.beta.assign(h.beta.begin(), h.beta.begin() + pre);
      out.positions.assign(h.positions.begin(), h.positions.begin() + pre);
      out.keys.insert(out.keys.end(), c.keys.begin(), c.keys.end());
      out.values.insert(out.values.end(), c.values.begin(), c.values.end());
      out.beta.insert(out.beta.end(), c.beta.begin(), c.beta.end());
      for (int s : c.selected) out.positions.push_back(h.positions[pre + static_cast<std::size_t>(s)]);
      if (window_votes) {  // the recent entries are among the selected ones
        h = std::move(out);
        continue;
      }
      out.keys.insert(out.keys.end(), h.keys.begin() + P * D, h.keys.end());
      out.values.insert(out.values.end(), h.values.begin() + P * D, h.values.end());
      out.beta.insert(out.beta.end(), h.beta.begin() + P, h.beta.end());
      out.positions.insert(out.positions.end(), h.positions.begin() + P, h.positions.end());
      h = std::move(out);
    } catch (...) {
#pragma omp critical(kvc_online_failure)
      if (!failure) failure = std::current_exception();
    }
  }
  if (failure) std::rethrow_exception(failure);
  ev.entries_after = cache.total_entries();
  ev.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return ev;
}

GenerationResult generate_with_online_compaction(const Transformer& model, const Tokenizer& tokenizer,
                                                 std::string_view prompt, int steps, Sampler& sampler,
                                                 const OnlineCompactionOptions& options,
                                                 std::vector<OnlineCompactionEvent>* events,
                                                 const std::function<void(std::string_view)>& on_text) {
  check_options(options);
  int done = 0;
  auto after = [&](KVCache& cache, std::span<const int> fed) {
    if (options.max_compactions > 0 && done >= options.max_compactions) return;
    if (cache.longest_global_length() < static_cast<std::size_t>(options.limit)) return;
    const OnlineCompactionEvent ev = compact_all_but_recent(model, tokenizer, cache, fed, options, done);
    ++done;
    log_line(fmt::format("generate: compaction {} after {} tokens: {} -> {} entries in {:.2f} s", done, ev.tokens_fed,
                         ev.entries_before, ev.entries_after, ev.seconds));
    if (events) events->push_back(ev);
  };
  return generate(model, tokenizer, prompt, steps, sampler, on_text, nullptr, after);
}

}  // namespace kvcompact
