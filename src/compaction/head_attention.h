// Attention of one KV head on its reference queries: the statistics every compaction method needs
// (row max, mass, output, per-key attention scores), and the attention output of a compacted head.
#pragma once

#include <vector>

#include "compaction/head_compaction.h"
#include "core/kv_cache.h"

namespace kvcompact {

/// Checks a HeadCompactionInput: head_dim > 0, T >= 0, n_queries >= 0, non-null pointers where
/// the size is non-zero, and finite K, V, Q. Throws Error naming `where` and the problem.
void validate_head_input(const HeadCompactionInput& in, const char* where);

/// One pass over the original head's attention (Attention Matching notation, arXiv 2602.16284):
/// s = 1/sqrt(d), S = s Q K^T [n, T] (+ key_bias_j when the input has one), m_i = max_j S_ij, E = exp(S - m), Z_i = sum_j E_ij,
/// A = E / Z, Y = A V [n, d]. S is never held whole: queries are processed in blocks
/// (cblas_dgemm, double precision) of about 8M logits.
struct HeadAttentionStats {
  int n_queries = 0, T = 0, head_dim = 0;
  std::vector<double> row_max;     ///< m: [n] (scaled logits, nats)
  std::vector<double> mass;        ///< Z: [n], sum_j exp(S_ij - m_i), in [1, T]
  std::vector<double> output;      ///< Y: [n, d]
  std::vector<double> attn_sum;    ///< [T] sum over queries of A_ij
  std::vector<double> attn_sumsq;  ///< [T] sum over queries of A_ij^2
  std::vector<double> attn_max;    ///< [T] max over queries of A_ij (0 when n == 0)
};

/// Computes HeadAttentionStats. Throws Error on invalid input (see validate_head_input), and when
/// T == 0 while n_queries > 0 (softmax over no keys).
HeadAttentionStats compute_head_attention(const HeadCompactionInput& in);

/// The same statistics in float32 where the paper's code (adamzweiger/compaction) uses float32:
/// logits by cblas_sgemm, softmax with the vectorised exp (ops/vexp.h), Y = A V by cblas_sgemm,
/// in blocks of 256 queries; each block's per-key sums, the row masses and Y are then added up in
/// double. Agrees with compute_head_attention to float rounding (relative ~1e-6 on Y, mass and
/// the per-key scores; tests/head_attention_test.cpp). Attention Matching's fast path. Same errors.
HeadAttentionStats compute_head_attention_f32(const HeadCompactionInput& in);

/// Scaled logits of queries against a subset of keys: out[i][j] = s * Q_i . K_{sel_j},
/// Q: [n, d], K: [T, d] -> [n, t] row-major double (cblas_dgemm). Indices must lie in [0, T).
std::vector<double> selected_logits(const HeadCompactionInput& in, const std::vector<int>& selected);

/// The same logits in float32 (cblas_sgemm): [n, t] row-major float.
std::vector<float> selected_logits_f32(const HeadCompactionInput& in, const std::vector<int>& selected);

/// Attention output of a compacted head on queries Q: [n, d]:
/// softmax_row(s Q C1^T + beta) C2  ->  [n, d] row-major float (computed in double), s = 1/sqrt(d).
/// An entry with beta = log w acts as w identical copies of an entry with beta = 0.
/// Throws Error when the head is empty (softmax over no entries), the sizes disagree
/// (keys/values [t, d], beta [t]), d <= 0, n < 0, or Q / the head contain NaN or Inf.
std::vector<float> compacted_attention_output(const CompactedHead& head, const float* queries,
                                              int n_queries, int head_dim);

/// The same for a cache head (keys C1, beta, values C2 of a HeadCache). `log_mass` (optional)
/// receives, per query, the log of the head's attention mass, log sum_i exp(s q.c_i + beta_i)
/// [n] (the lse of the paper's evaluate_compaction). Same errors.
std::vector<float> compacted_attention_output(const HeadCache& head, const float* queries, int n_queries,
                                              int head_dim, std::vector<double>* log_mass = nullptr);

/// Original (uncompacted) attention output softmax(s Q K^T) V: [n, d] row-major float.
/// Same checks as compute_head_attention.
std::vector<float> original_attention_output(const HeadCompactionInput& in);

}  // namespace kvcompact
