// RULER's synthetic long-context tasks (Hsieh et al. 2024, NVIDIA/RULER scripts/data/synthetic/ and
// scripts/synthetic.yaml) as seeded generators of kvcompact task suites (tasks/task_suite.h),
// with prompt lengths exact in the model's tokens. Issue 14, item 1.
#pragma once

#include <string>
#include <vector>

#include "tasks/task_generators.h"  // TaskGenOptions
#include "tasks/task_suite.h"
#include "io/tokenizer.h"

namespace kvcompact {

/// The RULER task families, in RULER's order: "ruler_niah_single_1", "ruler_niah_single_2",
/// "ruler_niah_single_3", "ruler_niah_multikey_1", "ruler_niah_multikey_2",
/// "ruler_niah_multikey_3", "ruler_niah_multivalue", "ruler_niah_multiquery", "ruler_vt",
/// "ruler_cwe", "ruler_fwe" (RULER's task names with the prefix "ruler_").
const std::vector<std::string>& ruler_task_names();

/// True for a name of ruler_task_names().
bool is_ruler_task(const std::string& family);

/// Default TaskGenOptions::context_tokens of the RULER tasks: 4096 (RULER's shortest length).
constexpr int kRulerDefaultContextTokens = 4096;

/// Makes opts.n items of one RULER task. Options used: n (>= 1), context_tokens (the prompt's
/// length in tokens of `tokenizer`, BOS, instructions, few-shot example, question and answer
/// prefix included; 0 = 4096), seed, depth (niah: depth of the first queried needle; < 0 = spread
/// evenly over the items, item i at i / (n - 1)) and max_prompt_tokens (> 0: context_tokens plus
/// the answer tokens must fit). shots and variant are not used (variant must be empty).
///
/// Every item: id "<family>-NNNN" (0-based), family = the task name, answer_type "recall",
/// references = RULER's outputs (reference = them joined by ", "), no stop strings (RULER stops
/// only at the token limit or EOS), max_new_tokens = RULER's tokens_to_generate (niah 128, vt 30,
/// cwe 120, fwe 50), prompt = RULER's template with its answer_prefix appended (plain text, no chat
/// template), context = the prompt up to the end of the document (instructions and few-shot
/// example included); the question after it is "\n" + RULER's query line + answer prefix. Each
/// prompt has the most haystack units (words, noise paragraphs, distractor lines, list entries)
/// that keep it within context_tokens, so it is short of that by less than one unit.
///
/// Templates (RULER scripts/data/synthetic/constants.py, {.} filled in):
///  - niah: "Some special magic {V} are hidden within the following text. Make sure to memorize
///    it. I will quiz you about the {V} afterwards.\n{context}\nWhat are all the special magic {V}
///    for {query} mentioned in the provided text? The special magic {V} for {query} mentioned in
///    the provided text are" ("Some"->"A", "are all"->"is", "are"->"is" and V singular when one
///    value is asked for). Needles "One of the special magic {V} for {key} is: {value}." (V plural).
///    Keys: words (wonderwords "adjective-noun") or uuids; values: numbers (7 digits) or uuids
///    (version 4). Haystacks: noise (the paragraph "The grass is green. The sky is blue. The sun
///    is yellow. Here we go. There and back again." repeated, one per line), essay (Paul Graham
///    essays, needle_haystack/PaulGrahamEssays/*.txt in name order, white space collapsed, from
///    a seeded sentence start, needles between sentences) or needle (distractor needles with
///    other random keys and values, one per line). Configurations (scripts/synthetic.yaml):
///    single_1 noise/words/numbers, single_2 essay/words/numbers, single_3 essay/words/uuids,
///    multikey_1 essay with 4 keys, multikey_2 needle haystack words/numbers, multikey_3 needle
///    haystack uuids/uuids, multivalue 4 values for one key, multiquery 4 keys all asked for.
///    Needle positions: the first queried needle at the item's depth, the others at distinct
///    depths drawn from RULER's 40-point grid round(linspace(0, 100, 40))%; depth = haystack
///    tokens before the needle / haystack tokens (needles excluded), the needle at the unit
///    boundary nearest it; item depth = that achieved depth of the first queried needle. Every
///    needle value occurs exactly once in the prompt.
///  - vt (variable tracking, 1 chain of 4 hops, noise haystack): "Memorize and track the chain(s)
///    of variable assignment hidden in the following text.\n\n{context}\nQuestion: Find all
///    variables that are assigned the value {query} in the text above. Answer: According to the
///    chain(s) of variable assignment in the text above, 5 variables are assigned the value
///    {query}, they are: "; the chain "VAR X1 = NNNNN", "VAR X2 = VAR X1 ", ... (5 distinct
///    5-letter upper-case names, a 5-digit value) as lines, in chain order, at sorted random
///    boundaries between the noise lines (two may share one);
///    references = the 5 names. Preceded by RULER's one-shot example (3-letter names, another
///    value, noise sized to at most 500 tokens, then " " + its 5 names + "\n\n"). Item depth =
///    depth of the chain's first line.
///  - cwe (common words extraction): one example then the question, each "Below is a numbered
///    list of words. In these words, some appear more often than others. Memorize the ones that
///    appear most often.\n{context}\nQuestion: What are the 10 most common words in the above
///    list? Answer: The top 10 words that appear most often in the list are:", the example
///    followed by " 1. w1 2. w2 ... 10. w10" and "\n"; context = "1. word 2. word ..." over a
///    shuffled list of distinct words from the wonderwords nouns, adjectives and verbs: 10 common
///    words x 6 and the others x 1 below 4096 tokens (example: 20 words, 3 and 1), 10 x 30 and
///    x 3 from 4096 on (example: 40 words, 10 and 3); references = the 10 common words.
///  - fwe (frequent words extraction, alpha 2): "Read the following coded text and track the
///    frequency of each coded word. Find the three most frequently appeared coded words.
///    {context}\nQuestion: Do not provide any explanation. Please ignore the dots '....'. What are
///    the three most frequently appeared words in the above coded text? Answer: According to the
///    coded text above, the three most frequently appeared words are:"; a vocabulary of
///    context_tokens / 50 distinct random 6-letter lower-case words, the first replaced by "...",
///    the k-th (1-based) repeated floor(N k^-2 / zeta(2)) times, shuffled, joined by spaces;
///    references = vocabulary words 2..4 (the three most frequent after the dots).
///
/// Word lists: the wonderwords 3.0.1 lists that RULER uses, shipped in tasks/ruler_words.inc.
///
/// Deviations from RULER: context_tokens is the prompt alone (RULER's max_seq_length also holds
/// tokens_to_generate; here the answer tokens come on top, checked against max_prompt_tokens), and
/// fwe's vocabulary is context_tokens / 50 (RULER: (max_seq_length - 50) / 50); the first queried
/// needle's depth is spread over the items instead of drawn from the grid, and placed in tokens;
/// an essay haystack starts at a seeded sentence start (RULER: always the start of its essay
/// file), sentences end at a word ending in . ! ? (closing quotes or brackets allowed) before an
/// upper-case word (RULER: nltk sent_tokenize); the items' random numbers come from SplitMix64
/// (RULER: Python's random), so the same seed does not give RULER's items; distractor needles
/// never reuse a key or value and no value occurs twice (redrawn); the vt example is drawn afresh
/// per item (RULER randomises the names and value of one fixed example); cwe's example words are
/// never the item's (RULER may share them); no chat template (RULER's "base" template).
/// Item source: "needle_haystack/PaulGrahamEssays (word W)" for essay haystacks (W = the 0-based
/// word where the haystack starts), else "RULER <task> (synthetic)".
/// Throws Error for an unknown task name (listing the known ones), n < 1, context_tokens < 0 or
/// too small for the instructions, needles and question (naming the task and the tokens they
/// need), a variant, max_prompt_tokens exceeded, and a missing essay folder or data file (named).
std::vector<TaskItem> generate_ruler_tasks(const std::string& family, const std::string& data_dir,
                                           const Tokenizer& tokenizer, const TaskGenOptions& opts);

}  // namespace kvcompact
