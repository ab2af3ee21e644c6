#include "ops/attention.h"

#include "ops/vexp.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace kvcompact {

int first_visible(const AttentionHeadView& v, int n, int r) {
  if (v.window <= 0) return 0;
  const int self = v.length - n + r;
  const int32_t limit = v.positions[self] - v.window;  // entries at positions <= limit are hidden
  return static_cast<int>(std::partition_point(v.positions, v.positions + self,
                                               [limit](int32_t p) { return p <= limit; }) -
                          v.positions);
}

void attend_row(const float* q, const float* keys, const float* values, const float* beta, int L,
                int head_dim, float scale, float* scratch, float* out) {
  float mx = -INFINITY;
  for (int j = 0; j < L; ++j) {
    const float* k = keys + static_cast<long>(j) * head_dim;
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int d = 0; d < head_dim; ++d) s += q[d] * k[d];
    s = s * scale + beta[j];
    scratch[j] = s;
    mx = s > mx ? s : mx;
  }
  const float sum = exp_shifted_sum(scratch, static_cast<std::size_t>(std::max(L, 0)), mx);
  const float inv = 1.0f / sum;
  for (int d = 0; d < head_dim; ++d) out[d] = 0.0f;
  for (int j = 0; j < L; ++j) {
    const float w = scratch[j] * inv;
    const float* v = values + static_cast<long>(j) * head_dim;
#pragma omp simd
    for (int d = 0; d < head_dim; ++d) out[d] += w * v[d];
  }
}

void causal_attention(const float* q, int n, int n_heads, int n_kv_heads, int head_dim,
                      const AttentionHeadView* heads, float* out) {
  if (n >= 8)
    causal_attention_blocked(q, n, n_heads, n_kv_heads, head_dim, heads, out);
  else
    causal_attention_rows(q, n, n_heads, n_kv_heads, head_dim, heads, out);
}

void causal_attention_blocked(const float* q, int n, int n_heads, int n_kv_heads, int head_dim,
                              const AttentionHeadView* heads, float* out) {
  if (n <= 0) return;
  const int group = n_heads / n_kv_heads;
  const int hd = head_dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const int ld = n_heads * hd;  // row stride of q and out
  int max_len = 0;
  for (int g = 0; g < n_kv_heads; ++g) max_len = std::max(max_len, heads[g].length);
  // Rows per block: 128, fewer when the logits of all heads would exceed ~8M floats (32 MiB).
  const long budget = 8L << 20;
  const int block = static_cast<int>(
      std::clamp<long>(budget / (static_cast<long>(n_heads) * std::max(max_len, 1)), 8, 128));
  thread_local std::vector<float> S;  // [n_heads, block rows, max_len], grow-only
  thread_local std::vector<int> base_store;
  base_store.resize(n_kv_heads);
  int* base = base_store.data();
  const std::size_t stride = static_cast<std::size_t>(std::min(n, block)) * max_len;
  if (S.size() < stride * n_heads) S.resize(stride * n_heads);
  for (int i0 = 0; i0 < n; i0 += block) {
    const int rows = std::min(block, n - i0);
    // 1) logits of every head: S_h = scale * Q_h K_g^T over the entries the block can see.
    // Entries before base (the first entry row i0 can see) are invisible to the whole block.
    for (int g = 0; g < n_kv_heads; ++g) base[g] = first_visible(heads[g], n, i0);
    for (int h = 0; h < n_heads; ++h) {
      const AttentionHeadView& hv = heads[h / group];
      const int b = base[h / group];
      const int Lc = hv.length - n + i0 + rows - b;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, Lc, hd, scale,
                  q + static_cast<long>(i0) * ld + static_cast<long>(h) * hd, ld,
                  hv.keys + static_cast<long>(b) * hd, hd, 0.0f, S.data() + h * stride, Lc);
    }
    // 2) + beta, causal mask, softmax: one parallel region over (head, row).
    float* Sp = S.data();
    const long tasks = static_cast<long>(n_heads) * rows;
#pragma omp parallel for schedule(static) if (tasks * (max_len + 1) > 32768)
    for (long t = 0; t < tasks; ++t) {
      const int h = static_cast<int>(t / rows), r = static_cast<int>(t % rows);
      const AttentionHeadView& hv = heads[h / group];
      const int b = base[h / group];
      const int prev = hv.length - n - b;
      const int Lc = prev + i0 + rows;
      const int L = prev + i0 + r + 1;  // causal: entries b .. b+L-1
      const int lo = first_visible(hv, n, i0 + r) - b;  // window: entries before b+lo hidden
      float* s = Sp + h * stride + static_cast<long>(r) * Lc;
      const float* beta = hv.beta + b;
      float mx = -INFINITY;
      for (int j = lo; j < L; ++j) {
        s[j] += beta[j];
        mx = s[j] > mx ? s[j] : mx;
      }
      const float sum = exp_shifted_sum(s + lo, static_cast<std::size_t>(L - lo), mx);
      const float inv = 1.0f / sum;
      for (int j = 0; j < lo; ++j) s[j] = 0.0f;
      for (int j = lo; j < L; ++j) s[j] *= inv;
      for (int j = L; j < Lc; ++j) s[j] = 0.0f;
    }
    // 3) out_h = P_h V_g.
    for (int h = 0; h < n_heads; ++h) {
      const AttentionHeadView& hv = heads[h / group];
      const int b = base[h / group];
      const int Lc = hv.length - n + i0 + rows - b;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, hd, Lc, 1.0f,
                  S.data() + h * stride, Lc, hv.values + static_cast<long>(b) * hd, hd, 0.0f,
                  out + static_cast<long>(i0) * ld + static_cast<long>(h) * hd, ld);
    }
  }
}

void causal_attention_rows(const float* q, int n, int n_heads, int n_kv_heads, int head_dim,
                           const AttentionHeadView* heads, float* out) {
  if (n <= 0) return;
  const int group = n_heads / n_kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  const long row = static_cast<long>(n_heads) * head_dim;
  const long tasks = static_cast<long>(n_heads) * n;
  long max_len = 0, work = 0;
  for (int g = 0; g < n_kv_heads; ++g) {
    max_len = std::max<long>(max_len, heads[g].length);
    work += static_cast<long>(heads[g].length) * group * n;
  }
  work *= head_dim;
  // Threads only pay off above a few hundred thousand multiply-adds (decode of tiny models).
  const bool parallel = work > (1L << 16) && omp_get_max_threads() > 1;
#pragma omp parallel if (parallel)
  {
    // Per-thread scratch, reused across calls (no per-token heap allocation once grown).
    thread_local std::vector<float> scratch;
    if (static_cast<long>(scratch.size()) < max_len) scratch.resize(max_len);
    // Rows are ordered so that each chunk mixes cheap (early) and expensive (late) causal rows.
#pragma omp for schedule(dynamic, 4)
    for (long t = 0; t < tasks; ++t) {
      const int h = static_cast<int>(t % n_heads);
      const int i = static_cast<int>(t / n_heads);
      const AttentionHeadView& hv = heads[h / group];
      const int lo = first_visible(hv, n, i);
      const int L = hv.length - n + i + 1 - lo;
      attend_row(q + i * row + static_cast<long>(h) * head_dim, hv.keys + static_cast<long>(lo) * head_dim,
                 hv.values + static_cast<long>(lo) * head_dim, hv.beta + lo, L, head_dim, scale,
                 scratch.data(), out + i * row + static_cast<long>(h) * head_dim);
    }
  }
}

}  // namespace kvcompact
