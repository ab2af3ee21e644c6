// Sharded qa-eval (see qa_eval_shards.h).
#include "studies/qa_eval_shards.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>

#include "core/error.h"
#include "core/log.h"
#include "core/model_fingerprint.h"
#include "io/json_number.h"

namespace kvcompact {
namespace {

using nlohmann::json;

json unit_result(const QaArticleUnit& u) {
  json answers = json::array(), scores = json::array();
  for (const QaReferenceAnswer& a : u.answers) answers.push_back({{"tokens", a.tokens}, {"text", a.text}});
  for (const auto& q : u.scores) {
    json rows = json::array();
    for (const QaQuestionScore& s : q) rows.push_back({s.answer_nll, s.mc_choice, s.mc_correct});
    scores.push_back(rows);
  }
  // Invalid UTF-8 in a decoded answer (a token cut inside a character) is written as U+FFFD.
  return {{"context_tokens", u.context_tokens},
          {"note", u.note},
          {"entries", u.entries},
          {"bytes", u.bytes},
          {"answers_generated", u.answers_generated},
          {"answers_reused", u.answers_reused},
          {"answers", answers},
          {"scores", scores}};
}


std::vector<double> whole_numbers(const json& v, const std::string& path, const char* field) {
  if (!v.is_array()) throw Error(fmt::format("{}: {}: expected a list of numbers", path, field));
  std::vector<double> out;
  for (const json& x : v) out.push_back(json_unit_number(x, path, field, true));
  return out;
}

/// A unit's result read back; throws Error naming the file when it is malformed.
QaArticleUnit parse_unit(const json& j, std::size_t n_rows, const std::string& path) {
  QaArticleUnit u;
  u.context_tokens = json_int(j.at("context_tokens"), path, "context_tokens");
  if (u.context_tokens < 2) throw Error(fmt::format("{}: context_tokens {} is under 2", path, u.context_tokens));
  u.note = j.at("note").get<std::string>();
  u.entries = whole_numbers(j.at("entries"), path, "entries");
  u.bytes = whole_numbers(j.at("bytes"), path, "bytes");
  u.answers_generated = json_int(j.at("answers_generated"), path, "answers_generated");
  u.answers_reused = json_int(j.at("answers_reused"), path, "answers_reused");
  if (u.entries.size() != n_rows || u.bytes.size() != n_rows)
    throw Error(fmt::format("{}: entries/bytes: expected {} rows (full + methods x ratios)", path, n_rows));
  for (const json& a : j.at("answers"))
    u.answers.push_back({json_int_list(a.at("tokens"), path, "answers.tokens"), a.at("text").get<std::string>()});
  for (const json& q : j.at("scores")) {
    if (!q.is_array() || q.size() != n_rows) throw Error(fmt::format("{}: scores: expected {} rows per question", path, n_rows));
    std::vector<QaQuestionScore> rows;
    for (const json& s : q) {
      if (!s.is_array() || s.size() != 3 || !s[2].is_boolean())
        throw Error(fmt::format("{}: scores: expected [answer_nll, mc_choice, mc_correct]", path));
      const int choice = json_int(s[1], path, "scores (mc_choice)");
      if (choice < 1) throw Error(fmt::format("{}: scores: mc_choice {} is not an option (1-based)", path, choice));
      rows.push_back({json_unit_number(s[0], path, "scores (answer_nll)"), choice, s[2].get<bool>()});
    }
    u.scores.push_back(std::move(rows));
  }
  if (u.answers.size() != u.scores.size())
    throw Error(fmt::format("{}: {} answers for {} questions", path, u.answers.size(), u.scores.size()));
  return u;
}

}  // namespace

UnitStudy make_qa_eval_study(const Model& model, const std::vector<QaArticle>& articles, const QaEvalOptions& options) {
  std::vector<std::string> methods, names, hashes;
  for (const std::string& m : options.methods) methods.push_back(to_string(parse_method_spec(m)));
  for (std::size_t a = 0; a < articles.size(); ++a) {
    names.push_back(fmt::format("article_{}", a));
    hashes.push_back(hash_hex(qa_article_to_jsonl(articles[a])));
  }
  json settings = {{"model_fingerprint", fingerprint_hex(model_fingerprint(model.config, model.weights))},
                   {"methods", methods},
                   {"ratios", options.ratios},
                   {"max_answer_tokens", options.max_answer_tokens},
                   {"prompt_template", options.prompt_template},
                   {"max_context_tokens", options.max_context_tokens},
                   {"seed", options.seed},
                   {"chat_template", options.chat ? hash_hex(options.chat->source) : std::string("none")}};
  if (!options.budget_proportions.empty()) {  // older studies (every head at the ratio): no keys
    settings["budget_proportions"] = options.budget_proportions;
    settings["max_head_ratio"] = options.max_head_ratio;
  }
  UnitStudy study = make_unit_study(study_kind("qa-eval"), settings, std::move(names), std::move(hashes));
  study.inputs = {{"model", model.path}};  // for the merged result's header (paths may differ between nodes)
  if (!options.budget_proportions.empty()) {
    study.inputs["budgets"] = options.budgets_source.empty() ? std::string("per-head proportions") : options.budgets_source;
    study.inputs["max_head_ratio"] = options.max_head_ratio;
  }
  return study;
}

UnitShardRun run_qa_eval_shard(const Model& model, const std::vector<QaArticle>& articles,
                               const QaEvalOptions& options, const std::string& dir, const ShardSpec& shard) {
  if (articles.empty()) throw Error("qa-eval: no articles");
  if (!options.answers_cache_dir.empty())
    throw Error("qa-eval --out: leave out --answers-cache (the study's units keep the reference answers, and one "
                "cache file would have every shard as a writer)");
  const std::vector<MethodSpec> methods = validate_qa_eval_options(options);
  const UnitStudy study = make_qa_eval_study(model, articles, options);
  const Transformer tr(model.config, model.weights);
  QaAnswerStore store("", model_fingerprint(model.config, model.weights), model.config.vocab_size);
  const std::size_t n_rows = 1 + methods.size() * options.ratios.size();
  const ShardSpec s = shard.active() ? shard : ShardSpec{0, 1};
  const auto t0 = std::chrono::steady_clock::now();
  auto evaluate = [&](int a) {
    const QaArticleUnit u = evaluate_qa_article(model, tr, articles[a], a, methods, options, store);
    if (options.progress)
      log_line(fmt::format("qa-eval: shard {}/{}: article {}/{} ({} context tokens, {} questions), {:.1f} s", s.index,
                           s.count, a + 1, articles.size(), u.context_tokens, articles[a].questions.size(),
                           std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()));
    return unit_result(u);
  };
  auto check = [n_rows](const json& r, int, const std::string& path) { (void)parse_unit(r, n_rows, path); };
  return run_unit_shard(dir, study, shard, evaluate, check, options.progress);
}

QaEvalMerge merge_qa_eval(const std::string& dir, bool allow_none) {
  const UnitStudyState state = read_unit_study(dir, study_kind("qa-eval"));
  QaEvalMerge out;
  out.study = state.study;
  const json& s = out.study.settings;
  try {
    out.options.methods = s.at("methods").get<std::vector<std::string>>();
    out.options.ratios = s.at("ratios").get<std::vector<double>>();
    if (s.contains("budget_proportions")) {
      out.options.budget_proportions = s.at("budget_proportions").get<std::vector<double>>();
      out.options.max_head_ratio = s.at("max_head_ratio").get<double>();
    }
  } catch (const json::exception& e) {
    throw Error(fmt::format("{}: malformed qa-eval settings ({})", dir, e.what()));
  }
  const std::size_t n_rows = 1 + out.options.methods.size() * out.options.ratios.size();
  std::vector<QaArticleUnit> units;
  for (int a = 0; a < out.study.units(); ++a) {
    const json& r = state.results[static_cast<std::size_t>(a)];
    if (r.is_null()) {
      out.missing.push_back(a);
      continue;
    }
    const std::string path = unit_study_path(dir, out.study, a);
    try {
      units.push_back(parse_unit(r, n_rows, path));
    } catch (const json::exception& e) {
      throw Error(fmt::format("{}: malformed qa-eval result ({}); delete it to have article {} evaluated again", path,
                              e.what(), a + 1));
    }
  }
  if (units.empty()) {
    if (allow_none) return out;
    throw Error(fmt::format("{}: no finished qa-eval articles to merge", dir));
  }
  out.result = aggregate_qa_eval(out.options, units);
  return out;
}

}  // namespace kvcompact
