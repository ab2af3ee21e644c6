#include "metrics/similarity_score.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "metrics/comet_score.h"  // find_executable
#include "metrics/external_command.h"
#include "core/error.h"
#include "similarity_score_py.h"  // kSimilarityScorePy: scripts/similarity_score.py, embedded by CMake

#ifndef KVC_DEFAULT_PYTHON
#define KVC_DEFAULT_PYTHON ""
#endif

namespace kvcompact {

const char* similarity_scorer_source() { return kSimilarityScorePy; }

std::string similarity_python(const SimilarityOptions& options) {
  if (!options.python.empty()) return find_executable(options.python);
  if (const char* env = std::getenv("KVC_PYTHON"); env != nullptr && *env) return find_executable(env);
  if (const std::string venv = find_executable(KVC_DEFAULT_PYTHON); !venv.empty()) return venv;
  return find_executable("python3");
}

std::vector<std::vector<double>> parse_similarity_output(const std::string& output,
                                                         const std::vector<std::size_t>& pairs) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(output);
  } catch (const nlohmann::json::exception&) {
    throw Error(fmt::format("similarity scorer: its output is not JSON: \"{}\"",
                            output.substr(0, std::min<std::size_t>(output.size(), 120))));
  }
  if (!j.is_object() || !j.contains("scores") || !j["scores"].is_array() || j["scores"].size() != pairs.size())
    throw Error(fmt::format("similarity scorer: expected {{\"scores\": [...]}} with {} lists", pairs.size()));
  std::vector<std::vector<double>> out;
  for (std::size_t r = 0; r < pairs.size(); ++r) {
    const nlohmann::json& list = j["scores"][r];
    if (!list.is_array() || list.size() != pairs[r])
      throw Error(fmt::format("similarity scorer: request {} got {} scores for {} pairs", r,
                              list.is_array() ? list.size() : 0, pairs[r]));
    std::vector<double> v;
    for (const nlohmann::json& x : list) {
      if (!x.is_number() || !std::isfinite(x.get<double>()))
        throw Error(fmt::format("similarity scorer: request {}: score {} is not a finite number", r, x.dump()));
      v.push_back(x.get<double>());
    }
    out.push_back(std::move(v));
  }
  return out;
}

std::vector<std::vector<double>> similarity_scores(const std::vector<SimilarityRequest>& requests,
                                                   const SimilarityOptions& options) {
  std::vector<std::size_t> pairs;
  nlohmann::json list = nlohmann::json::array();
  for (const SimilarityRequest& r : requests) {
    if (r.metric != "bleu" && r.metric != "rouge1" && r.metric != "cosine")
      throw Error(fmt::format("similarity scorer: unknown metric \"{}\" (expected bleu, rouge1 or cosine)", r.metric));
    if (r.hypotheses.size() != r.references.size())
      throw Error(fmt::format("similarity scorer: {} hypotheses and {} references (must be equal)",
                              r.hypotheses.size(), r.references.size()));
    pairs.push_back(r.hypotheses.size());
    list.push_back({{"metric", r.metric}, {"hypotheses", r.hypotheses}, {"references", r.references}});
  }
  if (requests.empty()) return {};
  const std::string python = similarity_python(options);
  if (python.empty())
    throw Error(options.python.empty()
                    ? "similarity scorer: no Python found (neither $KVC_PYTHON, the venv's .venv/bin/python nor "
                      "python3 on PATH): run bash scripts/setup.sh"
                    : fmt::format("similarity scorer: Python {} not found", options.python));
  TempDir dir("kvcompact_similarity_");
  const std::string script = dir.path() + "/similarity_score.py", input = dir.path() + "/input.json",
                    err = dir.path() + "/stderr.txt";
  {
    std::ofstream s(script, std::ios::binary);
    s << kSimilarityScorePy;
    std::ofstream in(input, std::ios::binary);
    // invalid UTF-8 in a generated answer (a token cut inside a character) becomes U+FFFD
    in << nlohmann::json{{"embedding_model", options.embedding_model}, {"requests", list}}.dump(
        -1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (!s || !in) throw Error(fmt::format("{}: cannot write the similarity scorer's input", dir.path()));
  }
  const std::string output = run_capturing_stdout(
      fmt::format("{} {} {}", shell_quote(python), shell_quote(script), shell_quote(input)), err,
      python);
  return parse_similarity_output(output, pairs);
}

}  // namespace kvcompact
