// Plain-text corpora split into documents.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kvcompact {

/// Splits text into documents at blank lines (a line holding only whitespace counts as blank).
/// Each document is stripped of leading/trailing whitespace; empty documents are dropped.
/// Line ends may be "\n" or "\r\n".
std::vector<std::string> split_documents(std::string_view text);

/// Splits WikiText (wiki.*.raw) into articles: an article starts at a top-level heading line
/// " = Title = " (one '=' each side; " = = Section = = " lines stay inside the article). Each
/// article (heading included) is stripped of leading/trailing whitespace; text before the first
/// heading is its own document when non-empty.
std::vector<std::string> split_wikitext_articles(std::string_view text);

/// How a corpus file is cut into documents: "blank-lines" (split_documents) or "wikitext"
/// (split_wikitext_articles). Throws Error naming the option for another name.
std::vector<std::string> split_corpus(std::string_view text, const std::string& how);

/// Reads a UTF-8 text file whole. Throws Error naming the file when it is missing, unreadable or
/// holds no non-whitespace text ("empty data file").
std::string read_text_file(const std::string& path);

/// read_text_file + split_corpus(split); `max_docs` > 0 keeps the first max_docs documents.
/// Throws Error when the file yields no document.
std::vector<std::string> read_documents(const std::string& path, int max_docs = 0,
                                        const std::string& split = "blank-lines");

}  // namespace kvcompact
