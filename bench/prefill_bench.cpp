// Prefill and decode speed: tokens/s of the forward pass on stories260K and on a
// Qwen3-0.6B-shaped float32 model with random weights (the project's speed target: llama.cpp
// prefills that shape at about 150 tokens/s on 2 threads of this CPU).
// Run: ./build/prefill_bench [--benchmark_filter=Qwen]. Prints figures; no pass/fail.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "loaders/model_loader.h"
#include "model/model.h"
#include "model/transformer.h"

namespace kvcompact {
namespace {

/// Fills with uniform values in +-scale from a 64-bit LCG (fast: 600M weights in seconds).
void fill(std::vector<float>& v, std::size_t n, float scale, uint64_t& state) {
  v.resize(n);
  for (auto& x : v) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    x = scale * (static_cast<float>(state >> 40) / 8388608.0f - 1.0f);
  }
}

struct ShapedModel {
  ModelConfig config;
  ModelWeights weights;
};

/// Qwen3-0.6B's shapes (hidden 1024, 28 layers, 16 query / 8 KV heads of 128, FFN 3072,
/// vocabulary 151,936, tied embeddings); no QK-norm (the Llama forward).
const ShapedModel& qwen3_0_6b_shape() {
  static std::unique_ptr<ShapedModel> m = [] {
    auto s = std::make_unique<ShapedModel>();
    ModelConfig& c = s->config;
    c.architecture = "qwen3-shaped-random";
    c.dim = 1024, c.hidden_dim = 3072, c.n_layers = 28, c.n_heads = 16, c.n_kv_heads = 8;
    c.head_dim = 128, c.vocab_size = 151936, c.max_seq_len = 40960, c.rope_theta = 1e6f;
    c.norm_eps = 1e-6f, c.tied_classifier = true;
    uint64_t st = 12345;
    ModelWeights& w = s->weights;
    fill(w.token_embedding, std::size_t(c.vocab_size) * c.dim, 0.05f, st);
    w.layers.resize(c.n_layers);
    for (auto& l : w.layers) {
      fill(l.attn_norm, c.dim, 1.0f, st);
      fill(l.ffn_norm, c.dim, 1.0f, st);
      fill(l.wq, std::size_t(c.q_dim()) * c.dim, 0.05f, st);
      fill(l.wk, std::size_t(c.kv_dim()) * c.dim, 0.05f, st);
      fill(l.wv, std::size_t(c.kv_dim()) * c.dim, 0.05f, st);
      fill(l.wo, std::size_t(c.dim) * c.q_dim(), 0.05f, st);
      fill(l.w_gate, std::size_t(c.hidden_dim) * c.dim, 0.05f, st);
      fill(l.w_up, std::size_t(c.hidden_dim) * c.dim, 0.05f, st);
      fill(l.w_down, std::size_t(c.dim) * c.hidden_dim, 0.05f, st);
    }
    fill(w.final_norm, c.dim, 1.0f, st);
    return s;
  }();
  return *m;
}

void prefill(benchmark::State& state, const ModelConfig& c, const ModelWeights& w) {
  const int n = static_cast<int>(state.range(0));
  Transformer tr(c, w);
  std::vector<int> ids(n);
  for (int i = 0; i < n; ++i) ids[i] = (i * 7919 + 1) % c.vocab_size;
  for (auto _ : state) {
    KVCache cache = tr.make_cache();
    benchmark::DoNotOptimize(tr.forward(ids, cache));
  }
  state.SetItemsProcessed(state.iterations() * n);
  state.counters["tokens_per_s"] = benchmark::Counter(double(n) * state.iterations(), benchmark::Counter::kIsRate);
}

void decode(benchmark::State& state, const ModelConfig& c, const ModelWeights& w) {
  const int context = static_cast<int>(state.range(0));
  Transformer tr(c, w);
  std::vector<int> ids(context);
  for (int i = 0; i < context; ++i) ids[i] = (i * 7919 + 1) % c.vocab_size;
  KVCache base = tr.make_cache();
  tr.forward(ids, base);
  for (auto _ : state) {
    state.PauseTiming();
    KVCache cache = base;
    state.ResumeTiming();
    const int tok = 5;
    benchmark::DoNotOptimize(tr.forward(std::span<const int>(&tok, 1), cache));
  }
  state.counters["tokens_per_s"] = benchmark::Counter(double(state.iterations()), benchmark::Counter::kIsRate);
}

void BM_PrefillStories260K(benchmark::State& state) {
  static Model m = load_model(std::string(KVC_SHARED_DIR) + "/models/stories260K/stories260K.bin");
  prefill(state, m.config, m.weights);
}
BENCHMARK(BM_PrefillStories260K)->Arg(256)->Unit(benchmark::kMillisecond);

void BM_DecodeStories260K(benchmark::State& state) {
  static Model m = load_model(std::string(KVC_SHARED_DIR) + "/models/stories260K/stories260K.bin");
  decode(state, m.config, m.weights);
}
BENCHMARK(BM_DecodeStories260K)->Arg(256)->Unit(benchmark::kMicrosecond);

void BM_PrefillQwen3_0_6B_Shape_F32(benchmark::State& state) {
  const ShapedModel& m = qwen3_0_6b_shape();
  prefill(state, m.config, m.weights);
}
BENCHMARK(BM_PrefillQwen3_0_6B_Shape_F32)->Arg(128)->Arg(512)->Unit(benchmark::kMillisecond)->Iterations(2);

void BM_DecodeQwen3_0_6B_Shape_F32(benchmark::State& state) {
  const ShapedModel& m = qwen3_0_6b_shape();
  decode(state, m.config, m.weights);
}
BENCHMARK(BM_DecodeQwen3_0_6B_Shape_F32)->Arg(512)->Unit(benchmark::kMillisecond)->Iterations(5);

}  // namespace
}  // namespace kvcompact
