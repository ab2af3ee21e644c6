#include "studies/qa_eval.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>

#include "budgets/budget_solver.h"
#include "metrics/continuation_nll.h"
#include "metrics/mean_sem.h"
#include "compaction/head_compaction.h"
#include "io/atomic_file.h"
#include "compaction/on_policy.h"
#include "core/error.h"
#include "core/log.h"
#include "io/json_number.h"
#include "io/text_documents.h"
#include "model/generate_from_cache.h"
#include "core/model_fingerprint.h"
#include "model/sampler.h"
#include "model/transformer.h"

namespace kvcompact {
namespace {

std::string fill_template(const std::string& tmpl, const std::string& question) {
  const std::size_t at = tmpl.find("{question}");
  if (at == std::string::npos) return tmpl + question;
  return tmpl.substr(0, at) + question + tmpl.substr(at + 10);
}

/// The cache after context + prompt, and the logits predicting the first token after the prompt.
struct PromptState {
  KVCache cache;
  std::vector<float> logits;
};

PromptState feed_prompt(const Transformer& tr, const KVCache& cache, std::span<const float> last_logits,
                        std::span<const int> prompt) {
  PromptState s{cache, std::vector<float>(last_logits.begin(), last_logits.end())};
  if (!prompt.empty()) {
    ForwardOptions opt;
    opt.logits = LogitsMode::Last;
    s.logits = tr.forward(prompt, s.cache, opt);
  }
  return s;
}

std::vector<double> option_lls(const Transformer& tr, const PromptState& s,
                               const std::vector<std::vector<int>>& option_tokens) {
  std::vector<double> ll;
  for (const auto& ot : option_tokens) ll.push_back(-continuation_nll(tr, s.cache, s.logits, ot).total_nll);
  return ll;
}

std::vector<std::vector<int>> encode_options(const Tokenizer& tok, const std::vector<std::string>& options) {
  std::vector<std::vector<int>> out;
  for (std::size_t i = 0; i < options.size(); ++i) {
    out.push_back(tok.encode(options[i], /*add_bos=*/false));
    if (out.back().empty())
      throw Error(fmt::format("option {} ({}) encodes to no tokens", i + 1, nlohmann::json(options[i]).dump()));
  }
  return out;
}

std::string answer_key(const std::string& article, const std::string& prompt, int max_tokens,
                       std::size_t context_tokens) {
  uint64_t h = fnv1a64(article.data(), article.size());
  const char sep = 0;
  h = fnv1a64(&sep, 1, h);
  h = fnv1a64(prompt.data(), prompt.size(), h);
  h = fnv1a64(&sep, 1, h);
  const int32_t m[2] = {max_tokens, static_cast<int32_t>(context_tokens)};
  h = fnv1a64(m, sizeof m, h);
  return fmt::format("{:016x}", h);
}

struct RowAcc {
  std::vector<double> nll, delta;
  int correct = 0;
  double entries = 0, bytes = 0;
};

}  // namespace

QaAnswerStore::QaAnswerStore(const std::string& dir, uint64_t fingerprint, int vocab) : vocab_(vocab) {
  if (dir.empty()) return;
  path_ = (std::filesystem::path(dir) / fmt::format("qa_answers_{:016x}.json", fingerprint)).string();
  fp_ = fingerprint_hex(fingerprint);
  std::error_code ec;
  if (!std::filesystem::exists(path_, ec)) return;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_text_file(path_));
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}: invalid JSON in the answers cache ({})", path_, e.what()));
  }
  if (!j.is_object() || j.value("model_fingerprint", "") != fp_ || !j.contains("answers") ||
      !j["answers"].is_object())
    throw Error(fmt::format("{}: not an answers cache for model fingerprint {}", path_, fp_));
  for (const auto& [key, v] : j["answers"].items()) {
    QaReferenceAnswer a;
    try {
      a.tokens = json_int_list(v.at("tokens"), path_, "answers." + key + ".tokens");
      a.text = v.at("text").get<std::string>();
    } catch (const nlohmann::json::exception&) {
      throw Error(fmt::format("{}: answer {} lacks 'tokens' or 'text'", path_, key));
    }
    if (a.tokens.empty()) throw Error(fmt::format("{}: answer {} has no tokens", path_, key));
    for (int t : a.tokens)
      if (t < 0 || t >= vocab_)
        throw Error(fmt::format("{}: answer {} has token id {} outside the vocabulary of {}", path_, key, t, vocab_));
    answers_[key] = std::move(a);
  }
}

const QaReferenceAnswer* QaAnswerStore::find(const std::string& key) const {
  auto it = answers_.find(key);
  return it == answers_.end() ? nullptr : &it->second;
}

void QaAnswerStore::put(const std::string& key, const QaReferenceAnswer& a) {
  answers_[key] = a;
  dirty_ = true;
}

void QaAnswerStore::save() {
  if (path_.empty() || !dirty_) return;
  nlohmann::json j;
  j["model_fingerprint"] = fp_;
  j["answers"] = nlohmann::json::object();
  for (const auto& [k, a] : answers_) j["answers"][k] = {{"tokens", a.tokens}, {"text", a.text}};
  write_file_atomic(path_, j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  dirty_ = false;
}

QaReferenceAnswer make_reference_answer(const Transformer& tr, const Tokenizer& tok, const KVCache& full_cache,
                                        std::span<const float> last_logits, int last_token,
                                        const std::string& prompt, int max_answer_tokens) {
  KVCache c = full_cache;
  Sampler greedy(tok.vocab_size(), 0.0f, 1.0f, 1);
  ContinueOptions copt;
  copt.max_new_tokens = max_answer_tokens;
  copt.stop_at_newline = true;
  int stop = -1;
  GenerationResult g = generate_from_cache(tr, tok, c, last_logits, last_token, prompt, greedy, copt, {}, &stop);
  QaReferenceAnswer ref;
  ref.tokens = g.generated;
  if (stop >= 0) ref.tokens.push_back(stop);
  ref.text = tok.decode(g.generated);
  return ref;
}

std::shared_ptr<const ChatTemplate> find_chat_template(const std::string& model_path,
                                                       const std::string& tokenizer_path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (model_path.ends_with(".gguf") && tokenizer_path.empty())
    return std::make_shared<const ChatTemplate>(load_gguf_chat_template(model_path));
  std::vector<fs::path> folders;
  if (fs::is_directory(model_path, ec)) folders.push_back(model_path);
  if (!tokenizer_path.empty()) {
    const fs::path t(tokenizer_path);
    folders.push_back(fs::is_directory(t, ec) ? t : t.parent_path());
  }
  for (const auto& d : folders) {
    if (fs::is_regular_file(d / "chat_template.jinja", ec) || fs::is_regular_file(d / "tokenizer_config.json", ec))
      return std::make_shared<const ChatTemplate>(load_chat_template(d.string()));
  }
  if (model_path.ends_with(".gguf")) return std::make_shared<const ChatTemplate>(load_gguf_chat_template(model_path));
  throw Error(fmt::format("{}: --chat: the model has no chat template (needs a GGUF model with tokenizer.chat_template, "
                          "or a tokenizer_config.json with chat_template or a chat_template.jinja in a Hugging Face "
                          "checkpoint folder or beside --tokenizer tokenizer.json)",
                          model_path));
}

std::string chat_wrap_prompt(const ChatTemplate& chat, const std::string& prompt) {
  return render_chat(chat, {ChatMessage{"user", prompt}}, /*add_generation_prompt=*/true);
}

QaArticleTokens tokenize_qa_article(const Model& model, const QaArticle& art, const QaEvalOptions& options) {
  const Tokenizer& tok = *model.tokenizer;
  const std::string& tmpl = art.prompt_template.empty() ? options.prompt_template : art.prompt_template;
  QaArticleTokens t;
  t.context_text = art.article;
  // Encode prompts and options first: they set the room the context must leave.
  int room = 0;
  for (std::size_t q = 0; q < art.questions.size(); ++q) {
    std::string prompt = fill_template(tmpl, art.questions[q].question);
    if (options.chat) {
      // Markers (control bytes absent from articles) find where the article ends in the rendering.
      const std::string a_mark = "\x02", q_mark = "\x03";
      const std::string r = render_chat(*options.chat, {ChatMessage{"user", a_mark + art.article + q_mark + prompt}},
                                        /*add_generation_prompt=*/true);
      const std::size_t qa = r.find(q_mark), am = r.find(a_mark);
      if (qa == std::string::npos || am == std::string::npos || am > qa)
        throw Error(fmt::format("article {} (line {}): the chat template ({}) does not render the user message verbatim",
                                art.id, art.line, options.chat->path));
      std::string prefix = r.substr(0, qa);
      prefix.erase(am, 1);
      if (q == 0) t.context_text = prefix;
      else if (prefix != t.context_text)
        throw Error(fmt::format("article {} (line {}): the chat template renders the article differently per question",
                                art.id, art.line));
      prompt = r.substr(qa + 1);
    }
    t.prompts.push_back(prompt);
    t.prompt_ids.push_back(tok.encode(prompt, /*add_bos=*/false));
    try {
      t.option_ids.push_back(encode_options(tok, art.questions[q].options));
    } catch (const Error& e) {
      throw Error(fmt::format("{}:{}: article {} question {}: {}", art.file.empty() ? "(QA data)" : art.file, art.line,
                              art.id, q + 1, e.what()));
    }
    int longest = options.max_answer_tokens + 1;
    for (const auto& o : t.option_ids.back()) longest = std::max(longest, static_cast<int>(o.size()));
    room = std::max(room, static_cast<int>(t.prompt_ids.back().size()) + longest);
  }
  t.context = tok.encode(t.context_text, /*add_bos=*/!options.chat);
  int budget = options.max_context_tokens;
  if (budget == 0 && model.config.max_seq_len > 0) budget = model.config.max_seq_len - room;
  if (budget > 0 && static_cast<int>(t.context.size()) > budget) {
    if (budget < 2)
      throw Error(fmt::format("article {} (line {}): its questions need {} of the model's {} positions, "
                              "leaving no room for the context", art.id, art.line, room, model.config.max_seq_len));
    t.note = fmt::format("article {}: context truncated from {} to {} tokens (max_seq_len {}, "
                         "{} kept for question and answer)", art.id, t.context.size(), budget,
                         model.config.max_seq_len, room);
    t.context.resize(static_cast<std::size_t>(budget));
  }
  if (t.context.size() < 2)
    throw Error(fmt::format("article {} (line {}): context has fewer than 2 tokens", art.id, art.line));
  // Without chat the key is the one qa-eval has always used (article text), so old caches stay valid.
  for (const auto& p : t.prompts)
    t.answer_keys.push_back(answer_key(t.context_text, p, options.max_answer_tokens, t.context.size()));
  return t;
}

int best_option(const std::vector<double>& ll) {
  if (ll.empty()) throw Error("qa-eval: no options to choose from");
  return static_cast<int>(std::max_element(ll.begin(), ll.end()) - ll.begin());
}

std::vector<double> option_log_likelihoods(const Transformer& transformer, const Tokenizer& tokenizer,
                                           const KVCache& cache, std::span<const float> last_logits,
                                           std::span<const int> prompt_tokens,
                                           const std::vector<std::string>& options) {
  const PromptState s = feed_prompt(transformer, cache, last_logits, prompt_tokens);
  return option_lls(transformer, s, encode_options(tokenizer, options));
}

void check_qa_budgets(const Model& model, const QaEvalOptions& options) {
  const std::size_t heads = static_cast<std::size_t>(model.config.n_layers) * model.config.n_kv_heads;
  if (!options.budget_proportions.empty() && options.budget_proportions.size() != heads)
    throw Error(fmt::format("qa-eval: the budgets list {} heads, the model has {} ({} layers x {} KV heads)",
                            options.budget_proportions.size(), heads, model.config.n_layers, model.config.n_kv_heads));
  if (!(options.max_head_ratio > 0 && options.max_head_ratio <= 1))
    throw Error(fmt::format("qa-eval: max head ratio {} is outside (0, 1]", options.max_head_ratio));
}

std::vector<MethodSpec> validate_qa_eval_options(const QaEvalOptions& options) {
  if (options.methods.empty()) throw Error("qa-eval: no methods given");
  if (options.ratios.empty()) throw Error("qa-eval: no ratios given");
  if (options.max_answer_tokens < 1)
    throw Error(fmt::format("--max-answer-tokens {} must be >= 1", options.max_answer_tokens));
  if (options.max_context_tokens < 0 || options.max_context_tokens == 1)
    throw Error(fmt::format("--max-context-tokens {} must be 0 (automatic) or >= 2", options.max_context_tokens));
  for (double r : options.ratios) kept_entries(r, 1);  // validates
  std::vector<MethodSpec> methods;
  for (const auto& m : options.methods) methods.push_back(parse_method_spec(m));
  return methods;
}

QaArticleUnit evaluate_qa_article(const Model& model, const Transformer& tr, const QaArticle& art, std::size_t ai,
                                  const std::vector<MethodSpec>& methods, const QaEvalOptions& options,
                                  QaAnswerStore& store) {
  const Tokenizer& tok = *model.tokenizer;
  check_qa_budgets(model, options);
  const QaArticleTokens at = tokenize_qa_article(model, art, options);
  QaArticleUnit unit;
  unit.note = at.note;
  const std::vector<int>& ids = at.context;
  unit.context_tokens = static_cast<int>(ids.size());

  std::vector<KVCache> caches;
  caches.push_back(KVCache{});  // the full cache, set below
  std::vector<float> last_logits;  // after the context's last token
  for (std::size_t mi = 0; mi < methods.size(); ++mi) {
    QueryPlan plan;
    plan.spec = methods[mi].queries;
    plan.seed = options.seed + ai;
    const ContextPrefill prefill = collect_reference_queries(tr, tok, ids, plan);
    if (mi == 0) {
      caches[0] = prefill.cache;
      last_logits = prefill.last_logits;
    }
    for (double ratio : options.ratios) {
      CompactionOptions co;
      co.method = methods[mi];
      co.ratio = ratio;
      co.seed = options.seed + ai;
      set_rope(co, model.config);
      if (!options.budget_proportions.empty()) {
        const std::vector<int> lengths(options.budget_proportions.size(), static_cast<int>(ids.size()));
        co.head_budgets = compacted_head_budgets(options.budget_proportions, lengths, model.config.n_kv_heads,
                                                 model.config.sliding_layers(), ratio, options.max_head_ratio);
      }
      caches.push_back(compact_prefill(tr, tok, prefill, co));
    }
  }
  for (const KVCache& c : caches) {
    unit.entries.push_back(static_cast<double>(c.total_entries()));
    unit.bytes.push_back(static_cast<double>(c.bytes()));
  }

  for (std::size_t q = 0; q < art.questions.size(); ++q) {
    // (a) the reference answer, from the uncompacted model.
    const std::string& key = at.answer_keys[q];
    QaReferenceAnswer ref;
    if (const QaReferenceAnswer* hit = store.find(key)) {
      ref = *hit;
      ++unit.answers_reused;
    } else {
      ref = make_reference_answer(tr, tok, caches[0], last_logits, ids.back(), at.prompts[q], options.max_answer_tokens);
      store.put(key, ref);
      ++unit.answers_generated;
    }
    unit.answers.push_back(ref);

    std::vector<QaQuestionScore> scores;
    for (const KVCache& c : caches) {
      const PromptState s = feed_prompt(tr, c, last_logits, at.prompt_ids[q]);
      QaQuestionScore sc;
      sc.answer_nll = continuation_nll(tr, s.cache, s.logits, ref.tokens).mean_nll();
      sc.mc_choice = best_option(option_lls(tr, s, at.option_ids[q])) + 1;
      sc.mc_correct = sc.mc_choice == art.questions[q].gold_label;
      if (!std::isfinite(sc.answer_nll))
        throw Error(fmt::format("article {} question {}: non-finite answer NLL", art.id, q + 1));
      scores.push_back(sc);
    }
    unit.scores.push_back(std::move(scores));
  }
  store.save();
  return unit;
}

QaEvalResult aggregate_qa_eval(const QaEvalOptions& options, const std::vector<QaArticleUnit>& units) {
  if (units.empty()) throw Error("qa-eval: no finished articles to aggregate");
  const std::size_t n_rows = 1 + options.methods.size() * options.ratios.size();
  std::vector<RowAcc> acc(n_rows);
  QaEvalResult res;
  double context_sum = 0;
  for (const QaArticleUnit& u : units) {
    if (u.entries.size() != n_rows || u.bytes.size() != n_rows || u.answers.size() != u.scores.size())
      throw Error(fmt::format("qa-eval: an article's result holds {} rows, the options {}", u.entries.size(), n_rows));
    if (!u.note.empty()) res.notes.push_back(u.note);
    context_sum += u.context_tokens;
    res.answers_generated += u.answers_generated;
    res.answers_reused += u.answers_reused;
    for (std::size_t r = 0; r < n_rows; ++r) {
      acc[r].entries += u.entries[r];
      acc[r].bytes += u.bytes[r];
    }
    for (std::size_t q = 0; q < u.scores.size(); ++q) {
      const std::vector<QaQuestionScore>& scores = u.scores[q];
      if (scores.size() != n_rows) throw Error(fmt::format("qa-eval: a question's scores hold {} rows, not {}", scores.size(), n_rows));
      for (std::size_t r = 0; r < n_rows; ++r) {
        acc[r].nll.push_back(scores[r].answer_nll);
        acc[r].delta.push_back(scores[r].answer_nll - scores[0].answer_nll);
        acc[r].correct += scores[r].mc_correct ? 1 : 0;
      }
      res.per_question.push_back(scores);
      res.reference_answers.push_back(u.answers[q]);
      ++res.questions;
    }
  }
  res.articles = static_cast<int>(units.size());
  res.mean_context_tokens = context_sum / res.articles;
  const double A = res.articles;
  auto fill_row = [&](QaEvalRow& row, const RowAcc& a) {
    const double n = static_cast<double>(a.nll.size());
    row.questions = static_cast<int>(a.nll.size());
    if (n == 0) return;
    row.answer_nll_mean = mean_sem(a.nll).mean;
    const MeanSem delta = mean_sem(a.delta);
    row.delta_answer_nll_mean = delta.mean;
    row.delta_answer_nll_sem = delta.sem;
    row.mc_correct = a.correct;
    row.mc_accuracy = a.correct / n;
    row.kept_entries = a.entries / A;
    row.cache_bytes = a.bytes / A;
  };
  QaEvalRow full;
  full.method = "full";
  full.ratio = 1;
  fill_row(full, acc[0]);
  res.rows.push_back(full);
  std::size_t r = 1;
  for (const auto& m : options.methods) {
    for (double ratio : options.ratios) {
      QaEvalRow row;
      row.method = m;
      row.ratio = ratio;
      fill_row(row, acc[r++]);
      res.rows.push_back(row);
    }
  }
  return res;
}

QaEvalResult run_qa_eval(const Model& model, const std::vector<QaArticle>& articles,
                         const QaEvalOptions& options) {
  if (articles.empty()) throw Error("qa-eval: no articles");
  const std::vector<MethodSpec> methods = validate_qa_eval_options(options);
  const Transformer tr(model.config, model.weights);
  QaAnswerStore store(options.answers_cache_dir, model_fingerprint(model.config, model.weights),
                      model.config.vocab_size);
  std::vector<QaArticleUnit> units;
  const auto t0 = std::chrono::steady_clock::now();
  for (std::size_t ai = 0; ai < articles.size(); ++ai) {
    units.push_back(evaluate_qa_article(model, tr, articles[ai], ai, methods, options, store));
    if (options.progress)
      log_line(fmt::format("qa-eval: article {}/{} ({} context tokens, {} questions), {:.1f} s", ai + 1,
                           articles.size(), units.back().context_tokens, articles[ai].questions.size(),
                           std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()));
  }
  return aggregate_qa_eval(options, units);
}

}  // namespace kvcompact
