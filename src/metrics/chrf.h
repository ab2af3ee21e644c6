// chrF: character n-gram F-score (Popovic 2015, "chrF: character n-gram F-score for automatic MT
// evaluation"), computed exactly as sacreBLEU 2.x's CHRF metric (sacrebleu/metrics/chrf.py).
#pragma once

#include <string>
#include <vector>

namespace kvcompact {

/// Per-order n-gram statistics of one or more (hypothesis, reference) pairs, as sacreBLEU keeps
/// them: for n = 1..char_order, the hypothesis n-gram count, the reference n-gram count and the
/// matched count (sum over n-grams g of min(count_hyp(g), count_ref(g))). As in sacreBLEU, the
/// hypothesis count of an order is 0 when the reference has no n-gram of that order.
struct ChrfStats {
  std::vector<long long> hyp, ref, match;  ///< [char_order]
};

/// The statistics of one pair. Characters are Unicode code points of the UTF-8 text (an invalid
/// byte counts as one character); all white space (Python's str.isspace: ASCII white space,
/// U+001C..U+001F, U+0085, U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000)
/// is removed first. Throws Error when char_order < 1.
ChrfStats chrf_statistics(const std::string& hypothesis, const std::string& reference, int char_order = 6);

/// The chrF score (0..100) of statistics (summed over sentences for a corpus score).
/// Default (sacreBLEU's default, eps_smoothing false): precision and recall are averaged over the
/// orders where both the hypothesis and the reference count are > 0 (0 when there is none), then
/// F = (1 + beta^2) P R / (beta^2 P + R) (0 when P + R = 0).
/// eps_smoothing true (chrF++.py / NLTK / Moses style): per-order F-scores with eps = 1e-16 for a
/// missing precision or recall (and eps for an order whose F denominator is 0), averaged over all
/// char_order orders. Throws Error when beta <= 0 or the statistics are empty or of unequal sizes.
double chrf_from_statistics(const ChrfStats& stats, double beta = 2.0, bool eps_smoothing = false);

/// Sentence-level chrF of one hypothesis against one reference, in 0..100: sacreBLEU's
/// `CHRF().sentence_score(hyp, [ref])` with the defaults char_order 6, word_order 0, beta 2,
/// case-sensitive, white space removed.
double chrf(const std::string& hypothesis, const std::string& reference, int char_order = 6, double beta = 2.0,
            bool eps_smoothing = false);

/// Corpus-level chrF (sacreBLEU `corpus_score`): the statistics of all pairs are summed, then
/// scored once. Throws Error when the lists differ in length or are empty.
double corpus_chrf(const std::vector<std::string>& hypotheses, const std::vector<std::string>& references,
                   int char_order = 6, double beta = 2.0, bool eps_smoothing = false);

}  // namespace kvcompact
