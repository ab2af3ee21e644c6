#include "analysis/mask_eval.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <random>

#include "analysis/answer_generation.h"
#include "analysis/answer_scoring.h"
#include "analysis/chrf.h"
#include "analysis/mean_sem.h"
#include "io/atomic_file.h"
#include "core/error.h"
#include "core/log.h"
#include "io/json_number.h"
#include "io/json_file.h"
#include "core/model_fingerprint.h"

namespace kvcompact {

std::vector<QueryHeadId> random_head_set(const ModelConfig& config, int k, int draw, uint64_t seed) {
  std::vector<QueryHeadId> all = all_query_heads(config);
  if (k < 0 || k > static_cast<int>(all.size()))
    throw Error(fmt::format("random head set: k {} is outside [0, {}]", k, all.size()));
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(k) * 0xBF58476D1CE4E5B9ULL +
                      static_cast<uint64_t>(draw) * 0x94D049BB133111EBULL + 0x2545F4914F6CDD1DULL);
  for (std::size_t i = all.size() - 1; i > 0; --i) {
    const std::size_t j = static_cast<std::size_t>(rng() % (i + 1));
    std::swap(all[i], all[j]);
  }
  all.resize(k);
  std::sort(all.begin(), all.end());
  return all;
}

namespace {

std::vector<std::string> head_names(const std::vector<QueryHeadId>& heads) {
  std::vector<std::string> out;
  for (const QueryHeadId& h : heads) out.push_back(query_head_name(h));
  return out;
}

struct Condition {
  std::string label;      // file stem: none, topk_k4, randomk_k4_d0
  std::string kind;       // none | topk | randomk
  int k = 0;
  int draw = 0;
  std::vector<QueryHeadId> heads;
};

// Per-family metric values of one condition: metric -> family -> value.
using FamilyMetrics = std::map<std::string, std::map<std::string, double>>;

double mean_of(const std::vector<double>& v) { return mean_sem(v).mean; }

}  // namespace

MaskEvalResult run_mask_eval(const Model& model, const std::vector<TaskItem>& items,
                             const HeadScores& scores, const MaskEvalOptions& options,
                             const std::string& out_dir) {
  const ModelConfig& c = model.config;
  const int total_heads = c.n_layers * c.n_heads;
  if (items.empty()) throw Error("mask-eval: no task items");
  if (scores.n_layers != c.n_layers || scores.n_heads != c.n_heads)
    throw Error(fmt::format("mask-eval: head scores are for {} layers x {} heads, the model has {} x {}",
                            scores.n_layers, scores.n_heads, c.n_layers, c.n_heads));
  const std::string fingerprint = fingerprint_hex(model_fingerprint(c, model.weights));
  if (!scores.model_fingerprint.empty() && scores.model_fingerprint != fingerprint)
    throw Error(fmt::format("mask-eval: head scores were made with model {}, not this model ({})",
                            scores.model_fingerprint, fingerprint));
  if (static_cast<int>(scores.ranked.size()) != total_heads)
    throw Error(fmt::format("mask-eval: head scores rank {} heads, the model has {}", scores.ranked.size(),
                            total_heads));
  for (int k : options.ks)
    if (k < 1 || k > total_heads)
      throw Error(fmt::format("mask-eval: K = {} is outside [1, {}] (the model has {} query heads)", k,
                              total_heads, total_heads));
  if (!options.ks.empty() && (options.random_seeds < 1 || options.random_seeds > 1000))
    throw Error(fmt::format("mask-eval: --random-seeds {} is outside [1, 1000]", options.random_seeds));
  if (options.reference != "gold" && options.reference != "model")
    throw Error(fmt::format("mask-eval: unknown reference \"{}\" (expected gold or model)", options.reference));
  bool want_chrf = false, want_comet = false, want_nll = false;
  for (const std::string& m : options.metrics) {
    if (m == "chrf") want_chrf = true;
    else if (m == "comet") want_comet = true;
    else if (m == "nll") want_nll = true;
    else if (m != "accuracy")
      throw Error(fmt::format("mask-eval: unknown metric \"{}\" (expected chrf, comet or nll; accuracy "
                              "is always reported)", m));
  }
  if (want_comet && find_executable(options.comet.executable).empty())
    throw Error(fmt::format("{} not found on PATH: install unbabel-comet (pip install unbabel-comet) or "
                            "use --metric chrf", options.comet.executable));
  // validate the intervention setup once (mean ablation needs matching means)
  HeadIntervention check(c, {}, options.ablation, options.means);
  if (options.progress) {  // TopK takes tied heads in the file's order: say so when a tie crosses a K
    std::string tied;
    for (int k : options.ks)
      if (k < total_heads && scores.ranked[k - 1].score == scores.ranked[k].score)
        tied += fmt::format("{}{} (score {:.4g})", tied.empty() ? "" : ", ", k, scores.ranked[k].score);
    if (!tied.empty())
      log_line(fmt::format("kvcompact: warning: tied head scores cross the TopK boundary at K = {}; tied heads are taken "
                   "in the scores file's order",
                   tied));
  }

  MaskEvalResult result;
  result.model = model.path;
  result.model_fingerprint = fingerprint;
  result.score_method = scores.method;
  result.ablation = to_string(options.ablation);
  result.reference = options.reference;
  result.metrics = {"accuracy"};
  if (want_chrf) result.metrics.push_back("chrf");
  if (want_comet) result.metrics.push_back("comet");
  if (want_nll) result.metrics.push_back("nll");
  result.ks = options.ks;
  std::sort(result.ks.begin(), result.ks.end());
  result.ks.erase(std::unique(result.ks.begin(), result.ks.end()), result.ks.end());
  result.random_seeds = options.random_seeds;
  result.n_heads_total = total_heads;
  std::map<std::string, int> family_items;
  for (const TaskItem& it : items) {
    if (family_items[it.family]++ == 0) result.families.push_back(it.family);
  }

  // The study's identity, for resuming: model, tasks, ablation (and means).
  uint64_t tasks_hash = kFnv64Offset;
  for (const TaskItem& it : items) {
    const std::string line = task_item_to_jsonl(it) + "\n";
    tasks_hash = fnv1a64(line.data(), line.size(), tasks_hash);
  }
  std::string means_tag = "none";
  if (options.ablation == Ablation::Mean && options.means) {
    uint64_t h = kFnv64Offset;
    for (const auto& layer : options.means->values) h = fnv1a64(layer.data(), layer.size() * sizeof(float), h);
    means_tag = fmt::format("{:016x}", h);
  }
  const nlohmann::json study = {{"model_fingerprint", fingerprint},
                                {"tasks_hash", fmt::format("{:016x}", tasks_hash)},
                                {"items", items.size()},
                                {"ablation", result.ablation},
                                {"seed", options.seed},
                                {"head_means", means_tag}};
  const std::string runs_dir = out_dir.empty() ? "" : out_dir + "/runs";
  if (!out_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(runs_dir, ec);
    if (ec) throw Error(fmt::format("{}: cannot create folder: {}", runs_dir, ec.message()));
    const std::string study_path = out_dir + "/study.json";
    if (std::filesystem::exists(study_path)) {
      const nlohmann::json old = read_json_file(study_path);
      if (old != study)
        throw Error(fmt::format("{}: this folder holds a study of other tasks, model, ablation or --seed ({}); "
                                "use another --out folder",
                                study_path, old.dump()));
    } else {
      write_file_atomic(study_path, study.dump(2) + "\n");
    }
  }

  std::vector<Condition> conditions;
  conditions.push_back({"none", "none", 0, 0, {}});
  for (int k : result.ks) {
    Condition top{fmt::format("topk_k{}", k), "topk", k, 0, {}};
    for (int i = 0; i < k; ++i) top.heads.push_back(scores.ranked[i].head);
    conditions.push_back(top);
    for (int d = 0; d < options.random_seeds; ++d)
      conditions.push_back({fmt::format("randomk_k{}_d{}", k, d), "randomk", k, d,
                            random_head_set(c, k, d, options.seed)});
  }
  if (!result.ks.empty())
    result.topk_heads = head_names(std::vector<QueryHeadId>(
        conditions[1 + (result.ks.size() - 1) * (1 + options.random_seeds)].heads));

  // Answers of every condition (resumed from runs/ when present).
  std::vector<std::vector<std::string>> answers(conditions.size());
  std::vector<std::vector<double>> nlls(conditions.size());  // [condition][item], NaN = no answer token
  const auto t_start = std::chrono::steady_clock::now();
  for (std::size_t ci = 0; ci < conditions.size(); ++ci) {
    const Condition& cond = conditions[ci];
    const std::string path = runs_dir.empty() ? "" : runs_dir + "/" + cond.label + ".json";
    const std::vector<std::string> names = head_names(cond.heads);
    if (!path.empty() && std::filesystem::exists(path)) {
      const nlohmann::json j = read_json_file(path);
      try {
        if (j.at("heads").get<std::vector<std::string>>() != names)
          throw Error(fmt::format("{}: masks heads {} but this study masks {} (another head ranking?); use "
                                  "another --out folder (or the same --seed)",
                                  path, j.at("heads").dump(), nlohmann::json(names).dump()));
        answers[ci] = j.at("answers").get<std::vector<std::string>>();
        if (j.contains("answer_nll"))
          for (const nlohmann::json& v : j.at("answer_nll"))
            nlls[ci].push_back(v.is_null() ? std::nan("") : v.get<double>());
      } catch (const nlohmann::json::exception& e) {
        throw Error(fmt::format("{}: not a mask-eval run file ({})", path, e.what()));
      }
      if (answers[ci].size() != items.size() || (!nlls[ci].empty() && nlls[ci].size() != items.size()))
        throw Error(fmt::format("{}: holds {} answers, the tasks have {} items", path, answers[ci].size(),
                                items.size()));
      if (!want_nll || !nlls[ci].empty()) continue;
      answers[ci].clear();  // saved without answer NLLs: run this condition again
    }
    const auto t0 = std::chrono::steady_clock::now();
    HeadIntervention iv(c, cond.heads, options.ablation, options.means);
    ForwardObserver* observer = cond.heads.empty() ? nullptr : &iv;
    answers[ci].reserve(items.size());
    nlls[ci].clear();
    for (const TaskItem& it : items) {
      const GeneratedAnswer a = generate_answer(model, it.prompt, it.max_new_tokens, it.stop, observer);
      answers[ci].push_back(a.text);
      if (want_nll) nlls[ci].push_back(answer_nll(model, it.prompt, it.reference, observer));
    }
    if (!path.empty()) {
      nlohmann::json run = {{"condition", cond.kind},
                            {"k", cond.k},
                            {"draw", cond.draw},
                            {"heads", names},
                            {"answers", answers[ci]}};
      if (want_nll) {
        nlohmann::json v = nlohmann::json::array();
        for (double x : nlls[ci]) v.push_back(std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr));
        run["answer_nll"] = v;
      }
      write_file_atomic(path, run.dump(1) + "\n");
    }
    if (options.progress) {
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const double all = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
      log_line(fmt::format("mask-eval: [{}/{}] {}: {} items in {:.1f} s ({:.0f} s so far)", ci + 1,
                   conditions.size(), cond.label, items.size(), s, all));
    }
  }

  // Metrics per condition and family.
  const std::vector<std::string>& unmasked = answers[0];
  std::vector<FamilyMetrics> metrics(conditions.size());
  for (std::size_t ci = 0; ci < conditions.size(); ++ci) {
    std::map<std::string, std::vector<double>> acc, chr, com, nll;
    std::vector<double> comet_scores;
    if (want_comet) {
      std::vector<std::string> src, hyp, ref;
      for (std::size_t i = 0; i < items.size(); ++i) {
        src.push_back(items[i].prompt);
        hyp.push_back(answers[ci][i]);
        ref.push_back(options.reference == "gold" ? items[i].reference : unmasked[i]);
      }
      comet_scores = comet_score(src, hyp, ref, options.comet);
    }
    for (std::size_t i = 0; i < items.size(); ++i) {
      const TaskItem& it = items[i];
      const std::string& pred = answers[ci][i];
      acc[it.family].push_back(answer_correct(pred, it.reference, it.answer_type) ? 1.0 : 0.0);
      const std::string& ref = options.reference == "gold" ? it.reference : unmasked[i];
      if (want_chrf) chr[it.family].push_back(chrf(pred, ref));
      if (want_comet) com[it.family].push_back(comet_scores[i]);
      if (want_nll && std::isfinite(nlls[ci][i])) nll[it.family].push_back(nlls[ci][i]);
    }
    for (const std::string& f : result.families) {
      metrics[ci]["accuracy"][f] = mean_of(acc[f]);
      if (want_chrf) metrics[ci]["chrf"][f] = mean_of(chr[f]);
      if (want_comet) metrics[ci]["comet"][f] = mean_of(com[f]);
      if (want_nll) metrics[ci]["nll"][f] = nll[f].empty() ? std::nan("") : mean_of(nll[f]);
    }
  }

  for (const std::string& f : result.families)
    for (const std::string& m : result.metrics) {
      result.rows.push_back({f, 0, "none", m, metrics[0][m][f], 0.0, 1, family_items[f]});
      for (int k : result.ks) {
        std::vector<double> draws;
        for (std::size_t ci = 1; ci < conditions.size(); ++ci) {
          if (conditions[ci].k != k) continue;
          if (conditions[ci].kind == "topk")
            result.rows.push_back({f, k, "topk", m, metrics[ci][m][f], 0.0, 1, family_items[f]});
          else
            draws.push_back(metrics[ci][m][f]);
        }
        const MeanSem s = mean_sem(draws);
        result.rows.push_back({f, k, "randomk", m, s.mean, s.sem, s.n, family_items[f]});
      }
    }
  return result;
}

nlohmann::json mask_eval_to_json(const MaskEvalResult& r) {
  nlohmann::json rows = nlohmann::json::array();
  for (const MaskEvalRow& row : r.rows)
    rows.push_back({{"family", row.family},
                    {"k", row.k},
                    {"condition", row.condition},
                    {"metric", row.metric},
                    {"mean", row.mean},
                    {"sem", row.sem},
                    {"draws", row.draws},
                    {"items", row.items}});
  return {{"kind", "mask-eval"},
          {"model", r.model},
          {"model_fingerprint", r.model_fingerprint},
          {"score_method", r.score_method},
          {"ablation", r.ablation},
          {"reference", r.reference},
          {"metrics", r.metrics},
          {"families", r.families},
          {"ks", r.ks},
          {"random_seeds", r.random_seeds},
          {"n_heads_total", r.n_heads_total},
          {"topk_heads", r.topk_heads},
          {"rows", rows}};
}

MaskEvalResult mask_eval_from_json(const nlohmann::json& j, const std::string& source) {
  MaskEvalResult r;
  try {
    if (j.value("kind", std::string()) != "mask-eval")
      throw Error(fmt::format("{}: not a mask-eval result (\"kind\" is not \"mask-eval\")", source));
    r.model = j.at("model").get<std::string>();
    r.model_fingerprint = j.at("model_fingerprint").get<std::string>();
    r.score_method = j.at("score_method").get<std::string>();
    r.ablation = j.at("ablation").get<std::string>();
    r.reference = j.at("reference").get<std::string>();
    r.metrics = j.at("metrics").get<std::vector<std::string>>();
    r.families = j.at("families").get<std::vector<std::string>>();
    r.ks = json_int_list(j.at("ks"), source, "ks");
    r.random_seeds = json_int(j.at("random_seeds"), source, "random_seeds");
    r.n_heads_total = json_int(j.at("n_heads_total"), source, "n_heads_total");
    r.topk_heads = j.value("topk_heads", std::vector<std::string>());
    for (const nlohmann::json& row : j.at("rows"))
      r.rows.push_back({row.at("family").get<std::string>(), json_int(row.at("k"), source, "k"),
                        row.at("condition").get<std::string>(), row.at("metric").get<std::string>(),
                        row.at("mean").is_null() ? std::nan("") : row.at("mean").get<double>(),
                        row.at("sem").is_null() ? std::nan("") : row.at("sem").get<double>(),
                        json_int(row.at("draws"), source, "draws"), json_int(row.at("items"), source, "items")});
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}: malformed mask-eval result ({})", source, e.what()));
  }
  return r;
}

std::string mask_eval_csv(const MaskEvalResult& r) {
  std::string out = "family,k,condition,metric,mean,sem,draws,items\n";
  for (const MaskEvalRow& row : r.rows)
    out += fmt::format("{},{},{},{},{},{},{},{}\n", row.family, row.k, row.condition, row.metric, row.mean,
                       row.sem, row.draws, row.items);
  return out;
}

}  // namespace kvcompact
