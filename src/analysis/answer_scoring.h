// Answer normalisation and exact-match scoring for task items (analysis/task_suite.h).
#pragma once

#include <string>
#include <vector>

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
/// Throws Error for an unknown answer type.
std::string normalize_answer(const std::string& text, const std::string& answer_type);

/// True when the normalised prediction equals the normalised reference and the latter is not
/// empty (an empty reference can never be matched). Throws Error for an unknown answer type.
bool answer_correct(const std::string& prediction, const std::string& reference,
                    const std::string& answer_type);

/// Cuts generated text at the first stop string (the stop string itself removed): the text before
/// the earliest occurrence of any non-empty stop string; the whole text when none occurs.
std::string cut_at_stop(const std::string& text, const std::vector<std::string>& stop);

}  // namespace kvcompact
