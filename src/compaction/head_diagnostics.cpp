#include "compaction/head_diagnostics.h"

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
  const std::size_t D = static_cast<std::size_t>(d);
  std::vector<double> lse_c;  // compacted side: output and log-mass per query (checks the head)
  const std::vector<float> yc = compacted_attention_output(compacted, original.queries, n, d, &lse_c);
  const HeadAttentionStats st = compute_head_attention_f32(original);
  double rel_sum = 0, cos_sum = 0, mass_sum = 0;
  out.cosine_min = std::numeric_limits<double>::infinity();
  for (int q = 0; q < n; ++q) {
    const float* y = yc.data() + static_cast<std::size_t>(q) * D;
    const double* yo = st.output.data() + static_cast<std::size_t>(q) * D;
    double diff2 = 0, n_o = 0, n_c = 0, dot = 0;
    for (std::size_t j = 0; j < D; ++j) {
      diff2 += (y[j] - yo[j]) * (y[j] - yo[j]);
      n_o += yo[j] * yo[j];
      n_c += static_cast<double>(y[j]) * y[j];
      dot += y[j] * yo[j];
    }
    const double rel = std::sqrt(diff2) / (std::sqrt(n_o) + 1e-10);
    const double cosine = dot / std::max(std::sqrt(n_o) * std::sqrt(n_c), 1e-8);
    const std::size_t qi = static_cast<std::size_t>(q);
    const double mass = std::fabs(std::expm1(lse_c[qi] - (st.row_max[qi] + std::log(st.mass[qi]))));
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
