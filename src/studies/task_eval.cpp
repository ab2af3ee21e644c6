// task-eval (see task_eval.h).
#include "studies/task_eval.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <map>

#include "tasks/answer_generation.h"
#include "tasks/answer_scoring.h"
#include "compaction/compact_context.h"
#include "metrics/mean_sem.h"
#include "compaction/head_compaction.h"
#include "compaction/on_policy.h"
#include "core/error.h"
#include "core/log.h"
#include "core/model_fingerprint.h"
#include "io/json_number.h"

namespace kvcompact {
namespace {

using nlohmann::json;

std::string item_where(const std::string& file, const TaskItem& item) {
  return fmt::format("{}: item {}", file, item.id);
}

}  // namespace

std::vector<TaskEvalRowKey> task_eval_row_keys(const TaskEvalOptions& options) {
  std::vector<TaskEvalRowKey> keys{{"full", 1.0}};
  for (const MethodSpec& m : options.methods)
    for (double r : options.ratios) keys.push_back({to_string(m), r});
  return keys;
}

void validate_task_eval(const std::vector<TaskEvalFile>& files, const TaskEvalOptions& options) {
  if (files.empty()) throw Error("task-eval: no task files (--tasks FILE...)");
  for (double r : options.ratios)
    if (!(r >= 0 && r <= 1)) throw Error(fmt::format("--ratios: {} is outside [0, 1]", r));
  if (!options.methods.empty() && options.ratios.empty()) throw Error("task-eval: no ratios given (--ratios)");
  for (const TaskEvalFile& f : files) {
    if (f.items.empty()) throw Error(fmt::format("{}: empty task file (no items)", f.path));
    for (const TaskItem& item : f.items)
      if (item.context.empty())
        throw Error(fmt::format("{} has no \"context\" (task-eval compacts an item's context span; make RULER items "
                                "with `kvcompact tasks --family ruler_...`)",
                                item_where(f.path, item)));
  }
}

TaskEvalTokens tokenize_task_item(const Model& model, const TaskItem& item, const std::string& file) {
  if (item.context.empty() || item.context.size() >= item.prompt.size() ||
      item.prompt.compare(0, item.context.size(), item.context) != 0)
    throw Error(fmt::format("{}: \"context\" is not a proper prefix of \"prompt\"", item_where(file, item)));
  const Tokenizer& tok = *model.tokenizer;
  TaskEvalTokens t;
  t.context = tok.encode(item.context, /*add_bos=*/true);
  t.question = tok.encode(std::string_view(item.prompt).substr(item.context.size()), /*add_bos=*/false);
  if (t.context.size() < 2)
    throw Error(fmt::format("{}: the context has {} tokens (need at least 2)", item_where(file, item), t.context.size()));
  if (t.question.empty()) throw Error(fmt::format("{}: the question encodes to no token", item_where(file, item)));
  const long long max_len = model.config.max_seq_len;
  if (max_len > 0 && static_cast<long long>(t.context.size()) > max_len)
    throw Error(fmt::format("{}: the context has {} tokens, more than the model's max_seq_len {}",
                            item_where(file, item), t.context.size(), max_len));
  if (max_len > 0 && static_cast<long long>(t.context.size() + t.question.size()) > max_len)
    throw Error(fmt::format("{}: context + question have {} tokens, more than the model's max_seq_len {}",
                            item_where(file, item), t.context.size() + t.question.size(), max_len));
  return t;
}

std::string greedy_answer(const Transformer& transformer, const Tokenizer& tokenizer, KVCache& cache,
                          std::span<const float> last_logits, int last_token, std::span<const int> question,
                          int max_new_tokens, const std::vector<std::string>& stop) {
  if (max_new_tokens < 1) throw Error(fmt::format("task-eval: max_new_tokens {} must be >= 1", max_new_tokens));
  if (tokenizer.vocab_size() > transformer.config().vocab_size)
    throw Error("task-eval: tokenizer larger than the model vocabulary");
  std::vector<float> logits(last_logits.begin(), last_logits.end());
  if (!question.empty()) {
    ForwardOptions opt;
    opt.logits = LogitsMode::Last;
    logits = transformer.forward(question, cache, opt);
  }
  const int prev = question.empty() ? last_token : question.back();
  return decode_greedy(transformer, tokenizer, cache, std::move(logits), prev, max_new_tokens, stop).text;
}

TaskEvalUnit evaluate_task_item(const Model& model, const Transformer& transformer, const TaskItem& item,
                                const std::string& file, std::size_t index, const TaskEvalOptions& options) {
  const TaskEvalTokens t = tokenize_task_item(model, item, file);
  const Tokenizer& tok = *model.tokenizer;
  TaskEvalUnit unit;
  unit.file = file;
  unit.id = item.id;
  unit.family = item.family;
  unit.context_tokens = static_cast<int>(t.context.size());
  unit.question_tokens = static_cast<int>(t.question.size());
  const uint64_t seed = options.seed + index;

  // One prefill per distinct reference-query setting; the full row uses the first one's cache
  // (every prefill's cache is the same context cache).
  std::vector<QuerySpec> specs;
  std::vector<ContextPrefill> prefills;
  prefills.reserve(options.methods.size() + 1);
  auto prefill_for = [&](const MethodSpec& m) -> const ContextPrefill& {
    for (std::size_t i = 0; i < specs.size(); ++i)
      if (specs[i] == m.queries) return prefills[i];
    CompactionOptions co;
    co.method = m;
    co.seed = seed;
    const auto t0 = std::chrono::steady_clock::now();
    prefills.push_back(prefill_for_compaction(model, t.context, co));
    unit.prefill_seconds += seconds_since(t0);
    specs.push_back(m.queries);
    return prefills.back();
  };
  auto answer = [&](KVCache cache, std::span<const float> last_logits) {
    TaskEvalAnswer a;
    a.entries = static_cast<double>(cache.total_entries());
    a.text = greedy_answer(transformer, tok, cache, last_logits, t.context.back(), t.question, item.max_new_tokens,
                           item.stop);
    a.score = item_score(a.text, item);
    return a;
  };

  if (options.methods.empty()) {
    // Only the full row: a plain prefill (no reference queries).
    KVCache cache = transformer.make_cache();
    ForwardOptions opt;
    opt.logits = LogitsMode::Last;
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<float> logits = transformer.forward(t.context, cache, opt);
    unit.prefill_seconds += seconds_since(t0);
    unit.answers.push_back(answer(std::move(cache), logits));
    return unit;
  }
  {
    const ContextPrefill& first = prefill_for(options.methods.front());
    unit.answers.push_back(answer(first.cache, first.last_logits));
  }
  for (const MethodSpec& m : options.methods) {
    const ContextPrefill& prefill = prefill_for(m);
    for (double ratio : options.ratios) {
      CompactionOptions co;
      co.method = m;
      co.ratio = ratio;
      co.seed = seed;
      set_rope(co, model.config);
      const auto t0 = std::chrono::steady_clock::now();
      KVCache compacted = compact_prefill(transformer, tok, prefill, co);
      const double secs = seconds_since(t0);
      TaskEvalAnswer a = answer(std::move(compacted), prefill.last_logits);
      a.seconds = secs;
      unit.answers.push_back(std::move(a));
    }
  }
  return unit;
}

TaskEvalResult aggregate_task_eval(const std::vector<TaskEvalRowKey>& keys, std::vector<TaskEvalUnit> units) {
  TaskEvalResult r;
  r.keys = keys;
  std::vector<std::string> families;
  std::map<std::string, std::vector<const TaskEvalUnit*>> by_family;
  double context_sum = 0;
  for (const TaskEvalUnit& u : units) {
    if (u.answers.size() != keys.size())
      throw Error(fmt::format("task-eval: {}: item {} has {} answers, the study has {} rows (full + methods x ratios)",
                              u.file, u.id, u.answers.size(), keys.size()));
    if (!by_family.count(u.family)) families.push_back(u.family);
    by_family[u.family].push_back(&u);
    context_sum += u.context_tokens;
    r.prefill_seconds += u.prefill_seconds;
  }
  for (const std::string& fam : families) {
    const auto& us = by_family[fam];
    for (std::size_t k = 0; k < keys.size(); ++k) {
      std::vector<double> scores;
      double secs = 0, entries = 0;
      for (const TaskEvalUnit* u : us) {
        scores.push_back(100.0 * u->answers[k].score);
        secs += u->answers[k].seconds;
        entries += u->answers[k].entries;
      }
      const MeanSem ms = mean_sem(scores);
      TaskEvalRow row;
      row.family = fam;
      row.method = keys[k].method;
      row.ratio = keys[k].ratio;
      row.items = static_cast<int>(us.size());
      row.score = ms.mean;
      row.score_sem = ms.sem;
      row.compaction_seconds = secs / static_cast<double>(us.size());
      row.kept_entries = entries / static_cast<double>(us.size());
      r.rows.push_back(row);
    }
  }
  r.mean_context_tokens = units.empty() ? 0 : context_sum / static_cast<double>(units.size());
  r.units = std::move(units);
  return r;
}

TaskEvalResult run_task_eval(const Model& model, const std::vector<TaskEvalFile>& files,
                             const TaskEvalOptions& options) {
  validate_task_eval(files, options);
  for (const TaskEvalFile& f : files)
    for (const TaskItem& item : f.items) (void)tokenize_task_item(model, item, f.path);  // fail before any work
  const Transformer transformer(model.config, model.weights);
  std::size_t total = 0, index = 0;
  for (const TaskEvalFile& f : files) total += f.items.size();
  std::vector<TaskEvalUnit> units;
  const auto t0 = std::chrono::steady_clock::now();
  for (const TaskEvalFile& f : files)
    for (const TaskItem& item : f.items) {
      units.push_back(evaluate_task_item(model, transformer, item, f.path, index, options));
      ++index;
      if (options.progress)
        log_line(fmt::format("task-eval: item {}/{} ({} {}, {} context tokens), {:.1f} s", index, total, item.family,
                             item.id, units.back().context_tokens, seconds_since(t0)));
    }
  return aggregate_task_eval(task_eval_row_keys(options), std::move(units));
}

json task_eval_unit_json(const TaskEvalUnit& u, const std::vector<TaskEvalRowKey>& keys) {
  json answers = json::array();
  for (std::size_t k = 0; k < u.answers.size() && k < keys.size(); ++k) {
    const TaskEvalAnswer& a = u.answers[k];
    answers.push_back({{"method", keys[k].method},
                       {"ratio", keys[k].ratio},
                       {"answer", a.text},
                       {"score", a.score},
                       {"seconds", a.seconds},
                       {"entries", a.entries}});
  }
  return {{"file", u.file},
          {"id", u.id},
          {"family", u.family},
          {"context_tokens", u.context_tokens},
          {"question_tokens", u.question_tokens},
          {"prefill_seconds", u.prefill_seconds},
          {"answers", answers}};
}

TaskEvalUnit parse_task_eval_unit(const json& j, const std::vector<TaskEvalRowKey>& keys, const std::string& path) {
  try {
    TaskEvalUnit u;
    u.file = j.at("file").get<std::string>();
    u.id = j.at("id").get<std::string>();
    u.family = j.at("family").get<std::string>();
    u.context_tokens = json_int(j.at("context_tokens"), path, "context_tokens");
    u.question_tokens = json_int(j.at("question_tokens"), path, "question_tokens");
    u.prefill_seconds = json_unit_number(j.at("prefill_seconds"), path, "prefill_seconds");
    const json& as = j.at("answers");
    if (!as.is_array() || as.size() != keys.size())
      throw Error(fmt::format("{}: answers: expected {} rows (full + methods x ratios)", path, keys.size()));
    for (std::size_t k = 0; k < keys.size(); ++k) {
      const json& a = as[k];
      if (a.at("method").get<std::string>() != keys[k].method || a.at("ratio").get<double>() != keys[k].ratio)
        throw Error(fmt::format("{}: answers[{}] is {} at {}, the study's row is {} at {}", path, k,
                                a.at("method").get<std::string>(), a.at("ratio").get<double>(), keys[k].method,
                                keys[k].ratio));
      TaskEvalAnswer x;
      x.text = a.at("answer").get<std::string>();
      x.score = json_unit_number(a.at("score"), path, "score");
      if (!(x.score >= 0 && x.score <= 1)) throw Error(fmt::format("{}: score {} is outside [0, 1]", path, x.score));
      x.seconds = json_unit_number(a.at("seconds"), path, "seconds");
      x.entries = json_unit_number(a.at("entries"), path, "entries", true);
      u.answers.push_back(std::move(x));
    }
    return u;
  } catch (const json::exception& e) {
    throw Error(fmt::format("{}: malformed task-eval result ({}); delete it to have the item evaluated again", path,
                            e.what()));
  }
}

UnitStudy make_task_eval_study(const Model& model, const std::vector<TaskEvalFile>& files,
                               const TaskEvalOptions& options) {
  std::vector<std::string> methods, names, hashes;
  for (const MethodSpec& m : options.methods) methods.push_back(to_string(m));
  std::size_t k = 0;
  for (const TaskEvalFile& f : files)
    for (const TaskItem& item : f.items) {
      names.push_back(fmt::format("item_{}", k++));
      hashes.push_back(hash_hex(task_item_to_jsonl(item)));
    }
  const json settings = {{"model_fingerprint", fingerprint_hex(model_fingerprint(model.config, model.weights))},
                         {"methods", methods},
                         {"ratios", options.ratios},
                         {"seed", options.seed}};
  UnitStudy study = make_unit_study(study_kind("task-eval"), settings, std::move(names), std::move(hashes));
  study.inputs = {{"model", model.path}};
  return study;
}

UnitShardRun run_task_eval_shard(const Model& model, const std::vector<TaskEvalFile>& files,
                                 const TaskEvalOptions& options, const std::string& dir, const ShardSpec& shard) {
  validate_task_eval(files, options);
  std::vector<std::pair<const TaskItem*, const std::string*>> items;
  for (const TaskEvalFile& f : files)
    for (const TaskItem& item : f.items) {
      (void)tokenize_task_item(model, item, f.path);  // fail before any work
      items.push_back({&item, &f.path});
    }
  const UnitStudy study = make_task_eval_study(model, files, options);
  const std::vector<TaskEvalRowKey> keys = task_eval_row_keys(options);
  const Transformer transformer(model.config, model.weights);
  const ShardSpec s = shard.active() ? shard : ShardSpec{0, 1};
  const auto t0 = std::chrono::steady_clock::now();
  auto evaluate = [&](int k) {
    const auto& [item, path] = items[static_cast<std::size_t>(k)];
    const TaskEvalUnit u = evaluate_task_item(model, transformer, *item, *path, static_cast<std::size_t>(k), options);
    if (options.progress)
      log_line(fmt::format("task-eval: shard {}/{}: item {}/{} ({} {}, {} context tokens), {:.1f} s", s.index, s.count,
                           k + 1, items.size(), item->family, item->id, u.context_tokens, seconds_since(t0)));
    return task_eval_unit_json(u, keys);
  };
  auto check = [&keys](const json& r, int, const std::string& path) { (void)parse_task_eval_unit(r, keys, path); };
  return run_unit_shard(dir, study, shard, evaluate, check, options.progress);
}

TaskEvalMerge merge_task_eval(const std::string& dir, bool allow_none) {
  const UnitStudyState state = read_unit_study(dir, study_kind("task-eval"));
  TaskEvalMerge out;
  out.study = state.study;
  std::vector<std::string> methods;
  std::vector<double> ratios;
  try {
    methods = out.study.settings.at("methods").get<std::vector<std::string>>();
    ratios = out.study.settings.at("ratios").get<std::vector<double>>();
  } catch (const json::exception& e) {
    throw Error(fmt::format("{}: malformed task-eval settings ({})", dir, e.what()));
  }
  out.keys = {{"full", 1.0}};
  for (const std::string& m : methods)
    for (double r : ratios) out.keys.push_back({m, r});
  std::vector<TaskEvalUnit> units;
  for (int k = 0; k < out.study.units(); ++k) {
    const json& r = state.results[static_cast<std::size_t>(k)];
    if (r.is_null()) {
      out.missing.push_back(k);
      continue;
    }
    units.push_back(parse_task_eval_unit(r, out.keys, unit_study_path(dir, out.study, k)));
  }
  if (units.empty() && !allow_none) throw Error(fmt::format("{}: no finished task-eval items to merge", dir));
  out.result = aggregate_task_eval(out.keys, std::move(units));
  return out;
}

}  // namespace kvcompact
