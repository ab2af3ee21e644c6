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

/// Reads a UTF-8 text file whole. Throws Error naming the file when it is missing, unreadable or
/// holds no non-whitespace text ("empty data file").
std::string read_text_file(const std::string& path);

/// read_text_file + split_documents; `max_docs` > 0 keeps the first max_docs documents.
/// Throws Error when the file yields no document.
std::vector<std::string> read_documents(const std::string& path, int max_docs = 0);

}  // namespace kvcompact
