// Blocked attention statistics of one KV head and the compacted head's output (see head_attention.h).
#include "compaction/head_attention.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

#include <cblas.h>
#if defined(__AVX512F__)
#include <immintrin.h>
#if defined(__GNUC__) && !defined(__clang__)
// GCC 12 reports its own _mm512_undefined_* placeholders (self-initialised) as maybe-uninitialised.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#endif
#include <omp.h>
#include <fmt/format.h>

#include "core/error.h"
#include "ops/vexp.h"

namespace kvcompact {
namespace {

constexpr std::size_t kBlockLogits = std::size_t{1} << 23;  // ~64 MiB of double logits per block
// Below this many logits a loop runs on one thread (thread start-up would cost more than it saves).
constexpr std::size_t kParallelMin = std::size_t{1} << 15;

std::size_t rows_per_block(int n, int width) {
  const std::size_t w = static_cast<std::size_t>(std::max(width, 1));
  return std::max<std::size_t>(1, std::min<std::size_t>(static_cast<std::size_t>(n), kBlockLogits / w));
}

/// Per-key sums of one softmax row: with p_j = e[j] * inv, sum[j] += p_j, sq[j] += p_j^2,
/// mx[j] = max(mx[j], p_j), for e, sum, sq, mx: [n] (distinct arrays; explicit AVX-512 where
/// built for it: the compiler cannot vectorise the loop past the possible aliasing).
void add_column_stats(const float* e, std::size_t n, float inv, float* sum, float* sq, float* mx) {
  std::size_t j = 0;
#if defined(__AVX512F__)
  const __m512 vi = _mm512_set1_ps(inv);
  for (; j + 16 <= n; j += 16) {
    const __m512 p = _mm512_mul_ps(_mm512_loadu_ps(e + j), vi);
    _mm512_storeu_ps(sum + j, _mm512_add_ps(_mm512_loadu_ps(sum + j), p));
    _mm512_storeu_ps(sq + j, _mm512_fmadd_ps(p, p, _mm512_loadu_ps(sq + j)));
    _mm512_storeu_ps(mx + j, _mm512_max_ps(_mm512_loadu_ps(mx + j), p));
  }
#endif
  for (; j < n; ++j) {
    const float p = e[j] * inv;
    sum[j] += p;
    sq[j] += p * p;
    mx[j] = std::max(mx[j], p);
  }
}

void check_finite(const float* p, std::size_t count, const char* where, const char* what) {
  for (std::size_t i = 0; i < count; ++i)
    if (!std::isfinite(p[i]))
      throw Error(fmt::format("{}: {} has a non-finite value (NaN or Inf) at flat index {}", where,
                              what, i));
}

std::vector<double> to_double(const float* p, std::size_t count) {
  return std::vector<double>(p, p + count);
}

// In place: each of the rows rows of X [rows, width] -> softmax; row_max/row_sum get m_i and
// sum_j exp(X_ij - m_i) when non-null.
void softmax_rows(double* X, std::size_t rows, std::size_t width, double* row_max, double* row_sum) {
#pragma omp parallel for schedule(static) if (rows * width >= kParallelMin)
  for (std::ptrdiff_t r = 0; r < static_cast<std::ptrdiff_t>(rows); ++r) {
    double* x = X + static_cast<std::size_t>(r) * width;
    double m = x[0];
    for (std::size_t j = 1; j < width; ++j) m = std::max(m, x[j]);
    double z = 0.0;
    for (std::size_t j = 0; j < width; ++j) {
      x[j] = std::exp(x[j] - m);
      z += x[j];
    }
    const double inv = 1.0 / z;
    for (std::size_t j = 0; j < width; ++j) x[j] *= inv;
    if (row_max) row_max[r] = m;
    if (row_sum) row_sum[r] = z;
  }
}

}  // namespace

void validate_head_input(const HeadCompactionInput& in, const char* where) {
  if (in.head_dim <= 0)
    throw Error(fmt::format("{}: head_dim {} must be positive", where, in.head_dim));
  if (in.T < 0) throw Error(fmt::format("{}: context length T = {} is negative", where, in.T));
  if (in.n_queries < 0)
    throw Error(fmt::format("{}: number of queries {} is negative", where, in.n_queries));
  const std::size_t d = static_cast<std::size_t>(in.head_dim);
  const std::size_t T = static_cast<std::size_t>(in.T), n = static_cast<std::size_t>(in.n_queries);
  if (T > 0 && (in.keys == nullptr || in.values == nullptr))
    throw Error(fmt::format("{}: keys or values missing for T = {}", where, in.T));
  if (n > 0 && in.queries == nullptr)
    throw Error(fmt::format("{}: queries missing for n_queries = {}", where, in.n_queries));
  if (T > 0) {
    check_finite(in.keys, T * d, where, "K");
    check_finite(in.values, T * d, where, "V");
    if (in.key_bias != nullptr) check_finite(in.key_bias, T, where, "key bias");
  }
  if (n > 0) check_finite(in.queries, n * d, where, "Q");
}

namespace {

// Validates the input (and T > 0 when there are queries) and returns its statistics zeroed, sized
// [n] / [n, d] / [T].
HeadAttentionStats zero_stats(const HeadCompactionInput& in) {
  validate_head_input(in, "attention statistics");
  if (in.T == 0 && in.n_queries > 0)
    throw Error("attention statistics: context is empty (T = 0), softmax over no keys");
  const std::size_t N = static_cast<std::size_t>(in.n_queries), TT = static_cast<std::size_t>(in.T),
                    D = static_cast<std::size_t>(in.head_dim);
  HeadAttentionStats st;
  st.n_queries = in.n_queries;
  st.T = in.T;
  st.head_dim = in.head_dim;
  st.row_max.assign(N, 0.0);
  st.mass.assign(N, 0.0);
  st.output.assign(N * D, 0.0);
  st.attn_sum.assign(TT, 0.0);
  st.attn_sumsq.assign(TT, 0.0);
  st.attn_max.assign(TT, 0.0);
  return st;
}

// C1 = K[selected] [t, d] in the precision of the logits that use it; indices must lie in [0, T).
template <class Real>
std::vector<Real> selected_keys(const HeadCompactionInput& in, const std::vector<int>& selected) {
  const std::size_t t = selected.size(), D = static_cast<std::size_t>(std::max(in.head_dim, 0));
  std::vector<Real> C1(t * D);
  for (std::size_t j = 0; j < t; ++j) {
    const int idx = selected[j];
    if (idx < 0 || idx >= in.T)
      throw Error(fmt::format("selected_logits: index {} outside the context [0, {})", idx, in.T));
    std::copy_n(in.keys + static_cast<std::size_t>(idx) * D, D, C1.data() + j * D);
  }
  return C1;
}

}  // namespace

HeadAttentionStats compute_head_attention(const HeadCompactionInput& in) {
  HeadAttentionStats st = zero_stats(in);
  const int n = in.n_queries, T = in.T, d = in.head_dim;
  const std::size_t N = static_cast<std::size_t>(n), TT = static_cast<std::size_t>(T),
                    D = static_cast<std::size_t>(d);
  if (n == 0) return st;

  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  const std::vector<double> K = to_double(in.keys, TT * D), V = to_double(in.values, TT * D);
  const std::size_t block = rows_per_block(n, T);
  std::vector<double> A(block * TT), Qb(block * D);
  for (std::size_t b0 = 0; b0 < N; b0 += block) {
    const std::size_t nb = std::min(block, N - b0);
    for (std::size_t i = 0; i < nb * D; ++i) Qb[i] = in.queries[b0 * D + i];
    // A = s * Qb K^T : [nb, T], then row softmax in place.
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(nb), T, d, scale,
                Qb.data(), d, K.data(), d, 0.0, A.data(), T);
    if (in.key_bias != nullptr)
      for (std::size_t r = 0; r < nb; ++r)
        for (std::size_t j = 0; j < TT; ++j) A[r * TT + j] += in.key_bias[j];
    softmax_rows(A.data(), nb, TT, st.row_max.data() + b0, st.mass.data() + b0);
    // Y block = A V : [nb, d].
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(nb), d, T, 1.0,
                A.data(), T, V.data(), d, 0.0, st.output.data() + b0 * D, d);
    // Per-key accumulators, parallel over blocks of keys (rows read contiguously per block).
    constexpr std::size_t kKeyBlock = 256;
    const std::ptrdiff_t n_key_blocks = static_cast<std::ptrdiff_t>((TT + kKeyBlock - 1) / kKeyBlock);
#pragma omp parallel for schedule(static) if (nb * TT >= kParallelMin)
    for (std::ptrdiff_t kb = 0; kb < n_key_blocks; ++kb) {
      const std::size_t j0 = static_cast<std::size_t>(kb) * kKeyBlock;
      const std::size_t j1 = std::min(TT, j0 + kKeyBlock);
      for (std::size_t r = 0; r < nb; ++r) {
        const double* a = A.data() + r * TT;
        for (std::size_t j = j0; j < j1; ++j) {
          st.attn_sum[j] += a[j];
          st.attn_sumsq[j] += a[j] * a[j];
          st.attn_max[j] = std::max(st.attn_max[j], a[j]);
        }
      }
    }
  }
  return st;
}

HeadAttentionStats compute_head_attention_f32(const HeadCompactionInput& in) {
  HeadAttentionStats st = zero_stats(in);
  const int n = in.n_queries, T = in.T, d = in.head_dim;
  const std::size_t N = static_cast<std::size_t>(n), TT = static_cast<std::size_t>(T),
                    D = static_cast<std::size_t>(d);
  if (n == 0) return st;

  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  constexpr std::size_t kRows = 256;
  const std::size_t block = std::min(kRows, N);
  const std::size_t n_blocks = (N + block - 1) / block;
  // Blocks of queries in parallel, each thread with its own buffers and per-key sums (inside an
  // outer parallel region, e.g. compact_cache's loop over heads, this runs on one thread; the
  // OpenMP build of OpenBLAS then runs each sgemm on the calling thread). Per-thread sums are added
  // in thread order, so a result depends on the thread count only, not on scheduling.
  const int threads =
      n_blocks > 1 && N * TT >= kParallelMin * 16 ? std::max(1, std::min(omp_get_max_threads(), static_cast<int>(n_blocks))) : 1;
  struct Local {
    std::vector<float> A, Y, bsum, bsq, bmax;
    std::vector<double> sum, sq, max;
  };
  std::vector<Local> local(static_cast<std::size_t>(threads));
  for (Local& l : local) {
    l.A.resize(block * TT), l.Y.resize(block * D), l.bsum.resize(TT), l.bsq.resize(TT), l.bmax.resize(TT);
    l.sum.assign(TT, 0.0), l.sq.assign(TT, 0.0), l.max.assign(TT, 0.0);
  }
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    Local& l = local[static_cast<std::size_t>(omp_get_thread_num())];
#pragma omp for schedule(static)
    for (std::ptrdiff_t bi = 0; bi < static_cast<std::ptrdiff_t>(n_blocks); ++bi) {
      const std::size_t b0 = static_cast<std::size_t>(bi) * block, nb = std::min(block, N - b0);
      // A = s Q_b K^T : [nb, T], then each row -> softmax.
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(nb), T, d, scale,
                  in.queries + b0 * D, d, in.keys, d, 0.0f, l.A.data(), T);
      std::fill(l.bsum.begin(), l.bsum.end(), 0.0f);
      std::fill(l.bsq.begin(), l.bsq.end(), 0.0f);
      std::fill(l.bmax.begin(), l.bmax.end(), 0.0f);
      for (std::size_t r = 0; r < nb; ++r) {
        float* a = l.A.data() + r * TT;
        if (in.key_bias != nullptr)
          for (std::size_t j = 0; j < TT; ++j) a[j] += in.key_bias[j];
        const float m = max_value(a, TT);
        const float z = exp_shifted_sum(a, TT, m);  // a holds exp(S - m); normalised in Y below
        add_column_stats(a, TT, 1.0f / z, l.bsum.data(), l.bsq.data(), l.bmax.data());
        st.row_max[b0 + r] = m;
        st.mass[b0 + r] = z;
      }
      for (std::size_t j = 0; j < TT; ++j) {
        l.sum[j] += l.bsum[j];
        l.sq[j] += l.bsq[j];
        l.max[j] = std::max(l.max[j], static_cast<double>(l.bmax[j]));
      }
      // Y_b = softmax(A) V = diag(1 / z) exp(A - m) V : [nb, d].
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(nb), d, T, 1.0f,
                  l.A.data(), T, in.values, d, 0.0f, l.Y.data(), d);
      for (std::size_t r = 0; r < nb; ++r) {
        const float inv = 1.0f / static_cast<float>(st.mass[b0 + r]);
        for (std::size_t c = 0; c < D; ++c) st.output[(b0 + r) * D + c] = l.Y[r * D + c] * inv;
      }
    }
  }
  for (const Local& l : local)
    for (std::size_t j = 0; j < TT; ++j) {
      st.attn_sum[j] += l.sum[j];
      st.attn_sumsq[j] += l.sq[j];
      st.attn_max[j] = std::max(st.attn_max[j], l.max[j]);
    }
  return st;
}

std::vector<float> selected_logits_f32(const HeadCompactionInput& in, const std::vector<int>& selected) {
  const std::size_t n = static_cast<std::size_t>(std::max(in.n_queries, 0));
  const std::size_t t = selected.size(), D = static_cast<std::size_t>(std::max(in.head_dim, 0));
  std::vector<float> out(n * t, 0.0f);
  if (n == 0 || t == 0) return out;
  const std::vector<float> C1 = selected_keys<float>(in, selected);
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(n), static_cast<int>(t),
              static_cast<int>(D), scale, in.queries, static_cast<int>(D), C1.data(),
              static_cast<int>(D), 0.0f, out.data(), static_cast<int>(t));
  return out;
}

std::vector<double> selected_logits(const HeadCompactionInput& in, const std::vector<int>& selected) {
  const std::size_t n = static_cast<std::size_t>(std::max(in.n_queries, 0));
  const std::size_t t = selected.size(), D = static_cast<std::size_t>(std::max(in.head_dim, 0));
  std::vector<double> out(n * t, 0.0);
  if (n == 0 || t == 0) return out;
  const std::vector<double> C1 = selected_keys<double>(in, selected);
  const std::vector<double> Q = to_double(in.queries, n * D);
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(n), static_cast<int>(t),
              static_cast<int>(D), scale, Q.data(), static_cast<int>(D), C1.data(),
              static_cast<int>(D), 0.0, out.data(), static_cast<int>(t));
  return out;
}

namespace {

// compacted_attention_output for any head type with keys, values and beta vectors.
template <class Head>
std::vector<float> compacted_output(const Head& head, const float* queries, int n_queries, int head_dim,
                                    std::vector<double>* log_mass) {
  const char* where = "compacted attention output";
  if (head_dim <= 0) throw Error(fmt::format("{}: head_dim {} must be positive", where, head_dim));
  if (n_queries < 0) throw Error(fmt::format("{}: number of queries {} is negative", where, n_queries));
  const std::size_t t = head.beta.size(), D = static_cast<std::size_t>(head_dim),
                    N = static_cast<std::size_t>(n_queries);
  if (t == 0) throw Error(fmt::format("{}: the compacted head is empty (softmax over no entries)", where));
  if (head.keys.size() != t * D || head.values.size() != t * D)
    throw Error(fmt::format("{}: head has {} beta but {} key and {} value floats (head_dim {})",
                            where, t, head.keys.size(), head.values.size(), head_dim));
  if (N > 0 && queries == nullptr) throw Error(fmt::format("{}: queries missing", where));
  check_finite(head.keys.data(), t * D, where, "C1");
  check_finite(head.values.data(), t * D, where, "C2");
  check_finite(head.beta.data(), t, where, "beta");
  check_finite(queries, N * D, where, "Q");
  std::vector<float> out(N * D, 0.0f);
  if (log_mass) log_mass->assign(N, 0.0);
  if (N == 0) return out;

  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  const std::vector<double> C1 = to_double(head.keys.data(), t * D),
                            C2 = to_double(head.values.data(), t * D);
  const std::size_t block = rows_per_block(n_queries, static_cast<int>(t));
  std::vector<double> P(block * t), Qb(block * D), Yb(block * D), m(block), z(block);
  for (std::size_t b0 = 0; b0 < N; b0 += block) {
    const std::size_t nb = std::min(block, N - b0);
    for (std::size_t i = 0; i < nb * D; ++i) Qb[i] = queries[b0 * D + i];
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(nb), static_cast<int>(t),
                head_dim, scale, Qb.data(), head_dim, C1.data(), head_dim, 0.0, P.data(),
                static_cast<int>(t));
    for (std::size_t r = 0; r < nb; ++r)
      for (std::size_t j = 0; j < t; ++j) P[r * t + j] += head.beta[j];
    softmax_rows(P.data(), nb, t, m.data(), z.data());
    if (log_mass)
      for (std::size_t r = 0; r < nb; ++r) (*log_mass)[b0 + r] = m[r] + std::log(z[r]);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(nb), head_dim,
                static_cast<int>(t), 1.0, P.data(), static_cast<int>(t), C2.data(), head_dim, 0.0,
                Yb.data(), head_dim);
    for (std::size_t i = 0; i < nb * D; ++i) out[b0 * D + i] = static_cast<float>(Yb[i]);
  }
  return out;
}

}  // namespace

std::vector<float> compacted_attention_output(const CompactedHead& head, const float* queries, int n_queries,
                                              int head_dim) {
  return compacted_output(head, queries, n_queries, head_dim, nullptr);
}

std::vector<float> compacted_attention_output(const HeadCache& head, const float* queries, int n_queries,
                                              int head_dim, std::vector<double>* log_mass) {
  return compacted_output(head, queries, n_queries, head_dim, log_mass);
}

std::vector<float> original_attention_output(const HeadCompactionInput& in) {
  const HeadAttentionStats st = compute_head_attention(in);
  return std::vector<float>(st.output.begin(), st.output.end());
}

}  // namespace kvcompact
