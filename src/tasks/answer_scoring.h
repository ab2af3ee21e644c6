// Answer normalisation and exact-match scoring for task items (tasks/task_suite.h).
#pragma once

#include <string>
#include <vector>

#include "tasks/task_suite.h"

namespace kvcompact {

/// Normalises a model answer or a reference for comparison, by answer type:
///  - "number": the first number in the text: an optional minus sign (directly before the digits
///    and not preceded by a letter or digit), digits with optional thousands separators ("1,234":
///    a comma followed by exactly three digits), an optional decimal part. Separators are removed,
///    leading zeros dropped, trailing zeros of the decimal part dropped ("18.0" -> "18",
///    "2.50" -> "2.5", "-0" -> "0"); "" when the text holds no digit.
///  - "word": the first whitespace-separated word that is not only punctuation, with ASCII
///    punctuation removed and ASCII letters lowercased ("Paris." -> "paris"); "" if none.
///  - "text": ASCII letters lowercased, punctuation removed (ASCII punctuation and the Unicode
///    General Punctuation block U+2010..U+205E, e.g. curly quotes), runs of white space collapsed
///    to one space, leading/trailing space trimmed.
///  - "recall": the text with ASCII letters lowercased, nothing else changed (RULER's str.lower();
///    non-ASCII letters are kept as they are).
/// Throws Error for an unknown answer type.
std::string normalize_answer(const std::string& text, const std::string& answer_type);

/// True when the normalised prediction equals the normalised reference and the latter is not
/// empty (an empty reference can never be matched); for "recall": when the normalised reference
/// is not empty and occurs anywhere in the normalised prediction. Throws Error for an unknown
/// answer type.
bool answer_correct(const std::string& prediction, const std::string& reference,
                    const std::string& answer_type);

/// Cuts generated text at the first stop string (the stop string itself removed): the text before
/// the earliest occurrence of any non-empty stop string; the whole text when none occurs.
/// RULER's string_match_all for one item (NVIDIA/RULER scripts/eval/synthetic/constants.py): the
/// fraction of the references whose lower-cased text ("recall" normalisation) occurs in the
/// lower-cased prediction, in [0, 1]; the mean over items (x 100) is RULER's score. An empty
/// reference counts as not found. Throws Error when references is empty.
double string_match_all(const std::string& prediction, const std::vector<std::string>& references);

/// RULER's string_match_part for one item (its qa tasks): 1 when any reference occurs in the
/// prediction (lower-cased as above), else 0. Throws Error when references is empty.
double string_match_part(const std::string& prediction, const std::vector<std::string>& references);

/// The score of one answer to an item in [0, 1]: answer_type "recall" -> string_match_all over
/// item.references (or {item.reference} when it has none); other types -> 1 or 0 by
/// answer_correct(prediction, item.reference, item.answer_type). Throws as those.
double item_score(const std::string& prediction, const TaskItem& item);

/// Cognitive Mirrors' accuracy rule for one masked answer (sihuo-design/CognitiveMirrors,
/// ablation_topk.py): correct when bleu > 0.8 or rouge1 > 0.6 or cosine > 0.6 (strict
/// inequalities; BLEU 0..1 against the unmasked model's answer, ROUGE-1 F and embedding cosine
/// against the gold answer: metrics/similarity_score.h).
bool cognitive_mirrors_correct(double bleu, double rouge1, double cosine);

/// `text` cut before the earliest occurrence of any non-empty stop string (unchanged when none
/// occurs).
std::string cut_at_stop(const std::string& text, const std::vector<std::string>& stop);

}  // namespace kvcompact
