// Multiple-choice QA on long documents, QuALITY JSONL format (Pang et al. 2022, nyu-mll/quality).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kvcompact {

/// One multiple-choice question about an article.
struct QaQuestion {
  std::string question;              ///< question text (for cloze sets: a sentence prefix)
  std::vector<std::string> options;  ///< answer options (>= 2)
  int gold_label = 0;                ///< 1-based index of the correct option
};

/// One article with its questions (one JSONL line).
struct QaArticle {
  std::string id;       ///< "article_id" (or "unique_id"), else "line N"
  std::string title;    ///< "title" when present
  std::string article;  ///< plain text (HTML tags stripped)
  std::string prompt_template;  ///< optional per-article question prompt, "{question}" placeholder
  std::vector<QaQuestion> questions;
  int line = 0;         ///< 1-based line number in the file
  std::string file;     ///< the file (parse_qa_jsonl's name) it came from, for error messages
};

/// Parses QuALITY-format JSONL, one article per non-empty line. Accepted shapes:
///  - QuALITY release: {"article": str, "questions": [{"question": str, "options": [str...],
///    "gold_label": int (1-based)}, ...], "article_id"?, "title"?};
///  - the flattened QuALITY layout of nyu-mll/quality's example task (question1,
///    question1option1..4, question1_gold_label, question2, ...), as in
///    shared/data/quality/quality_example_one_article.jsonl.
/// "article" may be a string or an array of strings (concatenated). HTML (detected by tags such
/// as <p>, <br/>, <html>) is turned into plain text by strip_html. Optional "prompt_template"
/// (our extension, written by make-cloze) is kept. Throws Error "<name>:<line>: <problem>" for
/// invalid JSON, a missing or mistyped field (named, e.g. questions[2].gold_label), fewer than 2
/// options, or a gold_label outside 1..options; and for a file with no article.
std::vector<QaArticle> parse_qa_jsonl(std::string_view text, const std::string& name);

/// Reads and parses a QA JSONL file (parse_qa_jsonl). Throws Error naming the path.
std::vector<QaArticle> read_qa_jsonl(const std::string& path);

/// One JSONL line (no trailing newline) in the QuALITY release shape: article_id, title, article,
/// prompt_template (when non-empty), questions[{question, options, gold_label}].
std::string qa_article_to_jsonl(const QaArticle& article);

/// HTML to plain text: drops comments, <!DOCTYPE>, <head>/<script>/<style> contents and every
/// tag; block tags (p, br, div, h1-h6, hr, li, tr, title) become paragraph breaks; decodes
/// &amp; &lt; &gt; &quot; &apos; &#39; &nbsp; and numeric entities (&#NNN; &#xHH;) to UTF-8;
/// collapses whitespace inside a paragraph to one space; paragraphs are joined by "\n\n".
std::string strip_html(std::string_view html);

/// True when the text looks like HTML (contains <html, <p>, <p , <br, </p> or <!DOCTYPE).
bool looks_like_html(std::string_view text);

}  // namespace kvcompact
