#include "compaction/head_diagnostics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "compaction/head_attention.h"
#include "core/error.h"

namespace kvcompact {

HeadDiagnostics diagnose_head(const HeadCompactionInput& original, const HeadCache& compacted) {
  validate_head_input(original, "diagnostics");
  HeadDiagnostics out;
  const int n = original.n_queries, d = original.head_dim;
  out.n_queries = n;
  if (n == 0) return out;
  const std::size_t t = compacted.length(), D = static_cast<std::size_t>(d);
  if (t == 0) throw Error("diagnostics: the compacted head is empty (softmax over no entries)");
  if (compacted.keys.size() != t * D || compacted.values.size() != t * D)
    throw Error(fmt::format("diagnostics: compacted head has {} entries but {} key and {} value floats (head_dim {})",
                            t, compacted.keys.size(), compacted.values.size(), d));
  for (std::size_t i = 0; i < t * D; ++i)
    if (!std::isfinite(compacted.keys[i]) || !std::isfinite(compacted.values[i]))
      throw Error("diagnostics: the compacted head holds a non-finite key or value");
  for (float b : compacted.beta)
    if (!std::isfinite(b)) throw Error("diagnostics: the compacted head holds a non-finite beta");

  const HeadAttentionStats st = compute_head_attention_f32(original);
  const double s = 1.0 / std::sqrt(static_cast<double>(d));
  std::vector<double> logits(t), y(D);
  double rel_sum = 0, cos_sum = 0, mass_sum = 0;
  out.rel_l2_max = 0;
  out.cosine_min = std::numeric_limits<double>::infinity();
  out.mass_err_max = 0;
  for (int q = 0; q < n; ++q) {
    const float* qv = original.queries + static_cast<std::size_t>(q) * D;
    double m = -std::numeric_limits<double>::infinity();
    for (std::size_t i = 0; i < t; ++i) {
      double dot = 0;
      for (std::size_t j = 0; j < D; ++j) dot += static_cast<double>(qv[j]) * compacted.keys[i * D + j];
      logits[i] = s * dot + compacted.beta[i];
      m = std::max(m, logits[i]);
    }
    double z = 0;
    std::fill(y.begin(), y.end(), 0.0);
    for (std::size_t i = 0; i < t; ++i) {
      const double w = std::exp(logits[i] - m);
      z += w;
      for (std::size_t j = 0; j < D; ++j) y[j] += w * compacted.values[i * D + j];
    }
    const double* yo = st.output.data() + static_cast<std::size_t>(q) * D;
    double diff2 = 0, n_o = 0, n_c = 0, dot = 0;
    for (std::size_t j = 0; j < D; ++j) {
      y[j] /= z;
      diff2 += (y[j] - yo[j]) * (y[j] - yo[j]);
      n_o += yo[j] * yo[j];
      n_c += y[j] * y[j];
      dot += y[j] * yo[j];
    }
    const double rel = std::sqrt(diff2) / (std::sqrt(n_o) + 1e-10);
    const double cosine = dot / std::max(std::sqrt(n_o) * std::sqrt(n_c), 1e-8);
    const double lse_c = m + std::log(z), lse_o = st.row_max[static_cast<std::size_t>(q)] +
                                                  std::log(st.mass[static_cast<std::size_t>(q)]);
    const double mass = std::fabs(std::expm1(lse_c - lse_o));
    rel_sum += rel;
    cos_sum += cosine;
    mass_sum += mass;
    out.rel_l2_max = std::max(out.rel_l2_max, rel);
    out.cosine_min = std::min(out.cosine_min, cosine);
    out.mass_err_max = std::max(out.mass_err_max, mass);
  }
  out.rel_l2_mean = rel_sum / n;
  out.cosine_mean = cos_sum / n;
  out.mass_err_mean = mass_sum / n;
  return out;
}

}  // namespace kvcompact
