// Tokenizer test inputs shared by the reference suites (Hugging Face tokenizer.json and GGUF
// vocabularies): real-data lines and hand-made edge cases. Header-only.
#pragma once

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace kvcompact::testing {

/// Lines of a text file (without their '\n'; the last line too), at most max_lines.
inline std::vector<std::string> lines_of(const std::string& path, std::size_t max_lines = SIZE_MAX) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (pos <= text.size() && out.size() < max_lines) {
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    out.push_back(text.substr(pos, nl - pos));
    pos = nl + 1;
  }
  return out;
}

/// Hand-made edge cases (UTF-8).
inline std::vector<std::string> edge_cases() {
  return {
      "", " ", "  ", "\n", "\n\n\n", "\t", "   leading spaces", "trailing spaces   ", "a  b   c    d     e",
      "tabs\tand\t\tmore", "line\r\nwindows\r\n", " \n \n  \n", "Hello, world!", "Hello world",
      "I'm here, you're there, it's 'quoted', we'll see, they've, he'd", "DON'T SHOUT'S 'LL 'VE",
      "1234567890123456789012345", "3.14159 and 1,000,000 and 2024-01-01", "x=12345;y=678",
      "emoji \xF0\x9F\x99\x82 \xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD family "
      "\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7",
      "flags \xF0\x9F\x87\xBA\xF0\x9F\x87\xB8\xF0\x9F\x87\xA9\xF0\x9F\x87\xAA",
      "\xE4\xBD\xA0\xE5\xA5\xBD\xEF\xBC\x8C\xE4\xB8\x96\xE7\x95\x8C\xEF\xBC\x81 "
      "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E\xE3\x81\xAE\xE3\x83\x86\xE3\x82\xAD\xE3\x82\xB9\xE3\x83\x88\xE3\x80\x82 "
      "\xED\x95\x9C\xEA\xB5\xAD\xEC\x96\xB4",
      "combining: e\xCC\x81 vs \xC3\xA9, A\xCC\x8A, \xE2\x84\xAB, q\xCC\x87\xCC\xA3",
      "jamo \xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8 and \xE0\xA5\x98 excluded",
      "\xD9\x85\xD8\xB1\xD8\xAD\xD8\xA8\xD8\xA7 \xD7\xA9\xD7\x9C\xD7\x95\xD7\x9D \xE0\xA4\xA8\xE0\xA4\xAE\xE0\xA4\xB8"
      "\xE0\xA5\x8D\xE0\xA4\xA4\xE0\xA5\x87",
      "nbsp a\xC2\xA0" "b, ideographic\xE3\x80\x80space, bom\xEF\xBB\xBFx, nel\xC2\x85y",
      "long s \xC5\xBF's and Kelvin \xE2\x84\xAA",
      "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n",
      "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>",
      "a<|endoftext|>b<|end_of_text|>c", "<|im_start|><|im_start|>", "partial <|im_sta and <|eot_i",
      "<s>in text</s> <unk>", "<think>\nreasoning\n</think>\n\nanswer",
      std::string(300, 'a'), std::string(120, '='), std::string(50, ' ') + "x",
      "def f(x):\n    return x**2  # comment\n\n\tpass\n",
      "Mixed CASE words AND acronyms like NASA, URLs http://example.com/a?b=c&d=e",
  };
}

/// Invalid UTF-8 (lone continuation bytes, truncated sequences, overlong forms, 5-byte forms).
/// Encoded surrogates (ED A0 80) are left out on purpose: llama.cpp passes their bytes to byte-level
/// BPE, kvcompact's GGUF BPE tokenizer replaces them with U+FFFD (io/gguf_tokenizer.h).
inline std::vector<std::string> invalid_utf8_cases() {
  return {"\x80", "abc\xFF" "def", "\xC3", "x\xE2\x82", "\xF0\x9F\x99", "\xC0\xAF overlong",
          "\xF8\x88\x80\x80\x80", "ok \xE4\xBD\xA0\xE5 cut", "\xFE\xFF bom-ish"};
}

}  // namespace kvcompact::testing
