// Saved compacted caches (.kvc): round trip bit identity, corruption / truncation / wrong-model
// refusal, model fingerprints, and continuing generation / scoring from a cache.
#include <gtest/gtest.h>

#include "cli_runner.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "metrics/continuation_nll.h"
#include "metrics/perplexity.h"
#include "compaction/compact_cache.h"
#include "compaction/reference_queries.h"
#include "core/error.h"
#include "loaders/kvc_file.h"
#include "io/text_documents.h"
#include "model/generate.h"
#include "model/generate_from_cache.h"
#include "loaders/model_loader.h"
#include "model/model.h"
#include "core/model_fingerprint.h"
#include "model/sampler.h"
#include "model/transformer.h"
#include "random_model.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

const std::string kShared = KVC_SHARED_DIR;
const std::string kBin = kShared + "/models/stories260K/stories260K.bin";
const std::string kGguf = kShared + "/models/stories260K/stories260K.gguf";
const std::string kAidreams = kShared + "/models/aidreams260K/aidreams260K.bin";
const std::string kData = kShared + "/data/tinystories/tinystories_val_head.txt";

std::string tmp_path(const std::string& name) {
  std::filesystem::create_directories(KVC_TEST_TMP);
  return std::string(KVC_TEST_TMP) + "/" + name;
}

const Model& stories() {
  static const Model m = load_model(kBin);
  return m;
}

/// A compacted cache of the first TinyStories document with stories260K (AM, ratio 0.25).
struct Fixture {
  std::vector<int> context, continuation;
  ContextPrefill prefill;
  KvcFile file;
};

const Fixture& fixture() {
  static const Fixture f = [] {
    Fixture x;
    const Model& m = stories();
    const auto docs = read_documents(kData, 2);
    x.context = m.tokenizer->encode(docs[0], true);
    x.continuation = m.tokenizer->encode(docs[1], false);
    Transformer tr(m.config, m.weights);
    x.prefill = repeat_prefill(tr, *m.tokenizer, x.context);
    CompactionOptions co;
    co.ratio = 0.25;
    x.file.model_fingerprint = model_fingerprint(m.config, m.weights);
    x.file.model_name = "stories260K.bin";
    x.file.config = m.config;
    x.file.method = "am";
    x.file.ratio = 0.25;
    x.file.context_tokens.assign(x.context.begin(), x.context.end());
    x.file.last_logits = x.prefill.last_logits;
    x.file.cache = compact_cache(x.prefill.cache, x.prefill.queries, co);
    return x;
  }();
  return f;
}

/// A tiny .kvc made from a random model (3 layers x 2 KV heads x head_dim 8, 61-token vocab).
std::string small_kvc_bytes() {
  static const std::string bytes = [] {
    auto rm = testing::make_random_model(testing::small_config(), 5);
    Transformer tr(rm.config, rm.weights);
    KVCache cache = tr.make_cache();
    const std::vector<int> ids = {1, 5, 9, 13, 17, 21};
    KvcFile f;
    f.last_logits = tr.forward(ids, cache);
    f.model_fingerprint = model_fingerprint(rm.config, rm.weights);
    f.model_name = "random";
    f.config = rm.config;
    f.method = "recent";
    f.ratio = 1.0;
    f.context_tokens.assign(ids.begin(), ids.end());
    f.cache = cache;
    f.cache.head(1, 1).beta[2] = 0.5f;
    return serialize_kvc(f);
  }();
  return bytes;
}

void expect_error(const std::string& bytes, const std::string& needle) {
  try {
    parse_kvc(bytes, "bad.kvc");
    ADD_FAILURE() << "no error, expected '" << needle << "'";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("bad.kvc"), std::string::npos) << msg;
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
  }
}

// Rewrites the checksum so that a crafted edit passes it (to test the field checks behind it).
std::string reseal(std::string bytes) {
  const uint64_t c = kvc_checksum(std::string_view(bytes).substr(0, bytes.size() - 8));
  std::memcpy(bytes.data() + bytes.size() - 8, &c, 8);
  return bytes;
}

TEST(KvcFile, RoundTripGivesBitIdenticalContinuationLogits) {
  const Fixture& fx = fixture();
  const Model& m = stories();
  const std::string path = tmp_path("roundtrip.kvc");
  write_kvc_file(path, fx.file);
  const KvcFile back = read_kvc_file(path);
  EXPECT_NO_THROW(check_kvc_model(back, path, m.config, model_fingerprint(m.config, m.weights), kBin));
  EXPECT_EQ(back.method, "am");
  EXPECT_EQ(back.ratio, 0.25);
  EXPECT_EQ(back.context_tokens, fx.file.context_tokens);
  EXPECT_EQ(back.cache.next_position, static_cast<int>(fx.context.size()));
  ASSERT_EQ(back.last_logits.size(), fx.file.last_logits.size());
  EXPECT_EQ(0, std::memcmp(back.last_logits.data(), fx.file.last_logits.data(), back.last_logits.size() * 4));
  for (int l = 0; l < m.config.n_layers; ++l)
    for (int h = 0; h < m.config.n_kv_heads; ++h) {
      const HeadCache &a = fx.file.cache.head(l, h), &b = back.cache.head(l, h);
      EXPECT_EQ(a.positions, b.positions);
      ASSERT_EQ(a.keys.size(), b.keys.size());
      EXPECT_EQ(0, std::memcmp(a.keys.data(), b.keys.data(), a.keys.size() * 4));
      EXPECT_EQ(0, std::memcmp(a.values.data(), b.values.data(), a.values.size() * 4));
      EXPECT_EQ(0, std::memcmp(a.beta.data(), b.beta.data(), a.beta.size() * 4));
    }
  // The compaction kept a quarter of the entries and fitted a bias somewhere.
  EXPECT_LT(back.cache.total_entries(), fx.prefill.cache.total_entries() / 2);
  bool any_bias = false;
  for (int l = 0; l < m.config.n_layers; ++l)
    for (int h = 0; h < m.config.n_kv_heads; ++h) any_bias |= back.cache.head(l, h).has_bias();
  EXPECT_TRUE(any_bias);

  Transformer tr(m.config, m.weights);
  KVCache mem = fx.file.cache, loaded = back.cache;
  ForwardOptions opt;
  opt.logits = LogitsMode::All;
  const std::vector<float> a = tr.forward(fx.continuation, mem, opt);
  const std::vector<float> b = tr.forward(fx.continuation, loaded, opt);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
  // ...and they differ from the full cache's (compaction changed something).
  KVCache full = fx.prefill.cache;
  const std::vector<float> c = tr.forward(fx.continuation, full, opt);
  EXPECT_NE(0, std::memcmp(a.data(), c.data(), a.size() * sizeof(float)));
}

TEST(KvcFile, EveryFlippedByteIsRefusedByChecksum) {
  const std::string good = small_kvc_bytes();
  EXPECT_NO_THROW(parse_kvc(good, "good.kvc"));
  // Offsets 0..23 hold magic, version, reserved and file size (each has its own check below).
  for (std::size_t i = 24; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] = static_cast<char>(bad[i] ^ 0x10);
    expect_error(bad, "checksum mismatch");
  }
  std::string bad = good;
  bad[1] = 'X';
  expect_error(bad, "not a kvcompact cache file");
  bad = good;
  bad[8] = 2;
  expect_error(bad, "format version 2");
  bad = good;
  bad[16] ^= 1;
  expect_error(bad, "header says");
}

TEST(KvcFile, EveryTruncationIsRefused) {
  const std::string good = small_kvc_bytes();
  for (std::size_t n = 0; n < good.size(); ++n) {
    const std::string cut = good.substr(0, n);
    if (n < 8) {
      expect_error(cut, "not a kvcompact cache file");
    } else if (n >= 24) {
      expect_error(cut, "truncated");
    } else {
      EXPECT_THROW(parse_kvc(cut, "bad.kvc"), Error) << n;
    }
  }
  expect_error(good + "x", "trailing bytes");
}

TEST(KvcFile, CraftedCountsAndNaNBehindAValidChecksumAreRefused) {
  const std::string good = small_kvc_bytes();
  // Locate fields: fixed header 76 bytes, then model name "random" (4+6), method "recent" (4+6),
  // ratio (8), T (4) at offset 104.
  const std::size_t t_off = 76 + 10 + 10 + 8;
  uint32_t T;
  std::memcpy(&T, good.data() + t_off, 4);
  ASSERT_EQ(T, 6u);
  std::string bad = good;
  const uint32_t huge = 0xFFFFFFF0u;
  std::memcpy(bad.data() + t_off, &huge, 4);
  expect_error(reseal(bad), "truncated");
  // First head's length (after 6 tokens and 61 logits) set beyond T.
  const std::size_t h_off = t_off + 4 + 6 * 4 + 61 * 4;
  uint32_t t0;
  std::memcpy(&t0, good.data() + h_off, 4);
  ASSERT_EQ(t0, 6u);
  bad = good;
  const uint32_t seven = 7;
  std::memcpy(bad.data() + h_off, &seven, 4);
  expect_error(reseal(bad), "more than the context length");
  // A NaN key in the first head.
  bad = good;
  const float nan = std::nanf("");
  std::memcpy(bad.data() + h_off + 4 + 6 * 4 + 6 * 4, &nan, 4);
  expect_error(reseal(bad), "not finite");
  // A position outside [0, T).
  bad = good;
  const int32_t pos = 6;
  std::memcpy(bad.data() + h_off + 4, &pos, 4);
  expect_error(reseal(bad), "position 6");
  // A context token outside the vocabulary.
  bad = good;
  const int32_t tok = 61;
  std::memcpy(bad.data() + t_off + 4, &tok, 4);
  expect_error(reseal(bad), "outside the vocabulary");
}

TEST(KvcFile, CacheForAnotherModelIsRefusedNamingBoth) {
  const Model other = load_model(kAidreams);
  const std::string path = tmp_path("for_stories.kvc");
  write_kvc_file(path, fixture().file);
  const KvcFile f = read_kvc_file(path);
  try {
    check_kvc_model(f, path, other.config, model_fingerprint(other.config, other.weights), kAidreams);
    ADD_FAILURE() << "accepted a cache for another model";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("stories260K.bin"), std::string::npos) << msg;
    EXPECT_NE(msg.find("aidreams260K.bin"), std::string::npos) << msg;
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
  }
}

TEST(ModelFingerprint, SameWeightsSameHashAnyChangeDiffers) {
  const Model& bin = stories();
  const Model gguf = load_model(kGguf);
  const uint64_t a = model_fingerprint(bin.config, bin.weights);
  // Same weights and forward config from .bin and .gguf (max_seq_len differs and is not hashed).
  EXPECT_EQ(a, model_fingerprint(gguf.config, gguf.weights));
  ModelWeights w = bin.weights;
  w.layers[3].wv[17] = std::nextafter(w.layers[3].wv[17], 1.0f);
  EXPECT_NE(a, model_fingerprint(bin.config, w));
  ModelConfig c = bin.config;
  c.rope_theta = 10001.0f;
  EXPECT_NE(a, model_fingerprint(c, bin.weights));
  // FNV-1a 64 published test vectors (draft-eastlake-fnv): "" and "a".
  EXPECT_EQ(fnv1a64("", 0), 0xcbf29ce484222325ULL);
  EXPECT_EQ(fnv1a64("a", 1), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(fingerprint_hex(0xabcULL), "0x0000000000000abc");
}

TEST(GenerateFromCache, FullCacheContinuesLikePlainGenerate) {
  const Model& m = stories();
  Transformer tr(m.config, m.weights);
  const std::string text = "Once upon a time, there was a little dog named Max.";
  const std::vector<int> ids = m.tokenizer->encode(text, true);
  KVCache cache = tr.make_cache();
  const std::vector<float> last = tr.forward(ids, cache);
  Sampler g1(m.config.vocab_size, 0.0f, 1.0f, 1), g2(m.config.vocab_size, 0.0f, 1.0f, 1);
  ContinueOptions opt;
  opt.max_new_tokens = 30;
  const GenerationResult a = generate_from_cache(tr, *m.tokenizer, cache, last, ids.back(), "", g1, opt);
  const GenerationResult b = generate(tr, *m.tokenizer, text, static_cast<int>(ids.size()) - 1 + 30, g2);
  ASSERT_FALSE(a.generated.empty());
  EXPECT_EQ(a.generated[0], argmax(last));
  EXPECT_EQ(a.generated, b.generated);
  EXPECT_EQ(cache.next_position, static_cast<int>(ids.size() + a.generated.size()) - (a.stopped ? 0 : 1));
}

TEST(GenerateFromCache, PromptWithoutBosAndNewlineStop) {
  const Model& m = stories();
  Transformer tr(m.config, m.weights);
  const Fixture& fx = fixture();
  KVCache c1 = fx.file.cache;
  Sampler greedy(m.config.vocab_size, 0.0f, 1.0f, 1);
  ContinueOptions opt;
  opt.max_new_tokens = 200;
  opt.stop_at_newline = true;
  int stop = -2;
  const GenerationResult r = generate_from_cache(tr, *m.tokenizer, c1, fx.file.last_logits,
                                                 fx.context.back(), "Kitty", greedy, opt, {}, &stop);
  EXPECT_EQ(r.prompt_tokens, m.tokenizer->encode("Kitty", false));
  EXPECT_NE(r.prompt_tokens.front(), m.tokenizer->bos_id());
  EXPECT_EQ(r.text.find('\n'), std::string::npos) << r.text;
  EXPECT_TRUE(r.stopped);
  EXPECT_GE(stop, 0);
  // The prompt went in at positions T, T+1, ...: the same logits as feeding it by hand.
  KVCache c2 = fx.file.cache;
  const std::vector<float> by_hand = tr.forward(r.prompt_tokens, c2);
  EXPECT_EQ(r.generated.empty() ? -1 : r.generated[0], argmax(by_hand));
  Sampler s2(m.config.vocab_size, 0.0f, 1.0f, 1);
  KVCache c3 = fx.file.cache;
  opt.max_new_tokens = 0;
  EXPECT_THROW(generate_from_cache(tr, *m.tokenizer, c3, fx.file.last_logits, 1, "", s2, opt), Error);
}

TEST(ContinuationNll, FullCacheMatchesScoringTheWholeSequence) {
  const Model& m = stories();
  Transformer tr(m.config, m.weights);
  const Fixture& fx = fixture();
  std::vector<int> all = fx.context;
  all.insert(all.end(), fx.continuation.begin(), fx.continuation.end());
  const double whole = score_tokens(tr, all).total_nll;
  const double ctx = score_tokens(tr, fx.context).total_nll;
  const NllResult r = continuation_nll(tr, fx.prefill.cache, fx.prefill.last_logits, fx.continuation);
  EXPECT_EQ(r.tokens, static_cast<long long>(fx.continuation.size()));
  EXPECT_NEAR(r.total_nll, whole - ctx, 1e-3 * std::abs(whole));
  EXPECT_THROW(continuation_nll(tr, fx.prefill.cache, fx.prefill.last_logits, {}), Error);
}

// ---- CLI: compact, then ppl/generate --cache; refusals print one line.
using testing::CliRun;
using testing::run_cli;

// A well-formed .kvc for the right model whose context is empty (parse_kvc accepts it, see
// FuzzRegression.KvcEmptyHeadsAndEmptyContextParse): generate --cache must refuse it in one line
// instead of reading the last context token of an empty list.
TEST(KvcCli, GenerateFromAnEmptyContextIsRefused) {
  const Model& m = stories();
  KvcFile f;
  f.model_fingerprint = model_fingerprint(m.config, m.weights);
  f.model_name = "stories260K.bin";
  f.config = m.config;
  f.method = "am";
  f.ratio = 0.1;
  f.last_logits.assign(static_cast<std::size_t>(m.config.vocab_size), 0.0f);
  f.cache = KVCache(m.config.n_layers, m.config.n_kv_heads, m.config.head_dim);
  f.cache.next_position = 0;
  const std::string kvc = tmp_path("empty_context.kvc");
  write_kvc_file(kvc, f);
  const CliRun r = run_cli("generate --model " + kBin + " --cache " + kvc + " --prompt Hi --steps 4");
  testing::expect_one_line_error(r, kvc + ": the cache holds no context tokens");
}

TEST(KvcCli, CompactThenContinueAndRefuseBadFiles) {
  const auto docs = read_documents(kData, 2);
  const std::string ctx = tmp_path("kvc_ctx.txt"), cont = tmp_path("kvc_cont.txt"), kvc = tmp_path("cli.kvc");
  std::ofstream(ctx) << docs[0] << "\n";
  std::ofstream(cont) << docs[1] << "\n";
  CliRun r = run_cli("compact --model " + kBin + " --context " + ctx + " --ratio 1 --method recent -o " + kvc + " --json");
  ASSERT_EQ(r.status, 0) << r.err;
  // Ratio 1 with `recent` keeps every entry: ppl --cache equals the exact continuation NLL.
  r = run_cli("ppl --model " + kBin + " --cache " + kvc + " --data " + cont + " --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const Model& m = stories();
  Transformer tr(m.config, m.weights);
  std::vector<int> c = m.tokenizer->encode(docs[0], true), k = m.tokenizer->encode(docs[1], false);
  KVCache cache = tr.make_cache();
  const std::vector<float> last = tr.forward(c, cache);
  const double expect = continuation_nll(tr, cache, last, k).mean_nll();
  const auto at = r.out.find("\"nll\": ");
  ASSERT_NE(at, std::string::npos) << r.out;
  EXPECT_NEAR(std::stod(r.out.substr(at + 7)), expect, 1e-5) << r.out;
  r = run_cli("generate --model " + kBin + " --cache " + kvc + " --prompt Spot --temperature 0 --steps 10 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("\"text\": \" Spot"), std::string::npos) << r.out;

  r = run_cli("ppl --model " + kAidreams + " --cache " + kvc + " --data " + cont);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("aidreams260K.bin"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("stories260K.bin"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;

  std::string bytes;
  {
    std::ifstream in(kvc, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    bytes = ss.str();
  }
  bytes[bytes.size() / 2] ^= 0x01;
  const std::string bad = tmp_path("flipped.kvc");
  std::ofstream(bad, std::ios::binary) << bytes;
  r = run_cli("generate --model " + kBin + " --cache " + bad + " --prompt Spot");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("checksum mismatch"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("flipped.kvc"), std::string::npos) << r.err;
}

}}  // namespace
}  // namespace kvcompact
