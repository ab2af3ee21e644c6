// Task suites for capability probes (issue 5): one task item per line of a JSONL file, with the
// prompt fed to the model, the reference answer and how an answer is matched.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kvcompact {

/// One task item; one JSON object per line in a .jsonl task file.
///
/// JSON keys: "id", "family", "prompt", "reference", "answer_type" (strings, required);
/// "stop" (array of strings, default ["\n"]), "max_new_tokens" (integer >= 1, default 16),
/// "depth" (number in [0, 1], retrieval items only) and "source" (string) are optional.
/// Optional for long-context items (tasks/ruler_tasks.h):
///  - "context" (string): the compactable document, a non-empty prefix of "prompt" that is shorter
///    than it; prompt = context + the question, fed verbatim after the (compacted) context.
///    Absent = the item marks no split.
///  - "references" (array of non-empty strings): every expected string (RULER's "outputs");
///    required and non-empty for answer_type "recall", which scores the fraction of references
///    contained in the lower-cased answer (answer_scoring.h, string_match_all). "reference" then
///    holds them joined by ", ", for reading.
/// Unknown keys are ignored.
struct TaskItem {
  std::string id;           ///< unique within a file
  std::string family;       ///< one of task_families()
  std::string prompt;       ///< text fed to the model (few-shot examples included)
  std::string reference;    ///< reference answer
  std::string answer_type;  ///< "number" | "word" | "text" | "recall" (normalisation + match rule)
  std::vector<std::string> stop = {"\n"};  ///< stop strings for generation (default {"\n"})
  int max_new_tokens = 16;                 ///< token limit for the answer
  /// Retrieval items: relative position of the needle in the haystack, measured in tokens
  /// (0 = at the start, 1 = at the end); -1 when not applicable (not written to the file).
  double depth = -1;
  /// Where the item came from, e.g. "gsm8k/test.jsonl:17" (data file relative to the data folder,
  /// 1-based line); empty when not recorded (not written to the file).
  std::string source;
  /// The compactable document: a prefix of prompt, shorter than it (the rest is the question);
  /// empty when not marked (not written to the file).
  std::string context;
  /// All expected strings (answer_type "recall"); empty when not given (not written to the file).
  std::vector<std::string> references;
};

/// The task families: "retrieval", "copy", "knowledge", "math", "inference", then the RULER
/// tasks of ruler_task_names() (tasks/ruler_tasks.h), e.g. "ruler_niah_single_1".
const std::vector<std::string>& task_families();
/// The answer types ("number", "word", "text", "recall").
const std::vector<std::string>& answer_types();

/// Parses a task suite from JSONL text, one object per non-empty line (lines holding only
/// whitespace are skipped). `name` (a file name) prefixes error messages. Throws Error
/// "NAME:LINE: <problem>" for invalid JSON, a line that is not an object, a missing or mistyped
/// field (e.g. `missing field "prompt"`), an empty id, prompt or reference, an unknown family or answer_type,
/// max_new_tokens < 1, depth outside [0, 1], a "context" that is empty, not a prefix of the prompt
/// or the whole prompt, a "references" entry that is empty or not a string, answer_type "recall"
/// without references, a duplicate id (naming the line of the first one);
/// and "NAME: empty task file (no items)" when there is no item.
std::vector<TaskItem> parse_task_suite(std::string_view text, const std::string& name);

/// Reads a .jsonl task file (parse_task_suite). Throws Error naming the path when it is missing or
/// unreadable, and as parse_task_suite.
std::vector<TaskItem> read_task_suite(const std::string& path);

/// One JSONL line (no trailing newline) for an item: keys in the order id, family, prompt,
/// reference, answer_type, stop, max_new_tokens, then depth (when >= 0), source, context and
/// references (each when not empty).
std::string task_item_to_jsonl(const TaskItem& item);

/// Writes the items, one line each, atomically (io/atomic_file.h). Throws Error naming the path.
void write_task_suite(const std::string& path, const std::vector<TaskItem>& items);

}  // namespace kvcompact
