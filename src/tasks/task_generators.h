// Seeded, reproducible generators of task suites (tasks/task_suite.h) from the real data in
// ../shared/data: retrieval (needle in a haystack), copy, knowledge (country -> capital), math
// (small-integer arithmetic, GSM8K) and inference (bAbI). Issue 5, item 3.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tasks/task_suite.h"
#include "io/tokenizer.h"

namespace kvcompact {

/// Options of generate_tasks. Token counts use the given tokenizer, BOS included.
struct TaskGenOptions {
  int n = 50;              ///< items to make (>= 1)
  int shots = 3;           ///< few-shot examples per prompt (knowledge, math, inference; >= 0)
  int context_tokens = 0;  ///< retrieval/copy: prompt length in tokens; 0 = family default (256)
  uint64_t seed = 0;       ///< everything random derives from it (SplitMix64); same seed, same items
  double depth = -1;       ///< retrieval needle depth in [0,1]; < 0 = spread evenly over items
  /// Sub-kind: retrieval "passkey" (default) | "fact" | "mixed" (alternating); math "mixed"
  /// (default, alternating) | "arithmetic" | "gsm8k"; inference: comma-separated bAbI task numbers
  /// ("1,2" or "qa1,qa2"; default all 20 tasks); copy and knowledge take none ("").
  std::string variant;
  /// > 0: every prompt's tokens (BOS included) plus its max_new_tokens must be at most this (e.g. the
  /// model's max_seq_len). Few-shot candidates over it are redrawn; a retrieval/copy context_tokens
  /// over it is an error. 0 = no limit.
  int max_prompt_tokens = 0;
};

/// Family default of TaskGenOptions::context_tokens (retrieval and copy: 256; the RULER tasks:
/// 4096; others: 0 = unused).
int default_context_tokens(const std::string& family);

/// Makes opts.n items of one family ("retrieval", "copy", "knowledge", "math", "inference", or a
/// RULER task of ruler_task_names(), made by generate_ruler_tasks, tasks/ruler_tasks.h) from
/// data_dir (the shared data folder, e.g. ../shared/data). Item ids are "<family>-NNNN" (0-based).
///
///  - retrieval: a needle sentence, "The pass key is NNNNN. Remember it." (5-digit number,
///    answer_type number) or "The secret city is CITY." (a one-word capital from the factual
///    pairs, answer_type word), inserted between two words of a run of Paul Graham essay text
///    (needle_haystack/PaulGrahamEssays/*.txt, white space collapsed, starting at a sentence
///    start), so that the haystack tokens before the needle are `depth` x the haystack tokens; then
///    "\n" and the question ("What is the pass key? The pass key is" / "What is the secret city?
///    The secret city is"). The haystack is the longest run that keeps the whole prompt within
///    context_tokens tokens. Item depth = the requested depth.
///  - copy: a TinyStories sentence (tinystories/tinystories_val_head.txt split at blank lines
///    into documents; not a document's first sentence; >= 7 words), "\n\n", consecutive other
///    documents from a random place at least 8 documents away, up to context_tokens tokens,
///    "\n\n", then the sentence's first 4 words; reference = the rest of the sentence, cut to at
///    most max_new_tokens - 4 tokens (the tokens it adds after the prefix) (>= 3 words; answer_type text, max_new_tokens 24). The 4-word
///    prefix never occurs in the other text.
///  - knowledge: shots lines "The capital of C is K.\n" (other pairs of
///    factual/country_capital_pairs.tsv), then "The capital of Q is"; reference K(Q), answer_type
///    word. Queries go through the pairs in a seeded order (reshuffled when used up).
///  - math: arithmetic ("12 + 7 = 19\n" shots, then "a + b =" or "a - b =", operands 0..20,
///    results >= 0) and GSM8K (gsm8k/test.jsonl: shots "Question: Q\nAnswer: N\n\n" from other
///    lines, then "Question: Q\nAnswer:"; reference = the number after "####", commas removed);
///    answer_type number.
///  - inference: bAbI (babi/en_test/qaN_*_test.txt; "ID text" statements and "ID question\tanswer
///    \tsupport" questions, a story restarting at ID 1): an example is the story's statements up to
///    a question, one per line, then "Question: Q\nAnswer:"; shots are solved examples of the same
///    task from other stories (each followed by " A\n\n"). Questions whose answer is a list
///    (holds a comma) are skipped. answer_type word.
/// Every item stops at "\n"; max_new_tokens: retrieval 8, copy 24, knowledge 8, arithmetic 6,
/// GSM8K 12, bAbI 6.
/// source = "<file relative to data_dir>:<1-based line>" of the query for knowledge, GSM8K, bAbI
/// and fact needles; "needle_haystack/PaulGrahamEssays (word W)" for passkeys and
/// "tinystories/... (document D, sentence S)" for copy items (1-based); empty for arithmetic.
/// The needle goes between two words (not snapped to a sentence end), so that its depth in tokens
/// is exact to about one word.
/// Throws Error for an unknown family or variant, n < 1, shots < 0, context_tokens < 0 or too
/// small for the prompt, depth > 1, a missing or malformed data file (named with its line), or
/// when max_prompt_tokens leaves no way to make an item.
std::vector<TaskItem> generate_tasks(const std::string& family, const std::string& data_dir,
                                     const Tokenizer& tokenizer, const TaskGenOptions& opts);

}  // namespace kvcompact
