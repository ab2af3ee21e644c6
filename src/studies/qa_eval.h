// QA evaluation of compacted KV caches on long documents (QuALITY-format JSONL).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "compaction/attention_matching.h"
#include "compaction/compact_cache.h"
#include "io/chat_template.h"
#include "io/qa_dataset.h"
#include "model/model.h"
#include "model/transformer.h"

namespace kvcompact {

/// Default question prompt (fed without BOS right after the article); "{question}" is replaced.
inline constexpr const char* kDefaultQaPrompt = "\n\nQuestion: {question}\nAnswer:";

/// Options of a QA evaluation.
struct QaEvalOptions {
  std::vector<std::string> methods{"am"};       ///< compaction method names (compact_cache.h)
  std::vector<double> ratios{0.1, 0.2, 0.5};    ///< keep ratios in [0, 1]
  int max_answer_tokens = 32;                   ///< reference answer length cap (tokens, >= 1)
  std::string answers_cache_dir;                ///< where reference answers are cached ("" = none)
  std::string prompt_template = kDefaultQaPrompt;  ///< used unless an article carries its own
  int max_context_tokens = 0;  ///< context cap incl. BOS; 0 = max_seq_len minus question room
  uint64_t seed = 0;           ///< seed of the `random` baseline (+ article index)
  AttentionMatchingOptions am;
  /// Per-head budget proportions [n_layers * n_kv_heads] (budget_solver.h); empty = every head at
  /// the ratio. When set, each ratio is the total ratio: the compacted heads share
  /// round(ratio * sum T_h) keys by these proportions (compacted_head_budgets).
  std::vector<double> budget_proportions;
  /// With budget_proportions: no head keeps more than max(1, floor(max_head_ratio * T)) keys, the
  /// excess water-filled over the others; in (0, 1].
  double max_head_ratio = 1.0;
  /// What the budgets came from, for reports ("pyramid (beta 20)", "FILE (schedule optimized)").
  std::string budgets_source;
  /// With a chat template (--chat): article + question prompt form one user message rendered with
  /// the generation prompt; the rendered text up to the article's end is the context, the rest the
  /// prompt (see tokenize_qa_article). nullptr: plain article + prompt.
  std::shared_ptr<const ChatTemplate> chat;
  bool progress = true;        ///< one line per article on stderr
};

/// Per-question outcome for one cache (full or compacted).
struct QaQuestionScore {
  double answer_nll = 0;   ///< mean NLL of the reference-answer tokens, nats/token
  int mc_choice = 0;       ///< 1-based option with the highest total log-likelihood
  bool mc_correct = false;
};

/// One row: a method and ratio ("full", 1 for the uncompacted cache), aggregated over questions.
struct QaEvalRow {
  std::string method;
  double ratio = 1;
  int questions = 0;
  double answer_nll_mean = 0;       ///< nats/token, mean over questions
  double delta_answer_nll_mean = 0; ///< mean over questions of answer_nll - answer_nll(full)
  double delta_answer_nll_sem = 0;  ///< its standard error (sample sd / sqrt(n); 0 for n = 1)
  double mc_accuracy = 0;           ///< fraction of questions whose choice == gold_label
  int mc_correct = 0;
  double kept_entries = 0;          ///< mean over articles, summed over heads
  double cache_bytes = 0;           ///< mean over articles (KVCache::bytes)
};

/// A reference answer: greedy tokens from the uncompacted model.
struct QaReferenceAnswer {
  std::vector<int> tokens;  ///< scored tokens: generated ids, then the stop token (newline/EOS) if any
  std::string text;         ///< decoded generated text (stop token excluded)
};

/// The evaluation's result.
struct QaEvalResult {
  std::vector<QaEvalRow> rows;  ///< "full" first, then methods x ratios in the order given
  int articles = 0, questions = 0;
  int answers_generated = 0, answers_reused = 0;  ///< reference answers made now / read from cache
  double mean_context_tokens = 0;
  std::vector<std::string> notes;  ///< e.g. "article X: truncated from N to M tokens"
  /// Per question (article-major), per row: the scores (same row order as `rows`).
  std::vector<std::vector<QaQuestionScore>> per_question;
  std::vector<QaReferenceAnswer> reference_answers;  ///< per question
};

/// An article as token ids, the way run_qa_eval feeds it.
struct QaArticleTokens {
  std::string context_text;                  ///< text of the context (the article, or the rendered chat prefix)
  std::vector<int> context;                  ///< context ids (BOS first unless chat), truncated to the budget
  std::vector<std::string> prompts;          ///< per question: text fed after the context (no BOS)
  std::vector<std::vector<int>> prompt_ids;  ///< per question: its ids
  std::vector<std::vector<std::vector<int>>> option_ids;  ///< per question, per option: ids (no BOS)
  std::vector<std::string> answer_keys;      ///< per question: key in the reference-answer cache
  std::string note;                          ///< non-empty when the context was truncated
};

/// Tokenizes an article and its questions. Without chat: context = article encoded with BOS,
/// prompt = the template with {question} replaced, encoded without BOS. With options.chat: the
/// user message article + prompt is rendered (add_generation_prompt); the rendered text before the
/// prompt part is the context (encoded without BOS: templates write their own BOS token), the rest
/// (prompt, end of turn, assistant header) the prompt. The context is cut to
/// options.max_context_tokens, or when 0 to max_seq_len minus the room the longest question needs
/// (prompt + max(answer cap + 1, longest option)); `note` says so. Throws Error naming the
/// article (id and line) for an option without tokens, no room left, or a context under 2 tokens.
QaArticleTokens tokenize_qa_article(const Model& model, const QaArticle& article, const QaEvalOptions& options);

/// The on-disk reference-answer cache <dir>/qa_answers_<fingerprint>.json: {"model_fingerprint",
/// "answers": {key: {"tokens": [...], "text": ...}}}. An empty dir keeps answers in memory only.
class QaAnswerStore {
 public:
  /// Reads the file when it exists. Throws Error naming it when it is not JSON, belongs to another
  /// fingerprint, or holds an answer without tokens or with ids outside [0, vocab).
  QaAnswerStore(const std::string& dir, uint64_t fingerprint, int vocab);
  const QaReferenceAnswer* find(const std::string& key) const;
  void put(const std::string& key, const QaReferenceAnswer& answer);
  /// Writes the file atomically when anything was added since the last save.
  void save();

 private:
  int vocab_;
  std::string path_, fp_;
  bool dirty_ = false;
  std::map<std::string, QaReferenceAnswer> answers_;
};

/// The reference answer of one question: greedy continuation of context + prompt over the full
/// context cache (next_position = context length; `last_logits` after the context's last token
/// `last_token`), up to max_answer_tokens, stopping at a newline or EOS (the stop token is the
/// last scored token).
QaReferenceAnswer make_reference_answer(const Transformer& transformer, const Tokenizer& tokenizer,
                                        const KVCache& full_cache, std::span<const float> last_logits,
                                        int last_token, const std::string& prompt, int max_answer_tokens);

/// Finds the chat template of a model: chat_template.jinja or tokenizer_config.json in the model
/// folder (HF checkpoint) or beside the tokenizer.json given as tokenizer_path (or in that
/// folder); for a .gguf model its tokenizer.chat_template metadata (a --tokenizer folder with a
/// template wins). Throws Error naming the model when there is none (llama2.c models).
std::shared_ptr<const ChatTemplate> find_chat_template(const std::string& model_path,
                                                       const std::string& tokenizer_path);

/// Wraps a prompt as one user message and renders it with the generation prompt (chat mode of
/// `generate`). Throws Error from the template.
std::string chat_wrap_prompt(const ChatTemplate& chat, const std::string& prompt);

/// Total log-likelihood (nats, <= 0) of each option [options.size()] after the cache's context
/// and `prompt_tokens` (no BOS), each option encoded without BOS. Pure function of its inputs.
std::vector<double> option_log_likelihoods(const Transformer& transformer, const Tokenizer& tokenizer,
                                           const KVCache& cache, std::span<const float> last_logits,
                                           std::span<const int> prompt_tokens,
                                           const std::vector<std::string>& options);

/// Index (0-based) of the largest value; the first one on ties. Throws Error when empty.
int best_option(const std::vector<double>& log_likelihoods);

/// One article's evaluation: the work unit of a sharded qa-eval (rows: "full", then methods x
/// ratios, methods outer).
struct QaArticleUnit {
  int context_tokens = 0;                          ///< after truncation
  std::string note;                                ///< truncation note, or ""
  std::vector<double> entries, bytes;              ///< [rows]: kept entries, KVCache::bytes
  std::vector<std::vector<QaQuestionScore>> scores;  ///< [questions][rows]
  std::vector<QaReferenceAnswer> answers;          ///< [questions]
  int answers_generated = 0, answers_reused = 0;
};

/// Checks the per-head budgets against the model: proportions for n_layers * n_kv_heads heads (or
/// none) and max_head_ratio in (0, 1]. Throws Error naming the mismatch.
void check_qa_budgets(const Model& model, const QaEvalOptions& options);

/// Checks the options (throws Error as run_qa_eval) and returns the parsed methods.
std::vector<MethodSpec> validate_qa_eval_options(const QaEvalOptions& options);

/// Evaluates article `article_index` (0-based; seeds the random baseline) as run_qa_eval does,
/// taking and putting reference answers in `store` (saved at the end). Throws as run_qa_eval.
QaArticleUnit evaluate_qa_article(const Model& model, const Transformer& transformer, const QaArticle& article,
                                  std::size_t article_index, const std::vector<MethodSpec>& methods,
                                  const QaEvalOptions& options, QaAnswerStore& store);

/// The result of run_qa_eval from its per-article units (in article order, so a sharded study
/// merges to the same numbers as one process). Throws Error when `units` is empty or a unit's rows
/// do not match the options.
QaEvalResult aggregate_qa_eval(const QaEvalOptions& options, const std::vector<QaArticleUnit>& units);

/// For each article: context = its text encoded with BOS, truncated to the budget (a note says so);
/// repeat-prefill (reference queries), then the full cache and each method x ratio compaction.
/// Per question, prompt = template with {question} replaced, encoded without BOS:
///  (a) reference answer = greedy continuation of context + prompt by the uncompacted model, up to
///      max_answer_tokens, stopping at a newline or EOS; made once and cached in
///      <answers_cache_dir>/qa_answers_<fingerprint>.json keyed by FNV-1a 64 of article text,
///      prompt, max_answer_tokens and context length (a rerun reuses it). answer_nll = mean NLL of its tokens
///      given context + prompt over each cache;
///  (b) multiple choice: the option with the highest total log-likelihood given context + prompt
///      (best_option of option_log_likelihoods) is compared with gold_label.
/// Throws Error for bad options, an unreadable answers cache, or a context under 2 tokens.
QaEvalResult run_qa_eval(const Model& model, const std::vector<QaArticle>& articles,
                         const QaEvalOptions& options);

}  // namespace kvcompact
