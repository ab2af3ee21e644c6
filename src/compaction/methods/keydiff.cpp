// KeyDiff (arXiv 2504.15364; kvpress 0.5.5 KeyDiffPress) as a compaction-method plug-in, whole in
// this file: keep the keys least similar to the head's mean key direction. The one-file example
// of adding a method: this file plus its two lines in registry.cpp.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "compaction/head_attention.h"
#include "compaction/method.h"
#include "compaction/score_eviction.h"

namespace kvcompact {
namespace {

/// Scores [T]: score_j = -cos(k_j, a) with the anchor a = mean_j k_j / max(||k_j||, 1e-12)
/// (kvpress: F.normalize, then F.cosine_similarity with eps 1e-8 on the norm product).
std::vector<double> keydiff_scores(const HeadCompactionInput& in) {
  validate_head_input(in, "keydiff");
  const std::size_t T = static_cast<std::size_t>(in.T), D = static_cast<std::size_t>(in.head_dim);
  std::vector<double> norm(T), anchor(D, 0.0);
  for (std::size_t j = 0; j < T; ++j) {
    double s = 0.0;
    for (std::size_t c = 0; c < D; ++c) s += static_cast<double>(in.keys[j * D + c]) * in.keys[j * D + c];
    norm[j] = std::sqrt(s);
    const double inv = 1.0 / std::max(norm[j], 1e-12);
    for (std::size_t c = 0; c < D; ++c) anchor[c] += in.keys[j * D + c] * inv;
  }
  double anchor_norm = 0.0;
  for (double& a : anchor) a /= static_cast<double>(T), anchor_norm += a * a;
  anchor_norm = std::sqrt(anchor_norm);
  std::vector<double> scores(T);
  for (std::size_t j = 0; j < T; ++j) {
    double dot = 0.0;
    for (std::size_t c = 0; c < D; ++c) dot += in.keys[j * D + c] * anchor[c];
    scores[j] = -dot / std::max(norm[j] * anchor_norm, 1e-8);
  }
  return scores;
}

}  // namespace

MethodEntry keydiff_method() {
  static const MethodInfo info{"keydiff",
                               "KeyDiff (arXiv 2504.15364, kvpress KeyDiffPress): the keys least similar (cosine) to\n"
                               "the mean key direction; no keys",
                               {}};
  return simple_method(info, [](const HeadCompactionInput& in, int b, std::uint64_t) {
    return compact_top_scores(in, keydiff_scores(in), b);
  });
}

}  // namespace kvcompact
