// Load and prefill a Qwen3-4B-shaped random-weight BF16 Hugging Face checkpoint (~8 GB: hidden
// 2560, 36 layers, 32 query / 8 KV heads of 128, FFN 9728, vocabulary 151,936, tied embeddings,
// QK-norm). The checkpoint is written once (in a child process, so its buffers do not count) to
// $KVC_HF_BENCH_DIR or /tmp/kvcompact_qwen3_4b_bf16, one shard per layer, and reused after.
// Reports: file bytes, peak resident memory (VmHWM of /proc/self/status) after load + prefill and
// its ratio to the file size (target <= 1.2: BF16 weights stay memory-mapped, no f32 copy),
// load seconds, and prefill tokens/s for 64 and 256 tokens. Before timing, the mapping is warmed
// by one 16-token prefill (every weight page is read once, so the timed prefills measure compute,
// not the disk: an earlier cold run was disk-bound at 0.19 tokens/s); `warmup_s` is that first
// prefill; each size is then run twice and the faster kept. Threads: OMP_NUM_THREADS / OPENBLAS_NUM_THREADS (reported as `threads`). Not a test;
// run it by hand, once, and delete the checkpoint after:
//   df -h /tmp && OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 ./build/hf_load_bench
//   rm -r /tmp/kvcompact_qwen3_4b_bf16
#include <benchmark/benchmark.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <omp.h>

#include "io/safetensors.h"
#include "loaders/hf_loader.h"
#include "model/transformer.h"
#include "core/half.h"

namespace kvcompact {
namespace {

namespace fs = std::filesystem;

constexpr int kHidden = 2560, kLayers = 36, kHeads = 32, kKv = 8, kHd = 128, kFfn = 9728, kVocab = 151936;

std::string bench_dir() {
  const char* e = std::getenv("KVC_HF_BENCH_DIR");
  return e ? e : "/tmp/kvcompact_qwen3_4b_bf16";
}

struct Gen {
  std::uint64_t s = 42;
  std::vector<std::uint16_t> bf16(std::size_t n, float scale, float center = 0.0f) {
    std::vector<std::uint16_t> v(n);
    for (auto& x : v) {
      s = s * 6364136223846793005ULL + 1442695040888963407ULL;
      x = f32_to_bf16(center + scale * (static_cast<float>(s >> 40) / 8388608.0f - 1.0f));
    }
    return v;
  }
};

void write_checkpoint(const std::string& dir) {
  fs::create_directories(dir);
  Gen g;
  std::ofstream(dir + "/config.json") << fmt::format(
      R"({{"architectures":["Qwen3ForCausalLM"],"hidden_size":{},"intermediate_size":{},"num_hidden_layers":{},)"
      R"("num_attention_heads":{},"num_key_value_heads":{},"head_dim":{},"vocab_size":{},"rms_norm_eps":1e-6,)"
      R"("rope_theta":1000000,"tie_word_embeddings":true,"max_position_embeddings":40960,"hidden_act":"silu"}})",
      kHidden, kFfn, kLayers, kHeads, kKv, kHd, kVocab);
  std::string index = R"({"weight_map":{)";
  auto add = [&](std::vector<SafetensorsWriteTensor>& ts, std::vector<std::vector<std::uint16_t>>& keep,
                 const std::string& name, std::vector<std::int64_t> shape, float scale, float center,
                 const std::string& shard) {
    std::size_t n = 1;
    for (auto d : shape) n *= static_cast<std::size_t>(d);
    keep.push_back(g.bf16(n, scale, center));
    ts.push_back({name, "BF16", shape, keep.back().data(), n * 2});
    index += fmt::format(R"("{}":"{}",)", name, shard);
  };
  {
    std::vector<SafetensorsWriteTensor> ts;
    std::vector<std::vector<std::uint16_t>> keep;
    keep.reserve(4);
    add(ts, keep, "model.embed_tokens.weight", {kVocab, kHidden}, 0.05f, 0.0f, "embed.safetensors");
    add(ts, keep, "model.norm.weight", {kHidden}, 0.1f, 1.0f, "embed.safetensors");
    write_safetensors(dir + "/embed.safetensors", ts);
  }
  const std::int64_t Q = kHeads * kHd, KV = kKv * kHd;
  for (int l = 0; l < kLayers; ++l) {
    const std::string shard = fmt::format("layer-{:02}.safetensors", l), p = fmt::format("model.layers.{}.", l);
    std::vector<SafetensorsWriteTensor> ts;
    std::vector<std::vector<std::uint16_t>> keep;
    keep.reserve(16);
    add(ts, keep, p + "input_layernorm.weight", {kHidden}, 0.1f, 1.0f, shard);
    add(ts, keep, p + "post_attention_layernorm.weight", {kHidden}, 0.1f, 1.0f, shard);
    add(ts, keep, p + "self_attn.q_proj.weight", {Q, kHidden}, 0.03f, 0.0f, shard);
    add(ts, keep, p + "self_attn.k_proj.weight", {KV, kHidden}, 0.03f, 0.0f, shard);
    add(ts, keep, p + "self_attn.v_proj.weight", {KV, kHidden}, 0.03f, 0.0f, shard);
    add(ts, keep, p + "self_attn.o_proj.weight", {kHidden, Q}, 0.03f, 0.0f, shard);
    add(ts, keep, p + "self_attn.q_norm.weight", {kHd}, 0.1f, 1.0f, shard);
    add(ts, keep, p + "self_attn.k_norm.weight", {kHd}, 0.1f, 1.0f, shard);
    add(ts, keep, p + "mlp.gate_proj.weight", {kFfn, kHidden}, 0.03f, 0.0f, shard);
    add(ts, keep, p + "mlp.up_proj.weight", {kFfn, kHidden}, 0.03f, 0.0f, shard);
    add(ts, keep, p + "mlp.down_proj.weight", {kHidden, kFfn}, 0.02f, 0.0f, shard);
    write_safetensors(dir + "/" + shard, ts);
  }
  index.back() = '}';
  index += "}";
  std::ofstream(dir + "/model.safetensors.index.json") << index;
}

long vm_hwm_kb() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

void HfQwen3_4B_Bf16_LoadAndPrefill64(benchmark::State& state) {
  const std::string dir = bench_dir();
  if (!fs::exists(fs::path(dir) / "model.safetensors.index.json")) {
    const pid_t pid = fork();  // the writer's buffers must not count towards our VmHWM
    if (pid == 0) {
      write_checkpoint(dir);
      _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      state.SkipWithError("writing the checkpoint failed");
      return;
    }
  }
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    HfLoadOptions opt;
    opt.load_tokenizer = false;
    Model m = load_hf_model(dir, opt);
    const auto t1 = std::chrono::steady_clock::now();
    Transformer tr(m.config, m.weights);
    auto prefill_seconds = [&](int n) {
      std::vector<int> ids(static_cast<std::size_t>(n));
      for (int i = 0; i < n; ++i) ids[i] = (i * 7919 + 1) % kVocab;
      KVCache cache = tr.make_cache();
      const auto a = std::chrono::steady_clock::now();
      benchmark::DoNotOptimize(tr.forward(ids, cache));
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count();
    };
    const double warm = prefill_seconds(16);  // faults every weight page in (all layers + tied classifier)
    // Each size twice, best kept: a busy machine (or pages evicted under memory pressure) shows
    // up as the difference between the two.
    const double s64_first = prefill_seconds(64);
    const double s256 = std::min(prefill_seconds(256), prefill_seconds(256));
    const double s64 = std::min(s64_first, prefill_seconds(64));
    std::uint64_t file_bytes = 0;
    for (const auto& e : fs::directory_iterator(dir)) file_bytes += fs::file_size(e.path());
    const double hwm = static_cast<double>(vm_hwm_kb()) * 1024.0;
    state.counters["file_GB"] = file_bytes / 1e9;
    state.counters["peak_rss_GB"] = hwm / 1e9;
    state.counters["rss_over_file"] = hwm / static_cast<double>(file_bytes);
    state.counters["load_s"] = std::chrono::duration<double>(t1 - t0).count();
    state.counters["warmup_s"] = warm;
    state.counters["prefill64_tok_per_s"] = 64.0 / s64;
    state.counters["prefill64_first_tok_per_s"] = 64.0 / s64_first;
    state.counters["prefill256_tok_per_s"] = 256.0 / s256;
    state.counters["threads"] = omp_get_max_threads();
  }
}
BENCHMARK(HfQwen3_4B_Bf16_LoadAndPrefill64)->Iterations(1)->Unit(benchmark::kSecond);

}  // namespace
}  // namespace kvcompact
