// Cost of one (head, ratio) point of the influence sweep (issue #4, "fast sweep") on stories260K:
// recompact one KV head at a ratio from its precomputed Attention Matching order, then score the
// evaluated tokens resuming at the head's layer with the hidden states captured in the baseline
// pass (layers below it see the same cache). The reference is a full forward of the evaluated
// tokens over the same cache (all layers). Counter `vs_full_forward` = point time / full-forward
// time (< 1 means the point is cheaper than a forward); `full_forward_us` is the reference time.
// Layer 0 cannot reuse anything (its ratio is ~1 plus the recompaction); the last layer reuses all
// but one layer. Run: ./build/influence_bench. Skips when ../shared is missing. No pass/fail.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <functional>
#include <memory>
#include <vector>

#include "compaction/attention_matching.h"
#include "compaction/compact_cache.h"
#include "compaction/head_compaction.h"
#include "compaction/reference_queries.h"
#include "io/text_documents.h"
#include "loaders/model_loader.h"
#include "model/model.h"
#include "model/transformer.h"

namespace kvcompact {
namespace {

const std::string kModel = std::string(KVC_SHARED_DIR) + "/models/stories260K/stories260K.bin";
const std::string kData = std::string(KVC_SHARED_DIR) + "/data/tinystories/tinystories_val_head.txt";

struct Capture : ForwardObserver {
  std::vector<std::vector<float>> x;
  void on_layer_input(const LayerInputView& v) override {
    if (static_cast<int>(x.size()) <= v.layer) x.resize(v.layer + 1);
    x[v.layer].assign(v.x.all().begin(), v.x.all().end());
  }
};

/// One document prepared as the sweep prepares it: baseline cache (every head at ratio 0.05),
/// per-head AM matchers, the evaluated tokens and the layer inputs of the baseline pass.
struct Setup {
  std::unique_ptr<Model> model;
  std::unique_ptr<Transformer> tr;
  ContextPrefill pre;
  KVCache base;
  std::vector<std::unique_ptr<AttentionMatcher>> matcher;
  std::vector<int> fed;
  Capture capture;
  int T = 0;
};

const Setup* setup() {
  static std::unique_ptr<Setup> s = []() -> std::unique_ptr<Setup> {
    if (!std::filesystem::exists(kModel) || !std::filesystem::exists(kData)) return nullptr;
    auto s = std::make_unique<Setup>();
    s->model = std::make_unique<Model>(load_model(kModel));
    const ModelConfig& c = s->model->config;
    s->tr = std::make_unique<Transformer>(c, s->model->weights);
    // The longest of the first 20 documents (more evaluated tokens, steadier timing).
    std::vector<int> ids;
    for (const auto& d : read_documents(kData, 20)) {
      auto v = s->model->tokenizer->encode(d, true);
      if (v.size() > ids.size()) ids = v;
    }
    const int N = static_cast<int>(ids.size());
    s->T = static_cast<int>(std::floor(0.6 * N));
    std::span<const int> ctx(ids.data(), s->T);
    s->pre = collect_reference_queries(*s->tr, *s->model->tokenizer, ctx, QueryPlan{});
    s->base = KVCache(c.n_layers, c.n_kv_heads, c.head_dim);
    s->base.next_position = s->T;
    const int t_base = kept_entries(0.05, s->T);
    for (int l = 0; l < c.n_layers; ++l)
      for (int h = 0; h < c.n_kv_heads; ++h) {
        const HeadCache& src = s->pre.cache.head(l, h);
        HeadCompactionInput in;
        in.keys = src.keys.data();
        in.values = src.values.data();
        in.queries = s->pre.queries.at(l, h).data();
        in.n_queries = s->pre.queries.count(l, h);
        in.context_queries = s->pre.context_queries.at(l, h).data();
        in.group_size = c.group_size();
        in.T = s->T;
        in.head_dim = c.head_dim;
        s->matcher.push_back(std::make_unique<AttentionMatcher>(in, AttentionMatchingOptions{}, s->T));
        s->base.head(l, h) = to_head_cache(s->matcher.back()->compact(t_base), src);
      }
    s->fed.assign(ids.begin() + s->T, ids.end() - 1);
    KVCache work = s->base;
    ForwardOptions o;
    o.logits = LogitsMode::All;
    o.observer = &s->capture;
    s->tr->forward(s->fed, work, o);
    return s;
  }();
  return s.get();
}

double time_us(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
}

/// state.range(0): layer (-1 = the last layer); KV head 0; ratio 0.2.
void BM_InfluencePoint(benchmark::State& state) {
  const Setup* s = setup();
  if (s == nullptr) {
    state.SkipWithError("shared stories260K model or TinyStories data missing");
    return;
  }
  const ModelConfig& c = s->model->config;
  const int layer = state.range(0) < 0 ? c.n_layers - 1 : static_cast<int>(state.range(0));
  const int t = kept_entries(0.2, s->T);
  double point_total = 0, full_total = 0;
  for (auto _ : state) {
    // Reference: full forward of the evaluated tokens over the baseline cache.
    const double full = time_us([&] {
      KVCache work = s->base;
      ForwardOptions o;
      o.logits = LogitsMode::All;
      benchmark::DoNotOptimize(s->tr->forward(s->fed, work, o));
    });
    // One point: recompact the head, resume at its layer.
    const double point = time_us([&] {
      KVCache work = s->base;
      work.head(layer, 0) = to_head_cache(s->matcher[static_cast<std::size_t>(layer) * c.n_kv_heads]->compact(t),
                                          s->pre.cache.head(layer, 0));
      ForwardOptions o;
      o.logits = LogitsMode::All;
      o.first_layer = layer;
      o.layer_input = layer > 0 ? s->capture.x[layer].data() : nullptr;
      if (layer == 0) o.first_layer = 0;
      benchmark::DoNotOptimize(s->tr->forward(s->fed, work, o));
    });
    state.SetIterationTime(point * 1e-6);
    point_total += point;
    full_total += full;
  }
  state.counters["vs_full_forward"] = point_total / full_total;
  state.counters["full_forward_us"] = full_total / static_cast<double>(state.iterations());
  state.counters["layer"] = layer;
  state.counters["eval_tokens"] = static_cast<double>(s->fed.size() + 1);
  state.counters["context_tokens"] = s->T;
}
BENCHMARK(BM_InfluencePoint)->Arg(0)->Arg(-1)->UseManualTime()->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace kvcompact
