// Per-head compaction time (Attention Matching and baselines) at realistic head sizes:
// head_dim 128, T context keys, n = 2 (T - 1) repeat-prefill reference queries (GQA group of 2),
// keep ratio 0.1. Prints figures; no pass/fail. Run: ./build/compaction_bench
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "compaction/attention_matching.h"
#include "compaction/baselines.h"
#include "compaction/head_compaction.h"

namespace kvcompact {
namespace {

struct HeadData {
  std::vector<float> K, V, Q;
  HeadCompactionInput in;
};

HeadData make_head(int T, int d) {
  HeadData h;
  const int n = 2 * (T - 1);
  std::mt19937_64 rng(7);
  std::normal_distribution<float> g(0.0f, 1.0f);
  h.K.resize(std::size_t(T) * d), h.V.resize(std::size_t(T) * d), h.Q.resize(std::size_t(n) * d);
  for (auto& x : h.K) x = g(rng);
  for (auto& x : h.V) x = g(rng);
  for (auto& x : h.Q) x = 2.0f * g(rng);  // peaked attention, like real heads
  h.in = {h.K.data(), h.V.data(), h.Q.data(), T, n, d};
  return h;
}

void BM_AttentionMatchingHead(benchmark::State& state) {
  HeadData h = make_head(static_cast<int>(state.range(0)), 128);
  const int t = kept_entries(0.1, h.in.T);
  for (auto _ : state) benchmark::DoNotOptimize(compact_attention_matching(h.in, t));
  state.counters["T"] = h.in.T;
  state.counters["queries"] = h.in.n_queries;
}
BENCHMARK(BM_AttentionMatchingHead)->Arg(256)->Arg(1024)->Arg(4096)->Unit(benchmark::kMillisecond);

void BM_AttnNoFitHead(benchmark::State& state) {
  HeadData h = make_head(static_cast<int>(state.range(0)), 128);
  const int t = kept_entries(0.1, h.in.T);
  for (auto _ : state) benchmark::DoNotOptimize(compact_attn_nofit(h.in, t));
}
BENCHMARK(BM_AttnNoFitHead)->Arg(1024)->Arg(4096)->Unit(benchmark::kMillisecond);

void BM_RandomHead(benchmark::State& state) {
  HeadData h = make_head(static_cast<int>(state.range(0)), 128);
  const int t = kept_entries(0.1, h.in.T);
  for (auto _ : state) benchmark::DoNotOptimize(compact_random(h.in, t, 1));
}
BENCHMARK(BM_RandomHead)->Arg(4096)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace kvcompact
