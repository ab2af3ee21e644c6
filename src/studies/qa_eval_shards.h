// Sharded qa-eval (issue #18): the study's work units are its articles, run by the shared
// unit-study runner (studies/unit_study.h); each article's scores and reference answers are one
// unit file, and `merge` aggregates them to the numbers a one-process qa-eval gives.
//
// Folder layout: DIR/units/qa_eval_article_<a>.json, DIR/shards/qa_eval_shard_<i>_of_<n>.json.
// The reference answers live in the units, so a shard needs no --answers-cache (one file that
// every shard would write); a rerun skips the finished articles.
#pragma once

#include <string>
#include <vector>

#include "studies/qa_eval.h"
#include "studies/unit_study.h"

namespace kvcompact {

/// The study of running `options` on `articles` with `model`: model fingerprint, methods in
/// canonical form, ratios, answer cap, prompt template, context cap, seed and chat template; one
/// unit per article (named article_<a>, the FNV-1a hash of its JSONL line).
UnitStudy make_qa_eval_study(const Model& model, const std::vector<QaArticle>& articles, const QaEvalOptions& options);

/// Runs shard `shard` (count 0: the whole study) into `dir` (see run_unit_shard). Throws Error for
/// options.answers_cache_dir set (the units keep the answers), and as run_qa_eval.
UnitShardRun run_qa_eval_shard(const Model& model, const std::vector<QaArticle>& articles,
                               const QaEvalOptions& options, const std::string& dir, const ShardSpec& shard);

/// A merged study.
struct QaEvalMerge {
  UnitStudy study;
  QaEvalOptions options;     ///< methods and ratios as the study ran them
  QaEvalResult result;       ///< over the finished articles, in article order (empty when none)
  std::vector<int> missing;  ///< 0-based articles without a unit file
};

/// Reads the manifests and units of `dir` (errors as read_unit_study); no finished article is an
/// Error unless allow_none.
QaEvalMerge merge_qa_eval(const std::string& dir, bool allow_none = false);

}  // namespace kvcompact
