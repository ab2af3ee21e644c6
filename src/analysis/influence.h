// Head influence sweeps (issue #4, the central figure of arXiv 2602.16284): for one KV head at a
// time, move its keep ratio over a grid while every other head stays at a baseline ratio, and
// record the change in mean log-perplexity (NLL, nats/token) of the evaluated tokens.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "analysis/influence_curves.h"
#include "compaction/method_spec.h"
#include "compaction/reference_queries.h"
#include "model/model.h"

namespace kvcompact {

/// Options of a sweep.
struct InfluenceOptions {
  std::vector<double> grid;       ///< swept ratios, strictly increasing in [0, 1]
  double baseline_ratio = 0.05;   ///< every other head's ratio; must be on the grid
  std::vector<HeadId> heads;      ///< heads to sweep (empty = all, layer-major)
  MethodSpec method;              ///< compaction method (default: am)
  double context_frac = 0.6;      ///< T = floor(context_frac * N)
  uint64_t seed = 0;              ///< reference-query subsampling, self-study, `random` method
  bool reuse_prefix = true;       ///< fast sweep: reuse hidden states of layers below the head
  bool progress = true;           ///< progress lines on stderr
};

/// One document's sweep: delta[head][grid point] in nats/token.
struct DocumentInfluence {
  int document = 0;                 ///< 0-based index in the data file
  int context_tokens = 0;           ///< T
  int eval_tokens = 0;              ///< evaluated (continuation) tokens
  double baseline_nll = 0;          ///< mean NLL with every head at the baseline ratio
  std::vector<HeadId> heads;        ///< swept heads, in order
  std::vector<std::vector<double>> delta;  ///< [heads][grid]
  double seconds = 0;               ///< wall time of this document's sweep
};

/// Sweeps one document given as token ids (BOS included): context = the first
/// T = floor(context_frac * N) tokens, evaluated tokens = the rest (scored as in compact-eval:
/// the first from the context's last logits, the rest teacher-forced over the cache).
/// The baseline cache has every head compacted at the baseline ratio; for head (l, h) and ratio r
/// only that head is recompacted (its selection order computed once for all r) and
/// delta(r) = NLL(r) - NLL(baseline). With reuse_prefix the evaluated tokens' hidden states
/// entering layer l are taken from the baseline pass (layers below l see the same cache), so only
/// layers l..L-1 are recomputed. `done` holds heads finished earlier (resume): they are skipped;
/// `on_head` is called after each head (to save progress). Throws Error when T < 2 or N - T < 1.
DocumentInfluence sweep_document(const Model& model, const std::vector<int>& ids, int document,
                                 const InfluenceOptions& options, const DocumentInfluence* done = nullptr,
                                 const std::function<void(const DocumentInfluence&)>& on_head = {});

/// Runs the sweep over documents with per-document result files in `out_dir`/docs (written
/// atomically after each head; a rerun skips finished documents and heads, and refuses files from
/// a different model, method, grid or baseline), then writes the aggregate
/// `out_dir`/influence.json and influence.csv (mean, SEM, std across documents per head and ratio).
/// Returns the aggregate.
InfluenceCurves run_influence(const Model& model, const std::vector<std::string>& documents,
                              const InfluenceOptions& options, const std::string& out_dir);

}  // namespace kvcompact
