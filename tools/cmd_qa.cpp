// `kvcompact qa-eval` (QA on long documents over compacted caches) and `kvcompact make-cloze`.
#include <fmt/format.h>

#include <string>

#include "budgets/budget_solver.h"
#include "tasks/cloze_generator.h"
#include "studies/qa_eval.h"
#include "studies/qa_eval_shards.h"
#include "cli_model.h"
#include "io/atomic_file.h"
#include "core/error.h"
#include "io/qa_dataset.h"
#include "io/text_documents.h"
#include "loaders/model_loader.h"
#include "model/model.h"
#include "report/table.h"
#include "study_reports.h"

namespace kvcompact::cli {

namespace {

// What --tokens-json writes: {"rows": [{"method", "ratio"}], "articles": [{"id", "context_ids",
// "questions": [{"prompt_ids", "option_ids", "gold_label", "answer_ids", "answer_text",
// "scores": [{"answer_nll", "mc_choice"} per row]}]}]}. The ids are tokenize_qa_article's (what
// run_qa_eval fed); answer_ids are the reference answer's scored tokens; units nats/token.
nlohmann::json qa_tokens_json(const Model& model, const std::vector<QaArticle>& articles, const QaEvalOptions& opt,
                              const QaEvalResult& r) {
  nlohmann::json out;
  out["rows"] = nlohmann::json::array();
  for (const QaEvalRow& row : r.rows) out["rows"].push_back({{"method", row.method}, {"ratio", row.ratio}});
  out["articles"] = nlohmann::json::array();
  std::size_t qi = 0;
  for (const QaArticle& art : articles) {
    const QaArticleTokens at = tokenize_qa_article(model, art, opt);
    nlohmann::json a{{"id", art.id}, {"context_ids", at.context}, {"questions", nlohmann::json::array()}};
    for (std::size_t q = 0; q < art.questions.size(); ++q, ++qi) {
      if (qi >= r.per_question.size() || qi >= r.reference_answers.size())
        throw Error("--tokens-json: the evaluation holds fewer questions than the data");
      nlohmann::json scores = nlohmann::json::array();
      for (const QaQuestionScore& sc : r.per_question[qi])
        scores.push_back({{"answer_nll", sc.answer_nll}, {"mc_choice", sc.mc_choice}});
      a["questions"].push_back({{"prompt_ids", at.prompt_ids[q]}, {"option_ids", at.option_ids[q]},
                                {"gold_label", art.questions[q].gold_label},
                                {"answer_ids", r.reference_answers[qi].tokens},
                                {"answer_text", r.reference_answers[qi].text}, {"scores", scores}});
    }
    out["articles"].push_back(std::move(a));
  }
  if (qi != r.per_question.size()) throw Error("--tokens-json: the evaluation holds more questions than the data");
  return out;
}

}  // namespace

Runner register_qa_eval(CLI::App& app, CommonOptions& common) {
  struct Opts {
    ModelOptions m;
    std::string data, ratios = "0.1,0.2,0.5", methods = "am,random,recent,attn-nofit";
    std::string answers_cache, csv, prompt_template = kDefaultQaPrompt, out_dir, shard, tokens_json, budgets;
    int max_answer_tokens = 32, max_context_tokens = 0;
    double max_head_ratio = 1.0, pyramid_beta = 20;
    unsigned long long seed = 0;
    bool chat = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand(
      "qa-eval", "multiple-choice accuracy and reference-answer NLL on long documents over compacted caches");
  add_model_options(cmd, o->m);
  cmd->add_option("--data", o->data, "QuALITY-format JSONL: one article per line with questions, options, gold_label")
      ->required();
  cmd->add_option("--ratios", o->ratios, "keep ratios r in [0, 1], comma-separated");
  cmd->add_option("--methods", o->methods, fmt::format("comma-separated method specs (`kvcompact methods`), families: {}", fmt::join(method_family_names(), ", ")));
  cmd->add_option("--answers-cache", o->answers_cache,
                  "folder for the reference answers of the uncompacted model (reused on rerun)");
  cmd->add_option("--max-answer-tokens", o->max_answer_tokens, "reference answer length cap (tokens)")
      ->check(positive_number());
  cmd->add_option("--max-context-tokens", o->max_context_tokens,
                  "truncate each article to N tokens (BOS included); 0 = the model's max_seq_len minus question room");
  cmd->add_option("--prompt-template", o->prompt_template,
                  "question prompt fed after the article (no BOS); {question} is replaced; articles may carry their own");
  cmd->add_option("--seed", o->seed, "seed of the random baseline");
  CLI::Option* budgets_opt = cmd->add_option("--budgets", o->budgets,
                  "per-head budgets: a budgets JSON (kvcompact budget), 'uniform' or 'pyramid'; each ratio is then "
                  "the total ratio, shared by the heads by these proportions");
  cmd->add_option("--max-head-ratio", o->max_head_ratio,
                  "with --budgets: no head keeps more than this fraction of its keys; the excess is water-filled "
                  "over the other heads (default 1 = no cap)");
  CLI::Option* beta_opt =
      cmd->add_option("--pyramid-beta", o->pyramid_beta, "PyramidKV beta of --budgets pyramid (>= 1, default 20)");
  cmd->add_option("--csv", o->csv, "also write the table as CSV to this file");
  cmd->add_flag("--chat", o->chat,
                "wrap article + question as one user message with the model's chat template (tokenizer_config.json); "
                "the rendered text up to the article's end is the compacted context");
  cmd->add_option("--out", o->out_dir,
                  "study folder: each article's result is written there (units/) and a rerun skips the finished "
                  "ones; the complete study writes qa_eval.{csv,json} there; `kvcompact merge DIR` aggregates");
  cmd->add_option("--shard", o->shard, "run shard I of N (I/N, 0-based) of the articles into --out DIR");
  cmd->add_option("--tokens-json", o->tokens_json,
                  "also write, per article, the token ids fed (context, question prompts, options, reference "
                  "answers) and every row's per-question scores, for running a peer on the same ids "
                  "(bench/peers/compare_kvpress_qa.py); not with --out");
  add_common_options(cmd, common);
  return [o, &common, budgets_opt, beta_opt] {
    QaEvalOptions opt;
    if (budgets_opt->count() > 0 && o->budgets.empty())
      throw Error("--budgets: empty; give a budgets JSON file, uniform or pyramid");
    if (beta_opt->count() > 0 && o->budgets != "pyramid") throw Error("--pyramid-beta: only with --budgets pyramid");
    const ShardSpec shard = o->shard.empty() ? ShardSpec{} : parse_shard(o->shard);
    if (shard.active() && o->out_dir.empty()) throw Error("--shard: needs --out DIR (the shared study folder)");
    if (!o->tokens_json.empty() && !o->out_dir.empty()) throw Error("--tokens-json: not with --out (run without a study folder)");
    opt.ratios = parse_number_list("--ratios", o->ratios);
    opt.methods.clear();
    for (const MethodSpec& m : parse_method_list(o->methods)) opt.methods.push_back(to_string(m));
    opt.answers_cache_dir = o->answers_cache;
    opt.max_answer_tokens = o->max_answer_tokens;
    opt.max_context_tokens = o->max_context_tokens;
    opt.prompt_template = o->prompt_template;
    opt.seed = o->seed;
    if (o->chat) opt.chat = find_chat_template(o->m.model, o->m.tokenizer);
    check_max_head_ratio(o->max_head_ratio, !o->budgets.empty());
    opt.max_head_ratio = o->max_head_ratio;
    const std::vector<QaArticle> articles = read_qa_jsonl(o->data);
    Model model = load_model(o->m.model, o->m.tokenizer);
    nlohmann::json budgets_header;  // what the report says about the budgets
    if (!o->budgets.empty()) {
      const BudgetSchedule s = schedule_by_name_or_file(o->budgets, model.config.n_layers, model.config.n_kv_heads,
                                                           model.config.sliding_layers(), opt.ratios, o->pyramid_beta);
      opt.budget_proportions = s.proportions();
      opt.budgets_source = o->budgets == "pyramid" ? fmt::format("pyramid (beta {})", o->pyramid_beta)
                           : o->budgets == "uniform" ? o->budgets
                                                     : fmt::format("{} (schedule {})", o->budgets, s.schedule);
      budgets_header = {{"budgets", opt.budgets_source}, {"max_head_ratio", o->max_head_ratio}};
    }
    if (!o->out_dir.empty()) {
      const UnitShardRun run = run_qa_eval_shard(model, articles, opt, o->out_dir, shard);
      const QaEvalMerge m = merge_qa_eval(o->out_dir, /*allow_none=*/true);
      if (!m.missing.empty()) {
        const ShardSpec s = shard.active() ? shard : ShardSpec{0, 1};
        const int done = m.study.units() - static_cast<int>(m.missing.size());
        if (common.json)
          print_json({{"study", m.study.id}, {"shard", {{"index", s.index}, {"count", s.count}}},
                      {"evaluated", run.evaluated}, {"skipped", run.skipped}, {"articles_done", done},
                      {"articles", m.study.units()}});
        else
          fmt::print("qa-eval: shard {}/{} (articles {}..{}): {} evaluated, {} already done; {}: {} of {} articles "
                     "done (`kvcompact merge {}` once every shard has finished)\n",
                     s.index, s.count, run.begin + 1, run.end, run.evaluated, run.skipped, o->out_dir, done,
                     m.study.units(), o->out_dir);
        return 0;
      }
      std::vector<std::string> csv{o->out_dir + "/qa_eval.csv"}, json{o->out_dir + "/qa_eval.json"};
      if (!o->csv.empty()) csv.push_back(o->csv);
      nlohmann::json header = {{"model", model.path}, {"data", o->data}, {"study", m.study.id}, {"chat", o->chat}};
      if (!budgets_header.is_null()) header.update(budgets_header);
      return report_qa_eval(m.result, header, csv, json, common.json);
    }
    const QaEvalResult r = run_qa_eval(model, articles, opt);
    if (!o->tokens_json.empty()) write_file_atomic(o->tokens_json, qa_tokens_json(model, articles, opt, r).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
    std::vector<std::string> csv;
    if (!o->csv.empty()) csv.push_back(o->csv);
    nlohmann::json header = {{"model", model.path}, {"data", o->data}, {"chat", o->chat}};
    if (!budgets_header.is_null()) header.update(budgets_header);
    return report_qa_eval(r, header, csv, {}, common.json);
  };
}

int report_qa_eval(const QaEvalResult& r, nlohmann::json header, const std::vector<std::string>& csv,
                   const std::vector<std::string>& json, bool as_json) {
  Table table({"method", "ratio", "questions", "answer_nll_mean", "delta_answer_nll_mean", "delta_answer_nll_sem",
               "mc_accuracy", "kept_entries", "cache_bytes"},
              4);
  for (const auto& row : r.rows)
    table.add_row({row.method, row.ratio, row.questions, row.answer_nll_mean, row.delta_answer_nll_mean,
                   row.delta_answer_nll_sem, row.mc_accuracy, row.kept_entries, row.cache_bytes});
  for (const std::string& path : csv) write_file_atomic(path, table.to_csv());
  header["articles"] = r.articles;
  header["questions"] = r.questions;
  header["mean_context_tokens"] = r.mean_context_tokens;
  header["answers_generated"] = r.answers_generated;
  header["answers_reused"] = r.answers_reused;
  header["notes"] = r.notes;
  header["units"] = {{"nll", "nats/token"}, {"bytes", "bytes"}};
  header["rows"] = table.to_json();
  for (const std::string& path : json) write_file_atomic(path, header.dump(2) + "\n");
  if (as_json) {
    print_json(header);
    return 0;
  }
  for (const auto& n : r.notes) fmt::print("note: {}\n", n);
  fmt::print("{} articles, {} questions, mean context {:.1f} tokens; reference answers: {} generated, {} reused\n",
             r.articles, r.questions, r.mean_context_tokens, r.answers_generated, r.answers_reused);
  if (header.contains("budgets"))
    fmt::print("per-head budgets: {}, max head ratio {}; each ratio is the total ratio\n",
               header["budgets"].get<std::string>(), header.value("max_head_ratio", 1.0));
  fmt::print("answer_nll: mean NLL of the full model's greedy answer (nats/token); delta = compacted - full, "
             "mean +- SEM over questions; mc_accuracy: highest-likelihood option == gold\n\n");
  fmt::print("{}", table.to_text());
  return 0;
}

Runner register_make_cloze(CLI::App& app, CommonOptions& common) {
  struct Opts {
    std::string data, out;
    ModelOptions m;
    ClozeOptions c;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("make-cloze", "make a small cloze multiple-choice QA set (QuALITY JSONL) from stories");
  cmd->add_option("--data", o->data, "UTF-8 text; stories are separated by blank lines")->required();
  cmd->add_option("--articles", o->c.articles, "articles to make")->check(positive_number());
  cmd->add_option("--stories-per-article", o->c.stories_per_article, "consecutive stories per article")
      ->check(positive_number());
  cmd->add_option("--questions", o->c.questions, "questions per article")->check(positive_number());
  cmd->add_option("--seed", o->c.seed, "random seed (same seed, same file)");
  cmd->add_option("--model", o->m.model, "count article tokens with this model's tokenizer (else a byte budget)");
  cmd->add_option("--tokenizer", o->m.tokenizer, "llama2.c tokenizer.bin for --model");
  cmd->add_option("--max-article-tokens", o->c.max_article_tokens, "token budget of an article, BOS included (with --model)")
      ->check(positive_number());
  cmd->add_option("--max-article-chars", o->c.max_article_chars, "byte budget of an article (without --model)")
      ->check(positive_number());
  cmd->add_option("-o,--output", o->out, "the JSONL file to write")->required();
  add_common_options(cmd, common);
  return [o, &common] {
    const std::vector<std::string> stories = read_documents(o->data);
    std::unique_ptr<Model> model;
    ClozeOptions c = o->c;
    if (!o->m.model.empty()) {
      model = std::make_unique<Model>(load_model(o->m.model, o->m.tokenizer));
      const Tokenizer* tok = model->tokenizer.get();
      c.count_tokens = [tok](std::string_view text) { return static_cast<int>(tok->encode(text, true).size()); };
    }
    const std::vector<QaArticle> set = make_cloze(stories, c);
    std::string bytes;
    std::size_t questions = 0;
    for (const auto& a : set) {
      bytes += qa_article_to_jsonl(a) + "\n";
      questions += a.questions.size();
    }
    write_file_atomic(o->out, bytes);
    if (common.json)
      print_json({{"output", o->out}, {"articles", set.size()}, {"questions", questions}, {"seed", c.seed}});
    else
      fmt::print("{}: {} articles, {} questions (seed {})\n", o->out, set.size(), questions, c.seed);
    return 0;
  };
}

}  // namespace kvcompact::cli
