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
/// Unknown keys are ignored.
struct TaskItem {
  std::string id;           ///< unique within a file
  std::string family;       ///< "retrieval" | "copy" | "knowledge" | "math" | "inference"
  std::string prompt;       ///< text fed to the model (few-shot examples included)
  std::string reference;    ///< reference answer
  std::string answer_type;  ///< "number" | "word" | "text"  (normalisation + match rule)
  std::vector<std::string> stop = {"\n"};  ///< stop strings for generation (default {"\n"})
  int max_new_tokens = 16;                 ///< token limit for the answer
  /// Retrieval items: relative position of the needle in the haystack, measured in tokens
  /// (0 = at the start, 1 = at the end); -1 when not applicable (not written to the file).
  double depth = -1;
  /// Where the item came from, e.g. "gsm8k/test.jsonl:17" (data file relative to the data folder,
  /// 1-based line); empty when not recorded (not written to the file).
  std::string source;
};

/// The task families ("retrieval", "copy", "knowledge", "math", "inference").
const std::vector<std::string>& task_families();
/// The answer types ("number", "word", "text").
const std::vector<std::string>& answer_types();

/// Parses a task suite from JSONL text, one object per non-empty line (lines holding only
/// whitespace are skipped). `name` (a file name) prefixes error messages. Throws Error
/// "NAME:LINE: <problem>" for invalid JSON, a line that is not an object, a missing or mistyped
/// field (e.g. `missing field "prompt"`), an empty id, prompt or reference, an unknown family or answer_type,
/// max_new_tokens < 1, depth outside [0, 1], a duplicate id (naming the line of the first one);
/// and "NAME: empty task file (no items)" when there is no item.
std::vector<TaskItem> parse_task_suite(std::string_view text, const std::string& name);

/// Reads a .jsonl task file (parse_task_suite). Throws Error naming the path when it is missing or
/// unreadable, and as parse_task_suite.
std::vector<TaskItem> read_task_suite(const std::string& path);

/// One JSONL line (no trailing newline) for an item: keys in the order id, family, prompt,
/// reference, answer_type, stop, max_new_tokens, then depth (when >= 0) and source (when not empty).
std::string task_item_to_jsonl(const TaskItem& item);

/// Writes the items, one line each, atomically (io/atomic_file.h). Throws Error naming the path.
void write_task_suite(const std::string& path, const std::vector<TaskItem>& items);

}  // namespace kvcompact
