// The server's library floor (src/serve/) without sockets, on the real stories260K model:
// rollback and prefix reuse reproduce a fresh prefill exactly, compaction keeps the protected
// prefix and the recent window verbatim and stays within --ctx, sessions survive a save/restore
// bit for bit, and the engine's greedy answers equal generate()'s, alone and batched.
#include <gtest/gtest.h>

#include <filesystem>
#include <unistd.h>

#include "core/error.h"
#include "loaders/model_loader.h"
#include "model/generate.h"
#include "model/model.h"
#include "model/sampler.h"
#include "serve/engine.h"
#include "serve/policy.h"
#include "serve/session.h"
#include "serve/session_store.h"

namespace kvcompact::serve {
namespace { namespace KVC_UNITY_ID {

class ServeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = new Model(load_model(std::string(KVC_SHARED_DIR) + "/models/stories260K/stories260K.bin"));
  }
  static void TearDownTestSuite() { delete model_; }
  static std::vector<int> ids(const std::string& text) { return model_->tokenizer->encode(text, true); }
  /// A session holding the first n tokens of `tokens` (all when n = 0), fed in one forward.
  static Session prefilled(const Transformer& tr, const std::vector<int>& tokens, std::size_t n = 0) {
    Session s;
    s.tokens.assign(tokens.begin(), n == 0 ? tokens.end() : tokens.begin() + static_cast<std::ptrdiff_t>(n));
    s.cache = tr.make_cache();
    ForwardOptions fo;
    fo.logits = LogitsMode::None;
    tr.forward(s.tokens, s.cache, fo);
    return s;
  }
  static Model* model_;
};
Model* ServeTest::model_ = nullptr;

const char* kStory =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her friends "
    "every day. One day she saw a big red ball under a tree and ran to get it. Her mom called her home for dinner.";

void expect_same_cache(const KVCache& a, const KVCache& b) {
  ASSERT_EQ(a.next_position, b.next_position);
  for (int l = 0; l < a.n_layers(); ++l)
    for (int g = 0; g < a.n_kv_heads(); ++g) {
      EXPECT_EQ(a.head(l, g).keys, b.head(l, g).keys) << l << "," << g;
      EXPECT_EQ(a.head(l, g).values, b.head(l, g).values) << l << "," << g;
      EXPECT_EQ(a.head(l, g).beta, b.head(l, g).beta) << l << "," << g;
      EXPECT_EQ(a.head(l, g).positions, b.head(l, g).positions) << l << "," << g;
    }
}

// Feeding A then B, rolling back to |A| and feeding B again gives the cache and logits of the
// first time bit for bit (the same computation); a rollback into the compacted part is refused.
TEST_F(ServeTest, RollbackThenRefeedIsExact) {
  const Transformer tr(model_->config, model_->weights);
  const std::vector<int> all = ids(kStory);
  const std::size_t a = 20;
  KVCache c = tr.make_cache();
  tr.forward(std::span<const int>(all.data(), a), c);
  const std::vector<float> l1 = tr.forward(std::span<const int>(all.data() + a, all.size() - a), c);
  const KVCache first = c;
  EXPECT_EQ(earliest_rollback(c), 0);
  rollback_to(c, static_cast<int>(a));
  EXPECT_EQ(c.next_position, static_cast<int>(a));
  EXPECT_EQ(c.longest_global_length(), a);
  const std::vector<float> l2 = tr.forward(std::span<const int>(all.data() + a, all.size() - a), c);
  EXPECT_EQ(l1, l2);
  expect_same_cache(first, c);
  EXPECT_THROW(rollback_to(c, 5, /*compacted_until=*/10), Error);
  EXPECT_THROW(rollback_to(c, c.next_position + 1), Error);
}

// A compaction keeps the first protected_prefix and the newest keep_recent entries of every
// head bit for bit, brings the largest head to the target, keeps next_position and positions.
TEST_F(ServeTest, CompactionKeepsPrefixAndRecentVerbatim) {
  const Transformer tr(model_->config, model_->weights);
  Session s = prefilled(tr, ids(kStory));
  const KVCache full = s.cache;
  const int T = static_cast<int>(s.tokens.size());
  s.protected_prefix = 5;
  CompactionPolicy p;
  p.ctx = T;
  p.keep_recent = 8;
  p.target_ratio = 0.5;
  p.method = parse_method_spec("am");
  check_policy(p);
  CompactionReport r;
  ASSERT_TRUE(compact_session(tr, *model_->tokenizer, p, s, &r));
  EXPECT_EQ(r.longest_before, static_cast<std::size_t>(T));
  EXPECT_LE(r.longest_after, static_cast<std::size_t>(p.target_entries()));
  EXPECT_GE(r.longest_after, static_cast<std::size_t>(p.target_entries() - 1));
  EXPECT_EQ(s.cache.next_position, T);
  EXPECT_EQ(s.compactions, 1);
  EXPECT_EQ(s.compacted_until, T - p.keep_recent);
  EXPECT_EQ(earliest_rollback(s.cache, s.compacted_until), T - p.keep_recent);
  const std::size_t d = static_cast<std::size_t>(full.head_dim());
  for (int l = 0; l < full.n_layers(); ++l)
    for (int g = 0; g < full.n_kv_heads(); ++g) {
      const HeadCache &f = full.head(l, g), &h = s.cache.head(l, g);
      const std::size_t n = h.length();
      for (std::size_t i = 0; i < 5; ++i) EXPECT_EQ(h.positions[i], static_cast<int>(i));
      EXPECT_TRUE(std::equal(f.keys.begin(), f.keys.begin() + 5 * d, h.keys.begin()));
      EXPECT_TRUE(std::equal(f.values.begin(), f.values.begin() + 5 * d, h.values.begin()));
      EXPECT_TRUE(std::equal(f.keys.end() - 8 * d, f.keys.end(), h.keys.end() - 8 * d));
      EXPECT_TRUE(std::equal(f.values.end() - 8 * d, f.values.end(), h.values.end() - 8 * d));
      for (std::size_t i = 0; i < 8; ++i) EXPECT_EQ(h.positions[n - 8 + i], T - 8 + static_cast<int>(i));
      for (std::size_t i = 0; i < 5; ++i) EXPECT_EQ(h.beta[i], 0.0f);
      for (std::size_t i = 1; i < n; ++i) EXPECT_LT(h.positions[i - 1], h.positions[i]);
    }
  // The held bytes are the entries': after shrink_to_fit, (2 d + 2) * 4 bytes each.
  EXPECT_EQ(allocated_bytes(s.cache), s.cache.total_entries() * (2 * d + 2) * 4);
}

// Two compactions of a growing conversation. Proportional allocation: the stretch the first
// compaction produced (positions before its compacted_until) keeps round(keep_middle * its
// original tokens / all middle tokens) entries, the rest goes to the newer stretch (worked out by
// hand from the policy). Whole: one ratio over both, so a method that keeps the newest entries
// ("recent") keeps nothing of the old stretch. Prefix and recent window stay verbatim either way.
TEST_F(ServeTest, ProportionalAllocationKeepsEachStretchItsShare) {
  const Transformer tr(model_->config, model_->weights);
  const std::string text = std::string(kStory) + " " + kStory + " " + kStory;
  const std::vector<int> all = ids(text);
  const int n1 = static_cast<int>(all.size()) / 2;
  ASSERT_GE(n1, 60);
  for (const char* method : {"recent", "am"})
    for (Allocation allocation : {Allocation::Proportional, Allocation::Whole}) {
      SCOPED_TRACE(std::string(method) + " " + to_string(allocation));
      Session s = prefilled(tr, all, static_cast<std::size_t>(n1));
      s.protected_prefix = 5;
      CompactionPolicy p;
      p.ctx = n1;
      p.keep_recent = 8;
      p.target_ratio = 0.5;
      p.allocation = allocation;
      p.method = parse_method_spec(method);
      check_policy(p);
      ASSERT_TRUE(compact_session(tr, *model_->tokenizer, p, s));
      const int c1 = s.compacted_until;
      ASSERT_EQ(c1, n1 - 8);
      // The rest of the conversation arrives: fed over the compacted cache at its own positions.
      ForwardOptions fo;
      fo.logits = LogitsMode::None;
      tr.forward(std::span<const int>(all.data() + n1, all.size() - static_cast<std::size_t>(n1)), s.cache, fo);
      s.tokens = all;
      const int longest = static_cast<int>(s.cache.longest_global_length());
      const int old_entries = p.target_entries() - 5 - 8;  // the first compaction's middle
      const int middle = longest - 5 - 8, new_entries = middle - old_entries;
      ASSERT_GT(new_entries, 2);
      ASSERT_TRUE(compact_session(tr, *model_->tokenizer, p, s));
      const int keep_middle = p.target_entries() - 5 - 8;
      const int T = static_cast<int>(all.size());
      const int want_old = static_cast<int>(
          std::lround(keep_middle * static_cast<double>(c1 - 5) / ((c1 - 5) + new_entries)));
      for (int l = 0; l < s.cache.n_layers(); ++l)
        for (int g = 0; g < s.cache.n_kv_heads(); ++g) {
          const HeadCache& h = s.cache.head(l, g);
          ASSERT_LE(h.length(), static_cast<std::size_t>(p.target_entries()));
          for (int i = 0; i < 5; ++i) EXPECT_EQ(h.positions[static_cast<std::size_t>(i)], i);
          for (int i = 0; i < 8; ++i) EXPECT_EQ(h.positions[h.length() - 8 + static_cast<std::size_t>(i)], T - 8 + i);
          int old_kept = 0;
          for (std::size_t i = 5; i < h.length(); ++i) old_kept += h.positions[i] < c1;
          if (allocation == Allocation::Proportional) {
            EXPECT_EQ(old_kept, want_old) << l << "," << g;
            EXPECT_EQ(static_cast<int>(h.length()), 5 + keep_middle + 8) << l << "," << g;
          } else if (std::string(method) == "recent") {
            EXPECT_EQ(old_kept, 0) << l << "," << g;
          }
          for (std::size_t i = 1; i < h.length(); ++i) EXPECT_LT(h.positions[i - 1], h.positions[i]);
        }
      EXPECT_EQ(s.compacted_until, T - 8);
      EXPECT_EQ(s.compactions, 2);
    }
  EXPECT_EQ(parse_allocation("whole"), Allocation::Whole);
  EXPECT_THROW(parse_allocation("half"), Error);
}

// SnapKV mid-conversation: the recent tokens' queries (fed again) are its observation window; it
// keeps the prefix and the recent window and selects the rest by their votes.
TEST_F(ServeTest, SnapKvVotesWithTheRecentTokens) {
  const Transformer tr(model_->config, model_->weights);
  Session s = prefilled(tr, ids(kStory));
  const KVCache full = s.cache;
  const int T = static_cast<int>(s.tokens.size());
  s.protected_prefix = 4;
  CompactionPolicy p;
  p.ctx = T;
  p.keep_recent = 8;
  p.method = parse_method_spec("snapkv:window=4");
  EXPECT_THROW(check_policy(p), Error);  // the window must be the recent tokens
  p.method = parse_method_spec("snapkv:window=8");
  check_policy(p);
  CompactionReport r;
  ASSERT_TRUE(compact_session(tr, *model_->tokenizer, p, s, &r));
  EXPECT_LE(r.longest_after, static_cast<std::size_t>(p.target_entries()));
  EXPECT_EQ(s.cache.next_position, T);
  const std::size_t d = static_cast<std::size_t>(full.head_dim());
  for (int l = 0; l < full.n_layers(); ++l)
    for (int g = 0; g < full.n_kv_heads(); ++g) {
      const HeadCache &f = full.head(l, g), &h = s.cache.head(l, g);
      const std::size_t n = h.length();
      ASSERT_GT(n, 12u);
      EXPECT_TRUE(std::equal(f.keys.begin(), f.keys.begin() + 4 * d, h.keys.begin()));
      for (std::size_t i = 0; i < 8; ++i) EXPECT_EQ(h.positions[n - 8 + i], T - 8 + static_cast<int>(i));
      for (std::size_t i = 0; i < 8 * d; ++i)  // fed again in one forward: equal up to summation order
        EXPECT_NEAR(h.keys[(n - 8) * d + i], f.keys[(static_cast<std::size_t>(T) - 8) * d + i], 1e-4);
      for (float b : h.beta) EXPECT_EQ(b, 0.0f);  // a selection: no bias
      for (std::size_t i = 1; i < n; ++i) EXPECT_LT(h.positions[i - 1], h.positions[i]);
    }
}

TEST_F(ServeTest, PolicyChecksNameTheOption) {
  CompactionPolicy p;
  p.ctx = 8;
  EXPECT_THROW(check_policy(p), Error);
  p.ctx = 1024;
  p.keep_recent = 600;  // past the 512-entry target
  EXPECT_THROW(check_policy(p), Error);
  p.keep_recent = 64;
  p.method = parse_method_spec("snapkv");
  EXPECT_THROW(check_policy(p), Error);
  p.method = parse_method_spec("am");
  p.target_ratio = 1.0;
  EXPECT_THROW(check_policy(p), Error);
}

// The store hands out the session whose history the prompt extends the furthest, rolled back to
// the agreed prefix; a session the prompt leaves early (another branch) stays untouched.
TEST_F(ServeTest, StoreReusesTheLongestExtendedSession) {
  const Transformer tr(model_->config, model_->weights);
  SessionStore store(*model_, 1, "");
  const std::vector<int> all = ids(kStory);
  auto make = [&](std::size_t n) {
    auto s = std::make_unique<Session>(prefilled(tr, all, n));
    s->id = store.new_id();
    return s;
  };
  store.put(make(10));
  store.put(make(30));
  std::vector<int> other = all;
  other[3] = other[3] == 100 ? 101 : 100;  // diverges at token 3 from both
  Checkout none = store.take(other, 4);
  EXPECT_EQ(none.reused, 0);
  EXPECT_TRUE(none.session->tokens.empty());
  Checkout c = store.take(std::span<const int>(all.data(), 40), 4);
  EXPECT_EQ(c.reused, 30);
  EXPECT_EQ(c.session->tokens.size(), 30u);
  // The prompt that equals a history exactly reuses all but its last token (one is fed).
  Checkout d = store.take(std::span<const int>(all.data(), 10), 4);
  EXPECT_EQ(d.reused, 9);
  EXPECT_EQ(d.session->cache.next_position, 9);
  EXPECT_EQ(d.session->cache.longest_global_length(), 9u);
}

// A prompt that shares only the protected prefix (template + system prompt) and a little more
// with an idle session is another conversation: it gets a new session, and the idle one keeps its
// history. A prompt that shares most of the conversation (a regenerated last answer) rolls it back.
TEST_F(ServeTest, StoreDoesNotHandAConversationToAnotherThatSharesOnlyTheSystemPrompt) {
  const Transformer tr(model_->config, model_->weights);
  SessionStore store(*model_, 1, "");
  const std::vector<int> all = ids(kStory);
  ASSERT_GE(all.size(), 30u);
  auto s = std::make_unique<Session>(prefilled(tr, all, 20));
  s->id = "mine";
  s->protected_prefix = 8;
  store.put(std::move(s));
  std::vector<int> other(all.begin(), all.begin() + 30);
  other[10] = other[10] == 100 ? 101 : 100;  // agrees on 10 tokens: 2 past the protected prefix
  Checkout fresh = store.take(other, 16);
  EXPECT_EQ(fresh.reused, 0);
  EXPECT_NE(fresh.session->id, "mine");
  store.put(std::move(fresh.session));
  std::vector<int> regen(all.begin(), all.begin() + 30);
  regen[17] = regen[17] == 100 ? 101 : 100;  // agrees on 17 of the 20
  Checkout c = store.take(regen, 16);
  EXPECT_EQ(c.session->id, "mine");
  EXPECT_EQ(c.reused, 17);
  EXPECT_EQ(c.session->cache.next_position, 17);
}

TEST_F(ServeTest, SaveRestoreIsBitExactAndNamesStayInTheFolder) {
  const Transformer tr(model_->config, model_->weights);
  const std::string dir = std::string(KVC_TEST_TMP) + "/serve_store_" + std::to_string(static_cast<long>(getpid()));
  std::filesystem::remove_all(dir);
  Session s;
  {
    SessionStore store(*model_, 7, dir);
    s.id = store.new_id();
    s.tokens = ids(kStory);
    s.cache = tr.make_cache();
    s.last_logits = tr.forward(s.tokens, s.cache);
    s.protected_prefix = 3;
    CompactionPolicy p;
    p.ctx = static_cast<int>(s.tokens.size());
    p.keep_recent = 4;
    ASSERT_TRUE(compact_session(tr, *model_->tokenizer, p, s));
    store.save(s, s.id);
    for (const char* bad : {"../x", ".hidden", "a/b", "", "x y"}) EXPECT_THROW(store.save(s, bad), Error) << bad;
  }
  SessionStore again(*model_, 7, dir);  // as after a restart
  auto list = again.list();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_FALSE(list[0].in_memory);
  std::vector<int> prompt = s.tokens;
  prompt.push_back(5);
  Checkout c = again.take(prompt, 4);
  ASSERT_EQ(c.reused, static_cast<int>(s.tokens.size()));
  EXPECT_EQ(c.session->tokens, s.tokens);
  EXPECT_EQ(c.session->compactions, 1);
  EXPECT_EQ(c.session->compacted_until, s.compacted_until);
  EXPECT_EQ(c.session->protected_prefix, 3);
  expect_same_cache(s.cache, c.session->cache);
  // A model with another fingerprint does not see the file.
  SessionStore other(*model_, 8, dir);
  EXPECT_TRUE(other.list().empty());
  std::filesystem::remove_all(dir);
}

/// Runs one request through the engine and collects its text and Done event.
GenerationEvent run(Engine& e, GenerationRequest r, std::string* text) {
  auto t = e.submit(std::move(r));
  for (;;) {
    auto ev = t->next(60000);
    if (!ev) throw Error("engine: no event in 60 s");
    if (ev->kind == GenerationEvent::Kind::Text) *text += ev->text;
    else return *ev;
  }
}

// Greedy answers equal generate()'s on the same prompt (generate() stops on BOS / EOS only, so
// the engine's extra end-of-turn tokens do not occur in stories260K's vocabulary).
TEST_F(ServeTest, EngineGreedyEqualsGenerate) {
  const Transformer tr(model_->config, model_->weights);
  EngineOptions eo;
  eo.policy.ctx = 512;
  eo.policy.keep_recent = 32;
  Engine engine(*model_, eo);
  for (const char* prompt : {"Once upon a time", "Lily and Ben went to the park"}) {
    Sampler greedy(model_->tokenizer->vocab_size(), 0.0f, 1.0f, 1);
    const GenerationResult g = generate(tr, *model_->tokenizer, prompt, 60, greedy);
    GenerationRequest r;
    r.prompt = model_->tokenizer->encode(prompt, true);
    r.max_tokens = 60 - static_cast<int>(r.prompt.size()) + 1;
    r.temperature = 0;
    std::string text;
    const GenerationEvent done = run(engine, r, &text);
    ASSERT_EQ(done.kind, GenerationEvent::Kind::Done) << done.message;
    const std::vector<int>& want = g.generated;  // the sampled tokens (the prompt is not among them)
    EXPECT_EQ(done.tokens, want) << prompt;
    EXPECT_EQ(text, model_->tokenizer->decode(want));
  }
}

// Three conversations at once (batched decode) answer what each answers alone, and turn 2 of a
// conversation prefills only its new tokens; a long conversation compacts and stays within --ctx.
TEST_F(ServeTest, EngineBatchesSessionsAndCompactsLongConversations) {
  EngineOptions eo;
  eo.policy.ctx = 96;
  eo.policy.keep_recent = 16;
  eo.policy.target_ratio = 0.5;
  eo.slots = 3;
  const char* starts[] = {"Once upon a time", "Tom had a big dog", "The sun was hot"};
  auto turn = [&](Engine& e, std::vector<int>& history, const std::string& user, std::string* text) {
    std::vector<int> add = model_->tokenizer->encode(user, false);
    history.insert(history.end(), add.begin(), add.end());
    GenerationRequest r;
    r.prompt = history;
    r.max_tokens = 12;
    r.temperature = 0;
    GenerationEvent d = run(e, r, text);
    if (d.kind == GenerationEvent::Kind::Done) history.insert(history.end(), d.tokens.begin(), d.tokens.end());
    return d;
  };
  std::vector<std::vector<int>> alone_tokens;
  {
    Engine e(*model_, eo);
    for (const char* s : starts) {
      std::vector<int> h = model_->tokenizer->encode(s, true);
      std::string text;
      GenerationEvent d1 = turn(e, h, " and then", &text);
      ASSERT_EQ(d1.kind, GenerationEvent::Kind::Done) << d1.message;
      GenerationEvent d2 = turn(e, h, " Later,", &text);
      ASSERT_EQ(d2.kind, GenerationEvent::Kind::Done) << d2.message;
      EXPECT_EQ(d2.kv.prefilled_tokens, static_cast<int>(d2.prompt_tokens) - d2.kv.reused_tokens);
      EXPECT_EQ(d2.kv.reused_tokens, d1.prompt_tokens + d1.completion_tokens - (d1.finish_reason == "length" ? 1 : 0));
      alone_tokens.push_back(d1.tokens);
    }
  }
  {
    Engine e(*model_, eo);
    std::vector<std::shared_ptr<Ticket>> tickets;
    for (const char* s : starts) {
      GenerationRequest r;
      r.prompt = model_->tokenizer->encode(std::string(s), true);
      std::vector<int> add = model_->tokenizer->encode(" and then", false);
      r.prompt.insert(r.prompt.end(), add.begin(), add.end());
      r.max_tokens = 12;
      r.temperature = 0;
      tickets.push_back(e.submit(r));
    }
    for (std::size_t i = 0; i < tickets.size(); ++i) {
      for (;;) {
        auto ev = tickets[i]->next(60000);
        ASSERT_TRUE(ev.has_value());
        if (ev->kind != GenerationEvent::Kind::Text) {
          EXPECT_EQ(ev->kind, GenerationEvent::Kind::Done) << ev->message;
          EXPECT_EQ(ev->tokens, alone_tokens[i]) << starts[i];
          break;
        }
      }
    }
    EXPECT_GT(e.metrics().decode_steps, 0u);
  }
  // Long conversation: 12 turns of ~25 tokens on --ctx 96: compacted, never past the limit.
  Engine e(*model_, eo);
  std::vector<int> h = model_->tokenizer->encode("Once upon a time", true);
  int compactions = 0;
  for (int i = 0; i < 12; ++i) {
    std::string text;
    GenerationEvent d = turn(e, h, " Then the girl went to the park with her mom.", &text);
    ASSERT_EQ(d.kind, GenerationEvent::Kind::Done) << d.message;
    EXPECT_LE(d.kv.longest_head, 96u);
    EXPECT_EQ(d.kv.original_tokens, h.size() - (d.finish_reason == "length" ? 1 : 0));
    EXPECT_EQ(d.kv.cache_bytes, d.kv.cache_entries * (2 * static_cast<std::size_t>(model_->config.head_dim) + 2) * 4);
    compactions = d.kv.compactions;
  }
  EXPECT_GE(compactions, 2);
  EXPECT_GT(h.size(), 3 * 96u);
  // One new message longer than --ctx is refused with 400 naming both numbers.
  std::vector<int> big = h;
  for (int i = 0; i < 120; ++i) big.push_back(big[1 + i % 10]);
  GenerationRequest r;
  r.prompt = big;
  r.max_tokens = 4;
  std::string text;
  GenerationEvent d = run(e, r, &text);
  ASSERT_EQ(d.kind, GenerationEvent::Kind::Failed);
  EXPECT_EQ(d.status, 400);
  EXPECT_NE(d.message.find("96"), std::string::npos) << d.message;
}

// --kv-budget: a second conversation evicts the least recently used idle one, which is saved
// first and read back from its file when its conversation goes on (its cache reused, not prefilled).
TEST_F(ServeTest, BudgetEvictsLeastRecentlyUsedAndTheSavedSessionComesBack) {
  const std::string dir = std::string(KVC_TEST_TMP) + "/serve_budget_" + std::to_string(static_cast<long>(getpid()));
  std::filesystem::remove_all(dir);
  EngineOptions eo;
  eo.policy.ctx = 256;
  eo.policy.keep_recent = 16;
  eo.save_dir = dir;
  // One session of ~40 tokens: 5 layers x 4 heads x 40 entries x (2 x 8 + 2) x 4 bytes = 57,600 bytes.
  eo.kv_budget_bytes = 80000;
  Engine e(*model_, eo);
  auto ask = [&](const std::vector<int>& prompt) {
    GenerationRequest r;
    r.prompt = prompt;
    r.max_tokens = 8;
    r.temperature = 0;
    std::string text;
    GenerationEvent d = run(e, r, &text);
    EXPECT_EQ(d.kind, GenerationEvent::Kind::Done) << d.message;
    return d;
  };
  std::vector<int> a = ids("Once upon a time, there was a little girl named Lily. She loved to play outside.");
  const GenerationEvent a1 = ask(a);
  std::vector<int> b = ids("Tom had a big red ball. He liked to kick it in the park with his dog.");
  ask(b);
  EXPECT_GE(e.metrics().evictions, 1u);
  EXPECT_LE(e.metrics().kv_bytes, eo.kv_budget_bytes);
  // Conversation a goes on: its session is read back from the save folder.
  a.insert(a.end(), a1.tokens.begin(), a1.tokens.end());
  std::vector<int> more = model_->tokenizer->encode(" Then", false);
  a.insert(a.end(), more.begin(), more.end());
  const GenerationEvent a2 = ask(a);
  EXPECT_EQ(a2.kv.session, a1.kv.session);
  EXPECT_GE(a2.kv.reused_tokens, static_cast<int>(a1.kv.original_tokens));
  e.stop();
  std::filesystem::remove_all(dir);
}

}}  // namespace
}  // namespace kvcompact::serve
