#include "studies/mask_eval.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>

#include "tasks/answer_generation.h"
#include "tasks/answer_scoring.h"
#include "metrics/chrf.h"
#include "metrics/similarity_score.h"
#include "metrics/mean_sem.h"
#include "core/error.h"
#include "core/log.h"
#include "io/json_number.h"
#include "core/model_fingerprint.h"

namespace kvcompact {

std::vector<QueryHeadId> random_head_set(const ModelConfig& config, int k, int draw, uint64_t seed,
                                         const std::vector<QueryHeadId>& exclude) {
  std::vector<QueryHeadId> all;
  for (const QueryHeadId& h : all_query_heads(config))
    if (std::find(exclude.begin(), exclude.end(), h) == exclude.end()) all.push_back(h);
  if (k < 0 || k > static_cast<int>(all.size()))
    throw Error(exclude.empty() ? fmt::format("random head set: k {} is outside [0, {}]", k, all.size())
                                : fmt::format("random head set: k {} is more than the {} heads left after excluding {}",
                                              k, all.size(), exclude.size()));
  if (all.empty()) return all;
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

struct Wanted {
  bool chrf = false, comet = false, nll = false;
  bool bleu = false, rouge1 = false, cosine = false, cm_accuracy = false;  // the similarity scorer's
  bool scorer() const { return bleu || rouge1 || cosine || cm_accuracy; }
};

Wanted parse_metrics(const std::vector<std::string>& metrics) {
  Wanted w;
  for (const std::string& m : metrics) {
    if (m == "chrf") w.chrf = true;
    else if (m == "comet") w.comet = true;
    else if (m == "nll") w.nll = true;
    else if (m == "bleu") w.bleu = true;
    else if (m == "rouge1") w.rouge1 = true;
    else if (m == "cosine") w.cosine = true;
    else if (m == "cm_accuracy") w.cm_accuracy = true;
    else if (m != "accuracy")
      throw Error(fmt::format("mask-eval: unknown metric \"{}\" (expected chrf, comet, nll, bleu, rouge1, cosine or "
                              "cm_accuracy; accuracy is always reported)", m));
  }
  return w;
}

/// The study's conditions without their heads: none, then per k (ascending) topk and the draws.
std::vector<Condition> condition_list(const std::vector<int>& ks, int random_seeds) {
  std::vector<Condition> conditions;
  conditions.push_back({"none", "none", 0, 0, {}});
  for (int k : ks) {
    conditions.push_back({fmt::format("topk_k{}", k), "topk", k, 0, {}});
    for (int d = 0; d < random_seeds; ++d)
      conditions.push_back({fmt::format("randomk_k{}_d{}", k, d), "randomk", k, d, {}});
  }
  return conditions;
}

/// One condition's answers (and answer NLLs, NaN = no answer token), as a unit's result.
struct ConditionAnswers {
  std::vector<std::string> heads;  ///< masked heads' names
  std::vector<std::string> answers;
  std::vector<double> nlls;        ///< empty without the nll metric
};

nlohmann::json to_json(const Condition& cond, const ConditionAnswers& a) {
  nlohmann::json j = {{"condition", cond.kind}, {"k", cond.k}, {"draw", cond.draw}, {"heads", a.heads},
                      {"answers", a.answers}};
  if (!a.nlls.empty()) {
    nlohmann::json v = nlohmann::json::array();
    for (double x : a.nlls) v.push_back(std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr));
    j["answer_nll"] = v;
  }
  return j;
}

/// A unit's result read back; throws Error naming `path` when it does not fit the condition.
ConditionAnswers parse_condition(const nlohmann::json& j, const Condition& cond, std::size_t n_items, bool want_nll,
                                 const std::vector<std::string>* expect_heads, const std::string& path) {
  ConditionAnswers a;
  if (j.at("condition").get<std::string>() != cond.kind || json_int(j.at("k"), path, "k") != cond.k ||
      json_int(j.at("draw"), path, "draw") != cond.draw)
    throw Error(fmt::format("{}: is not condition {}", path, cond.label));
  a.heads = j.at("heads").get<std::vector<std::string>>();
  if (expect_heads != nullptr && a.heads != *expect_heads)
    throw Error(fmt::format("{}: masks heads {} but this study masks {}", path, nlohmann::json(a.heads).dump(),
                            nlohmann::json(*expect_heads).dump()));
  if (static_cast<int>(a.heads.size()) != cond.k)
    throw Error(fmt::format("{}: masks {} heads, condition {} masks {}", path, a.heads.size(), cond.label, cond.k));
  a.answers = j.at("answers").get<std::vector<std::string>>();
  if (want_nll)
    for (const nlohmann::json& v : j.at("answer_nll")) {
      // null: the reference answer had no token to score (NaN in a one-process run).
      const double x = v.is_null() ? std::nan("") : v.get<double>();
      if (!v.is_null() && !(std::isfinite(x) && x >= 0))
        throw Error(fmt::format("{}: answer_nll {} is not a finite number >= 0 (edited?); delete it to have it run "
                                "again",
                                path, v.dump()));
      a.nlls.push_back(x);
    }
  if (a.answers.size() != n_items)
    throw Error(fmt::format("{}: holds {} answers, the tasks have {} items", path, a.answers.size(), n_items));
  if (want_nll && a.nlls.size() != n_items)
    throw Error(fmt::format("{}: holds {} answer NLLs, the tasks have {} items", path, a.nlls.size(), n_items));
  return a;
}

/// The metrics of every condition and the rows of `result` (whose header fields are set).
void score_conditions(MaskEvalResult& result, const std::vector<TaskItem>& items,
                      const std::vector<Condition>& conditions, const std::vector<ConditionAnswers>& runs,
                      const MaskEvalOptions& options, const Wanted& want) {
  std::map<std::string, int> family_items;
  for (const TaskItem& it : items)
    if (family_items[it.family]++ == 0) result.families.push_back(it.family);
  if (!result.ks.empty())
    result.topk_heads = runs[1 + (result.ks.size() - 1) * (1 + static_cast<std::size_t>(result.random_seeds))].heads;
  const std::vector<std::string>& unmasked = runs[0].answers;
  // Cognitive Mirrors' metrics, every condition in one run of the scorer: per condition, BLEU
  // against the unmasked answers, ROUGE-1 and cosine against the gold answers (the paper's), or
  // against the unmasked answers with reference "model".
  const bool need_bleu = want.bleu || want.cm_accuracy, need_rouge = want.rouge1 || want.cm_accuracy,
             need_cosine = want.cosine || want.cm_accuracy;
  std::vector<std::vector<double>> sim;  // [condition * 3 + {0 bleu, 1 rouge1, 2 cosine}][item]
  if (want.scorer()) {
    std::vector<std::string> gold;
    for (const TaskItem& it : items) gold.push_back(it.reference);
    if (options.reference == "model") gold = unmasked;
    std::vector<SimilarityRequest> requests;
    for (std::size_t ci = 0; ci < conditions.size(); ++ci) {
      if (need_bleu) requests.push_back({"bleu", runs[ci].answers, unmasked});
      if (need_rouge) requests.push_back({"rouge1", runs[ci].answers, gold});
      if (need_cosine) requests.push_back({"cosine", runs[ci].answers, gold});
    }
    const std::vector<std::vector<double>> got = similarity_scores(requests, options.similarity);
    std::size_t next = 0;
    const std::vector<double> none(items.size(), 0.0);
    for (std::size_t ci = 0; ci < conditions.size(); ++ci) {
      sim.push_back(need_bleu ? got[next++] : none);
      sim.push_back(need_rouge ? got[next++] : none);
      sim.push_back(need_cosine ? got[next++] : none);
    }
  }
  std::vector<FamilyMetrics> metrics(conditions.size());
  for (std::size_t ci = 0; ci < conditions.size(); ++ci) {
    const std::vector<std::string>& answers = runs[ci].answers;
    std::map<std::string, std::vector<double>> acc, chr, com, nll, bleu, rouge, cosine, cm;
    std::vector<double> comet_scores;
    if (want.comet) {
      std::vector<std::string> src, hyp, ref;
      for (std::size_t i = 0; i < items.size(); ++i) {
        src.push_back(items[i].prompt);
        hyp.push_back(answers[i]);
        ref.push_back(options.reference == "gold" ? items[i].reference : unmasked[i]);
      }
      comet_scores = comet_score(src, hyp, ref, options.comet);
    }
    for (std::size_t i = 0; i < items.size(); ++i) {
      const TaskItem& it = items[i];
      const std::string& pred = answers[i];
      acc[it.family].push_back(item_score(pred, it));  // 1/0, or the fraction of references ("recall")
      const std::string& ref = options.reference == "gold" ? it.reference : unmasked[i];
      if (want.chrf) chr[it.family].push_back(chrf(pred, ref));
      if (want.comet) com[it.family].push_back(comet_scores[i]);
      if (want.nll && std::isfinite(runs[ci].nlls[i])) nll[it.family].push_back(runs[ci].nlls[i]);
      if (want.scorer()) {
        const double b = sim[ci * 3][i], r = sim[ci * 3 + 1][i], c = sim[ci * 3 + 2][i];
        bleu[it.family].push_back(b);
        rouge[it.family].push_back(r);
        cosine[it.family].push_back(c);
        cm[it.family].push_back(cognitive_mirrors_correct(b, r, c) ? 1.0 : 0.0);
      }
    }
    for (const std::string& f : result.families) {
      metrics[ci]["accuracy"][f] = mean_of(acc[f]);
      if (want.chrf) metrics[ci]["chrf"][f] = mean_of(chr[f]);
      if (want.comet) metrics[ci]["comet"][f] = mean_of(com[f]);
      if (want.nll) metrics[ci]["nll"][f] = nll[f].empty() ? std::nan("") : mean_of(nll[f]);
      if (want.bleu) metrics[ci]["bleu"][f] = mean_of(bleu[f]);
      if (want.rouge1) metrics[ci]["rouge1"][f] = mean_of(rouge[f]);
      if (want.cosine) metrics[ci]["cosine"][f] = mean_of(cosine[f]);
      if (want.cm_accuracy) metrics[ci]["cm_accuracy"][f] = mean_of(cm[f]);
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
  for (const std::string& f : zero_accuracy_families(result))
    log_line(fmt::format("kvcompact: warning: family {}: the unmasked model's accuracy is 0 on its {} items, so "
                         "masking cannot show a drop there (make the task easier: shots, format, length); the "
                         "figure marks it",
                         f, family_items[f]));
}

}  // namespace

std::vector<std::string> zero_accuracy_families(const MaskEvalResult& result) {
  std::vector<std::string> out;
  for (const std::string& f : result.families) {
    bool any = false, zero = true;
    for (const MaskEvalRow& row : result.rows)
      if (row.family == f && row.condition == "none" && row.metric == "accuracy") {
        any = true;
        zero = zero && row.mean == 0.0;
      }
    if (any && zero) out.push_back(f);
  }
  return out;
}

namespace {

std::string tasks_hash_of(const std::vector<TaskItem>& items) {
  uint64_t h = kFnv64Offset;
  for (const TaskItem& it : items) {
    const std::string line = task_item_to_jsonl(it) + "\n";
    h = fnv1a64(line.data(), line.size(), h);
  }
  return fmt::format("{:016x}", h);
}

/// A validated study, ready to run.
struct Prepared {
  MaskEvalResult header;             ///< every field but families, rows and topk_heads
  std::vector<Condition> conditions; ///< with their heads
  Wanted want;
  MaskPositions positions = MaskPositions::All;  ///< options.positions resolved
  UnitStudy study;                   ///< one unit per condition, named by its label
};

Prepared prepare(const Model& model, const std::vector<TaskItem>& items, const HeadScores& scores,
                 const MaskEvalOptions& options) {
  const ModelConfig& c = model.config;
  const int total_heads = c.n_layers * c.n_heads;
  if (items.empty()) throw Error("mask-eval: no task items");
  if (scores.n_layers != c.n_layers || scores.n_heads != c.n_heads)
    throw Error(fmt::format("mask-eval: head scores are for {} layers x {} heads, the model has {} x {}",
                            scores.n_layers, scores.n_heads, c.n_layers, c.n_heads));
  const std::string fingerprint = fingerprint_hex(model_fingerprint(c, model.weights));
  if (!scores.model_fingerprint.empty() && scores.model_fingerprint != fingerprint)
    throw Error(fmt::format("mask-eval: the head scores were made with model {}, not this model ({}): rank "
                            "the heads of this model with `kvcompact head-scores`",
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
  if (options.random_from != "all" && options.random_from != "rest")
    throw Error(fmt::format("mask-eval: unknown --random-from \"{}\" (expected all or rest)", options.random_from));
  const bool from_rest = options.random_from == "rest";
  if (from_rest)
    for (int k : options.ks)
      if (total_heads - k < k)
        throw Error(fmt::format("mask-eval: --random-from rest: K = {} leaves {} heads outside the top {}, fewer than "
                                "K (use K <= {} or --random-from all)",
                                k, total_heads - k, k, total_heads / 2));
  Prepared p;
  p.want = parse_metrics(options.metrics);
  if (p.want.comet && find_executable(options.comet.executable).empty())
    throw Error(fmt::format("{} not found on PATH: install unbabel-comet (pip install unbabel-comet) or "
                            "use --metric chrf", options.comet.executable));
  p.positions = options.positions.value_or(options.ablation == Ablation::Scale ? MaskPositions::Last
                                                                                : MaskPositions::All);
  // validate the intervention setup once (mean ablation needs matching means, scale a factor in (0, 1])
  HeadIntervention check(c, {}, options.ablation, options.means, nullptr, {options.scale, p.positions});
  if (p.want.scorer()) {  // a missing Python, package or model fails now, not after the generation
    std::vector<SimilarityRequest> probe;
    if (p.want.bleu || p.want.cm_accuracy) probe.push_back({"bleu", {"a b c d"}, {"a b c d"}});
    if (p.want.rouge1 || p.want.cm_accuracy) probe.push_back({"rouge1", {"a"}, {"a"}});
    if (p.want.cosine || p.want.cm_accuracy) probe.push_back({"cosine", {"a"}, {"a"}});
    similarity_scores(probe, options.similarity);
  }
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

  MaskEvalResult& result = p.header;
  result.model = model.path;
  result.model_fingerprint = fingerprint;
  result.score_method = scores.method;
  result.ablation = to_string(AblationSpec{options.ablation, options.scale});
  result.mask_positions = to_string(p.positions);
  result.random_from = options.random_from;
  result.reference = options.reference;
  result.metrics = {"accuracy"};
  if (p.want.chrf) result.metrics.push_back("chrf");
  if (p.want.comet) result.metrics.push_back("comet");
  if (p.want.nll) result.metrics.push_back("nll");
  if (p.want.bleu) result.metrics.push_back("bleu");
  if (p.want.rouge1) result.metrics.push_back("rouge1");
  if (p.want.cosine) result.metrics.push_back("cosine");
  if (p.want.cm_accuracy) result.metrics.push_back("cm_accuracy");
  result.ks = options.ks;
  std::sort(result.ks.begin(), result.ks.end());
  result.ks.erase(std::unique(result.ks.begin(), result.ks.end()), result.ks.end());
  result.random_seeds = options.random_seeds;
  result.n_heads_total = total_heads;

  p.conditions = condition_list(result.ks, result.random_seeds);
  for (Condition& cond : p.conditions) {
    if (cond.kind == "topk")
      for (int i = 0; i < cond.k; ++i) cond.heads.push_back(scores.ranked[i].head);
    if (cond.kind == "randomk") {
      std::vector<QueryHeadId> topk;
      if (from_rest)
        for (int i = 0; i < cond.k; ++i) topk.push_back(scores.ranked[i].head);
      cond.heads = random_head_set(c, cond.k, cond.draw, options.seed, topk);
    }
  }

  std::string means_tag = "none";
  if (options.ablation == Ablation::Mean && options.means) {
    uint64_t h = kFnv64Offset;
    for (const auto& layer : options.means->values) h = fnv1a64(layer.data(), layer.size() * sizeof(float), h);
    means_tag = fmt::format("{:016x}", h);
  }
  std::vector<std::string> names, hashes;
  for (const Condition& cond : p.conditions) {
    names.push_back(cond.label);
    hashes.push_back(hash_hex(nlohmann::json(head_names(cond.heads)).dump()));
  }
  std::string tasks;
  for (const TaskItem& it : items) tasks += task_item_to_jsonl(it) + "\n";
  nlohmann::json settings = {{"model_fingerprint", fingerprint},
                                   {"tasks_hash", tasks_hash_of(items)},
                                   {"items", items.size()},
                                   {"ablation", result.ablation},
                                   {"head_means", means_tag},
                                   {"seed", options.seed},
                                   {"score_method", result.score_method},
                                   {"ks", result.ks},
                                   {"random_seeds", result.random_seeds},
                                   {"n_heads_total", total_heads},
                                   {"metrics", result.metrics},
                                   {"reference", result.reference},
                                   {"comet_model", p.want.comet ? options.comet.model : std::string()}};
  // Settings added later are recorded only where they differ from what earlier studies did, so
  // that their folders keep their identity and resume.
  if (p.positions != MaskPositions::All) settings["mask_positions"] = result.mask_positions;
  if (from_rest) settings["random_from"] = options.random_from;
  if (p.want.cosine || p.want.cm_accuracy) settings["embedding_model"] = options.similarity.embedding_model;
  p.study = make_unit_study(study_kind("mask-eval"), settings, names, hashes);
  p.study.inputs = {{"model", model.path}, {"tasks", tasks}};
  return p;
}

/// Per item, the KV cache of its prompt but the last token, prefilled once without any
/// intervention (under MaskPositions::Last every condition leaves those rows unmasked) and kept
/// while the caches fit in `budget` bytes. Filled lazily, so a resumed study whose conditions are
/// all done prefills nothing.
class PromptPrefixes {
 public:
  PromptPrefixes(const Model& model, std::size_t budget) : model_(model), budget_(budget) {}

  /// Greedy answer of `it` (index i) with `observer` on the prompt's last token and every
  /// generated one, the prefix taken from the store (or prefilled now and stored when it fits).
  GeneratedAnswer answer(std::size_t i, const TaskItem& it, ForwardObserver* observer) {
    if (budget_ == 0) return generate_answer(model_, it.prompt, it.max_new_tokens, it.stop, observer);
    if (entries_.size() <= i) entries_.resize(i + 1);
    Entry& e = entries_[i];
    Transformer tr(model_.config, model_.weights);
    if (!e.tried) {
      e.tried = true;
      e.ids = encode_prompt_ids(model_, it.prompt);
      const std::size_t need = static_cast<std::size_t>(model_.config.n_layers) * model_.config.n_kv_heads *
                               model_.config.head_dim * 2 * sizeof(float) * e.ids.size();
      if (used_ + need <= budget_) {
        e.cache = tr.make_cache();
        if (e.ids.size() > 1) {
          ForwardOptions o;
          o.logits = LogitsMode::None;
          (void)tr.forward(std::vector<int>(e.ids.begin(), e.ids.end() - 1), e.cache, o);
        }
        e.stored = true;
        used_ += need;
      }
    }
    if (!e.stored) return generate_answer(model_, it.prompt, it.max_new_tokens, it.stop, observer);
    const CacheMark mark = e.cache.mark();
    ForwardOptions o;
    o.logits = LogitsMode::Last;
    o.observer = observer;
    const int last_token = e.ids.back();
    std::vector<float> logits = tr.forward(std::span<const int>(&last_token, 1), e.cache, o);
    GeneratedAnswer out =
        decode_greedy(tr, *model_.tokenizer, e.cache, std::move(logits), last_token, it.max_new_tokens, it.stop, observer);
    e.cache.rollback(mark);
    out.prompt_tokens = static_cast<int>(e.ids.size());
    return out;
  }

 private:
  struct Entry {
    bool tried = false, stored = false;
    std::vector<int> ids;
    KVCache cache;
  };
  const Model& model_;
  std::size_t budget_, used_ = 0;
  std::vector<Entry> entries_;
};

ConditionAnswers evaluate_condition(const Model& model, const std::vector<TaskItem>& items, const Condition& cond,
                                    const MaskEvalOptions& options, MaskPositions positions, bool want_nll,
                                    PromptPrefixes* prefixes) {
  HeadIntervention iv(model.config, cond.heads, options.ablation, options.means, nullptr,
                      {options.scale, positions});
  // Teacher forcing feeds the answer in one call: masking "last" there means every row from the
  // prompt's last token on, i.e. every row of the call after the prompt's unmasked prefix.
  HeadIntervention iv_rows(model.config, cond.heads, options.ablation, options.means, nullptr,
                           {options.scale, MaskPositions::All});
  const bool last = positions == MaskPositions::Last;
  ForwardObserver* observer = cond.heads.empty() ? nullptr : &iv;
  ForwardObserver* nll_observer = cond.heads.empty() ? nullptr : &iv_rows;
  ConditionAnswers a;
  a.heads = head_names(cond.heads);
  for (std::size_t i = 0; i < items.size(); ++i) {
    const TaskItem& it = items[i];
    a.answers.push_back(last && prefixes != nullptr
                            ? prefixes->answer(i, it, observer).text
                            : generate_answer(model, it.prompt, it.max_new_tokens, it.stop, observer).text);
    if (want_nll) a.nlls.push_back(answer_nll(model, it.prompt, it.reference, nll_observer, !last));
  }
  return a;
}

}  // namespace

MaskEvalShardRun run_mask_eval_shard(const Model& model, const std::vector<TaskItem>& items, const HeadScores& scores,
                                     const MaskEvalOptions& options, const std::string& out_dir,
                                     const ShardSpec& shard) {
  if (out_dir.empty()) throw Error("mask-eval: a shard needs an output folder");
  const Prepared p = prepare(model, items, scores, options);
  PromptPrefixes prefixes(model, options.prefix_cache_bytes);
  const auto t_start = std::chrono::steady_clock::now();
  auto evaluate = [&](int ci) {
    const Condition& cond = p.conditions[static_cast<std::size_t>(ci)];
    const auto t0 = std::chrono::steady_clock::now();
    const nlohmann::json j =
        to_json(cond, evaluate_condition(model, items, cond, options, p.positions, p.want.nll, &prefixes));
    if (options.progress) {
      const auto now = std::chrono::steady_clock::now();
      log_line(fmt::format("mask-eval: [{}/{}] {}: {} items in {:.1f} s ({:.0f} s so far)", ci + 1,
                           p.conditions.size(), cond.label, items.size(),
                           std::chrono::duration<double>(now - t0).count(),
                           std::chrono::duration<double>(now - t_start).count()));
    }
    return j;
  };
  auto check = [&](const nlohmann::json& r, int ci, const std::string& path) {
    const Condition& cond = p.conditions[static_cast<std::size_t>(ci)];
    const std::vector<std::string> names = head_names(cond.heads);
    (void)parse_condition(r, cond, items.size(), p.want.nll, &names, path);
  };
  MaskEvalShardRun out;
  out.run = run_unit_shard(out_dir, p.study, shard, evaluate, check, options.progress);
  const UnitStudyState state = read_unit_study(out_dir, p.study.kind, check);
  out.done = state.done();
  out.units = state.study.units();
  out.study = state.study.id;
  if (!state.complete()) return out;
  std::vector<ConditionAnswers> runs;
  for (std::size_t ci = 0; ci < p.conditions.size(); ++ci)
    runs.push_back(parse_condition(state.results[ci], p.conditions[ci], items.size(), p.want.nll, nullptr,
                                   unit_study_path(out_dir, p.study, static_cast<int>(ci))));
  MaskEvalResult result = p.header;
  score_conditions(result, items, p.conditions, runs, options, p.want);
  out.result = std::move(result);
  return out;
}

MaskEvalResult run_mask_eval(const Model& model, const std::vector<TaskItem>& items,
                             const HeadScores& scores, const MaskEvalOptions& options,
                             const std::string& out_dir) {
  if (!out_dir.empty()) return *run_mask_eval_shard(model, items, scores, options, out_dir, ShardSpec{}).result;
  const Prepared p = prepare(model, items, scores, options);
  PromptPrefixes prefixes(model, options.prefix_cache_bytes);
  std::vector<ConditionAnswers> runs;
  const auto t_start = std::chrono::steady_clock::now();
  for (const Condition& cond : p.conditions) {
    runs.push_back(evaluate_condition(model, items, cond, options, p.positions, p.want.nll, &prefixes));
    if (options.progress)
      log_line(fmt::format("mask-eval: [{}/{}] {}: {} items ({:.0f} s so far)", runs.size(), p.conditions.size(),
                           cond.label, items.size(),
                           std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count()));
  }
  MaskEvalResult result = p.header;
  score_conditions(result, items, p.conditions, runs, options, p.want);
  return result;
}

MaskEvalMerge merge_mask_eval(const std::string& dir, const CometOptions& comet, const SimilarityOptions& similarity) {
  const UnitStudyState state = read_unit_study(dir, study_kind("mask-eval"));
  const nlohmann::json& s = state.study.settings;
  MaskEvalMerge out;
  out.study = state.study.id;
  out.units = state.study.units();
  for (int u : state.missing) out.missing.push_back(state.study.unit_names[static_cast<std::size_t>(u)]);
  if (!state.complete()) return out;
  MaskEvalResult r;
  MaskEvalOptions options;
  std::vector<TaskItem> items;
  const std::string where = fmt::format("{}/shards", dir);
  try {
    r.model = state.study.inputs.at("model").get<std::string>();
    items = parse_task_suite(state.study.inputs.at("tasks").get<std::string>(), where + " (tasks)");
    if (tasks_hash_of(items) != s.at("tasks_hash").get<std::string>())
      throw Error(fmt::format("{}: the manifest's tasks do not match its tasks_hash (edited?)", where));
    r.model_fingerprint = s.at("model_fingerprint").get<std::string>();
    r.score_method = s.at("score_method").get<std::string>();
    r.ablation = s.at("ablation").get<std::string>();
    r.mask_positions = s.value("mask_positions", std::string("all"));
    r.random_from = s.value("random_from", std::string("all"));
    r.reference = s.at("reference").get<std::string>();
    r.metrics = s.at("metrics").get<std::vector<std::string>>();
    r.ks = json_int_list(s.at("ks"), where, "ks");
    r.random_seeds = json_int(s.at("random_seeds"), where, "random_seeds");
    r.n_heads_total = json_int(s.at("n_heads_total"), where, "n_heads_total");
    options.reference = r.reference;
    options.comet = comet;
    options.comet.model = s.at("comet_model").get<std::string>();
    options.similarity = similarity;
    options.similarity.embedding_model = s.value("embedding_model", std::string());
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}: malformed mask-eval manifest ({})", where, e.what()));
  }
  const Wanted want = parse_metrics(r.metrics);
  if (want.comet && find_executable(options.comet.executable).empty())
    throw Error(fmt::format("{} not found on PATH: the study asks for COMET (install unbabel-comet)",
                            options.comet.executable));
  const std::vector<Condition> conditions = condition_list(r.ks, r.random_seeds);
  if (conditions.size() != static_cast<std::size_t>(state.study.units()))
    throw Error(fmt::format("{}: {} units for {} conditions", where, state.study.units(), conditions.size()));
  std::vector<ConditionAnswers> runs;
  for (std::size_t ci = 0; ci < conditions.size(); ++ci) {
    const std::string path = unit_study_path(dir, state.study, static_cast<int>(ci));
    try {
      runs.push_back(parse_condition(state.results[ci], conditions[ci], items.size(), want.nll, nullptr, path));
    } catch (const nlohmann::json::exception& e) {
      throw Error(fmt::format("{}: malformed mask-eval result ({}); delete it to have it run again", path, e.what()));
    }
    // Without the model, the unit's input hash (of its head names) checks the heads it masked.
    if (hash_hex(nlohmann::json(runs.back().heads).dump()) != state.study.unit_hashes[ci])
      throw Error(fmt::format("{}: its heads are not the ones this study masks for {} (edited?); delete it to have "
                              "it run again",
                              path, conditions[ci].label));
  }
  score_conditions(r, items, conditions, runs, options, want);
  out.result = std::move(r);
  return out;
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
          {"mask_positions", r.mask_positions},
          {"random_from", r.random_from},
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
    r.mask_positions = j.value("mask_positions", std::string("all"));
    r.random_from = j.value("random_from", std::string("all"));
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
